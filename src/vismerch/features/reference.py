"""Plain definitions of the colour backend's stages: what each computes, written for
reading, not speed. ``kernels.py`` computes the same things faster;
``tests/unit/test_colour_kernels.py`` holds each kernel to its definition here. The
backend itself uses ``soft_bins``, which has no faster twin.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from vismerch.features.colourspace import ciede2000, srgb_to_lab


def plane_sum(planes: torch.Tensor) -> torch.Tensor:
    """(B, 3, ...) -> (B, ...) sum over the channel axis."""
    return planes.sum(dim=1)


def plane_max(planes: torch.Tensor) -> torch.Tensor:
    """(B, 3, ...) -> (B, ...) largest channel."""
    return planes.amax(dim=1)


def cell_means(x: torch.Tensor, k: int) -> torch.Tensor:
    """(B, H, W) -> (B, H/k, W/k) means of k x k cells."""
    b, h, w = x.shape
    return x.reshape(b, h // k, k, w // k, k).mean(dim=(2, 4))


def first_min(dist: torch.Tensor) -> torch.Tensor:
    """(B, K, N) -> (B, N): index of the smallest of the K values, the first of equals."""
    return dist.argmin(dim=1)


def far_from(lab: torch.Tensor, ref: torch.Tensor, delta: float) -> torch.Tensor:
    """CIEDE2000(lab, ref) > delta, for lab (B, ..., 3) and one reference per image (B, 3)."""
    shape = (lab.shape[0],) + (1,) * (lab.dim() - 2) + (3,)
    return ciede2000(lab, ref.reshape(shape)) > delta


def box_count(m: torch.Tensor) -> torch.Tensor:
    """Number of set cells in each 3x3 window (zero padding) of (B, H, W) float."""
    ones = torch.ones(1, 1, 3, 3, dtype=m.dtype, device=m.device)
    return F.conv2d(m[:, None], ones, padding=1)[:, 0]


def erode(mask: torch.Tensor, r: int) -> torch.Tensor:
    """Cells whose (2r+1)^2 window lies inside ``mask`` (B, H, W) bool; outside the frame
    counts as inside."""
    outside = F.pad((~mask).to(torch.float32)[:, None], (r, r, r, r), value=0.0)
    return F.max_pool2d(outside, 2 * r + 1, stride=1)[:, 0] == 0


def run_sum(values: torch.Tensor, barrier: torch.Tensor) -> torch.Tensor:
    """For each cell of (B, H, W): how many set ``values`` lie in its run along the last
    axis, a run being the cells from one ``barrier`` cell up to (not including) the next."""
    ids = barrier.to(torch.int64).cumsum(dim=-1)
    same = ids[..., :, None] == ids[..., None, :]  # (B, H, W, W)
    return (same & values[..., None, :]).sum(dim=-1)


def open_to_border(fg: torch.Tensor) -> torch.Tensor:
    """(B, H, W) bool: no foreground between the cell (inclusive) and the frame's edge
    along its row or its column, on at least one side."""
    def clear(dim: int) -> torch.Tensor:
        return fg.to(torch.int32).cumsum(dim) == 0

    def clear_back(dim: int) -> torch.Tensor:
        return fg.flip(dim).to(torch.int32).cumsum(dim).flip(dim) == 0

    return clear(1) | clear_back(1) | clear(2) | clear_back(2)


def _spread(reach: torch.Tensor, bg: torch.Tensor, fg: torch.Tensor) -> torch.Tensor:
    """One sweep: reached background spreads along its row's background run, then along
    its column's."""
    reach = (run_sum(reach, fg) > 0) & bg
    t = (run_sum(reach.transpose(1, 2), fg.transpose(1, 2)) > 0) & bg.transpose(1, 2)
    return t.transpose(1, 2)


def fill_narrow_holes(fg: torch.Tensor, max_run: int, sweeps: int) -> torch.Tensor:
    """The mask ``fg`` (B, H, W) bool plus its narrow enclosed holes. Background reached
    from the frame's border cells in ``sweeps`` row-then-column sweeps is open; the rest
    is hole. A hole cell is narrow across when its background run along its row (or
    column) is at most ``max_run`` cells; it is filled when no wide hole cell shares its
    run along the other direction (a stripe is narrow all along; the tip of a large
    hole is narrow only locally and stays background)."""
    bg = ~fg
    border = torch.zeros_like(fg)
    border[:, 0], border[:, -1], border[:, :, 0], border[:, :, -1] = True, True, True, True
    reach = bg & border
    for _ in range(sweeps):
        reach = _spread(reach, bg, fg)
    holes = bg & ~reach
    fg_t = fg.transpose(1, 2)
    narrow_row = holes & (run_sum(bg, fg) <= max_run)
    narrow_col = holes & (run_sum(bg.transpose(1, 2), fg_t) <= max_run).transpose(1, 2)
    wide = holes & ~(narrow_row | narrow_col)
    col_ok = (run_sum(wide.transpose(1, 2), fg_t) == 0).transpose(1, 2)
    row_ok = run_sum(wide, fg) == 0
    return fg | (narrow_row & col_ok) | (narrow_col & row_ok)


