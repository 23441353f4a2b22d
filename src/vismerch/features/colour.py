"""The ``colour`` feature backend: no weights, torch on any device, batched.

Per batch of uint8 RGB images (B, S, S, 3), after the image analysis of ``analysis.py``
(blur, a ``grid`` x ``grid`` copy of the colours, backdrop, exposure, product mask and
its geometry) and the perceptual hash of the grid's luma, it computes:

1. palette and histogram samples: one pixel per cell of a jittered ``samples`` x
   ``samples`` lattice of the full image (single pixels keep the colours of fine stripes
   and prints, which cell averages would blend; the jitter avoids aliasing with periodic
   patterns). A sample counts when its cell is foreground and the pixel itself stands
   out from the background or lies in a filled hole; interior pixels (their four
   neighbours ``RING_STEP`` px away alike and none backdrop-like) are preferred. With
   (almost) no foreground the whole frame is used;
2. the palette: weighted k-means (K=5, deterministic farthest-point init, 5 Lloyd steps
   on a third of the samples then 2 on all), clusters closer than ``MERGE_DELTA``
   CIEDE2000 merged, clusters under 2% dropped; thin dark outlines left out;
3. the similarity vector: soft CIELAB histogram of the samples (6x7x7 bins), mean-Lab
   layout on a 4x4 grid of the whole frame, an 8-orientation gradient histogram on 2x2
   cells; each block is Hellinger/L2-normalised and weighted so that cosine =
   0.6 histogram + 0.2 layout + 0.2 edges; the whole vector is L2-normalised.

The duplicate signature (dupes/signature.py) starts from the ``BOX_GRID`` means that the
analysis' one pass over the pixels leaves. Sizes are the ``Sizes`` the backend is made with. The
fast paths are in kernels.py, their plain definitions in reference.py. Colour naming lives
in colournames.py and is re-exported here.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from vismerch.dupes import signature as dupsig
from vismerch.dupes.signature import BOX_GRID
from vismerch.errors import UsageError
from vismerch.features import analysis, foreground, kernels, quality
from vismerch.features.analysis import BORDER, CPU_CHUNK, GRID, shrink
from vismerch.features.base import COLOUR_VERSION, FeatureBatch
from vismerch.features.colournames import (  # noqa: F401  (re-exported API)
    MULTICOLOUR,
    ColourTable,
    NamedColour,
    colour_names,
    dominant_colour,
    is_multicolour,
    load_colour_table,
    parse_colour,
)
from vismerch.features.colourspace import ciede2000, lab_to_srgb, srgb_to_lab
from vismerch.features.hashing import luma, pack_bits, phash_bits

if TYPE_CHECKING:
    from vismerch.config import Settings

VERSION = COLOUR_VERSION  # what each version changed: features/base.py
PALETTE_K = 5
SAMPLES = 32  # palette/histogram samples per side (1024 pixels per image)
SAMPLE_SEED = 20240601
RING_STEP = 2  # px to the neighbours that decide whether a sample is interior
INTERIOR_LEVELS = 48  # sRGB levels: fabric texture and JPEG noise stay well under this
BACKDROP_LEVELS = 12  # sRGB levels from the background colour: still backdrop-like
KMEANS_COARSE_STEP = 3  # every third sample for the first Lloyd steps
KMEANS_COARSE_ITERS = 5
KMEANS_FINE_ITERS = 2
MERGE_DELTA = 8.0  # CIEDE2000: closer clusters are shades of one colour (lit vs shaded)
MIN_CLUSTER = 0.02  # palette clusters under 2% of the product are outline blends/noise
MIN_FOREGROUND = 0.005  # mask fraction below which the whole frame is used
L_CENTRES = torch.linspace(0.0, 100.0, 6)
AB_CENTRES = torch.linspace(-60.0, 60.0, 7)
LAYOUT_CELLS = 4
EDGE_BINS = 8
EDGE_CELLS = 2
BLOCK_WEIGHTS = {"hist": 0.6, "layout": 0.2, "edges": 0.2}  # shares of the cosine
# thin dark outlines (cel-shaded renders, illustrations, piping) are not the product's
# colour: near-black samples within OUTLINE_BAND of the mask's edge leave the
# palette (not the histogram) when the product's interior is mostly not dark
OUTLINE_BAND = 1 / 32  # of the frame (2 cells of a 64 grid, 8 px at 256): wider than a contour
OUTLINE_MAX_L = 25.0  # CIELAB L*: near-black
OUTLINE_MAX_CHROMA = 12.0  # and nearly neutral (a navy or burgundy edge is the product)
OUTLINE_MAX_DARK_INTERIOR = 0.3  # interior share of such dark samples: above it, dark is the product
OUTLINE_MIN_LEFT = 0.5  # never drop more than half the product's samples

HIST_DIM = len(L_CENTRES) * len(AB_CENTRES) ** 2
LAYOUT_DIM = 3 * LAYOUT_CELLS**2
EDGE_DIM = EDGE_BINS * EDGE_CELLS**2
DIM = HIST_DIM + LAYOUT_DIM + EDGE_DIM


@dataclass(frozen=True)
class Sizes:
    """The backend's resolutions: the analysis grid (cells per side), palette samples per
    side, the backdrop ring (grid cells) and the images per chunk of full-size work on
    CPU. (The duplicate signature's grid is ``dupes.signature.BOX_GRID``.)"""

    grid: int = GRID
    samples: int = SAMPLES
    border: int = BORDER
    chunk: int = CPU_CHUNK


def _settings(settings: Settings):
    if settings is None:
        from vismerch.config import load_settings

        return load_settings()
    return settings


class ColourBackend:
    """Offline colour/layout/edge features plus palette, hash and quality metrics."""

    name = "colour"
    dim = DIM

    def __init__(self, device: str | torch.device = "cpu", settings: Settings | None = None,
                 sizes: Sizes | None = None, **options: Any):
        if options:
            raise UsageError(f"colour backend: unknown options {sorted(options)}")
        self.settings = _settings(settings)
        self.device = torch.device(device)
        self.working_size = int(self.settings.working_size)
        self.foreground_delta = float(self.settings.colour_foreground_delta)
        self.sizes = sizes or Sizes()

    @property
    def fingerprint(self) -> dict[str, Any]:
        fp = {
            "backend": self.name,
            "version": VERSION,
            "working_size": self.working_size,
            "grid": self.sizes.grid,
            "dim": self.dim,
            "foreground_delta": self.foreground_delta,
        }
        # other sizes only when not the defaults: stored fingerprints stay valid
        default = asdict(Sizes())
        fp.update({k: v for k, v in asdict(self.sizes).items() if v != default[k]})
        return fp

    def encode_images(self, images: Any, profile: dict[str, float] | None = None) -> FeatureBatch:
        """uint8 (B, H, W, 3) RGB (tensor or array) -> FeatureBatch; ``images`` is left
        as it is. When ``profile`` is a dict, the seconds spent in each stage are added to
        it (CPU: this thread's CPU time, which a busy machine does not inflate; CUDA:
        synchronised wall time)."""
        if not isinstance(images, torch.Tensor):
            arr = np.asarray(images)
            images = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
        x = images
        if x.ndim != 4 or x.shape[-1] != 3 or x.dtype != torch.uint8:
            raise UsageError(
                f"colour backend wants uint8 (B, H, W, 3) RGB, got {x.dtype} {tuple(x.shape)}"
            )
        if x.shape[0] == 0:
            return _empty_batch()
        with torch.inference_mode():
            x = x.to(self.device)
            out, dup = self._encode(x, _StageClock(profile, self.device))
        vectors = out.pop("vector").float().cpu().numpy()
        bits = out.pop("phash_bits")
        columns = {k: v.float().cpu().numpy() for k, v in out.items()}
        columns["phash"] = pack_bits(bits)
        columns.update(dup)
        return FeatureBatch(vectors=vectors, columns=columns)

    def _encode(self, x: torch.Tensor, clock: _StageClock
                ) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray]]:
        """(feature tensors, the duplicate signature's columns): the image analysis,
        then the colour embedding of what it found."""
        seen, dup = self._analyse(x, clock)
        out = dict(seen.columns)
        palette_weights = drop_outlines(seen.samples, seen.weights, seen.mask, seen.cell_idx) * \
            seen.centred.reshape(len(seen.centred), -1).index_select(1, seen.cell_idx)
        out["palette_lab"], out["palette_weight"] = kmeans_palette(seen.samples, palette_weights)
        clock("palette: k-means, merge")
        blocks = {
            "hist": lab_histogram(seen.samples, seen.weights),
            "layout": colour_layout(seen.lab),
            "edges": edge_histogram(seen.grey),
        }
        out["vector"] = _combine(blocks)
        clock("vector: histogram, layout, edges")
        return out, dup

    def _analyse(self, x: torch.Tensor, clock: _StageClock) -> tuple[_Seen, dict[str, np.ndarray]]:
        """The always-on analysis: one pass over the pixels, hash, duplicate signature,
        backdrop, exposure, mask and the weighted palette samples."""
        sz = self.sizes
        h, w = x.shape[1:3]
        pixel_idx, ring_idx, cell_idx = sample_lattice(h, w, x.device, sz.samples, sz.grid)
        lattice = torch.cat([pixel_idx, ring_idx.reshape(-1)])
        blur, rgb, gathered, planes = analysis.scan(x, lattice, sz.grid, BOX_GRID, sz.chunk)
        grey = luma(rgb)  # (B, G, G): the hash's area means are means of the grid's luma
        columns: dict[str, torch.Tensor] = {
            "phash_bits": phash_bits(grey),
            "blur": blur,
        }
        clock("full_size: hash, blur, shrink")
        # the framing/light-invariant duplicate signature (dupes/signature.py) starts from the
        # scan's BOX_GRID means: the full-size image is averaged once for both
        dup = dupsig.signatures(x, planes=planes)
        clock("duplicate signature")
        metrics, lab, mask, holes = analysis.analyse_grid(
            rgb, analysis.grid_levels(h, w, sz.grid), self.foreground_delta, sz.border, clock)
        columns.update(metrics)  # the mask's geometry is the backdrop mask's, scene or not
        mask, centred, in_scene = foreground.scene_mask(lab, mask, metrics["background_clutter"])
        samples, weights = sample_weights(gathered, pixel_idx.numel(), metrics["background_lab"],
                                          (mask, holes & mask, cell_idx), self.foreground_delta,
                                          in_scene)
        clock("samples: lattice, interior test")
        return _Seen(columns, grey, lab, mask, centred, cell_idx, samples, weights), dup


