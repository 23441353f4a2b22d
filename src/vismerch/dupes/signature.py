"""Per-image duplicate signatures, invariant to framing and light (issue 11).

Computed by the colour backend from the working-size pixels, stored in its shard (3.2 KiB per image):

* ``dup_box`` float32 (4,): the product's bounding box ``x0, y0, x1, y1`` in frame
  fractions, found on a 128x128 area-averaged copy in two passes: the border's median
  colour finds the product roughly, then the median of a ring around it (padding may be
  another white) undoes the white balance (each channel divided by it) and finds it
  again. A cell's product mass is its levels from the backdrop above a noise floor, so in
  proportion to the share of it the product covers (``_coverage``; faint shadows and
  gradients away from the product stay out); each side sits where the cumulative mass crosses
  ``EDGE_SHARE``, interpolated inside the cell, so a copy zoomed or cut differently keeps
  its box to a fraction of a cell. A photo without a backdrop (a scene, or a product
  filling the frame: the ring inside the frame less its uniform bars is mostly far from
  its median colour, ``frame_cells``) is boxed by the frame less its padding or
  letterbox bars instead, each stripped side moved by the share of its first line the
  bar still covers, and balanced in brightness only, by its brightest cell; so is a shot
  on a dark or coloured backdrop that most of the product is lighter than
  (``_unclipped``: balanced by that backdrop, the product would clip to white). Padding,
  letterbox bars and trimmed margins change the frame, not the box, so everything below
  is computed on the box and they vanish. Zeros mean "no signature" (shards written
  before the columns existed read back as zeros: ``has_signature``).
* ``dup_sig`` uint8 (32, 32): the box's content, white balance undone, resampled to 32x32
  through a Gaussian of ``BLUR`` cells (anti-aliasing: a stripe or dot pattern finer than
  the signature averages out instead of aliasing into a different moire at each scale),
  from the 128 grid, or from the working-size pixels when the box spans fewer than
  ``FINE_SPAN`` grid cells on a side (the grid's 2x2 means would leave a small product
  too few of them, so a padded or letterboxed copy, shrunk in its frame, lost the detail
  its original kept), as log-luma ``log(Y + 0.05)`` quantised to 8 bits. Brightness
  multiplies Y and gamma raises it to a power, so in log-luma both are an offset and a
  scale, which the zero-mean, unit-norm correlation comparing signatures does not see
  (contrast nearly so); near white a few levels of gradient or noise are almost nothing
  in log-luma.
* ``dup_colour`` uint8 (8, 8, 3): CIELAB means of the box's 8x8 cells after the white
  balance is undone (L* x 2.55, a* + 128, b* + 128; ``lab_cells`` reads them): what
  tells a colourway (same shot, another colour) from a light edit of the same photo.
* ``dup_chroma`` uint8 (32, 32, 2): the a*b* codes of the signature's cells: a thin product's colour.
* ``dup_hash`` uint64: the 64-bit DCT hash (imagehash's construction) of ``dup_sig``:
  candidates for the framing-invariant comparison come from near hashes.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from vismerch.features import quality
from vismerch.features.colourspace import srgb_to_lab
from vismerch.features.cpumath import matmul
from vismerch.features.hashing import LUMA, pack_bits, phash_bits

SIG = 32  # signature side (cells)
BLUR = 0.45  # Gaussian sigma of the resampling, in signature cells (a box filter is 0.29)
MIN_BLUR = 0.5  # ... and at least this many source cells (where a box is upsampled)
REACH = 4.0  # sigmas: the Gaussian's weights are zero beyond (a window per image)
FINE_SPAN = 40  # grid cells: boxes narrower on a side are resampled from the pixels
MARGIN = 0.0  # the box plus this share of its size on each side (0.02 and 0.04 measured worse
#                precision on the generated catalogs and worse recall on OpenMoji than none)
BOX_GRID = 128  # resolution the bounding box is found at
BOX_LEVELS = 34.0  # sRGB levels from the backdrop (after white balance): solid product
MASS_FROM = 24.0  # sRGB levels from the backdrop below which a cell is backdrop ...
EDGE_FLOOR = 8.0  # ... or, beside solid product, below which it is (JPEG) noise
EDGE_SHARE = 0.002  # product mass left outside the box on each side (noise, stray specks)
RING_GAP, RING = 2, 4  # cells: the backdrop ring around the box
MIN_MASS = 0.5  # product mass (``_coverage``) below which the whole frame is the box: five
#                 cells of a faint product (34 levels), two thirds of a cell of a dark one
LOG_EPS = 0.05
LOG_LO, LOG_HI = float(np.log(LOG_EPS)), float(np.log(1.0 + LOG_EPS))
COLOUR_CELLS = 8
BAR_LEVELS = 10.0  # sRGB levels: a padding or letterbox bar's cells from its colour (JPEG noise)
BUSY_RING = 2  # cells: the ring inside the bars that tells a backdrop from a scene ...
BUSY_SHARE = 0.5  # ... share of it away from its median colour: no backdrop
EDGE_FULL = 0.75  # share of a stripped side's line that content must fill (a photo's edge)
AGREE = 1.5  # cells: a product box this close to the frame less its bars on every side
CLIP_LEVELS = 8.0  # sRGB levels above the backdrop ...
CLIP_SHARE = 0.05  # ... in more than this share of the box's cells: the backdrop is not its white
BORDER = 4  # border ring (BOX_GRID cells) the backdrop colour is the median of
COLUMNS = ("dup_box", "dup_sig", "dup_colour", "dup_chroma", "dup_hash")


def _area(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """(B, C, H, W) float -> (B, C, h, w) area means."""
    if x.shape[-2] % h == 0 and x.shape[-1] % w == 0:
        return F.avg_pool2d(x, (x.shape[-2] // h, x.shape[-1] // w))
    return F.interpolate(x, size=(h, w), mode="area")


def _backdrop(small: torch.Tensor) -> torch.Tensor:
    """(B, 3, G, G) -> (B, 3) per-channel median of the border ring."""
    b, g = small.shape[0], BORDER
    ring = torch.cat([small[:, :, :g].reshape(b, 3, -1), small[:, :, -g:].reshape(b, 3, -1),
                      small[:, :, g:-g, :g].reshape(b, 3, -1),
                      small[:, :, g:-g, -g:].reshape(b, 3, -1)], dim=2)
    return ring.median(dim=2).values


def _quantile_span(profile: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, G) product mass per column (or row) -> where the cumulative mass first reaches
    ``EDGE_SHARE`` of the total and where the rest falls under it, in cells: the box to
    a fraction of a cell, steady under noise. Inside the edge cell its mass is taken to
    lie against the product's side at the density the cell would have if full (exact for
    a straight edge: a rectangle's sides land within ~0.2 cell wherever they fall in
    their cells), or spread evenly where the product is still widening past it.
    No mass: the whole frame."""
    g = profile.shape[1]
    total = profile.sum(dim=1, keepdim=True)
    cum = torch.cumsum(profile, dim=1)
    lo_t, hi_t = EDGE_SHARE * total, (1 - EDGE_SHARE) * total

    def cross(t: torch.Tensor, step: int) -> torch.Tensor:
        k = torch.searchsorted(cum, t).clamp(max=g - 1)  # first cell reaching t
        before = torch.where(k > 0, cum.gather(1, (k - 1).clamp(min=0)), torch.zeros_like(t))
        inside = profile.gather(1, k)
        # the mass cell k would hold if the product filled it: the next cell's inward,
        # less the rise to the one after (a flat edge: the next cell's; a slanted or round
        # one, still widening: about the cell's own, so spread evenly through it)
        near = profile.gather(1, (k + step).clamp(0, g - 1))
        far = profile.gather(1, (k + 2 * step).clamp(0, g - 1))
        full = torch.maximum(inside, near - (far - near).clamp_min(0)).clamp_min(1e-6)
        if step > 0:  # the product lies at the cell's far side
            return (k + 1 - ((inside - (t - before)) / full).clamp(0, 1)).squeeze(1)
        return (k + ((t - before) / full).clamp(0, 1)).squeeze(1)

    empty = total.squeeze(1) < MIN_MASS
    lo, hi = cross(lo_t, 1), cross(hi_t, -1)
    return torch.where(empty, 0.0, lo), torch.where(empty, float(g), hi)


