"""The colour backend's fast paths: each computes what one function of ``reference.py``
computes, by a cheaper route on the CPU (torch's CPU kernels are slow on short trailing
axes, small windows and short reductions; these use contiguous planes, separable sums and
shortcuts that skip work whose result is already known).

Every function here has an equivalence test against its reference
(``tests/unit/test_colour_kernels.py``). None of them changes its arguments. On a GPU most
take torch's plain operation, which is one kernel there. The matrix products and powers
go through ``cpumath.py`` (numpy's BLAS and ufuncs; tested against torch's in
``tests/unit/test_cpumath.py``).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from vismerch.features.colourspace import ciede2000
from vismerch.features.cpumath import matmul

DE00_PER_DE76 = 2.13  # upper bound of CIEDE2000 / CIE76 (sqrt(4.5), rounded up)


def plane_sum(planes: torch.Tensor) -> torch.Tensor:
    """(B, 3, ...) -> (B, ...): the three channel planes added in order; the same bits as
    ``sum`` over a trailing channel axis (reference: ``planes.sum(1)`` in that order)."""
    return planes[:, 0] + planes[:, 1] + planes[:, 2]


def plane_max(planes: torch.Tensor) -> torch.Tensor:
    """(B, 3, ...) -> (B, ...): the largest of the three channel planes."""
    return torch.maximum(torch.maximum(planes[:, 0], planes[:, 1]), planes[:, 2])


def mean_2x2(x: torch.Tensor) -> torch.Tensor:
    """(B, 2H, 2W) float -> (B, H, W) means of 2x2 cells, as ((a + b) + (c + d)) / 4 over
    four strided views: the sums, in the order, that ``reference.cell_means`` adds them in
    (the same bits)."""
    b, h, w = x.shape
    g = x.reshape(b, h // 2, 2, w // 2, 2)
    return ((g[:, :, 0, :, 0] + g[:, :, 0, :, 1]) + (g[:, :, 1, :, 0] + g[:, :, 1, :, 1])) / 4


def weigh_channels(images: torch.Tensor, weights: np.ndarray) -> torch.Tensor:
    """uint8 CPU (..., C) times float32 (C,) -> float32 (...): numpy converts the pixels to
    float32 in small buffers on their way into the product, with no float copy of the
    images (reference: ``images.float() @ weights``, the same values)."""
    return torch.from_numpy(np.matmul(images.numpy(), weights))


def first_min(dist: torch.Tensor) -> torch.Tensor:
    """``dist.argmin(dim=1)`` of (B, K, N), the first of equal minima. On CPU by a
    knock-out of contiguous (B, N) rows: argmin over a short middle axis is slow there."""
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


def far_from(lab: torch.Tensor, ref: torch.Tensor, delta: float) -> torch.Tensor:
    """CIEDE2000(lab, ref) > delta, for lab (B, ..., 3) and one reference per image (B, 3).

    On CPU, cheap bounds settle most colours without the full formula: CIEDE2000 <=
    sqrt(4.5) * CIE76 (S_L, S_C, S_H >= 1, a' <= 1.5 a, |R_T| <= 2) settles those close to
    the reference, and CIEDE2000 >= |dL| / S_L settles those far from it in lightness."""
    b = lab.shape[0]
    flat = lab.reshape(b, -1, 3)
    if lab.device.type != "cpu":
        return (ciede2000(flat, ref[:, None]) > delta).reshape(lab.shape[:-1])
    m = flat.shape[1]
    planes = flat.transpose(1, 2).contiguous()  # (B, 3, M)
    diff = planes - ref[:, :, None]
    maybe = plane_sum(diff * diff) > (delta / DE00_PER_DE76) ** 2
    lm50 = (planes[:, 0] + ref[:, 0, None] - 100.0).mul_(0.5).pow_(2)
    s_l = 1.0 + 0.015 * lm50 / torch.sqrt(20.0 + lm50)
    sure = diff[:, 0].abs() > delta * s_l
    maybe = (maybe & ~sure).reshape(-1)
    idx = maybe.nonzero().squeeze(1)
    out = sure.reshape(-1).clone()
    out[idx] = ciede2000(flat.reshape(-1, 3).index_select(0, idx),
                         ref.index_select(0, idx // m)) > delta
    return out.reshape(lab.shape[:-1])


def box_count(m: torch.Tensor) -> torch.Tensor:
    """Number of set cells in each 3x3 window (zero padding) of (B, H, W) float, as three
    row sums then three column sums."""
    p = F.pad(m, (1, 1, 1, 1))
    rows = p[:, :-2] + p[:, 1:-1] + p[:, 2:]
    return rows[:, :, :-2] + rows[:, :, 1:-1] + rows[:, :, 2:]


def erode(mask: torch.Tensor, r: int) -> torch.Tensor:
    """Cells whose (2r+1)^2 window lies inside ``mask`` (B, H, W) bool; outside the frame
    counts as inside. Separable window sums (a min-pool is far slower on one CPU thread)."""
    h, w = mask.shape[1:]
    p = F.pad(mask.to(torch.float32), (r, r, r, r), value=1.0)
    rows = sum(p[:, i:i + h] for i in range(2 * r + 1))
    full = sum(rows[:, :, i:i + w] for i in range(2 * r + 1))
    return full > (2 * r + 1) ** 2 - 0.5


def runs(barrier: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Run ids along the last axis: cells between barriers share an id (B, H, W) int64,
    unique over the batch, and the number of ids."""
    b, h, w = barrier.shape
    run = barrier.to(torch.int64).cumsum(dim=-1)
    offset = torch.arange(b * h, device=barrier.device).reshape(b, h, 1) * (w + 1)
    return run + offset, b * h * (w + 1)


def run_sum(values: torch.Tensor, run_ids: tuple[torch.Tensor, int]) -> torch.Tensor:
    """Count of set ``values`` (bool) over each cell's run, broadcast back to the cells.
    Counted on CPU in uint8 when a run cannot exceed 255 cells (the bools' own bytes)."""
    ids, n = run_ids
    small = values.device.type == "cpu" and ids.shape[-1] <= torch.iinfo(torch.uint8).max
    dtype = torch.uint8 if small else torch.int32
    flat = values.reshape(-1)
    flat = flat.view(torch.uint8) if small else flat.to(dtype)
    acc = torch.zeros(n, device=values.device, dtype=dtype).scatter_add_(0, ids.reshape(-1), flat)
    return acc.index_select(0, ids.reshape(-1)).view(ids.shape)


def open_to_border(fg: torch.Tensor) -> torch.Tensor:
    """(B, H, W) bool, meaningful for background cells: no foreground between the cell and
    the frame's edge along its row or its column."""
    out = torch.zeros_like(fg)
    counts = fg.to(torch.int16)  # counts of at most H or W cells
    for dim in (1, 2):
        before = counts.cumsum(dim, dtype=torch.int16)  # foreground up to and including here
        out |= (before == 0) | (before == before.narrow(dim, fg.shape[dim] - 1, 1))
    return out


def _sweep(bg: torch.Tensor, rows: tuple[torch.Tensor, int], cols: tuple[torch.Tensor, int],
           reach: torch.Tensor) -> torch.Tensor:
    """Spread ``reach`` along background runs: first along rows, then along columns."""
    reach = (run_sum(reach, rows) > 0) & bg
    bg_t = bg.transpose(1, 2)
    return ((run_sum(reach.transpose(1, 2), cols) > 0) & bg_t).transpose(1, 2)


def fill_narrow_holes(fg: torch.Tensor, max_run: int, sweeps: int) -> torch.Tensor:
    """``reference.fill_narrow_holes``, computed only for the images that can have an
    enclosed hole: a background cell open to the border along its row or column is reached
    by the first sweep, so images whose background is all that open are returned as they are."""
    maybe = (~fg & ~open_to_border(fg)).any(dim=2).any(dim=1).nonzero().squeeze(1)
    if maybe.numel() == 0:
        return fg.clone()
    fg_m = fg.index_select(0, maybe)
    bg = ~fg_m
    border = torch.zeros_like(fg_m)
    border[:, 0], border[:, -1], border[:, :, 0], border[:, :, -1] = True, True, True, True
    reach = _sweep(bg, runs(fg_m), runs(fg_m.transpose(1, 2)), bg & border)
    todo_m = (bg & ~reach).any(dim=2).any(dim=1).nonzero().squeeze(1)  # rows of ``maybe``
    if todo_m.numel() == 0:
        return fg.clone()
    todo = maybe.index_select(0, todo_m)
    fg_s, bg_s = fg_m.index_select(0, todo_m), bg.index_select(0, todo_m)
    reach_s = reach.index_select(0, todo_m)
    rows, cols = runs(fg_s), runs(fg_s.transpose(1, 2))
    for _ in range(sweeps - 1):
        reach_s = _sweep(bg_s, rows, cols, reach_s)
    holes = bg_s & ~reach_s
    bg_t = bg_s.transpose(1, 2)
    narrow_row = holes & (run_sum(bg_s, rows) <= max_run)
    narrow_col = holes & (run_sum(bg_t, cols) <= max_run).transpose(1, 2)
    wide = holes & ~(narrow_row | narrow_col)
    col_ok = (run_sum(wide.transpose(1, 2), cols) == 0).transpose(1, 2)
    row_ok = run_sum(wide, rows) == 0
    filled = fg_s | (narrow_row & col_ok) | (narrow_col & row_ok)
    return fg.index_copy(0, todo, filled)


def square_distance(planes: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """Squared distances (B, N) of points on channel planes (B, 3, N) to one centre (B, 3)."""
    return plane_sum((planes - centre[:, :, None]).pow_(2))


def lloyd(planes: torch.Tensor, weights: torch.Tensor, centres: torch.Tensor, iters: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """``reference.lloyd`` on points as channel planes (B, 3, N): distances as
    |p|^2 - 2 p.c + |c|^2 (one matrix product), cluster sums by scatter-add of the
    assignments. A cluster that loses all its points keeps its centre."""
    b, k = centres.shape[:2]
    p2 = plane_sum(planes.pow(2))[:, None]  # distances (B, K, N)
    weighted = planes * weights[:, None]
    mass = torch.zeros(b, k, device=planes.device, dtype=planes.dtype)
    for _ in range(iters):
        dist = torch.add(p2, matmul(centres, planes), alpha=-2.0)
        nearest = first_min(dist.add_(centres.pow(2).sum(-1)[:, :, None]))  # (B, N)
        mass = torch.zeros_like(mass).scatter_add_(1, nearest, weights)
        sums = torch.zeros(b, 3, k, device=planes.device, dtype=planes.dtype).scatter_add_(
            2, nearest[:, None].expand(-1, 3, -1), weighted).transpose(1, 2)
        centres = torch.where(mass[..., None] > 0, sums / mass.clamp_min(1e-9)[..., None], centres)
    return centres, mass


def soft_histogram(points: torch.Tensor, weights: torch.Tensor,
                   centres: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``reference.soft_histogram``: the eight corners' bins are the lower corner's plus a
    constant, and their weights are products shared along the loops (the same products,
    multiplied in the same order)."""
    from vismerch.features.reference import soft_bins

    (il, fl), (ia, fa), (ib, fb) = (soft_bins(points[..., i], c) for i, c in enumerate(centres))
    _, na, nb = (len(c) for c in centres)
    hist = torch.zeros(points.shape[0], len(centres[0]) * na * nb, device=points.device,
                       dtype=torch.float32)
    base = (il * na + ia) * nb + ib
    for dl, wl in ((0, 1.0 - fl), (1, fl)):
        w_l = weights * wl
        for da, wa in ((0, 1.0 - fa), (1, fa)):
            w_la = w_l * wa
            for db, wb in ((0, 1.0 - fb), (1, fb)):
                hist.scatter_add_(1, base + ((dl * na + da) * nb + db), w_la * wb)
    return hist