@dataclass(frozen=True)
class _Seen:
    """What the analysis hands the embedding: its columns (hash, metrics), the grid's
    luma (B, G, G) and Lab (B, G, G, 3), the mask (B, G, G) and each cell's palette weight
    (B, G, G: 1, or a scene's centre prior), each sample's grid cell (N,), the samples in
    Lab (B, N, 3) and their weights (B, N)."""

    columns: dict[str, torch.Tensor]
    grey: torch.Tensor
    lab: torch.Tensor
    mask: torch.Tensor
    centred: torch.Tensor
    cell_idx: torch.Tensor
    samples: torch.Tensor
    weights: torch.Tensor


class _StageClock:
    """Adds the time since the previous call to ``profile[stage]`` (no-op without one)."""

    def __init__(self, profile: dict[str, float] | None, device: torch.device):
        self.profile = profile
        self.cuda = device.type == "cuda"
        self.last = self._now() if profile is not None else 0.0

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
            return time.perf_counter()
        return time.thread_time()

    def __call__(self, stage: str) -> None:
        if self.profile is None:
            return
        now = self._now()
        self.profile[stage] = self.profile.get(stage, 0.0) + now - self.last
        self.last = now


# ---------------------------------------------------------------- samples


_lattices: dict[tuple[int, int, str, int, int], tuple[torch.Tensor, ...]] = {}