def _ring_backdrop(small: torch.Tensor, cells: torch.Tensor, fallback: torch.Tensor,
                   ) -> torch.Tensor:
    """(B, 3) per-channel (lower) median of the cells RING_GAP..RING_GAP+RING cells outside
    the box ``cells`` (B, 4: x0, y0, x1, y1 in cells); ``fallback`` where fewer than 16
    such cells lie inside the frame (the product fills it). The ring is the outer
    rectangle less the inner one: four slices of the grid per image, a few thousand cells,
    rather than a mask over every image's whole grid."""
    b, _, g, _ = small.shape
    x0, y0, x1, y1 = cells.unbind(1)
    # cell r is in [lo - pad, hi + pad) exactly when ceil(lo - pad) <= r < ceil(hi + pad)
    edges = torch.stack([y0 - RING_GAP - RING, y1 + RING_GAP + RING, x0 - RING_GAP - RING,
                         x1 + RING_GAP + RING, y0 - RING_GAP, y1 + RING_GAP, x0 - RING_GAP,
                         x1 + RING_GAP], dim=1)
    out = fallback.clone()
    for i, (oy0, oy1, ox0, ox1, iy0, iy1, ix0, ix1) in enumerate(
            edges.ceil().clamp(0, g).to(torch.int64).tolist()):
        outer = small[i, :, oy0:oy1, ox0:ox1]
        if iy0 < iy1 and ix0 < ix1:  # the inner rectangle, relative to the outer one
            a, z, c, d = iy0 - oy0, iy1 - oy0, ix0 - ox0, ix1 - ox0
            parts = (outer[:, :a], outer[:, z:], outer[:, a:z, :c], outer[:, a:z, d:])
            ring = torch.cat([part.reshape(3, -1) for part in parts], dim=1)
        else:
            ring = outer.reshape(3, -1)
        if ring.shape[1] >= 16:
            out[i] = ring.median(dim=1).values
    return out.clamp_min(16.0)


