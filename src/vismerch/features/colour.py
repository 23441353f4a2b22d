"""The ``colour`` feature backend: no weights, torch on any device, batched.

Per batch of uint8 RGB images (B, S, S, 3) it computes, in one pass:

1. full size (in chunks of 8 on CPU): luma -> perceptual hash (hashing.py) and the blur
   metric (quality.py); a 64x64 area-averaged copy of the colours;
2. on the 64x64 grid, in CIELAB: the background is the per-channel median of a border
   ring (quality.background_stats); the foreground is every cell more than
   ``colour_foreground_delta`` (CIEDE2000) from it, minus specks (fewer than 3 cells in
   a 3x3 window), plus narrow enclosed holes: background-coloured cells not reachable
   from the border whose row or column run is at most 1/10 of the frame (white stripes
   or lettering on a garment, narrow all along; not the large hole inside a necklace or
   a bag handle).
   Mask geometry gives fill, extent and centre offset (quality.mask_geometry);
3. palette and histogram samples: one pixel per cell of a jittered 32x32 lattice of the
   full image (single pixels keep the colours of fine stripes and prints, which 4x4
   averages would blend; the jitter avoids aliasing with periodic patterns). A sample
   counts when its cell is foreground and the pixel itself stands out from the
   background or lies in a filled hole. With (almost) no foreground the whole frame is
   used. Palette: weighted k-means (K=5, deterministic farthest-point init, 5 Lloyd steps
   on a third of the samples then 2 on all), clusters closer than ``MERGE_DELTA``
   CIEDE2000 merged, clusters under 2% dropped;
4. the similarity vector: soft CIELAB histogram of the samples (6x7x7 bins), mean-Lab
   layout on a 4x4 grid of the whole frame, an 8-orientation gradient histogram on 2x2
   cells; each block is Hellinger/L2-normalised and weighted so that cosine =
   0.6 histogram + 0.2 layout + 0.2 edges; the whole vector is L2-normalised.

Colour naming lives in colournames.py and is re-exported here.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vismerch.dupes import signature as dupsig
from vismerch.dupes.signature import BOX_GRID
from vismerch.errors import UsageError
from vismerch.features import quality
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
from vismerch.features.cpumath import matmul
from vismerch.features.hashing import luma, pack_bits, phash_bits

VERSION = COLOUR_VERSION  # what each version changed: features/base.py
GRID = 64  # palette, mask, histogram and layout resolution
BORDER = 2  # border ring width in grid cells (1/32 of the frame)
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
DE00_PER_DE76 = 2.13  # upper bound of CIEDE2000 / CIE76 (sqrt(4.5), rounded up)
HOLE_MAX_RUN = GRID // 10
CPU_CHUNK = 8
REACH_SWEEPS = 3
L_CENTRES = torch.linspace(0.0, 100.0, 6)
AB_CENTRES = torch.linspace(-60.0, 60.0, 7)
LAYOUT_CELLS = 4
EDGE_BINS = 8
EDGE_CELLS = 2
BLOCK_WEIGHTS = {"hist": 0.6, "layout": 0.2, "edges": 0.2}  # shares of the cosine
WHITE = (100.0, 0.0, 0.0)
# thin dark outlines (cel-shaded renders, illustrations, piping) are not the product's
# colour: near-black samples within OUTLINE_BAND grid cells of the mask's edge leave the
# palette (not the histogram) when the product's interior is mostly not dark
OUTLINE_BAND = 2  # grid cells (8 px at 256): wider than a drawn contour
OUTLINE_MAX_L = 25.0  # CIELAB L*: near-black
OUTLINE_MAX_CHROMA = 12.0  # and nearly neutral (a navy or burgundy edge is the product)
OUTLINE_MAX_DARK_INTERIOR = 0.3  # interior share of such dark samples: above it, dark is the product
OUTLINE_MIN_LEFT = 0.5  # never drop more than half the product's samples

HIST_DIM = len(L_CENTRES) * len(AB_CENTRES) ** 2
LAYOUT_DIM = 3 * LAYOUT_CELLS**2
EDGE_DIM = EDGE_BINS * EDGE_CELLS**2
DIM = HIST_DIM + LAYOUT_DIM + EDGE_DIM


def _settings(settings: Any):
    if settings is None:
        from vismerch.config import load_settings

        return load_settings()
    return settings


class ColourBackend:
    """Offline colour/layout/edge features plus palette, hash and quality metrics."""

    name = "colour"
    dim = DIM

    def __init__(self, device: str | torch.device = "cpu", settings: Any = None, **options: Any):
        if options:
            raise UsageError(f"colour backend: unknown options {sorted(options)}")
        self.settings = _settings(settings)
        self.device = torch.device(device)
        self.working_size = int(self.settings.working_size)
        self.foreground_delta = float(self.settings.colour_foreground_delta)

    @property
    def fingerprint(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "version": VERSION,
            "working_size": self.working_size,
            "grid": GRID,
            "dim": self.dim,
            "foreground_delta": self.foreground_delta,
        }

    def encode_images(self, images: Any, profile: dict[str, float] | None = None) -> FeatureBatch:
        """uint8 (B, H, W, 3) RGB (tensor or array) -> FeatureBatch. When ``profile`` is a
        dict, the seconds spent in each stage are added to it (CPU: this thread's CPU
        time, which a busy machine does not inflate; CUDA: synchronised wall time)."""
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

    # ------------------------------------------------------------ the pipeline

    def _encode(self, x: torch.Tensor, clock: _StageClock
                ) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray]]:
        """(feature tensors, the duplicate signature's columns)."""
        b = x.shape[0]
        # full-size work in chunks of CPU_CHUNK on CPU: a whole batch's full-size
        # temporaries are tens of MB (measured: chunks of 8 and 16 are as fast as each
        # other, whole batches and chunks of 2-4 slower); on a GPU the batch goes at once
        step = b if x.device.type != "cpu" else CPU_CHUNK
        # the palette's lattice pixels and their rings (below) are gathered chunk by chunk
        # too, while each chunk is in cache: gathered from the whole batch afterwards, each
        # of those ~5,000 reads per image missed it (0.05 ms per image)
        pixel_idx, ring_idx, cell_idx = _sample_lattice(x.shape[1], x.shape[2], x.device)
        lattice = torch.cat([pixel_idx, ring_idx.reshape(-1)])
        parts, gathered = [], []
        # the duplicate signature's 128x128 means, on channel planes, are written by the
        # chunks straight into the batch's (B, 3, 128, 128)
        h, w = x.shape[1:3]
        planes = None
        if _grid_levels(h, w) is not None and h % BOX_GRID == 0:
            planes = torch.empty(b, 3, BOX_GRID, BOX_GRID, device=x.device)
        for i in range(0, b, step):
            chunk = x[i : i + step]
            gathered.append(chunk.reshape(len(chunk), -1, 3).index_select(1, lattice))
            parts.append(_full_size(chunk, None if planes is None else planes[i : i + step]))
        gathered = torch.cat(gathered)  # (B, 5N, 3) uint8: N lattice pixels, then 4N ring
        blur, rgb = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        # rgb: (B, G, G, 3) area-averaged sRGB; the hash's 32x32 area means are 2x2 means
        # of its luma's 64x64 (luma is linear)
        grey = luma(rgb)  # (B, G, G)
        out: dict[str, torch.Tensor] = {
            "phash_bits": phash_bits(grey),
            "blur": blur,
        }
        clock("full_size: hash, blur, shrink")
        # the framing/light-invariant duplicate signature (dupes/signature.py) starts from the
        # chunks' 128x128 means: the full-size image is averaged once for both
        dup = dupsig.signatures(x, planes=planes)
        clock("duplicate signature")
        lab = srgb_to_lab(rgb, levels=_grid_levels(x.shape[1], x.shape[2]))  # (B, G, G, 3)
        background, clutter = quality.background_stats(lab, BORDER)
        white = torch.tensor(WHITE, device=x.device)
        out["background_lab"] = background
        out["background_delta"] = ciede2000(background, white)
        out["background_clutter"] = clutter
        out.update(quality.exposure_stats(lab[..., 0].reshape(b, -1)))
        clock("grid: lab, background, exposure")

        mask, holes = foreground_mask(lab, background, self.foreground_delta)
        out.update(quality.mask_geometry(mask))
        clock("mask: foreground, holes, geometry")
        # palette and histogram: single pixels at a jittered 32x32 lattice of the full
        # image, not cell averages, so fine stripes/checks/prints keep their own colours
        # instead of blending into a colour the product does not have. A sample counts
        # when its cell is foreground and the pixel itself stands out from the background
        # (or lies in a filled hole): thin chains and straps do not drag backdrop in.
        n = pixel_idx.numel()
        pixels = gathered[:, :n]  # (B, N, 3) uint8
        samples = srgb_to_lab(pixels)  # (B, N, 3)
        own = far_from(samples, background, self.foreground_delta)
        in_mask = mask.reshape(b, -1).index_select(1, cell_idx)
        in_hole = holes.reshape(b, -1).index_select(1, cell_idx)
        keep = in_mask & (own | in_hole)
        # prefer interior pixels: the four neighbours RING_STEP px away are within
        # INTERIOR_LEVELS of the pixel and none of them is backdrop-like. Outline blends
        # of product and backdrop (a third of a thin chain's pixels), JPEG halos and
        # blends between stripes are left out
        # (on channel planes: a max over a trailing axis of 3 is several times slower)
        lattice_rgb = gathered.transpose(1, 2).to(torch.int16)  # (B, 3, 5N)
        ring = lattice_rgb[:, :, n:].reshape(b, 3, 4, n)
        spread = _plane_max((ring - lattice_rgb[:, :, None, :n]).abs_())  # (B, 4, N)
        bg_rgb = (lab_to_srgb(background) * 255.0).round().to(torch.int16)[:, :, None, None]
        off_bg = _plane_max((ring - bg_rgb).abs_()) > BACKDROP_LEVELS
        solid = ((spread <= INTERIOR_LEVELS) & off_bg).all(dim=1)
        interior = keep & (solid | in_hole)
        enough = interior.sum(dim=1) >= (0.3 * keep.sum(dim=1)).clamp_min(8)
        keep = torch.where(enough[:, None], interior, keep)
        weights = _fallback(keep.to(torch.float32))
        clock("samples: lattice, interior test")
        palette_weights = drop_outlines(samples, weights, mask, cell_idx)
        out["palette_lab"], out["palette_weight"] = kmeans_palette(samples, palette_weights)
        clock("palette: k-means, merge")
        blocks = {
            "hist": lab_histogram(samples, weights),
            "layout": colour_layout(lab),
            "edges": edge_histogram(grey),
        }
        out["vector"] = _combine(blocks)
        clock("vector: histogram, layout, edges")
        return out, dup


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


# ---------------------------------------------------------------- stages


def _full_size(x: torch.Tensor, planes: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 (b, S, S, 3) -> (blur, channels-last GRID x GRID sRGB means): the work that
    reads every pixel, done in chunks. ``planes`` (b, 3, BOX_GRID, BOX_GRID), given when S
    is a multiple of BOX_GRID, receives the BOX_GRID x BOX_GRID means the duplicate
    signature starts from."""
    h, w = x.shape[1:3]
    b = x.shape[0]
    if _grid_levels(h, w) is None:  # no whole cells: area resampling
        xf = x.to(torch.float32).permute(0, 3, 1, 2)
        rgb = _shrink(xf, GRID).permute(0, 2, 3, 1).contiguous()
    elif planes is not None:
        # cell means straight from the uint8 pixels (integer sums: the float values,
        # cheaper); one pass serves both: the 64x64 means are 2x2 means of the 128x128
        # ones (added in cell_mean's order, so the same bits), which dupsig.signatures
        # would otherwise recompute from x
        quality.cell_mean_planes(x, h // BOX_GRID, planes)
        m = BOX_GRID // GRID
        rgb = quality.cell_mean(planes.reshape(b * 3, BOX_GRID, BOX_GRID), m)
        rgb = rgb.view(b, 3, GRID, GRID).permute(0, 2, 3, 1).contiguous()
    else:
        rgb = quality.cell_mean(x, h // GRID)
    return quality.blur_metric(luma(x)), rgb


def _grid_levels(h: int, w: int) -> int | None:
    """How many pixels each GRID cell mean of an h x w image averages when ``_full_size``
    takes the means as exact integer sums (square, a multiple of GRID); None when it
    resamples instead."""
    return (h // GRID) ** 2 if h == w and h % GRID == 0 else None


_lattices: dict[tuple[int, int, str], tuple[torch.Tensor, ...]] = {}


def _sample_lattice(
    h: int, w: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flat pixel indices of one pixel per cell of a SAMPLES x SAMPLES lattice, at a fixed
    pseudo-random offset inside each cell (jitter: a regular lattice would alias with
    stripes of a matching period); the indices of its four neighbours RING_STEP px away
    (4, N); and the flat GRID-cell index holding each pixel."""
    key = (h, w, str(device))
    if key not in _lattices:
        gen = torch.Generator().manual_seed(SAMPLE_SEED)
        jitter = torch.rand(2, SAMPLES, SAMPLES, generator=gen, dtype=torch.float64)
        i = torch.arange(SAMPLES, dtype=torch.float64)
        ys = ((i[:, None] + jitter[0]) * h / SAMPLES).floor().long().clamp_max(h - 1)
        xs = ((i[None, :] + jitter[1]) * w / SAMPLES).floor().long().clamp_max(w - 1)
        ys, xs = ys.reshape(-1), xs.reshape(-1)
        d = RING_STEP
        ring = torch.stack([
            (ys - d).clamp_min(0) * w + xs, (ys + d).clamp_max(h - 1) * w + xs,
            ys * w + (xs - d).clamp_min(0), ys * w + (xs + d).clamp_max(w - 1),
        ])
        cell = (ys * GRID) // h * GRID + (xs * GRID) // w
        _lattices[key] = tuple(t.to(device) for t in (ys * w + xs, ring, cell))
    return _lattices[key]


def _shrink(x: torch.Tensor, size: int) -> torch.Tensor:
    """(B, C, H, W) float -> (B, C, size, size) by area averaging."""
    h, w = x.shape[-2:]
    if h % size == 0 and w % size == 0:
        return F.avg_pool2d(x, (h // size, w // size))
    return F.interpolate(x, size=(size, size), mode="area")


def _box_count(m: torch.Tensor) -> torch.Tensor:
    """Number of set cells in each 3x3 window (zero padding), (B, H, W) float."""
    p = F.pad(m, (1, 1, 1, 1))
    rows = p[:, :-2] + p[:, 1:-1] + p[:, 2:]  # separable: three rows, then three columns
    return rows[:, :, :-2] + rows[:, :, 1:-1] + rows[:, :, 2:]


def _runs(barrier: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Run ids along the last axis: cells between barriers share an id (B, H, W) int64,
    unique over the batch, and the number of ids."""
    b, h, w = barrier.shape
    run = barrier.to(torch.int64).cumsum(dim=-1)
    offset = torch.arange(b * h, device=barrier.device).reshape(b, h, 1) * (w + 1)
    return run + offset, b * h * (w + 1)


def _run_sum(values: torch.Tensor, runs: tuple[torch.Tensor, int]) -> torch.Tensor:
    """Count of set ``values`` (bool) over each cell's run, broadcast back to the cells.
    Counted on CPU in uint8 when a run cannot exceed 255 cells (the bools' own bytes, no
    conversion; with ``index_select`` rather than ``take``: less than half the time)."""
    ids, n = runs
    small = values.device.type == "cpu" and ids.shape[-1] <= torch.iinfo(torch.uint8).max
    dtype = torch.uint8 if small else torch.int32
    flat = values.reshape(-1)
    flat = flat.view(torch.uint8) if small else flat.to(dtype)
    acc = torch.zeros(n, device=values.device, dtype=dtype).scatter_add_(0, ids.reshape(-1), flat)
    return acc.index_select(0, ids.reshape(-1)).view(ids.shape)


def fill_narrow_holes(fg: torch.Tensor) -> torch.Tensor:
    """Add enclosed background cells (not reachable from the border) in narrow runs."""
    # most product shots have no enclosed background at all: a background cell with no
    # foreground between it and the frame's edge along its row or column is reached by the
    # first sweep, so images where every background cell is that open need no sweep
    maybe = (~fg & ~_open_to_border(fg)).any(dim=2).any(dim=1).nonzero().squeeze(1)
    if maybe.numel() == 0:
        return fg
    fg_m = fg.index_select(0, maybe)
    bg = ~fg_m
    border = torch.zeros_like(fg_m)
    border[:, 0], border[:, -1], border[:, :, 0], border[:, :, -1] = True, True, True, True
    reach = _sweep(bg, _runs(fg_m), _runs(fg_m.transpose(1, 2)), bg & border)
    todo_m = (bg & ~reach).any(dim=2).any(dim=1).nonzero().squeeze(1)  # rows of ``maybe``
    if todo_m.numel() == 0:
        return fg
    todo = maybe.index_select(0, todo_m)
    fg_s, bg_s = fg_m.index_select(0, todo_m), bg.index_select(0, todo_m)
    reach_s = reach.index_select(0, todo_m)
    rows, cols = _runs(fg_s), _runs(fg_s.transpose(1, 2))
    for _ in range(REACH_SWEEPS - 1):  # each row + column sweep goes round one more turn
        reach_s = _sweep(bg_s, rows, cols, reach_s)
    holes = bg_s & ~reach_s
    # a hole cell is narrow across (row or column run <= HOLE_MAX_RUN); it is filled when
    # every cell along the other direction is narrow too. A stripe is narrow all along;
    # the tip of a necklace's big hole is narrow only locally and stays background.
    bg_t = bg_s.transpose(1, 2)
    narrow_row = holes & (_run_sum(bg_s, rows) <= HOLE_MAX_RUN)
    narrow_col = holes & (_run_sum(bg_t, cols) <= HOLE_MAX_RUN).transpose(1, 2)
    wide = holes & ~(narrow_row | narrow_col)
    col_ok = (_run_sum(wide.transpose(1, 2), cols) == 0).transpose(1, 2)
    row_ok = _run_sum(wide, rows) == 0
    filled = fg_s | (narrow_row & col_ok) | (narrow_col & row_ok)
    return fg.index_copy(0, todo, filled)


def _open_to_border(fg: torch.Tensor) -> torch.Tensor:
    """(B, H, W) bool, meaningful for background cells: no foreground between the cell and
    the frame's edge along its row or its column."""
    out = torch.zeros_like(fg)
    counts = fg.to(torch.int16)  # a count per row or column of at most GRID: int64 is 4x the bytes
    for dim in (1, 2):
        before = counts.cumsum(dim, dtype=torch.int16)  # foreground cells up to and including this one
        out |= (before == 0) | (before == before.narrow(dim, fg.shape[dim] - 1, 1))
    return out


def _sweep(
    bg: torch.Tensor, rows: tuple[torch.Tensor, int], cols: tuple[torch.Tensor, int],
    reach: torch.Tensor,
) -> torch.Tensor:
    """Spread ``reach`` along background runs: first along rows, then along columns
    (``rows``/``cols``: the foreground's ``_runs`` and those of its transpose)."""
    reach = (_run_sum(reach, rows) > 0) & bg
    bg_t = bg.transpose(1, 2)
    return ((_run_sum(reach.transpose(1, 2), cols) > 0) & bg_t).transpose(1, 2)


def far_from(lab: torch.Tensor, ref: torch.Tensor, delta: float) -> torch.Tensor:
    """CIEDE2000(lab, ref) > delta, for lab (B, ..., 3) and one reference per image (B, 3)."""
    b = lab.shape[0]
    flat = lab.reshape(b, -1, 3)
    if lab.device.type != "cpu":
        return (ciede2000(flat, ref[:, None]) > delta).reshape(lab.shape[:-1])
    # Cheap bounds decide most colours without the full formula: CIEDE2000 <= sqrt(4.5) *
    # CIE76 (S_L, S_C, S_H >= 1, a' <= 1.5 a, |R_T| <= 2) settles those close to the
    # reference, and CIEDE2000 >= |dL| / S_L (the chroma/hue part is never negative,
    # since |R_T| <= 2) settles those far from it in lightness alone.
    # (on channel planes: torch's sum over a trailing axis of 3 is several times slower)
    m = flat.shape[1]
    planes = flat.transpose(1, 2).contiguous()  # (B, 3, M)
    diff = planes - ref[:, :, None]
    maybe = _plane_sum(diff * diff) > (delta / DE00_PER_DE76) ** 2
    lm50 = (planes[:, 0] + ref[:, 0, None] - 100.0).mul_(0.5).pow_(2)
    s_l = 1.0 + 0.015 * lm50 / torch.sqrt(20.0 + lm50)
    sure = diff[:, 0].abs() > delta * s_l
    maybe = (maybe & ~sure).reshape(-1)
    idx = maybe.nonzero().squeeze(1)
    out = sure.reshape(-1).clone()
    out[idx] = ciede2000(flat.reshape(-1, 3).index_select(0, idx),
                         ref.index_select(0, idx // m)) > delta
    return out.reshape(lab.shape[:-1])


def foreground_mask(
    lab: torch.Tensor, background: torch.Tensor, delta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lab grid (B, G, G, 3), background (B, 3) -> (foreground mask, the enclosed holes
    it took in), both bool (B, G, G)."""
    fg = far_from(lab, background, delta)
    fg = fg & (_box_count(fg.to(torch.float32)) >= 2.5)  # drop specks of 1-2 cells
    filled = fill_narrow_holes(fg)
    return filled, filled & ~fg


def drop_outlines(samples: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor,
                  cell_idx: torch.Tensor) -> torch.Tensor:
    """Palette weights without thin dark outlines: samples (B, N, 3) Lab that are
    near-black and lie within OUTLINE_BAND cells of the mask's edge get weight 0, when the
    interior (the mask eroded by the band) holds under OUTLINE_MAX_DARK_INTERIOR of such
    dark samples and at least OUTLINE_MIN_LEFT of the samples stay. A black product (dark
    inside too) keeps its edges."""
    b = samples.shape[0]
    edge = (mask & ~_erode(mask, OUTLINE_BAND)).reshape(b, -1).index_select(1, cell_idx)
    chroma = torch.hypot(samples[..., 1], samples[..., 2])
    dark = (samples[..., 0] < OUTLINE_MAX_L) & (chroma < OUTLINE_MAX_CHROMA)
    used = weights > 0
    interior = used & ~edge
    dark_inside = (interior & dark).sum(1) / interior.sum(1).clamp_min(1)
    drop = used & edge & dark
    left = (used & ~drop).sum(1) >= OUTLINE_MIN_LEFT * used.sum(1)
    ok = (dark_inside < OUTLINE_MAX_DARK_INTERIOR) & left & (interior.sum(1) > 0)
    return torch.where(drop & ok[:, None], torch.zeros_like(weights), weights)


def _erode(mask: torch.Tensor, r: int) -> torch.Tensor:
    """Cells whose (2r+1)^2 window lies inside ``mask`` (B, H, W) bool; outside the frame
    counts as inside (a product cut by the frame edge has no outline there). Separable
    window sums: a 5x5 max_pool2d costs ~0.5 ms per image on one CPU thread, this ~0.02."""
    h, w = mask.shape[1:]
    p = F.pad(mask.to(torch.float32), (r, r, r, r), value=1.0)
    rows = sum(p[:, i:i + h] for i in range(2 * r + 1))
    full = sum(rows[:, :, i:i + w] for i in range(2 * r + 1))
    return full > (2 * r + 1) ** 2 - 0.5


def _fallback(weights: torch.Tensor) -> torch.Tensor:
    """Rows with a (near) empty mask use every cell."""
    empty = weights.mean(dim=1, keepdim=True) < MIN_FOREGROUND
    return torch.where(empty, torch.ones_like(weights), weights)


def kmeans_palette(points: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted k-means in Lab: points (B, N, 3), weights (B, N) -> palette (B, K, 3),
    weights (B, K) summing to 1 over used clusters, heaviest first, zero-padded."""
    b = points.shape[0]
    k = PALETTE_K
    active = weights > 0
    # deterministic init: the weighted mean, then repeatedly the cell farthest from all
    # centres so far (covers the extreme colours; Lloyd steps pull them to cluster means)
    mean = (points * weights[..., None]).sum(1) / weights.sum(1, keepdim=True).clamp_min(1e-9)
    centres = mean[:, None].repeat(1, k, 1)
    # the distance work on channel planes (B, 3, N): torch reduces a trailing axis of 3
    # several times slower than it adds three contiguous planes (the same sums, bit for bit)
    planes = points.transpose(1, 2).contiguous()
    nearest = _square_distance(planes, mean)
    rows = torch.arange(b, device=points.device)
    for i in range(1, k):
        idx = torch.where(active, nearest, torch.full_like(nearest, -1.0)).argmax(dim=1)
        centres[:, i] = points[rows, idx]
        nearest = torch.minimum(nearest, _square_distance(planes, centres[:, i]))
    # Lloyd steps, coarse to fine: most on every third point, the last ones on all
    for step, iters in ((KMEANS_COARSE_STEP, KMEANS_COARSE_ITERS), (1, KMEANS_FINE_ITERS)):
        centres, mass = _lloyd(planes[:, :, ::step].contiguous(), weights[:, ::step], centres,
                               iters)
    centres, mass = _merge_close(centres, mass)
    share = mass / mass.sum(dim=1, keepdim=True).clamp_min(1e-9)
    share = torch.where(share >= MIN_CLUSTER, share, torch.zeros_like(share))
    share = share / share.sum(dim=1, keepdim=True).clamp_min(1e-9)
    order = share.argsort(dim=1, descending=True, stable=True)
    share = share.gather(1, order)
    centres = centres.gather(1, order[..., None].expand(-1, -1, 3))
    centres = torch.where(share[..., None] > 0, centres, torch.zeros_like(centres))
    return centres, share


def _lloyd(
    planes: torch.Tensor, weights: torch.Tensor, centres: torch.Tensor, iters: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted Lloyd iterations; a cluster that loses all its points keeps its centre.
    Cluster sums by scatter-add of the assignments (a one-hot matrix and its product cost
    a fifth more, for the same sums)."""
    b, k = centres.shape[:2]
    p2 = _plane_sum(planes.pow(2))[:, None]  # planes: (B, 3, N) points; distances (B, K, N)
    weighted = planes * weights[:, None]
    mass = torch.zeros(b, k, device=planes.device, dtype=planes.dtype)
    for _ in range(iters):
        dist = torch.add(p2, matmul(centres, planes), alpha=-2.0)
        nearest = _first_min(dist.add_(centres.pow(2).sum(-1)[:, :, None]))  # (B, N)
        mass = torch.zeros_like(mass).scatter_add_(1, nearest, weights)
        sums = torch.zeros(b, 3, k, device=planes.device, dtype=planes.dtype).scatter_add_(
            2, nearest[:, None].expand(-1, 3, -1), weighted).transpose(1, 2)
        centres = torch.where(mass[..., None] > 0, sums / mass.clamp_min(1e-9)[..., None], centres)
    return centres, mass


def _plane_sum(planes: torch.Tensor) -> torch.Tensor:
    """(B, 3, N) -> (B, N): the three planes added in order (what ``sum(-1)`` of the
    channels-last points gives, bit for bit, several times faster)."""
    return planes[:, 0] + planes[:, 1] + planes[:, 2]


def _plane_max(planes: torch.Tensor) -> torch.Tensor:
    """(B, 3, ...) -> (B, ...): the largest of the three channel planes."""
    return torch.maximum(torch.maximum(planes[:, 0], planes[:, 1]), planes[:, 2])


def _square_distance(planes: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """Squared distances (B, N) of points on channel planes (B, 3, N) to one centre (B, 3)."""
    return _plane_sum((planes - centre[:, :, None]).pow_(2))


def _first_min(dist: torch.Tensor) -> torch.Tensor:
    """``dist.argmin(dim=1)`` of (B, K, N) (the first of equal minima), on CPU by a
    knock-out of contiguous (B, N) rows: torch's CPU argmin over a short axis is several
    times slower (a GPU's is one kernel where the knock-out would be a dozen)."""
    if dist.device.type != "cpu":
        return dist.argmin(dim=1)
    values = list(dist.unbind(1))
    index: list[torch.Tensor | int] = list(range(len(values)))
    while len(values) > 1:
        nv, ni = [], []
        for a in range(0, len(values) - 1, 2):
            later = values[a + 1] < values[a]  # a tie keeps the earlier cluster
            ni.append(torch.where(later, index[a + 1], index[a]))
            nv.append(torch.minimum(values[a], values[a + 1]))
        if len(values) % 2:
            nv.append(values[-1])
            ni.append(index[-1])
        values, index = nv, ni
    out = index[0]
    return out if isinstance(out, torch.Tensor) else torch.full_like(values[0], out, dtype=torch.int64)


def _merge_close(centres: torch.Tensor, mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


def _soft_bins(v: torch.Tensor, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Linear interpolation onto evenly spaced bin centres: (lower index, upper weight)."""
    lo, step, n = float(centres[0]), float(centres[1] - centres[0]), len(centres)
    pos = ((v - lo) / step).clamp(0.0, n - 1.0)
    i0 = pos.floor().clamp_max(n - 2)
    return i0.to(torch.int64), pos - i0


def lab_histogram(points: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Soft (trilinear) Lab histogram (B, HIST_DIM), square-rooted (Hellinger), unit L2."""
    b = points.shape[0]
    na = len(AB_CENTRES)
    il, fl = _soft_bins(points[..., 0], L_CENTRES)
    ia, fa = _soft_bins(points[..., 1], AB_CENTRES)
    ib, fb = _soft_bins(points[..., 2], AB_CENTRES)
    hist = torch.zeros(b, HIST_DIM, device=points.device, dtype=torch.float32)
    # the eight corners' bins are the lower corner's plus a constant; their weights are
    # products shared along the loops (the same products, in the same order)
    base = (il * na + ia) * na + ib
    for dl, wl in ((0, 1.0 - fl), (1, fl)):
        w_l = weights * wl
        for da, wa in ((0, 1.0 - fa), (1, fa)):
            w_la = w_l * wa
            for db, wb in ((0, 1.0 - fb), (1, fb)):
                hist.scatter_add_(1, base + ((dl * na + da) * na + db), w_la * wb)
    hist = hist / hist.sum(dim=1, keepdim=True).clamp_min(1e-9)
    return hist.sqrt()


def colour_layout(lab: torch.Tensor) -> torch.Tensor:
    """Mean Lab of a LAYOUT_CELLS^2 grid over the whole frame, centred and scaled."""
    cells = _shrink(lab.permute(0, 3, 1, 2), LAYOUT_CELLS)  # (B, 3, c, c)
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
