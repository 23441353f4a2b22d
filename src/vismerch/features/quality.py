"""Image quality: batched metric kernels (torch) and the listed-colour audit (the flags
judged on these metrics are classes in ``quality_flags.py``).

Metrics (per image, computed by the ``colour`` backend at the working size, which is the
whole image stretched to a square; every fraction below is a fraction of the frame's own
width/height, so stretching does not change it):

- ``blur``: how steep the image's edges are, whatever their contrast and however much of
  the frame is product. A variance of the Laplacian alone grows with edge contrast and
  with the share of the frame that holds edges, so a small or white-on-white product
  would read as blurred; we normalise it. The frame is cut into 8x8-pixel blocks every 4
  px (at 256 px); blocks whose grey standard deviation is at least 4 levels hold an edge
  or texture. Over those blocks, ``blur`` = sum of squared 4-neighbour Laplacian / sum of
  squared gradient (central differences). For a step edge blurred by a Gaussian of sigma
  px this is 1/(2 sigma^2) (0.5 at sigma 1, 0.22 at 1.5, 0.125 at 2; a pixel-sharp edge
  gives 1-6), independent of contrast and edge length; sigma is in pixels of a 256-px
  frame whatever the working size (working sizes of 512 and up are box-averaged to
  about 256 first, so noise weighs the same). An image with no edge blocks at all scores 0
  (nothing in it is sharp).
- ``brightness``: mean L* of the frame. ``highlights``/``shadows``: the 99th/1st
  percentile of L* (the brightest/darkest 1% of the frame), used for the exposure flags.
- ``background_lab``, ``background_delta``: the per-channel median Lab of a border ring
  (1/32 of the frame wide) and its CIEDE2000 from white (L*=100).
- ``background_clutter``: the ring is cut into 16 segments (4 per side); each segment's
  RMS Lab distance from its own mean measures texture or objects; the median over the
  segments ignores a product that touches one or two sides and a smooth light fall-off.
- ``fill``: foreground fraction of the frame. ``extent``: the longer side of the
  foreground's bounding box (1%..99% of its mass on each axis) as a fraction of the
  frame. ``centre_offset``: distance from that box's centre to the frame centre.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from vismerch.config import setting
from vismerch.errors import UsageError
from vismerch.features.colournames import (
    MULTICOLOUR,
    colour_names,
    load_colour_table,
    normalise_name,
    parse_colour,
)
from vismerch.features.colourspace import ciede2000_np, lab_to_hex
from vismerch.features.quality_flags import EXPOSURE_QUANTILE

METRIC_NAMES: tuple[str, ...] = (
    "blur", "brightness", "highlights", "shadows", "background_delta",
    "background_clutter", "fill", "extent", "centre_offset",
)

BLUR_BLOCKS = 32  # blocks per side (8 px at 256)
BLUR_REFERENCE = 256.0  # frame size (px) the blur metric is expressed in
EDGE_STD = 4.0  # grey levels: a block with less spread holds no edge (noise at 256 px is ~1)
BORDER_SEGMENTS_PER_SIDE = 4
BBOX_TRIM = 0.01


# ---------------------------------------------------------------- metric kernels (torch)


def cell_mean(x: torch.Tensor, k: int) -> torch.Tensor:
    """Mean over k x k cells of (B, H, W, ...) -> (B, H//k, W//k, ...), cropping the rest.

    Written as k + k strided additions: on one CPU thread this is several times faster
    than ``avg_pool2d`` for the small k used here, and it keeps channels last. uint8 input
    is summed in int16 (int32 past k = 11) and gives float32 means: integer sums are exact,
    so the values are those of the float32 path, from a quarter of the bytes (2x2 cells
    of a 256 px image: 0.11 -> 0.06 ms on one thread).
    """
    if k == 1:
        return x if x.dtype != torch.uint8 else x.to(torch.float32)
    integer = x.dtype == torch.uint8
    if integer:
        x = x.to(torch.int16 if k * k * 255 <= torch.iinfo(torch.int16).max else torch.int32)
    b, h, w = x.shape[:3]
    rest = x.shape[3:]
    h2, w2 = h // k, w // k
    rows = x[:, : h2 * k, : w2 * k].reshape(b, h2, k, w2 * k, *rest)
    acc = rows[:, :, 0] + rows[:, :, 1]
    for i in range(2, k):
        acc += rows[:, :, i]
    cols = acc.reshape(b, h2, w2, k, *rest)
    out = cols[:, :, :, 0] + cols[:, :, :, 1]
    for i in range(2, k):
        out += cols[:, :, :, i]
    if integer:
        out = out.to(torch.float32)
    return out.mul_(1.0 / (k * k))


def cell_mean_planes(x: torch.Tensor, k: int, out: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, C) -> ``out`` (B, C, H//k, W//k) float32: ``cell_mean``'s k x k
    means (the same values: exact integer sums) written straight onto channel planes.

    Each output row sums k pixel rows; neighbouring pixels' channels are then added as
    shifted views of the flat row (pixel j's channel c lies at C j + c), and the cell sums
    are read off at a stride of C k into the planes: no transposing copy of channels-last
    means afterwards (torch handles an innermost axis of 3 several times slower).
    """
    b, h, w, c = x.shape
    h2, w2 = h // k, w // k
    if k == 1:
        return out.copy_(x.permute(0, 3, 1, 2))
    dtype = torch.int16 if k * k * 255 <= torch.iinfo(torch.int16).max else torch.int32
    rows = x[:, : h2 * k, : w2 * k].reshape(b, h2, k, w2 * k * c)
    acc = rows[:, :, 0].to(dtype) + rows[:, :, 1]
    for i in range(2, k):
        acc += rows[:, :, i]
    n = (w2 * k - (k - 1)) * c  # flat positions whose k pixels lie inside the row
    sums = acc[..., :n] + acc[..., c : c + n]
    for i in range(2, k):
        sums += acc[..., i * c : i * c + n]
    cells = sums.as_strided((b, c, h2, w2), (sums.stride(0), 1, sums.stride(1), c * k))
    return out.copy_(cells).mul_(1.0 / (k * k))


def _pairs_mean(x: torch.Tensor) -> torch.Tensor:
    """Mean of every 2x2 window of the last two axes, stride 1: (..., H, W) -> (..., H-1,
    W-1)."""
    return (x[..., :-1, :-1] + x[..., 1:, :-1] + x[..., :-1, 1:] + x[..., 1:, 1:]).mul_(0.25)


def blur_metric(grey: torch.Tensor) -> torch.Tensor:
    """Greyscale (B, H, W) float in [0, 255] -> (B,) edge sharpness (see module doc)."""
    factor = int(min(grey.shape[1:]) // BLUR_REFERENCE)
    if factor >= 2:  # larger working sizes: measure at ~256 px, where noise is averaged alike
        grey = cell_mean(grey, factor)
    b, h, w = grey.shape
    # Row-major flat views shifted by one pixel/one row give the four neighbours as
    # contiguous slices of rows 1..H-2 (full width; the first and last columns wrap round
    # and are zeroed below). In-place chains keep this to ~20 passes over the image.
    flat = grey.reshape(b, h * w)
    n = (h - 2) * w
    c, up, down = flat[:, w : w + n], flat[:, :n], flat[:, 2 * w : 2 * w + n]
    left, right = flat[:, w - 1 : w - 1 + n], flat[:, w + 1 : w + 1 + n]
    # the four per-pixel statistics of rows 1..H-2 (grey, its square, the Laplacian's and
    # the gradient's squares) are written side by side into one buffer, so one
    # ``cell_mean`` call sums the cells of all four (four calls cost a third more)
    stats = torch.empty(b, 4, h - 2, w, device=grey.device, dtype=grey.dtype)
    planes = stats.view(b, 4, n)
    planes[:, 0] = c
    torch.mul(c, c, out=planes[:, 1])
    lap = torch.add(left, right, out=planes[:, 2]).add_(up).add_(down).sub_(c, alpha=4.0)
    lap.mul_(lap)
    grad = torch.sub(right, left, out=planes[:, 3])  # twice the central difference: squared, 4x (see den)
    grad.mul_(grad)
    dy = torch.sub(down, up)
    grad.addcmul_(dy, dy)
    stats[:, 2:, :, 0] = 0.0
    stats[:, 2:, :, -1] = 0.0
    # statistics of k-px cells, then of 2x2-cell blocks every cell: an edge sits near
    # the middle of some block wherever it lies. The four statistics side by side: one
    # 2x2-block pass and one masked sum for all (per-call overhead, not arithmetic, is
    # what these small grids cost)
    k = max(2, min(h, w) // (2 * BLUR_BLOCKS))
    cells = cell_mean(stats.view(b * 4, h - 2, w), k)
    cells = cells.view(b, 4, *cells.shape[1:])
    blocks = _pairs_mean(cells)  # (B, 4, h', w'): mean, mean square, laplacian, gradient
    edge = blocks[:, 1] - blocks[:, 0].square() >= EDGE_STD**2  # local variance
    num, den = torch.where(edge[:, None], blocks[:, 2:], 0.0).sum(dim=(2, 3)).unbind(1)
    den = den * 0.25  # the central differences' squares (a power of two: the same bits)
    # in units of a 256-px frame, so the threshold means the same at any working size
    scale = (min(h, w) / BLUR_REFERENCE) ** 2
    return torch.where(den > 0, num / den.clamp_min(1e-9) * scale, torch.zeros_like(num))


def exposure_stats(lightness: torch.Tensor) -> dict[str, torch.Tensor]:
    """L* (B, N) -> mean, 99th percentile (highlights), 1st percentile (shadows)."""
    b, n = lightness.shape
    k = max(1, math.ceil(EXPOSURE_QUANTILE * n))
    # percentiles from a 0.25-L* histogram: one scatter instead of sorting every row
    bins = (lightness * 4.0).round().clamp(0, 400).to(torch.int64)
    counts = torch.zeros(b, 401, device=lightness.device, dtype=torch.float32)
    counts.scatter_add_(1, bins, torch.ones_like(lightness, dtype=torch.float32))
    cdf = counts.cumsum(dim=1)
    return {
        "brightness": lightness.mean(dim=1),
        "highlights": (cdf < n - k + 1).sum(dim=1).to(lightness.dtype) / 4.0,
        "shadows": (cdf < k).sum(dim=1).to(lightness.dtype) / 4.0,
    }


def border_ring(lab: torch.Tensor, width: int) -> list[torch.Tensor]:
    """Lab grid (B, G, G, 3) -> border segments, 4 per side, in two groups of equal-size
    segments: top/bottom (B, 8, n, 3) and left/right (B, 8, m, 3)."""
    b, g = lab.shape[:2]
    per = BORDER_SEGMENTS_PER_SIDE
    side = g - 2 * width
    if g % per or side % per:
        raise ValueError(f"grid {g} with border {width} does not split into {per} segments")
    bands = torch.stack((lab[:, :width], lab[:, -width:]), dim=1)  # (B, 2, w, G, 3)
    across = bands.reshape(b, 2, width, per, g // per, 3).transpose(2, 3)
    flanks = torch.stack((lab[:, width:-width, :width], lab[:, width:-width, -width:]), dim=1)
    down = flanks.reshape(b, 2, per, side // per, width, 3)
    return [across.reshape(b, 2 * per, -1, 3), down.reshape(b, 2 * per, -1, 3)]


def background_stats(lab: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Lab grid (B, G, G, 3) -> (background Lab (B, 3), clutter (B,))."""
    groups = border_ring(lab, width)
    b = lab.shape[0]
    background = torch.cat([g.reshape(b, -1, 3) for g in groups], dim=1).median(dim=1).values
    spreads = []
    for seg in groups:  # RMS distance of each segment's pixels from the segment's mean
        dev = seg - seg.mean(dim=2, keepdim=True)
        spreads.append(dev.pow(2).sum(-1).mean(2).sqrt())
    clutter = torch.cat(spreads, dim=1).quantile(0.5, dim=1)
    return background, clutter


def _span(mass: torch.Tensor, trim: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Mass profile (B, G) -> (start, end) cell indices holding (trim, 1 - trim) of it."""
    total = mass.sum(dim=1, keepdim=True).clamp_min(1e-9)
    cdf = mass.cumsum(dim=1) / total
    start = (cdf <= trim).sum(dim=1)
    end = (cdf < 1.0 - trim).sum(dim=1).clamp_max(mass.shape[1] - 1)
    return start.to(mass.dtype), torch.maximum(end.to(mass.dtype), start.to(mass.dtype))


def mask_geometry(mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Foreground mask (B, H, W) bool -> fill, extent, centre_offset (B,) each."""
    m = mask.to(torch.float32)
    _, h, w = m.shape
    fill = m.mean(dim=(1, 2))
    x0, x1 = _span(m.sum(dim=1), BBOX_TRIM)
    y0, y1 = _span(m.sum(dim=2), BBOX_TRIM)
    width, height = (x1 - x0 + 1) / w, (y1 - y0 + 1) / h
    cx, cy = (x0 + x1 + 1) / (2 * w), (y0 + y1 + 1) / (2 * h)
    has = fill > 0
    zero = torch.zeros_like(fill)
    return {
        "fill": fill,
        "extent": torch.where(has, torch.maximum(width, height), zero),
        "centre_offset": torch.where(has, torch.hypot(cx - 0.5, cy - 0.5), zero),
    }


def metrics_row(columns: dict[str, np.ndarray], i: int) -> dict[str, float]:
    """The scalar metrics of image ``i`` from a FeatureBatch's (or shard's) columns."""
    return {k: float(columns[k][i]) for k in METRIC_NAMES if k in columns}


# ---------------------------------------------------------------- listed-colour audit

AUDIT_MIN_WEIGHT = 0.25  # a listed colour may name any colour covering a quarter of the product


@dataclass(frozen=True)
class AuditResult:
    listed: str
    listed_hex: str
    observed: str  # the image's named colour closest to the listed one
    observed_hex: str
    distance: float  # CIEDE2000 between the listed and the observed colour
    disagrees: bool
    dominant: str  # the image's heaviest named colour


def audit_listed_colour(
    listed: str,
    palette_lab,
    palette_weight,
    table=None,
    threshold: float | None = None,
    *,
    reasons: list[str] | None = None,
) -> AuditResult | None:
    """Compare a manifest's listed colour with the image (one product).

    The listed colour (a table name or ``#rrggbb``) is compared by CIEDE2000 with the
    image's main colours: the dominant named colour and any other named colour covering
    at least a quarter of the product (a listed "white" for a red-and-white striped shirt
    is right). ``disagrees`` when even the closest of them is further than ``threshold``.
    Returns None, appending the reason to ``reasons`` when given, for an empty or
    unknown listed colour, a ``multicolour`` listing, or an empty palette.
    """
    lab = np.asarray(palette_lab, dtype=np.float64)[None]
    weight = np.asarray(palette_weight, dtype=np.float64)[None]
    return audit_listed_colours([listed], lab, weight, table, threshold, reasons=reasons)[0]


def audit_listed_colours(
    listed: list[str],
    palette_lab,
    palette_weight,
    table=None,
    threshold: float | None = None,
    *,
    reasons: list[str] | None = None,
) -> list[AuditResult | None]:
    """``audit_listed_colour`` for a whole catalog at once: palettes (N, K, 3) and (N, K),
    one CIEDE2000 call for all products (per-product torch calls are all dispatch overhead).
    ``threshold`` defaults to the audit_colour_delta setting."""
    if threshold is None:
        threshold = setting(None, "audit_colour_delta")
    if len(listed) == 0:
        return []
    table = table or load_colour_table()
    keys = [(t or "").strip() for t in listed]
    parsed = _parse_listed(set(keys), table)
    named = colour_names(palette_lab, palette_weight, table)
    mains, cand, valid = _main_colours(named)
    query = np.stack([np.zeros(3) if isinstance(parsed[t], str) else parsed[t] for t in keys])
    dist = np.where(valid, ciede2000_np(query[:, None, :], cand), np.inf)
    known = [t for t, v in parsed.items() if not isinstance(v, str)]
    listed_hex = dict(zip(known, lab_to_hex(np.stack([parsed[t] for t in known])), strict=True)) \
        if known else {}
    out: list[AuditResult | None] = []
    for i, text in enumerate(keys):
        if isinstance(parsed[text], str) or not named[i]:
            if reasons is not None:
                reasons.append(parsed[text] if isinstance(parsed[text], str) else "the image has no palette")
            out.append(None)
            continue
        best = int(np.argmin(dist[i]))
        out.append(AuditResult(
            listed=text, listed_hex=listed_hex[text], observed=mains[i][best].name,
            observed_hex=mains[i][best].hex, distance=round(float(dist[i, best]), 2),
            disagrees=bool(dist[i, best] > threshold), dominant=named[i][0].name))
    return out


def _parse_listed(texts: set[str], table) -> dict[str, np.ndarray | str]:
    """Each listed text -> its Lab colour, or why it is skipped."""
    parsed: dict[str, np.ndarray | str] = {}
    for text in texts:
        if not text:
            parsed[text] = "no listed colour"
        elif normalise_name(text) == MULTICOLOUR:
            parsed[text] = f"listed colour {text!r} names no single colour to compare"
        else:
            try:
                parsed[text] = parse_colour(text, table)
            except UsageError:
                parsed[text] = f"listed colour {text!r} is not in the colour table {table.source}"
    return parsed


def _main_colours(named: list) -> tuple[list[list], np.ndarray, np.ndarray]:
    """Each product's main named colours (those covering AUDIT_MIN_WEIGHT, else the
    dominant one), and their Lab (N, K, 3) with a validity mask (N, K) for one distance call."""
    k = max((len(n) for n in named), default=1) or 1
    cand = np.zeros((len(named), k, 3))
    valid = np.zeros((len(named), k), dtype=bool)
    mains: list[list] = []
    for i, names in enumerate(named):
        main = [c for c in names if c.weight >= AUDIT_MIN_WEIGHT] or names[:1]
        mains.append(main)
        for j, c in enumerate(main):
            cand[i, j], valid[i, j] = c.lab, True
    return mains, cand, valid