def _coverage(diff: torch.Tensor) -> torch.Tensor:
    """(B, G, G) levels from the backdrop (max over channels; used up) -> product mass per cell:
    its levels above a floor, / 255, so in proportion to the share of the cell the product
    covers (a sixth of a cell leaves a sixth of the product's levels). Cells at
    ``BOX_LEVELS`` or more and those beside them count from ``EDGE_FLOOR`` (noise): they
    hold the product's edges and thin parts. Any other cell counts from ``MASS_FROM``, so
    tints, gradients and faint shadows away from the product stay out.

    Colour version 4's mass ramped from ``MASS_FROM`` to 1 at ``BOX_LEVELS``: a sixth of a
    cell of a dark product counted as a whole cell, so each side of the box sat up to ~0.9
    cell outside the product by where the edge fell in its cell, and a copy zoomed 1.1x
    was misregistered by up to 2% of the box, which stripes and dots turned into layout
    0.93 and detail 0.80 (generated seed 7). Not capped at the product's full level
    either: a dark outline's cell two thirds covered would count as whole again."""
    near = _beside(diff >= BOX_LEVELS)
    # one floor per cell without a float mask: the bool's bytes, added with a weight
    diff.sub_(MASS_FROM).add_(near.view(torch.uint8), alpha=MASS_FROM - EDGE_FLOOR)
    return diff.clamp_(min=0).mul_(1.0 / 255.0)


def _beside(mask: torch.Tensor) -> torch.Tensor:
    """(B, G, G) bool -> the cells in or beside (8-neighbourhood) a True cell: shifted ORs
    (max_pool2d over one channel costs ~30x as much on CPU)."""
    rows = mask.clone()
    rows[:, 1:] |= mask[:, :-1]
    rows[:, :-1] |= mask[:, 1:]
    out = rows.clone()
    out[:, :, 1:] |= rows[:, :, :-1]
    out[:, :, :-1] |= rows[:, :, 1:]
    return out


