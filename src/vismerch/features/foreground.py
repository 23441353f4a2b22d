"""The product in a photo without a clean backdrop (a product standing in a scene, a
full-bleed shot): a foreground mask for the colour backend's 64x64 CIELAB grid.

The colour backend's own mask takes every cell far from the border's median colour; on a
studio backdrop that is the product, in a scene it is most of the scene. A frame is a
scene when the border is not a studio's uniform backdrop (``background_clutter`` over
``STUDIO_CLUTTER``) and that mask covers over ``SCENE_FILL`` of the frame or over
``EDGE_MIN`` of the frame's edge (part of the border stands apart from the rest: a sky
above a landscape), or when it covers under ``CENTRE_MIN`` of the centre box but over
``EDGE_MIN`` of the edge (the "backdrop" was a full-bleed product's own colour all round
the border, the "product" the scene beside it). Clutter alone is no guide: a defocused
scene is smooth, an under-exposed studio shot noisy. There, with the two background priors of
salient-object detection (the frame's border is scene; the scene is smoother than the
product's outline, Wei et al. 2012, "Geodesic saliency using background priors"):

1. the border ring's colours are summarised by a small k-means (``BG_K`` colours); a
   border colour more common in the centre box than on the border is the product running
   off the frame, not the scene, and leaves the background model;
2. a cell is product when it is farther than ``SCENE_DELTA`` (CIE76) from every
   background colour **and** its geodesic distance from the scene's border cells (the
   least colour change, summed over steps above ``STEP_NOISE``, along any path to them)
   exceeds ``SCENE_DELTA`` too: a scene's own colours that the ring missed are reached
   through the scene's smooth gradients, a product only across its outline;
3. of those, the cells connected to the centre box (the product is framed around it);
4. of those, the cells geodesically nearer the frame's centre (the ``SEED`` box of cells,
   or the kept cell nearest it) than the scene's border cells: a seeded geodesic
   segmentation (Bai & Sapiro 2007, "A geodesic framework for fast interactive image and
   video segmentation"). Step 2 alone keeps a scene object that stands out from the
   border as much as the product does (a flower or a face behind it); the product is the
   one framed at the centre, and the scene object is reached from the scene's border
   with less colour change than from there. Each cell is weighted for the palette by a
   centre prior (a Gaussian, ``CENTRE_SIGMA``).

When that leaves under ``MIN_SCENE_FILL`` of the frame, the backend's mask stays, but
weighted by the same centre prior: the frame is still no studio shot (its border is no
backdrop, so that mask is most of the frame), and the product is still framed around
the centre, not at the border.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

SCENE_FILL = 0.5  # a backdrop mask covering more of the frame than this found no backdrop
STUDIO_CLUTTER = 1.0  # a studio backdrop's border is this uniform (a big product on it is no scene)
CENTRE_MIN = 0.2  # nor did one covering less of the centre box (a full-bleed product's own
#                   colour all round the border passes for the backdrop) ...
EDGE_MIN = 0.05  # ... while it lies along the frame's edge (the scene beside the product)
SCENE_DELTA = 12.0  # CIE76: a product's colour stands this far from the scene's
STEP_NOISE = 3.0  # CIE76 between neighbouring cells that texture and noise make
BG_K = 8
BG_ITERS = 6
SHRINK = 2  # the scene's grid: 64 / SHRINK cells a side
RING = 1  # cells of that grid (1/32 of the frame, the backend's border ring)
CENTRE = (0.3, 0.7)  # the centre box, as fractions of each side
SEED = 1 / 16  # the product's seed: the frame's centre, this share of each side (2 cells)
MIN_SCENE_FILL = 0.01  # of the frame: ~10 cells of the scene grid still name a colour
CENTRE_SIGMA = 0.25  # the centre prior's spread, in frame sides
_EIGHT = np.ones((3, 3), dtype=bool)


def scene_mask(lab: torch.Tensor, mask: torch.Tensor, clutter: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the foreground mask (B, G, G) bool with scenes' rows replaced, a (B, G, G) weight
    per cell: 1, or in a scene the centre prior, which rows were replaced (B,) bool)
    (module docstring); ``lab`` the (B, G, G, 3) CIELAB grid, ``clutter`` the border's
    colour spread (B,) (``quality.background_stats``). In a replaced row the
    border's median colour is no backdrop: the product's pixels may match it."""
    g = mask.shape[1]
    scene = is_scene(mask, clutter)
    weight = torch.ones(mask.shape, device=mask.device)
    replaced = torch.zeros_like(scene)
    if not bool(scene.any()):
        return mask, weight, replaced
    out = mask.clone()
    r = (torch.arange(g, device=mask.device) + 0.5) / g - 0.5
    prior = torch.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / (2 * CENTRE_SIGMA**2))
    rows = scene.nonzero().flatten()
    # on a grid of SHRINK x SHRINK cell means: the palette's 32x32 lattice needs no finer mask
    small = F.avg_pool2d(lab[rows].permute(0, 3, 1, 2), SHRINK).permute(0, 2, 3, 1)
    small = small.double().cpu().numpy()
    for i, cells in zip(rows.tolist(), small, strict=True):
        found = np.kron(_one_scene(cells), np.ones((SHRINK, SHRINK), dtype=bool))
        weight[i] = prior
        if found.mean() >= MIN_SCENE_FILL:
            out[i] = torch.from_numpy(found).to(mask.device)
            replaced[i] = True
    return out, weight, replaced