def sample_lattice(h: int, w: int, device: torch.device, samples: int = SAMPLES,
                   grid: int = GRID) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flat pixel indices of one pixel per cell of a samples x samples lattice, at a fixed
    pseudo-random offset inside each cell (jitter: a regular lattice would alias with
    stripes of a matching period); the indices of its four neighbours RING_STEP px away
    (4, N); and the flat index of the grid x grid cell holding each pixel."""
    key = (h, w, str(device), samples, grid)
    if key not in _lattices:
        gen = torch.Generator().manual_seed(SAMPLE_SEED)
        jitter = torch.rand(2, samples, samples, generator=gen, dtype=torch.float64)
        i = torch.arange(samples, dtype=torch.float64)
        ys = ((i[:, None] + jitter[0]) * h / samples).floor().long().clamp_max(h - 1)
        xs = ((i[None, :] + jitter[1]) * w / samples).floor().long().clamp_max(w - 1)
        ys, xs = ys.reshape(-1), xs.reshape(-1)
        d = RING_STEP
        ring = torch.stack([
            (ys - d).clamp_min(0) * w + xs, (ys + d).clamp_max(h - 1) * w + xs,
            ys * w + (xs - d).clamp_min(0), ys * w + (xs + d).clamp_max(w - 1),
        ])
        cell = (ys * grid) // h * grid + (xs * grid) // w
        _lattices[key] = tuple(t.to(device) for t in (ys * w + xs, ring, cell))
    return _lattices[key]


def solid_samples(gathered: torch.Tensor, n: int, background: torch.Tensor) -> torch.Tensor:
    """The lattice pixels (B, 5N, 3) uint8: N samples, then their rings (4 per sample)
    -> bool (B, N): the sample's four neighbours are within INTERIOR_LEVELS of it and
    none is within BACKDROP_LEVELS of the ``background`` (B, 3) Lab. Outline blends of
    product and backdrop, JPEG halos and blends between stripes are not solid."""
    b = gathered.shape[0]
    lattice_rgb = gathered.transpose(1, 2).to(torch.int16)  # (B, 3, 5N): channel planes
    ring = lattice_rgb[:, :, n:].reshape(b, 3, 4, n)
    spread = kernels.plane_max((ring - lattice_rgb[:, :, None, :n]).abs_())  # (B, 4, N)
    bg_rgb = (lab_to_srgb(background) * 255.0).round().to(torch.int16)[:, :, None, None]
    off_bg = kernels.plane_max((ring - bg_rgb).abs_()) > BACKDROP_LEVELS
    return ((spread <= INTERIOR_LEVELS) & off_bg).all(dim=1)


def sample_weights(gathered: torch.Tensor, n: int, background: torch.Tensor,
                   cells: tuple[torch.Tensor, torch.Tensor, torch.Tensor], delta: float,
                   in_scene: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (the N samples in Lab (B, N, 3), their weights (B, N)). ``cells``: the mask and
    its holes (B, G, G) and each sample's flat grid cell (N,). A sample counts when its
    cell is foreground and the pixel stands out from the background (or lies in a filled
    hole; in a scene, ``in_scene`` (B,) bool, the border's colour is no backdrop and every
    sample in the mask counts): thin chains and straps do not drag backdrop in. Solid
    samples are preferred when there are enough of them; a (near) empty mask uses every
    sample."""
    mask, holes, cell_idx = cells
    b = gathered.shape[0]
    samples = srgb_to_lab(gathered[:, :n])  # (B, N, 3)
    own = kernels.far_from(samples, background, delta)
    if in_scene is not None:
        own = own | in_scene[:, None]
    in_mask = mask.reshape(b, -1).index_select(1, cell_idx)
    in_hole = holes.reshape(b, -1).index_select(1, cell_idx)
    keep = in_mask & (own | in_hole)
    interior = keep & (solid_samples(gathered, n, background) | in_hole)
    enough = interior.sum(dim=1) >= (0.3 * keep.sum(dim=1)).clamp_min(8)
    keep = torch.where(enough[:, None], interior, keep).to(torch.float32)
    empty = keep.mean(dim=1, keepdim=True) < MIN_FOREGROUND
    return samples, torch.where(empty, torch.ones_like(keep), keep)


