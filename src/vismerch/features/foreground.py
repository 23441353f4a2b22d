"""The product in a photo without a clean backdrop (a product standing in a scene, a
full-bleed shot): a foreground mask from the colours of the frame's border, for the
colour backend's 64x64 CIELAB grid.

The colour backend's own mask takes every cell far from the border's median colour; on a
studio backdrop that is the product, in a scene it is most of the scene. A frame is a
scene when its border is cluttered (``background_clutter`` above ``SCENE_CLUTTER``, the
``quality_clutter`` flag's default: studio paper and noise stay under ~3) or when that
mask covers over ``SCENE_FILL`` of the frame. There, like GrabCut's first step without
the graph cut:

1. the border ring's colours are summarised by a small k-means (``BG_K`` colours);
2. a border colour that is more common in the centre box than on the border is the
   product running off the frame, not the scene, and leaves the background model;
3. the foreground is every cell farther than ``SCENE_DELTA`` (CIE76) from all remaining
   background colours, kept where it is connected to the centre box (the product is
   framed around the centre; a scene's own far colours elsewhere are not it).

When that leaves under ``MIN_SCENE_FILL`` of the frame, the backend's mask stays.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SCENE_CLUTTER = 6.0  # border colour spread above which the frame is a scene
SCENE_FILL = 0.7  # a mask covering more of the frame than this found no backdrop either
SCENE_DELTA = 12.0  # CIE76 from every background colour: the product (above a scene's blur)
BG_K = 8
BG_ITERS = 6
RING = 2  # grid cells
CENTRE = (0.3, 0.7)  # the centre box, as fractions of each side
MIN_SCENE_FILL = 0.03


def scene_mask(lab: torch.Tensor, mask: torch.Tensor, clutter: torch.Tensor) -> torch.Tensor:
    """The foreground mask (B, G, G) bool, with scenes' rows replaced (module docstring);
    ``lab`` the (B, G, G, 3) CIELAB grid, ``clutter`` the border's spread (B,)."""
    fill = mask.float().mean(dim=(1, 2))
    scene = (clutter > SCENE_CLUTTER) | (fill > SCENE_FILL)
    if not bool(scene.any()):
        return mask
    out = mask.clone()
    for i in scene.nonzero().flatten().tolist():
        found = _one_scene(lab[i].float())
        if float(found.float().mean()) >= MIN_SCENE_FILL:
            out[i] = found
    return out


def _one_scene(lab: torch.Tensor) -> torch.Tensor:
    g = lab.shape[0]
    ring = torch.ones(g, g, dtype=torch.bool, device=lab.device)
    ring[RING:-RING, RING:-RING] = False
    lo, hi = round(CENTRE[0] * g), round(CENTRE[1] * g)
    centre = torch.zeros_like(ring)
    centre[lo:hi, lo:hi] = True
    centres = _kmeans(lab[ring])
    cells = lab.reshape(-1, 3)
    d = torch.cdist(cells, centres)  # (G*G, K)
    nearest = d.argmin(dim=1)
    near = d.min(dim=1).values <= SCENE_DELTA
    share_ring = torch.bincount(nearest[ring.reshape(-1) & near], minlength=len(centres)).float()
    share_centre = torch.bincount(nearest[centre.reshape(-1) & near], minlength=len(centres)).float()
    scene = share_ring / max(1, int(ring.sum())) >= share_centre / max(1, int(centre.sum()))
    if not bool(scene.any()):
        return torch.zeros_like(ring)
    far = (d[:, scene].min(dim=1).values > SCENE_DELTA).reshape(g, g)
    return _reach(far, far & centre)


def _kmeans(points: torch.Tensor) -> torch.Tensor:
    """Deterministic k-means (farthest-point start) of (N, 3) points -> (k, 3) centres."""
    centres = [points.mean(dim=0)]
    nearest = (points - centres[0]).norm(dim=1)
    for _ in range(1, min(BG_K, len(points))):
        centres.append(points[int(nearest.argmax())])
        nearest = torch.minimum(nearest, (points - centres[-1]).norm(dim=1))
    c = torch.stack(centres)
    for _ in range(BG_ITERS):
        assign = torch.cdist(points, c).argmin(dim=1)
        sums = torch.zeros_like(c).index_add_(0, assign, points)
        count = torch.bincount(assign, minlength=len(c)).float()[:, None]
        c = torch.where(count > 0, sums / count.clamp_min(1), c)
    return c


def _reach(allowed: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
    """Cells of ``allowed`` (G, G) connected (8-neighbourhood) to ``seed``."""
    cur = seed.float()[None, None]
    ok = allowed.float()[None, None]
    for _ in range(allowed.shape[0]):
        nxt = F.max_pool2d(cur, 3, stride=1, padding=1) * ok
        if torch.equal(nxt, cur):
            break
        cur = nxt
    return cur[0, 0] > 0