def scene_boxes(x: torch.Tensor, delta: float) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> (B, 4) float x0, y0, x1, y1 (frame fractions): the box of the
    product that ``scene_mask`` finds in a frame without a clean backdrop, NaN where the
    frame has a backdrop or no product was found there. The colour backend's grid analysis
    (``delta``: its ``colour_foreground_delta``) without the rest of its work."""
    from vismerch.features import analysis

    h, w = x.shape[1:3]
    rgb = analysis.grid_means(x)
    metrics, lab, mask, _ = analysis.analyse_grid(rgb, analysis.grid_levels(h, w), delta)
    found, _, replaced = scene_mask(lab, mask, metrics["background_clutter"])
    boxes = torch.full((x.shape[0], 4), float("nan"))
    g = found.shape[1]
    for i in replaced.nonzero().flatten().tolist():
        ys, xs = torch.nonzero(found[i].cpu(), as_tuple=True)
        boxes[i] = torch.stack([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]).float() / g
    return boxes


def is_scene(mask: torch.Tensor, clutter: torch.Tensor) -> torch.Tensor:
    """(B,) bool: which frames of the backdrop ``mask`` (B, G, G) are no studio shot."""
    g = mask.shape[1]
    lo, hi = round(CENTRE[0] * g), round(CENTRE[1] * g)
    inside = mask[:, lo:hi, lo:hi].float().mean(dim=(1, 2))
    edge = mask.clone()
    edge[:, 2:-2, 2:-2] = False
    on_edge = edge.float().sum(dim=(1, 2)) / (4 * 2 * (g - 2))
    busy = clutter > STUDIO_CLUTTER
    big = (mask.float().mean(dim=(1, 2)) > SCENE_FILL) & busy
    return big | ((inside < CENTRE_MIN) & (on_edge > EDGE_MIN)) | (busy & (on_edge > EDGE_MIN))


def _one_scene(lab: np.ndarray) -> np.ndarray:
    g = lab.shape[0]
    ring = np.ones((g, g), dtype=bool)
    ring[RING:-RING, RING:-RING] = False
    lo, hi = round(CENTRE[0] * g), round(CENTRE[1] * g)
    centre = np.zeros_like(ring)
    centre[lo:hi, lo:hi] = True
    cells = lab.reshape(-1, 3)
    centres = _kmeans(lab[ring])
    d = _distances(cells, centres)  # (G*G, K)
    nearest, near = d.argmin(axis=1), d.min(axis=1) <= SCENE_DELTA
    k = len(centres)
    share_ring = np.bincount(nearest[ring.ravel() & near], minlength=k) / ring.sum()
    share_centre = np.bincount(nearest[centre.ravel() & near], minlength=k) / centre.sum()
    scene = share_ring >= share_centre
    if not scene.any():
        return np.zeros_like(ring)
    far = d[:, scene].min(axis=1) > SCENE_DELTA
    sources = ring.ravel() & np.isin(nearest, np.flatnonzero(scene)) & near
    from_scene = _geodesic(cells, g, sources)
    product = (far & (from_scene > SCENE_DELTA)).reshape(g, g)
    labels, _ = ndimage.label(product, structure=_EIGHT)
    keep = np.unique(labels[centre & product])
    product = np.isin(labels, keep[keep > 0])
    if not product.any():
        return product
    from_seed = _geodesic(cells, g, _centre_seed(product).ravel())
    return product & (from_seed < from_scene).reshape(g, g)


def _centre_seed(product: np.ndarray) -> np.ndarray:
    """The product's seed in its (G, G) mask: the mask's cells in the frame's central
    ``SEED`` box, or, where it has none there, its cell nearest the centre."""
    g = product.shape[0]
    half = max(1, round(SEED * g / 2))
    seed = np.zeros_like(product)
    seed[g // 2 - half:g // 2 + half, g // 2 - half:g // 2 + half] = True
    seed &= product
    if not seed.any():
        ys, xs = np.nonzero(product)
        k = int(np.argmin((ys + 0.5 - g / 2) ** 2 + (xs + 0.5 - g / 2) ** 2))
        seed[ys[k], xs[k]] = True
    return seed


def _geodesic(cells: np.ndarray, g: int, sources: np.ndarray) -> np.ndarray:
    """(G*G,) least summed colour change (steps above STEP_NOISE) from any source cell
    along 4-connected paths of the (G*G, 3) grid."""
    if not sources.any():
        return np.full(len(cells), np.inf)
    idx = np.arange(g * g).reshape(g, g)
    a = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    b = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    diff = cells[a] - cells[b]
    step = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    weight = np.maximum(step - STEP_NOISE, 0.0) + 1e-6  # zero would drop the edge
    graph = csr_matrix((weight, (a, b)), shape=(g * g, g * g))
    return dijkstra(graph, directed=False, indices=np.flatnonzero(sources), min_only=True)


def _distances(points: np.ndarray, centres: np.ndarray, p2: np.ndarray | None = None
               ) -> np.ndarray:
    """(N, K) Euclidean distances of (N, 3) points (squared norms ``p2``, when known) to
    (K, 3) centres."""
    if p2 is None:
        p2 = np.einsum("ij,ij->i", points, points)
    d2 = p2[:, None] - 2.0 * points @ centres.T + np.einsum("ij,ij->i", centres, centres)
    return np.sqrt(np.maximum(d2, 0.0))


def _kmeans(points: np.ndarray) -> np.ndarray:
    """Deterministic k-means (farthest-point start) of (N, 3) points -> (k, 3) centres."""
    p2 = np.einsum("ij,ij->i", points, points)
    centres = [points.mean(axis=0)]
    nearest = _distances(points, centres[0][None], p2)[:, 0]
    for _ in range(1, min(BG_K, len(points))):
        centres.append(points[int(nearest.argmax())])
        nearest = np.minimum(nearest, _distances(points, centres[-1][None], p2)[:, 0])
    c = np.stack(centres)
    k = len(c)
    for _ in range(BG_ITERS):
        assign = _distances(points, c, p2).argmin(axis=1)
        count = np.bincount(assign, minlength=k)
        sums = np.stack([np.bincount(assign, points[:, j], minlength=k) for j in range(3)], 1)
        c = np.where(count[:, None] > 0, sums / np.maximum(count, 1)[:, None], c)
    return c