# ---------------------------------------------------------------- palette


def drop_outlines(samples: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor,
                  cell_idx: torch.Tensor) -> torch.Tensor:
    """Palette weights without thin dark outlines: samples (B, N, 3) Lab that are
    near-black and lie within OUTLINE_BAND of the mask's edge get weight 0, when the
    interior (the mask eroded by the band) holds under OUTLINE_MAX_DARK_INTERIOR of such
    dark samples and at least OUTLINE_MIN_LEFT of the samples stay. A black product (dark
    inside too) keeps its edges."""
    b = samples.shape[0]
    band = max(1, round(mask.shape[1] * OUTLINE_BAND))  # grid cells
    edge = (mask & ~kernels.erode(mask, band)).reshape(b, -1).index_select(1, cell_idx)
    chroma = torch.hypot(samples[..., 1], samples[..., 2])
    dark = (samples[..., 0] < OUTLINE_MAX_L) & (chroma < OUTLINE_MAX_CHROMA)
    used = weights > 0
    interior = used & ~edge
    dark_inside = (interior & dark).sum(1) / interior.sum(1).clamp_min(1)
    drop = used & edge & dark
    left = (used & ~drop).sum(1) >= OUTLINE_MIN_LEFT * used.sum(1)
    ok = (dark_inside < OUTLINE_MAX_DARK_INTERIOR) & left & (interior.sum(1) > 0)
    return torch.where(drop & ok[:, None], torch.zeros_like(weights), weights)