def _box_cells(balanced: torch.Tensor, level: torch.Tensor | float = 255.0) -> torch.Tensor:
    """(B, 4) product box x0, y0, x1, y1 in cells of ``balanced`` (B, 3, G, G): the grid
    with its white balance undone, the backdrop at ``level`` (255, or (B, 3, 1, 1): a padded
    photo balanced by its brightest cells has its bars' colour there, not white)."""
    mass = _coverage((balanced - level).abs_().amax(dim=1))  # (B, G, G)
    x0, x1 = _quantile_span(mass.sum(dim=1))
    y0, y1 = _quantile_span(mass.sum(dim=2))
    return torch.stack([x0, y0, x1, y1], dim=1)


def _resample_rows(lo: torch.Tensor, hi: torch.Tensor, size: int) -> torch.Tensor:
    """(B, SIG, size) weights that resample the span ``lo..hi`` (B,) frame fractions of a
    ``size``-cell axis to SIG cells: at each cell's centre a Gaussian of sigma ``BLUR``
    cells (at least ``MIN_BLUR`` source cells) over the source cells within ``REACH``
    sigmas (edges repeated), each row summing to 1. Separable, so the signature is
    ``rows @ grid @ cols^T``: two small matrix products instead of a 2-D resampling. Only
    each row's band is evaluated, then added into the zero matrix."""
    b = lo.shape[0]
    k = (torch.arange(SIG, device=lo.device, dtype=torch.float32) + 0.5) * ((1 + 2 * MARGIN) / SIG)
    centre = torch.addcmul(lo[:, None], (hi - lo)[:, None], k - MARGIN).mul_(size).sub_(0.5)
    inv = 1.0 / ((hi - lo) * (size / SIG * BLUR)).clamp_min_(MIN_BLUR)  # (B,) 1 / sigma
    reach = math.ceil(REACH / float(inv.min())) if b else 0
    cell = centre.floor().to(torch.int64)[:, :, None] + torch.arange(
        -reach, reach + 2, device=lo.device)  # (B, SIG, band)
    z = (cell - centre[:, :, None]).mul_(inv[:, None, None])
    # cut at REACH of each image's own sigma: an image's weights (and the window it
    # reads) do not depend on the other images of its batch
    w = torch.where(z.abs() <= REACH, z.square().mul_(-0.5).exp_(), 0.0)
    w = w / w.sum(dim=2, keepdim=True)
    return torch.zeros(b, SIG, size, device=lo.device).scatter_add_(
        2, cell.clamp_(0, size - 1), w)