def lloyd(points: torch.Tensor, weights: torch.Tensor, centres: torch.Tensor, iters: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted Lloyd iterations on points (B, N, 3): each point joins its nearest centre
    (the first of equals), each centre moves to its points' weighted mean; a centre with
    no points stays. -> (centres (B, K, 3), cluster weights (B, K))."""
    k = centres.shape[1]
    mass = torch.zeros(centres.shape[:2], dtype=points.dtype, device=points.device)
    for _ in range(iters):
        dist = ((points[:, None] - centres[:, :, None]) ** 2).sum(-1)  # (B, K, N)
        member = F.one_hot(dist.argmin(dim=1), k).to(points.dtype) * weights[..., None]
        mass = member.sum(dim=1)  # (B, K)
        sums = torch.einsum("bnk,bnc->bkc", member, points)
        moved = sums / mass.clamp_min(1e-9)[..., None]
        centres = torch.where(mass[..., None] > 0, moved, centres)
    return centres, mass


def soft_bins(v: torch.Tensor, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Linear interpolation onto evenly spaced bin centres: (lower index, upper weight)."""
    lo, step, n = float(centres[0]), float(centres[1] - centres[0]), len(centres)
    pos = ((v - lo) / step).clamp(0.0, n - 1.0)
    i0 = pos.floor().clamp_max(n - 2)
    return i0.to(torch.int64), pos - i0


def soft_histogram(points: torch.Tensor, weights: torch.Tensor,
                   centres: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Trilinear histogram of points (B, N, 3) with weights (B, N) on the grid of bin
    ``centres`` per channel -> (B, n0 * n1 * n2), unnormalised: each point spreads its
    weight over the eight bins around it."""
    bins = [soft_bins(points[..., i], c) for i, c in enumerate(centres)]
    n = [len(c) for c in centres]
    hist = torch.zeros(points.shape[0], n[0] * n[1] * n[2], device=points.device)
    for corner in range(8):
        d = [(corner >> 2) & 1, (corner >> 1) & 1, corner & 1]
        idx = [i0 + di for (i0, _), di in zip(bins, d, strict=True)]
        w = weights
        for (_, frac), di in zip(bins, d, strict=True):
            w = w * (frac if di else 1.0 - frac)
        hist.scatter_add_(1, (idx[0] * n[1] + idx[1]) * n[2] + idx[2], w)
    return hist


def grid_means(x: torch.Tensor, grid: int) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float (B, grid, grid, 3) area-averaged sRGB."""
    xf = x.to(torch.float32).permute(0, 3, 1, 2)
    return F.interpolate(xf, size=(grid, grid), mode="area").permute(0, 2, 3, 1)


def grid_lab(x: torch.Tensor, grid: int) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> CIELAB (B, grid, grid, 3) of the area-averaged sRGB."""
    return srgb_to_lab(grid_means(x, grid))


def edge_histogram(grey: torch.Tensor, bins: int, cells: int) -> torch.Tensor:
    """Sobel gradients of (B, H, W) grey (edges replicated); each pixel's magnitude is
    split linearly between the two nearest of ``bins`` unsigned orientations (wrapping
    round), per cell of a cells x cells grid -> (B, cells^2 * bins), unnormalised."""
    b, h, w = grey.shape
    sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
    p = F.pad(grey[:, None], (1, 1, 1, 1), mode="replicate")
    gx = F.conv2d(p, sobel[None, None])[:, 0]
    gy = F.conv2d(p, sobel.T[None, None])[:, 0]
    mag = torch.hypot(gx, gy)
    pos = torch.remainder(torch.atan2(gy, gx), math.pi) / math.pi * bins - 0.5
    i0 = pos.floor()
    frac = pos - i0
    lower = i0.to(torch.int64) % bins
    upper = (lower + 1) % bins
    cy = torch.arange(h)[:, None] * cells // h
    cx = torch.arange(w)[None, :] * cells // w
    cell = ((cy * cells + cx) * bins).expand(h, w)
    hist = torch.zeros(b, cells * cells * bins)
    hist.scatter_add_(1, (cell + lower).reshape(b, -1), (mag * (1 - frac)).reshape(b, -1))
    hist.scatter_add_(1, (cell + upper).reshape(b, -1), (mag * frac).reshape(b, -1))
    return hist


def foreground_mask(lab: torch.Tensor, background: torch.Tensor, delta: float, max_run: int,
                    sweeps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Lab grid (B, G, G, 3) -> (mask, filled holes): cells ``far_from`` the background,
    less specks (under 3 set cells in their 3x3 window), plus ``fill_narrow_holes``."""
    fg = far_from(lab, background, delta)
    fg = fg & (box_count(fg.to(torch.float32)) >= 3)
    filled = fill_narrow_holes(fg, max_run, sweeps)
    return filled, filled & ~fg


def solid_samples(gathered: torch.Tensor, n: int, background_rgb: torch.Tensor,
                  interior_levels: int, backdrop_levels: int) -> torch.Tensor:
    """Lattice pixels (B, 5N, 3) uint8 (N samples, then 4 rings of N neighbours) and the
    background as sRGB levels (B, 3) -> bool (B, N): every neighbour's largest channel
    difference from the sample is at most ``interior_levels`` and from the background
    more than ``backdrop_levels``."""
    px = gathered.to(torch.int32)
    b = px.shape[0]
    sample, ring = px[:, None, :n], px[:, n:].reshape(b, 4, n, 3)
    alike = (ring - sample).abs().amax(-1) <= interior_levels
    off_bg = (ring - background_rgb.to(torch.int32)[:, None, None]).abs().amax(-1) > backdrop_levels
    return (alike & off_bg).all(dim=1)


def merge_close(centres: torch.Tensor, mass: torch.Tensor, delta: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image, agglomerative merging with complete linkage: while the closest pair of
    used clusters is nearer than ``delta`` (CIEDE2000, between the original colours each
    holds: the largest such distance), the lower-numbered keeps their weighted mean and
    both masses, the other is emptied."""
    centres, mass = centres.clone(), mass.clone()
    d0 = ciede2000(centres[:, :, None], centres[:, None])
    for img in range(centres.shape[0]):
        members = {i: {i} for i in range(centres.shape[1]) if mass[img, i] > 0}
        while len(members) > 1:
            def link(i, j, img=img, members=members):
                return max(float(d0[img, a, b]) for a in members[i] for b in members[j])
            pairs = [(link(i, j), i, j) for i in members for j in members if i < j]
            dist, i, j = min(pairs)
            if dist >= delta:
                break
            mi, mj = mass[img, i], mass[img, j]
            centres[img, i] = (centres[img, i] * mi + centres[img, j] * mj) / (mi + mj)
            mass[img, i], mass[img, j] = mi + mj, 0.0
            members[i] |= members.pop(j)
    return centres, mass


def kmeans_palette(points: torch.Tensor, weights: torch.Tensor, k: int,
                   schedule: tuple[tuple[int, int], ...], merge_delta: float, min_share: float
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted k-means: the first centre the weighted mean, each next one the weighted
    point farthest from all centres so far; Lloyd steps per ``schedule`` ((every how
    many points, iterations), ...); close clusters merged; shares under ``min_share``
    dropped. -> (centres (B, k, 3), shares (B, k) heaviest first, unused zero)."""
    b = points.shape[0]
    mean = (points * weights[..., None]).sum(1) / weights.sum(1, keepdim=True)
    centres = [mean]
    for _ in range(1, k):
        dist = torch.stack([((points - c[:, None]) ** 2).sum(-1) for c in centres]).amin(0)
        far = torch.where(weights > 0, dist, torch.full_like(dist, -1.0)).argmax(dim=1)
        centres.append(points[torch.arange(b), far])
    c = torch.stack(centres, dim=1)
    for step, iters in schedule:
        c, mass = lloyd(points[:, ::step], weights[:, ::step], c, iters)
    c, mass = merge_close(c, mass, merge_delta)
    share = mass / mass.sum(1, keepdim=True)
    share = torch.where(share >= min_share, share, 0.0)
    share = share / share.sum(1, keepdim=True)
    order = share.argsort(dim=1, descending=True, stable=True)
    share, c = share.gather(1, order), c.gather(1, order[..., None].expand(-1, -1, 3))
    return torch.where(share[..., None] > 0, c, 0.0), share