def kmeans_palette(points: torch.Tensor, weights: torch.Tensor, k: int = PALETTE_K
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted k-means in Lab: points (B, N, 3), weights (B, N) -> palette (B, K, 3),
    weights (B, K) summing to 1 over used clusters, heaviest first, zero-padded."""
    b = points.shape[0]
    active = weights > 0
    # deterministic init: the weighted mean, then repeatedly the point farthest from all
    # centres so far (covers the extreme colours; Lloyd steps pull them to cluster means)
    mean = (points * weights[..., None]).sum(1) / weights.sum(1, keepdim=True).clamp_min(1e-9)
    centres = mean[:, None].repeat(1, k, 1)
    planes = points.transpose(1, 2).contiguous()  # (B, 3, N): what the kernels take
    nearest = kernels.square_distance(planes, mean)
    rows = torch.arange(b, device=points.device)
    for i in range(1, k):
        idx = torch.where(active, nearest, torch.full_like(nearest, -1.0)).argmax(dim=1)
        centres[:, i] = points[rows, idx]
        nearest = torch.minimum(nearest, kernels.square_distance(planes, centres[:, i]))
    # Lloyd steps, coarse to fine: most on every third point, the last ones on all
    for step, iters in ((KMEANS_COARSE_STEP, KMEANS_COARSE_ITERS), (1, KMEANS_FINE_ITERS)):
        centres, mass = kernels.lloyd(planes[:, :, ::step].contiguous(), weights[:, ::step],
                                      centres, iters)
    centres, mass = merge_close(centres, mass)
    share = mass / mass.sum(dim=1, keepdim=True).clamp_min(1e-9)
    share = torch.where(share >= MIN_CLUSTER, share, torch.zeros_like(share))
    share = share / share.sum(dim=1, keepdim=True).clamp_min(1e-9)
    order = share.argsort(dim=1, descending=True, stable=True)
    share = share.gather(1, order)
    centres = centres.gather(1, order[..., None].expand(-1, -1, 3))
    centres = torch.where(share[..., None] > 0, centres, torch.zeros_like(centres))
    return centres, share


def merge_close(centres: torch.Tensor, mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Agglomerative merging, complete linkage: repeatedly merge the closest pair of used
    clusters while every colour in the two is within MERGE_DELTA CIEDE2000 of every other
    (no chaining of a gradient into one colour); distances are computed once."""
    b, k, _ = centres.shape
    rows = torch.arange(b, device=centres.device)
    d = ciede2000(centres[:, :, None], centres[:, None])
    unused = mass <= 0
    eye = torch.eye(k, dtype=torch.bool, device=centres.device)
    d = d.masked_fill(unused[:, :, None] | unused[:, None, :] | eye, math.inf)
    for _ in range(k - 1):
        best = d.reshape(b, -1).argmin(dim=1)
        i, j = best // k, best % k
        do = d.reshape(b, -1)[rows, best] < MERGE_DELTA
        if not bool(do.any()):
            break
        mi, mj = mass[rows, i], mass[rows, j]
        merged = (centres[rows, i] * mi[:, None] + centres[rows, j] * mj[:, None]) / (
            (mi + mj).clamp_min(1e-9)[:, None]
        )
        oi = F.one_hot(i, k).bool() & do[:, None]
        oj = F.one_hot(j, k).bool() & do[:, None]
        centres = torch.where(oi[..., None], merged[:, None], centres)
        mass = torch.where(oi, (mi + mj)[:, None], mass).masked_fill(oj, 0.0)
        linked = torch.maximum(d[rows, i], d[rows, j])  # (B, K): complete linkage
        d = torch.where(oi[:, :, None], linked[:, None, :], d)
        d = torch.where(oi[:, None, :], linked[:, :, None], d)
        d = d.masked_fill(oj[:, :, None] | oj[:, None, :], math.inf)
    return centres, mass



# ---------------------------------------------------------------- the vector


def lab_histogram(points: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Soft (trilinear) Lab histogram (B, HIST_DIM), square-rooted (Hellinger), unit L1
    before the root (so unit L2 after)."""
    hist = kernels.soft_histogram(points, weights, (L_CENTRES, AB_CENTRES, AB_CENTRES))
    hist = hist / hist.sum(dim=1, keepdim=True).clamp_min(1e-9)
    return hist.sqrt()


def colour_layout(lab: torch.Tensor) -> torch.Tensor:
    """Mean Lab of a LAYOUT_CELLS^2 grid over the whole frame, centred and scaled."""
    cells = shrink(lab.permute(0, 3, 1, 2), LAYOUT_CELLS)  # (B, 3, c, c)
    scale = torch.tensor([50.0, 50.0, 50.0], device=lab.device)[None, :, None, None]
    shift = torch.tensor([50.0, 0.0, 0.0], device=lab.device)[None, :, None, None]
    return ((cells - shift) / scale).reshape(lab.shape[0], -1)


def edge_histogram(grey: torch.Tensor) -> torch.Tensor:
    """Magnitude-weighted unsigned gradient orientations, EDGE_BINS per cell of a
    EDGE_CELLS^2 grid, square-rooted and L2-normalised (B, EDGE_DIM)."""
    b, h, w = grey.shape
    p = F.pad(grey[:, None], (1, 1, 1, 1), mode="replicate")[:, 0]
    gx = (p[:, 1:-1, 2:] - p[:, 1:-1, :-2]) * 2 + (p[:, :-2, 2:] - p[:, :-2, :-2]) + (
        p[:, 2:, 2:] - p[:, 2:, :-2]
    )
    gy = (p[:, 2:, 1:-1] - p[:, :-2, 1:-1]) * 2 + (p[:, 2:, :-2] - p[:, :-2, :-2]) + (
        p[:, 2:, 2:] - p[:, :-2, 2:]
    )
    mag = torch.hypot(gx, gy)
    pos = torch.remainder(torch.atan2(gy, gx), math.pi) / math.pi * EDGE_BINS - 0.5
    i0 = pos.floor()
    frac = pos - i0
    # pos lies in [-0.5, EDGE_BINS - 0.5): the bins wrap round at -1 and EDGE_BINS only.
    # Bin numbers stay floats (small whole numbers: exact) until one int64 conversion each
    i0 = torch.where(i0 < 0, i0 + EDGE_BINS, i0)
    i1 = torch.where(i0 == EDGE_BINS - 1, 0.0, i0 + 1)
    cy = (torch.arange(h, device=grey.device) * EDGE_CELLS // h)[:, None]
    cx = (torch.arange(w, device=grey.device) * EDGE_CELLS // w)[None, :]
    cell = ((cy * EDGE_CELLS + cx) * EDGE_BINS).to(torch.float32)
    hist = torch.zeros(b, EDGE_DIM, device=grey.device, dtype=torch.float32)
    hist.scatter_add_(1, i0.add_(cell).to(torch.int64).reshape(b, -1), (mag * (1 - frac)).reshape(b, -1))
    hist.scatter_add_(1, i1.add_(cell).to(torch.int64).reshape(b, -1), (mag * frac).reshape(b, -1))
    hist = hist / hist.sum(dim=1, keepdim=True).clamp_min(1e-9)
    return hist.sqrt()

def _combine(blocks: dict[str, torch.Tensor]) -> torch.Tensor:
    parts = []
    for name in ("hist", "layout", "edges"):
        v = blocks[name]
        v = v / v.norm(dim=1, keepdim=True).clamp_min(1e-9)
        parts.append(v * math.sqrt(BLOCK_WEIGHTS[name]))
    vec = torch.cat(parts, dim=1)
    return vec / vec.norm(dim=1, keepdim=True).clamp_min(1e-9)


def _empty_batch() -> FeatureBatch:
    columns: dict[str, np.ndarray] = {
        "palette_lab": np.zeros((0, PALETTE_K, 3), np.float32),
        "palette_weight": np.zeros((0, PALETTE_K), np.float32),
        "background_lab": np.zeros((0, 3), np.float32),
        "phash": np.zeros((0,), np.uint64),
        **dupsig.empty_columns(),
    }
    for name in quality.METRIC_NAMES:
        columns[name] = np.zeros((0,), np.float32)
    return FeatureBatch(vectors=np.zeros((0, DIM), np.float32), columns=columns)