def _rows_and_cols(box: torch.Tensor, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``_resample_rows`` of the boxes' (B, 4) vertical and horizontal spans; one call
    for both when the frame is square (the working size always is)."""
    if h != w:
        return (_resample_rows(box[:, 1], box[:, 3], h), _resample_rows(box[:, 0], box[:, 2], w))
    both = _resample_rows(torch.cat([box[:, 1], box[:, 0]]), torch.cat([box[:, 3], box[:, 2]]), h)
    return both[:len(box)], both[len(box):]


def _support(rows: torch.Tensor) -> list[tuple[int, int]]:
    """(B, SIG, size) resampling weights -> each image's window [first, last + 1) of
    source cells with a nonzero weight."""
    used = (rows > 0).any(dim=1).to(torch.uint8)
    size = used.shape[1]
    first = used.argmax(dim=1)
    stop = size - used.flip(1).argmax(dim=1)
    return list(zip(first.tolist(), stop.tolist(), strict=True))


def _from_pixels(x: torch.Tensor, which: torch.Tensor, box: torch.Tensor,
                 back: torch.Tensor) -> torch.Tensor:
    """(n, 3, SIG, SIG): the box content of the uint8 images ``x[which]`` (x: (B, H, W,
    3)), resampled from their pixels, white balance undone (each channel divided by
    ``back`` (n, 3)) and clamped at 255 after resampling; each image reads only the window
    its Gaussian reaches (a small box: a small window)."""
    h, w = x.shape[1:3]
    rows, cols = _rows_and_cols(box, h, w)
    out = torch.empty(len(which), 3, SIG, SIG, device=x.device)
    for k, (i, (y0, y1), (x0, x1)) in enumerate(
            zip(which.tolist(), _support(rows), _support(cols), strict=True)):
        patch = x[i, y0:y1, x0:x1].to(torch.float32).reshape(y1 - y0, -1)
        half = matmul(rows[k, :, y0:y1], patch)  # (SIG, width * 3)
        # channel planes first: BLAS takes only unit-stride rows (a strided view would
        # fall back to numpy's plain loop, ten times slower)
        planes = half.reshape(SIG, x1 - x0, 3).permute(2, 0, 1).contiguous()
        out[k] = matmul(planes, cols[k, :, x0:x1].T.contiguous())
    return out.mul_((255.0 / back)[:, :, None, None]).clamp_(0, 255)


def signatures(x: torch.Tensor, planes: torch.Tensor | None = None) -> dict[str, np.ndarray]:
    """uint8 (B, H, W, 3) RGB -> the ``COLUMNS`` arrays (see the module docstring).
    ``planes``: the caller's float (B, 3, 128, 128) area means of ``x`` on channel planes,
    when it has them (read, never changed)."""
    box, cells, back = box_cells(x, planes)
    return from_cells(box, small_boxes_from_pixels(x, box, back, cells))


def box_cells(x: torch.Tensor, planes: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The first step of ``signatures``: (box (B, 4) in frame fractions, the box's
    white-balanced sRGB at SIG x SIG cells from the grid (B, 3, SIG, SIG), the backdrop
    colour it was balanced by (B, 3)). ``planes``: as ``signatures`` takes them."""
    b, h, w, _ = x.shape
    small = planes  # (B, 3, G, G): channel planes
    if small is None and h % BOX_GRID == 0 and w % BOX_GRID == 0:
        k = h // BOX_GRID  # integer sums straight onto the planes: cheapest
        small = quality.cell_mean_planes(x, k, torch.empty(b, 3, h // k, w // k, device=x.device))
    elif small is None:
        small = _area(x.to(torch.float32).permute(0, 3, 1, 2), BOX_GRID, BOX_GRID).contiguous()
    # two passes: the border's colour finds the product roughly; the colour around it
    # (padding may be another white) sets the white balance and finds it again
    border = _backdrop(small).clamp_min(16.0)  # (B, 3)
    cells = _box_cells(small * (255.0 / border)[:, :, None, None])
    back = _ring_backdrop(small, cells, border)
    # a photo without a backdrop (the product fills the frame or stands in a scene): its
    # box is the frame less any padding or letterbox bars, balanced by its own light
    frame, busy = frame_cells(small)
    if busy.any():
        # where the product box found against the border agrees with the frame less its
        # bars (a patterned product on a backdrop), it is the finer of the two
        agree = ((cells - frame).abs() <= AGREE).all(dim=1)
        cells[busy & ~agree] = frame[busy & ~agree]
        back[busy] = _own_white(small[busy], frame[busy])
    # a dark or coloured backdrop: balanced by it, a lighter product would clip to white
    # and lose its colour; balanced by the box's brightest cells instead
    ring, back = back, _unclipped(small, cells, back)
    # a new tensor: the caller's planes are left as they were
    balanced = small * (255.0 / back)[:, :, None, None]
    # where the ring's colour is the border's (most shots), the second pass would find the
    # same box: only the others are searched again; inside bars, from the ring's colour
    redo = ((back != border).any(dim=1) & ~busy).nonzero().squeeze(1)
    if redo.numel():
        barred = (frame != frame.new_tensor([0, 0, BOX_GRID, BOX_GRID])).any(dim=1, keepdim=True)
        level = torch.where(barred, ring * (255.0 / back), 255.0).index_select(0, redo)
        cells = cells.index_copy(0, redo, _box_cells(balanced.index_select(0, redo), level[..., None, None]))
    box = cells / BOX_GRID
    rows, cols = _rows_and_cols(box, BOX_GRID, BOX_GRID)
    content = matmul(matmul(rows[:, None], balanced.clamp_(0, 255)), cols.transpose(1, 2)[:, None])
    return box, content, back


def _strip(dev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, G) per-line spread (levels) -> (first, stop) of the lines left once the
    uniform lines (spread <= ``BAR_LEVELS``) at either end are stripped."""
    bar = (dev <= BAR_LEVELS).to(torch.int32)
    g = dev.shape[1]
    first = bar.cumprod(dim=1).sum(dim=1)
    stop = g - bar.flip(1).cumprod(dim=1).sum(dim=1)
    empty = stop <= first  # all uniform: a blank frame keeps all of it
    return torch.where(empty, 0, first), torch.where(empty, g, stop)


def frame_cells(small: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 3, G, G) grid -> (the frame less its uniform bars (B, 4: x0, y0, x1, y1 in
    cells), bool (B,): that region has no backdrop). Rows, then columns within the rows
    left, are bars while each channel's range over the line's cells is at most twice
    ``BAR_LEVELS`` (padding, letterbox bars, a studio backdrop's empty margins). The
    region has no backdrop when more than ``BUSY_SHARE`` of its ring of ``BUSY_RING``
    cells (inside its outermost line) lies farther than ``MASS_FROM`` levels from the
    ring's median colour and every stripped side meets content along its whole length
    (``_straight_edges``): a scene or a full-bleed shot, where a product box found
    against the border colour would move with every crop."""
    b, _, g, _ = small.shape
    # a line's spread: its cells' range per channel, halved (max and min are a fraction
    # of a median's cost, and on a bar's cells the two agree)
    row_dev = (small.amax(dim=3) - small.amin(dim=3)).amax(dim=1) / 2
    y0, y1 = _strip(row_dev)
    rows = torch.arange(g, device=small.device)
    inside = (rows[None] >= y0[:, None]) & (rows[None] < y1[:, None])  # (B, G)
    keep = inside[:, None, :, None]
    col_dev = (torch.where(keep, small, -1.0).amax(dim=2)
               - torch.where(keep, small, 256.0).amin(dim=2)).amax(dim=1) / 2
    x0, x1 = _strip(col_dev)
    frame = torch.stack([x0, y0, x1, y1], dim=1).to(torch.float32)
    busy = torch.zeros(b, dtype=torch.bool, device=small.device)
    for i, (a0, b0, a1, b1) in enumerate(frame.to(torch.int64).tolist()):
        # the region's outermost line is left out: its cells may blend a bar with the edge
        region = small[i, :, b0 + 1:b1 - 1, a0 + 1:a1 - 1]
        if min(b1 - b0, a1 - a0) <= 2 * BUSY_RING + 2:
            continue
        r = BUSY_RING
        ring = torch.cat([region[:, :r].reshape(3, -1), region[:, -r:].reshape(3, -1),
                          region[:, r:-r, :r].reshape(3, -1), region[:, r:-r, -r:].reshape(3, -1)], 1)
        far = (ring - ring.median(dim=1, keepdim=True).values).abs().amax(dim=0) > MASS_FROM
        busy[i] = far.float().mean() > BUSY_SHARE and _straight_edges(small[i], (a0, b0, a1, b1))
        if busy[i]:
            frame[i] = _sub_cell(small[i], frame[i])
    return frame, busy


def _straight_edges(grid: torch.Tensor, frame: tuple[int, int, int, int]) -> bool:
    """Whether every side of ``frame`` that bars were stripped from meets content along
    its whole length: at least ``EDGE_FULL`` of the second kept line's cells stand out
    from the bar's colour, as along a padded or letterboxed photo's edge (a product on a
    backdrop meets its margins at a tip or a hem, not along all four sides)."""
    x0, y0, x1, y1 = frame
    g = grid.shape[-1]
    rows, cols = grid[:, :, x0:x1], grid[:, y0:y1]
    sides = ((y0 > 0, lambda o: rows[:, y0 + o]), (y1 < g, lambda o: rows[:, y1 - 1 - o]),
             (x0 > 0, lambda o: cols[:, :, x0 + o]), (x1 < g, lambda o: cols[:, :, x1 - 1 - o]))
    for stripped, line in sides:
        if not stripped:
            continue
        bar = line(-1).median(dim=1, keepdim=True).values
        if ((line(1) - bar).abs().amax(dim=0) > MASS_FROM).float().mean() < EDGE_FULL:
            return False
    return True


def _sub_cell(grid: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
    """``frame`` (4,) with each side that bars were stripped from moved into its first
    kept line by the share of that line the bar still covers: the median over its cells
    of (levels from the bar's colour) / (the next line's), where the next line stands out
    from the bar (a copy padded by a fraction of a cell lines up with its original)."""
    x0, y0, x1, y1 = (int(v) for v in frame.tolist())
    g = grid.shape[-1]
    out = frame.clone()
    rows = grid[:, :, x0:x1]  # (3, G, width): the rows' bars within the kept columns
    cols = grid[:, y0:y1]  # (3, height, G): the columns' bars within the kept rows

    def cover(bar: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> float | None:
        m = bar.median(dim=1, keepdim=True).values
        d0 = (first - m).abs().amax(dim=0)
        d1 = (second - m).abs().amax(dim=0)
        sel = d1 > MASS_FROM
        if int(sel.sum()) < 3:
            return None
        return float((d0[sel] / d1[sel]).clamp(0, 1).median())

    sides = (  # (side, stripped, line at (offset from the side), step inward)
        (1, y0 > 0 and y1 - y0 > 2, lambda o: rows[:, y0 + o], 1),
        (3, y1 < g and y1 - y0 > 2, lambda o: rows[:, y1 - 1 - o], -1),
        (0, x0 > 0 and x1 - x0 > 2, lambda o: cols[:, :, x0 + o], 1),
        (2, x1 < g and x1 - x0 > 2, lambda o: cols[:, :, x1 - 1 - o], -1),
    )
    for k, stripped, take, inward in sides:
        if stripped:
            t = cover(take(-1), take(0), take(1))
            if t is not None:  # the content covers t of the line, on its inner side
                out[k] = frame[k] + inward * (1.0 - t)
    return out


def _own_white(small: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
    """(n, 3): the level of the brightest cell inside each ``frame``, in every channel
    (at least 16): a photo without a backdrop has nothing known to be white, so its
    brightness is set by it and its white balance left as it is (balanced per channel
    by its brightest cells, a product filling the frame would turn white and lose the
    colour that tells it from its colourways)."""
    out = torch.empty(len(small), 3, device=small.device)
    for i, (a0, b0, a1, b1) in enumerate(frame.to(torch.int64).tolist()):
        out[i] = small[i, :, b0:b1, a0:a1].amax()
    return out.clamp_min(16.0)


def _unclipped(small: torch.Tensor, cells: torch.Tensor, back: torch.Tensor) -> torch.Tensor:
    """``back`` (B, 3), or in every channel the level of the box's brightest cell (as
    ``_own_white``) where more than ``CLIP_SHARE`` of the box's cells are lighter than
    ``back`` in a channel: that backdrop is no white to balance by."""
    out = back.clone()
    for i, (a0, b0, a1, b1) in enumerate(cells.floor().to(torch.int64).tolist()):
        box = small[i, :, b0:max(b1, b0 + 1), a0:max(a1, a0 + 1)]
        over = (box > back[i, :, None, None] + CLIP_LEVELS).any(dim=0)
        if over.float().mean() > CLIP_SHARE:
            out[i] = torch.maximum(back[i].amax(), box.amax())
    return out


def small_boxes_from_pixels(x: torch.Tensor, box: torch.Tensor, back: torch.Tensor,
                            cells: torch.Tensor) -> torch.Tensor:
    """``cells`` (B, 3, SIG, SIG) from ``box_cells``, in place, with the boxes narrower than
    ``FINE_SPAN`` grid cells on a side resampled from the pixels ``x`` instead, when they
    are finer than the grid (a small product has too few grid cells for the signature's
    detail: a stripe or dot pattern would alias differently at each scale)."""
    h, w = x.shape[1:3]
    if h <= BOX_GRID and w <= BOX_GRID:
        return cells
    span = torch.minimum(box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]) * BOX_GRID
    fine = (span < FINE_SPAN).nonzero().squeeze(1)
    if fine.numel():
        cells[fine] = _from_pixels(x, fine, box.index_select(0, fine), back.index_select(0, fine))
    return cells


def from_cells(box: torch.Tensor, cells: torch.Tensor) -> dict[str, np.ndarray]:
    """``box_cells``'s output -> the ``COLUMNS`` arrays."""
    luma_w = torch.tensor(LUMA, dtype=torch.float32, device=cells.device)
    y = (torch.einsum("bchw,c->bhw", cells, luma_w) / 255.0).clamp(0, 1)
    sig = torch.log(y + LOG_EPS)  # near white, a few levels of gradient or noise are ~0
    colour = _quantise_lab(srgb_to_lab(_area(cells, COLOUR_CELLS, COLOUR_CELLS).permute(0, 2, 3, 1)))
    chroma = _quantise_lab(srgb_to_lab(cells.permute(0, 2, 3, 1)))[..., 1:]
    q = ((sig - LOG_LO) / (LOG_HI - LOG_LO) * 255.0).round().clamp(0, 255)
    return {"dup_box": box.cpu().numpy(), "dup_sig": q.to(torch.uint8).cpu().numpy(),
            "dup_colour": colour.cpu().numpy(), "dup_chroma": chroma.contiguous().cpu().numpy(),
            "dup_hash": pack_bits(phash_bits(q))}


# ``dup_colour``'s code: CIELAB x LAB_CODE_SCALE + LAB_CODE_OFFSET, as uint8 (L* x 2.55,
# a* + 128, b* + 128: steps of 0.4 L* and 1 a*/b*)
LAB_CODE_SCALE = np.array([2.55, 1.0, 1.0], np.float32)
LAB_CODE_OFFSET = np.array([0.0, 128.0, 128.0], np.float32)


def _quantise_lab(lab: torch.Tensor) -> torch.Tensor:
    """CIELAB -> the uint8 code (``LAB_CODE_SCALE``, ``LAB_CODE_OFFSET``)."""
    scale = torch.from_numpy(LAB_CODE_SCALE).to(lab.device)
    offset = torch.from_numpy(LAB_CODE_OFFSET).to(lab.device)
    return (lab * scale + offset).round().clamp(0, 255).to(torch.uint8)


def lab_cells(colour: np.ndarray) -> np.ndarray:
    """The stored ``dup_colour`` (N, 8, 8, 3) uint8 -> CIELAB float32."""
    return (np.asarray(colour, np.float32) - LAB_CODE_OFFSET) / LAB_CODE_SCALE


def ab_cells(chroma: np.ndarray) -> np.ndarray:
    """``dup_chroma`` codes (N, 32, 32, 2), or values resampled from them -> a*b* float32."""
    return (np.asarray(chroma, np.float32) - LAB_CODE_OFFSET[1:]) / LAB_CODE_SCALE[1:]


def luma_cells(sig: np.ndarray) -> np.ndarray:
    """``dup_sig`` log-luma codes (N, 32, 32) -> luma x 100 float32 (L*'s scale)."""
    step = np.float32((LOG_HI - LOG_LO) / 255.0)
    y = np.exp(np.float32(LOG_LO) + np.asarray(sig, np.float32) * step) - np.float32(LOG_EPS)
    return np.clip(y, 0.0, 1.0) * np.float32(100.0)


def empty_columns() -> dict[str, np.ndarray]:
    """The ``COLUMNS`` for zero images."""
    return {"dup_box": np.zeros((0, 4), np.float32), "dup_sig": np.zeros((0, SIG, SIG), np.uint8),
            "dup_colour": np.zeros((0, COLOUR_CELLS, COLOUR_CELLS, 3), np.uint8),
            "dup_chroma": np.zeros((0, SIG, SIG, 2), np.uint8), "dup_hash": np.zeros((0,), np.uint64)}


def has_signature(box: np.ndarray) -> np.ndarray:
    """bool (N,): rows whose ``dup_box`` is a real box (zeros = computed before it existed)."""
    box = np.asarray(box, np.float32)
    return (box[:, 2] > box[:, 0]) & (box[:, 3] > box[:, 1])
