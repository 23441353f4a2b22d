"""Is image B the same photo as image A, reframed and relit? Pair scores from the
signatures of dupes/signature.py (box, 32x32 log-luma of the box); the colour checks
are dupes/colourcheck.py's.

* **structure**: the zero-mean, unit-norm correlation (NCC) of the two box signatures as
  they are (padding, letterbox, trimmed margins, resizing, re-encoding and light edits
  leave the box's content unchanged up to an offset and scale of log-luma), when the
  boxes' aspect ratios agree; otherwise, or when that falls short, a **region search**:
  a crop that cuts into the product leaves a box that is a sub-rectangle of the other's.
  Its width fraction ``su`` is searched on a grid, its height fraction follows from the
  two aspect ratios (a crop does not change the pixel scale: ``sv = su * aspect_a /
  aspect_b``), and its position is tied to the sides where the cropped box still has
  margin (a side that does not touch the frame was not cut, so it lines up with the
  other box's side); sides touching the frame try left/centre/right. Both directions
  (B in A, A in B) are tried and compared at 16x16; the best is then refined in two
  rounds of small moves and scalings (``REFINE_STEPS``) and scored at 32x32, the crop
  blurred as the magnified view of the other is (``_as_magnified``).
* **mirror**: the same search against B flipped left-right. A pair whose mirrored score
  beats its direct one is a mirrored shot, refused unless ``allow_mirror``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

SIG = 32
G = 16  # region-search comparison grid
SCALES = np.round(np.arange(0.60, 1.0001, 0.025), 3)  # width fractions searched
MIN_SHARE = 0.45  # smallest box area share a crop may keep (a quarter of the frame cut
#                   can take more than a quarter of a product that fills the frame)
TOUCH = 1.5 / 128  # a box side this close to the frame edge touches it
# |log aspect ratio| of the two boxes up to which the plain comparison is tried. True copies
# that line up as they are (pad, letterbox, trim, light, resize, re-encode and chains of
# them) differed by at most 0.025 on generated catalogs (seeds 2, 4, 5: 339 pairs, colour
# version 3's boxes); 0.04 keeps 1.6x that margin. 0.06 let one look-alike pair of another
# cut through (seed 4); on the OpenMoji set 0.04 and 0.06 found the same pairs (issue 11's
# note; the catalogs' scores before and after are in benchmarks/RESULTS.md).
PLAIN_ASPECT = 0.04
REFINE_STEPS = (0.008, 0.004)  # box fractions: the region search's refinement rounds
RIM = 1  # cells at the signature's edge left out of the scores
_PAIRS = 96  # pairs per region-search chunk (its arrays stay ~30 MB)
# The plain scores of many pairs come from per-image unit rows stored as float16: a dot
# product of two unit rows rounded to float16 (relative error <= 2**-11 per element) is
# off by at most ~1e-3 (Cauchy-Schwarz), so a score farther than MARGIN from every
# threshold gives the same verdict as the exact one; the few nearer are recomputed exactly.
MARGIN = 2e-3
_FAST_PAIRS = 16_384  # pairs per fast-score chunk
_DOT_PAIRS = 1_024  # pairs per dot-product block (~7 MB of float32 rows)


def _unit(x: np.ndarray) -> np.ndarray:
    """(..., n) -> zero-mean unit-norm rows."""
    x = x - x.mean(axis=-1, keepdims=True)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-6)


_BLOCK = 65_536  # rows per block of the whole-catalog passes: bounded temporaries


def _shrink(sig: np.ndarray, g: int) -> np.ndarray:
    """(P, 32, 32) -> (P, g, g) cell means (g divides 32 here). uint8 signatures are summed
    as integers in blocks by ``features.quality.cell_mean`` (strided int16 additions: exact,
    so the float32 means numpy's float sum gives; 3-4x faster than a multi-axis ``sum`` on
    262,144 signatures at g = 8), with no float copy of them all (4 GB at a million)."""
    k = sig.shape[-1] // g
    if sig.dtype != np.uint8:
        dtype = np.result_type(sig.dtype, np.float32)
        return sig.reshape(len(sig), g, k, g, k).sum(axis=(2, 4), dtype=dtype) / dtype.type(k * k)
    import torch

    from vismerch.features.quality import cell_mean

    out = np.empty((len(sig), g, g), np.float32)
    for s in range(0, len(sig), _BLOCK):
        out[s:s + _BLOCK] = cell_mean(torch.from_numpy(np.ascontiguousarray(sig[s:s + _BLOCK])),
                                      k).numpy()
    return out


@functools.lru_cache(maxsize=4)
def _candidates() -> tuple[np.ndarray, np.ndarray]:
    """(scale index, anchor u, anchor v) grid: anchors 0 = start, 1 = centre, 2 = end."""
    s, u, v = np.meshgrid(np.arange(SCALES.size), np.arange(3), np.arange(3), indexing="ij")
    return s.reshape(-1), np.stack([u.reshape(-1), v.reshape(-1)], axis=1)


def _sample(sig: np.ndarray, x0: np.ndarray, y0: np.ndarray, sx: np.ndarray, sy: np.ndarray,
            g: int) -> np.ndarray:
    """Bilinear samples of (P, 32, 32) at a g x g grid over sub-rectangles given per
    (P, C) in box fractions -> (P, C, g*g)."""
    t = (np.arange(g) + 0.5) / g
    xs = (x0[..., None] + sx[..., None] * t) * SIG - 0.5  # (P, C, G)
    ys = (y0[..., None] + sy[..., None] * t) * SIG - 0.5
    xs, ys = xs.clip(0, SIG - 1.001), ys.clip(0, SIG - 1.001)
    xl, yl = xs.astype(np.int64), ys.astype(np.int64)
    wx, wy = (xs - xl)[..., None, :], (ys - yl)[..., :, None]
    p = np.arange(len(sig))[:, None, None, None]
    def at(yy, xx):
        return sig[p, yy[..., :, None], xx[..., None, :]]  # (P, C, G, G)
    top = at(yl, xl) * (1 - wx) + at(yl, xl + 1) * wx
    bottom = at(yl + 1, xl) * (1 - wx) + at(yl + 1, xl + 1) * wx
    out = top * (1 - wy) + bottom * wy
    return out.reshape(out.shape[0], out.shape[1], -1)


def _region(big: np.ndarray, small: np.ndarray, aspect_big: np.ndarray,
            aspect_small: np.ndarray, touch_small: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layout, detail, the sub-rectangle (P, 4): x0, y0, width, height as box fractions,
    NaN where none fits) of ``small`` (P, 32, 32)'s best match among sub-rectangles of
    ``big``."""
    scale_idx, anchors = _candidates()
    su = SCALES[scale_idx][None, :].repeat(len(big), 0)  # (P, C)
    sv = su * (aspect_big / aspect_small)[:, None]
    ok = (sv <= 1.04) & (su * np.minimum(sv, 1) >= MIN_SHARE)
    sv = np.minimum(sv, 1.0)
    au, av = anchors[None, :, 0], anchors[None, :, 1]
    # a side with margin was not cut: the sub-rectangle starts (or ends) there; a box
    # touching the frame on both sides may sit anywhere along that axis
    left, top, right, bottom = (touch_small[:, k:k + 1] for k in range(4))
    for a, lo, hi, frac in ((au, left, right, su), (av, top, bottom, sv)):
        full = frac >= 0.999
        ok &= np.where(a == 0, (~lo & hi & ~full) | (lo & hi), True)
        ok &= np.where(a == 2, lo & ~full, True)
        # neither side cut: the same extent, up to the aspect ratios' measuring error
        ok &= np.where(a == 1, (lo & hi & ~full) | (~lo & ~hi & (frac >= 0.94)), True)
    x0 = np.where(au == 0, 0.0, np.where(au == 1, (1 - su) / 2, 1 - su))
    y0 = np.where(av == 0, 0.0, np.where(av == 1, (1 - sv) / 2, 1 - sv))
    # only the valid (pair, candidate) entries are sampled: most pairs allow a few
    pair, cand = np.nonzero(ok)
    plain = np.full(len(big), -1.0, np.float32)
    detail = np.full(len(big), -1.0, np.float32)
    where = np.full((len(big), 4), np.nan, np.float32)
    if not pair.size:
        return plain, detail, where
    x0, y0, su, sv = (v[pair, cand] for v in (x0, y0, su, sv))
    target = _unit(_shrink(small, G).reshape(len(small), -1))
    got = _unit(_sample(big[pair], x0[:, None], y0[:, None], su[:, None], sv[:, None], G)[:, 0])
    score = np.einsum("en,en->e", got, target[pair])
    order = np.lexsort((-score, pair))  # per pair, best first
    first = order[np.r_[True, pair[order][1:] != pair[order][:-1]]]
    found = pair[first]
    # the chosen sub-rectangle, refined, at full resolution: layout and detail scores
    plain[found], detail[found], where[found] = _refine(big[found], small[found], x0[first],
                                                        y0[first], su[first], sv[first])
    return plain, detail, where


def _refine(big: np.ndarray, small: np.ndarray, x0: np.ndarray, y0: np.ndarray,
            su: np.ndarray, sv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layout, detail, the refined sub-rectangle (P, 4)) of ``small`` against the
    sub-rectangle of ``big`` found on the search grid, moved and scaled by up to
    ``REFINE_STEPS``' sums (a crop's true scale lies between two of ``SCALES``, and its
    position between anchors when the crop is not centred: a quarter of a signature cell
    off costs the detail score most), keeping the best layout + detail in each round."""
    steps = np.array([-1.0, 0.0, 1.0])
    d_s, d_x, d_y = (v.reshape(-1) for v in np.meshgrid(steps, steps, steps, indexing="ij"))
    small = _as_magnified(small, su, sv)
    plain, detail = _scores(_sample(big, x0[:, None], y0[:, None], su[:, None], sv[:, None],
                                    SIG)[:, 0].reshape(len(big), SIG, SIG), small)
    for step in REFINE_STEPS:
        f = 1.0 + step * d_s[None, :]  # (1, 27) scale factors, both axes alike
        cu, cv = np.minimum(su[:, None] * f, 1.0), np.minimum(sv[:, None] * f, 1.0)
        cx = np.clip(x0[:, None] + (su[:, None] - cu) / 2 + step * d_x[None, :], 0.0, 1.0 - cu)
        cy = np.clip(y0[:, None] + (sv[:, None] - cv) / 2 + step * d_y[None, :], 0.0, 1.0 - cv)
        n, c = cx.shape
        views = _sample(big, cx, cy, cu, cv, SIG).reshape(n * c, SIG, SIG)
        lay, det = _scores(views, np.repeat(small, c, axis=0))
        lay, det = lay.reshape(n, c), det.reshape(n, c)
        pick = np.argmax(lay + det, axis=1)
        rows = np.arange(n)
        better = (lay + det)[rows, pick] > plain + detail
        plain = np.where(better, lay[rows, pick], plain)
        detail = np.where(better, det[rows, pick], detail)
        x0, y0 = np.where(better, cx[rows, pick], x0), np.where(better, cy[rows, pick], y0)
        su, sv = np.where(better, cu[rows, pick], su), np.where(better, cv[rows, pick], sv)
    return plain, detail, np.stack([x0, y0, su, sv], axis=1)


# A signature cell's own blur (sigma, cells): the resampling Gaussian (signature.BLUR)
# and the cell's area
CELL_BLUR = float(np.hypot(0.45, 0.29))


def _gauss_rows(sigma: np.ndarray) -> np.ndarray:
    """(P,) sigmas in cells -> (P, SIG, SIG) row-normalised Gaussian blur matrices."""
    d = np.arange(SIG)[:, None] - np.arange(SIG)[None, :]
    w = np.exp(-0.5 * (d[None] / np.maximum(sigma, 1e-3)[:, None, None]) ** 2)
    return (w / w.sum(axis=2, keepdims=True)).astype(np.float32)


def _as_magnified(small: np.ndarray, su: np.ndarray, sv: np.ndarray) -> np.ndarray:
    """``small`` (P, 32, 32) blurred as the region search's view of the other signature
    is: that view magnifies a share ``su`` x ``sv`` of it to the whole grid, its cells'
    blur and the linear interpolation between them with it. Compared unblurred, the
    sharper crop's fine detail, which the view cannot hold, reads as a difference."""
    def sigma(share: np.ndarray) -> np.ndarray:
        var = (CELL_BLUR ** 2 + 1.0 / 6.0) / np.square(np.clip(share, 0.3, 1.0)) - CELL_BLUR ** 2
        return np.sqrt(np.maximum(var, 0.0))
    rows, cols = _gauss_rows(sigma(sv)), _gauss_rows(sigma(su))
    return rows @ small.astype(np.float32) @ cols.transpose(0, 2, 1)


def _blur(sig: np.ndarray) -> np.ndarray:
    """(P, S, S) -> the [1, 4, 6, 4, 1] / 16 kernel along each axis (about a Gaussian of
    sigma 1), edges repeated."""
    # edges repeated by concatenation: the values np.pad(mode="edge") gives, at a tenth of
    # its cost on small arrays
    p = np.concatenate([sig[:, :1], sig[:, :1], sig, sig[:, -1:], sig[:, -1:]], axis=1)
    n = sig.shape[1]
    rows = (p[:, 0:n] + p[:, 4:n + 4] + 4 * (p[:, 1:n + 1] + p[:, 3:n + 3]) + 6 * p[:, 2:n + 2])
    p = np.concatenate([rows[:, :, :1], rows[:, :, :1], rows, rows[:, :, -1:],
                        rows[:, :, -1:]], axis=2)
    m = sig.shape[2]
    return (p[:, :, 0:m] + p[:, :, 4:m + 4] + 4 * (p[:, :, 1:m + 1] + p[:, :, 3:m + 3])
            + 6 * p[:, :, 2:m + 2]) / 256.0


def _scores(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P, S, S) pairs -> (layout NCC, detail NCC): the detail is what a blur of sigma ~1
    removes (edges, seams, print), where look-alikes of one silhouette differ most."""
    n = len(a)
    ha, hb = a - _blur(a), b - _blur(b)
    # the outermost cells are left out: they straddle the box's edge, so a box a fraction
    # of a cell off changes them most (a rectangular product's whole outline)
    a, b, ha, hb = (v[:, RIM:-RIM, RIM:-RIM] for v in (a, b, ha, hb))
    plain = np.einsum("pn,pn->p", _unit(a.reshape(n, -1)), _unit(b.reshape(n, -1)))
    detail = np.einsum("pn,pn->p", _unit(ha.reshape(n, -1)), _unit(hb.reshape(n, -1)))
    return plain, detail


def touches(box: np.ndarray) -> np.ndarray:
    """(N, 4) boxes -> (N, 4) bool: left, top, right, bottom side at the frame edge."""
    return np.stack([box[:, 0] <= TOUCH, box[:, 1] <= TOUCH, box[:, 2] >= 1 - TOUCH,
                     box[:, 3] >= 1 - TOUCH], axis=1)


def box_aspect(box: np.ndarray, frame_aspect: np.ndarray) -> np.ndarray:
    """(N,) width / height of each (N, 4) box in pixels (``frame_aspect``: the frame's)."""
    return (box[:, 2] - box[:, 0]) * frame_aspect / np.maximum(box[:, 3] - box[:, 1], 1e-3)


def crop_regions(sig: np.ndarray, box: np.ndarray, frame_aspect: np.ndarray, i: np.ndarray,
                 j: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the original of each pair (i, j), its crop, the original's sub-rectangle the crop
    shows (P, 4): x0, y0, width, height as box fractions; NaN where neither box was cut),
    by the region search, unmirrored, in whichever direction lines up better."""
    box = np.asarray(box, np.float32)
    aspect, touch = box_aspect(box, frame_aspect), touches(box)
    cut = touch.any(axis=1)
    big, small = i.copy(), j.copy()
    where = np.full((i.size, 4), np.nan, np.float32)
    for s in range(0, i.size, _PAIRS):
        pi, pj = i[s:s + _PAIRS], j[s:s + _PAIRS]
        a, b = np.asarray(sig)[pi].astype(np.float32), np.asarray(sig)[pj].astype(np.float32)
        in_a = _region(a, b, aspect[pi], aspect[pj], touch[pj])  # j a crop of i
        in_b = _region(b, a, aspect[pj], aspect[pi], touch[pi])
        score_a = np.where(cut[pj], in_a[0] + in_a[1], -np.inf)
        score_b = np.where(cut[pi], in_b[0] + in_b[1], -np.inf)
        flip = score_b > score_a
        big[s:s + _PAIRS] = np.where(flip, pj, pi)
        small[s:s + _PAIRS] = np.where(flip, pi, pj)
        where[s:s + _PAIRS] = np.where(flip[:, None], in_b[2], in_a[2])
        where[s:s + _PAIRS][np.isinf(np.maximum(score_a, score_b))] = np.nan
    return big, small, where


def region_view(grid: np.ndarray, where: np.ndarray) -> np.ndarray:
    """(P, 32, 32, C) grids of the originals -> their sub-rectangles ``where`` at 32x32."""
    x0, y0, su, sv = (where[:, k:k + 1] for k in range(4))
    planes = [_sample(grid[..., c], x0, y0, su, sv, SIG)[:, 0].reshape(len(grid), SIG, SIG)
              for c in range(grid.shape[-1])]
    return np.stack(planes, axis=-1)


def crop_view(grid: np.ndarray, where: np.ndarray) -> np.ndarray:
    """(P, 32, 32, C) grids of the crops, blurred as ``region_view`` magnifies the originals'."""
    planes = [_as_magnified(grid[..., c], where[:, 2], where[:, 3]) for c in range(grid.shape[-1])]
    return np.stack(planes, axis=-1)


def structure_scores(sig: np.ndarray, box: np.ndarray, frame_aspect: np.ndarray,
                     i: np.ndarray, j: np.ndarray, *, good_enough: float = 1.0,
                     mirrored: bool = True, fine_enough: float = -1.0) -> tuple[np.ndarray, ...]:
    """(layout, detail, mirrored layout, mirrored detail, layout as they are) correlations
    of pairs (i, j), each the best alignment's (see the module docstring); the last is -1
    where the aspect ratios differ. ``frame_aspect`` (N,): each image's width / height in
    pixels. Pairs whose plain layout correlation reaches ``good_enough`` and whose detail
    reaches ``fine_enough`` skip the region search (a box a fraction of a cell off keeps
    the layout but not the detail: the search's refinement lines it up); so does a
    direction whose smaller box touches no side of its frame (nothing was cut from it: it
    is the whole product, and can only line up as it is).
    ``mirrored=False`` leaves the mirrored scores at -1 (half the work)."""
    sig = np.asarray(sig)
    box = np.asarray(box, np.float32)
    aspect = box_aspect(box, frame_aspect)
    touch = touches(box)
    cut = touch.any(axis=1)
    out = np.full((5, i.size), -1.0, np.float32)
    for s in range(0, i.size, 4096):
        pi, pj = i[s:s + 4096], j[s:s + 4096]
        a = sig[pi].astype(np.float32)
        b = sig[pj].astype(np.float32)
        fb = np.ascontiguousarray(b[:, :, ::-1])
        near = np.abs(np.log(aspect[pi] / aspect[pj])) <= PLAIN_ASPECT
        best = np.full((5, pi.size), -1.0, np.float32)
        best[0], best[1] = np.where(near, _scores(a, b), -1.0)
        if mirrored:
            best[2], best[3] = np.where(near, _scores(a, fb), -1.0)
        best[4] = best[0]
        todo = np.flatnonzero(((best[0] < good_enough) | (best[1] < fine_enough))
                              & (cut[pi] | cut[pj]))
        for c in range(0, todo.size, _PAIRS):
            t = todo[c:c + _PAIRS]
            ta, tb = touch[pi[t]], touch[pj[t]]
            ra, rb = aspect[pi[t]], aspect[pj[t]]
            views = [(0, b[t], tb)]
            if mirrored:
                views.append((2, fb[t], tb[:, [2, 1, 0, 3]]))  # mirrored: left, right swap
            for k, other, tt in views:
                for b_small in (True, False):
                    small_cut = cut[pj[t]] if b_small else cut[pi[t]]
                    if not small_cut.any():
                        continue
                    got = (_region(a[t], other, ra, rb, tt) if b_small
                           else _region(other, a[t], rb, ra, ta))
                    better = (got[0] > best[k, t]) & small_cut
                    best[k, t[better]] = got[0][better]
                    best[k + 1, t[better]] = got[1][better]
        out[:, s:s + 4096] = best
    return out[0], out[1], out[2], out[3], out[4]


@functools.lru_cache(maxsize=2)
def _blur_matrix(size: int):
    """(size, size) torch matrix K with K @ x = :func:`_blur`'s pass along one axis."""
    import torch

    k = np.zeros((size, size), np.float32)
    for r in range(size):
        for off, w in zip(range(-2, 3), (1, 4, 6, 4, 1), strict=True):
            k[r, min(max(r + off, 0), size - 1)] += w / 16.0
    return torch.from_numpy(k)


def unit_rows(sig: np.ndarray, chunk: int = 8_192) -> tuple[np.ndarray, np.ndarray]:
    """(N, 32, 32) signatures -> the (layout, detail) rows :func:`_scores` correlates, per
    image: (N, 30*30) zero-mean unit rows each, float16 (see ``MARGIN``). The blur is
    :func:`_blur` as two matrix products (equal up to float rounding, far inside MARGIN)."""
    import torch

    n, side = len(sig), SIG - 2 * RIM
    layout = np.empty((n, side * side), np.float16)
    detail = np.empty((n, side * side), np.float16)
    k = _blur_matrix(SIG)

    def unit(x):
        x = x.reshape(len(x), -1)
        x = x - x.mean(dim=1, keepdim=True)
        return (x / x.norm(dim=1, keepdim=True).clamp_min(1e-6)).half().numpy()

    for s in range(0, n, chunk):
        a = torch.from_numpy(np.asarray(sig[s:s + chunk])).float()
        m = len(a)
        # k @ a @ k.T as two flat matrix products (one GEMM each, not m small ones)
        rows = (a.reshape(-1, SIG) @ k.T).reshape(m, SIG, SIG)
        h = a - (rows.transpose(1, 2).reshape(-1, SIG) @ k.T).reshape(m, SIG, SIG).transpose(1, 2)
        layout[s:s + m] = unit(a[:, RIM:-RIM, RIM:-RIM])
        detail[s:s + m] = unit(h[:, RIM:-RIM, RIM:-RIM])
    return layout, detail


def _row_dots(rows, i: np.ndarray, j: np.ndarray, mirror: bool = False) -> np.ndarray:
    """Dot products of float16 unit rows (a torch tensor (N, 900)) i and j, in float32;
    ``mirror``: j's rows flipped left-right (the rows of the mirrored image)."""
    import torch

    out = torch.empty(len(i))
    ti, tj = torch.from_numpy(i), torch.from_numpy(j)
    side = SIG - 2 * RIM
    for s in range(0, len(i), _DOT_PAIRS):  # small blocks: the float copies stay in cache
        a = rows.index_select(0, ti[s:s + _DOT_PAIRS]).float()
        b = rows.index_select(0, tj[s:s + _DOT_PAIRS]).float()
        if mirror:
            b = b.view(-1, side, side).flip(2).reshape(len(a), -1)
        out[s:s + _DOT_PAIRS] = torch.linalg.vecdot(a, b)
    return out.numpy()


@dataclass(frozen=True)
class Thresholds:
    """What :func:`fast_structure_scores` must give the exact verdicts against: the
    layout and detail thresholds, the plain score that skips the region search, and
    whether mirrored scores are wanted."""

    layout: tuple[float, ...]
    detail: tuple[float, ...]
    good_enough: float = 1.0
    mirrored: bool = True

    def close(self, plain: np.ndarray, fine: np.ndarray) -> np.ndarray:
        """Scores within ``MARGIN`` of a threshold: the fast score may not decide them."""
        near = [np.abs(plain - t) < MARGIN for t in (*self.layout, self.good_enough)]
        return np.any(near, axis=0) | np.any([np.abs(fine - t) < MARGIN for t in self.detail],
                                             axis=0)


def fast_structure_scores(sig: np.ndarray, box: np.ndarray, frame_aspect: np.ndarray,
                          i: np.ndarray, j: np.ndarray, at: Thresholds) -> tuple[np.ndarray, ...]:
    """:func:`structure_scores` for many pairs, with the same verdicts against the
    thresholds ``at``.

    Pairs whose boxes line up as they are get their plain scores from per-image unit rows
    (:func:`unit_rows`, computed once per image instead of once per pair); a pair whose
    fast score lies within ``MARGIN`` of a threshold, whose mirrored and direct scores are
    that close, or that needs the region search goes through :func:`structure_scores`.
    Elsewhere the scores are within ``MARGIN`` of the exact ones, and detail is left at -1
    where the layout is below every layout threshold (it cannot change a verdict there)."""
    import torch

    i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
    out = np.full((5, i.size), -1.0, np.float32)
    if not i.size:
        return tuple(out)
    box = np.asarray(box, np.float32)
    aspect = box_aspect(box, frame_aspect)
    cut = touches(box).any(axis=1)
    # unit rows of the images the pairs name only (an incremental search names few)
    used = np.zeros(len(sig), bool)
    used[i], used[j] = True, True
    rows = np.flatnonzero(used)
    local = np.cumsum(used) - 1
    sub = sig if rows.size == len(sig) else np.asarray(sig)[rows]
    unit = tuple(torch.from_numpy(x) for x in unit_rows(sub))
    near = np.abs(np.log(aspect[i] / aspect[j])) <= PLAIN_ASPECT
    either_cut = cut[i] | cut[j]
    exact = ~near & either_cut  # no plain score: only the region search can pair them
    for s in range(0, i.size, _FAST_PAIRS):
        sl = slice(s, s + _FAST_PAIRS)
        q = np.flatnonzero(near[sl])
        if q.size:
            unsure = _plain_from_rows(unit, local[i[sl][q]], local[j[sl][q]], at,
                                      out[:, s:s + _FAST_PAIRS], q)
            short = (out[0, s + q] < at.good_enough) | (out[1, s + q] < min(at.detail, default=-1.0))
            exact[s + q] |= unsure | (short & either_cut[s + q])
    out[4] = out[0]
    redo = np.flatnonzero(exact)
    if redo.size:
        got = structure_scores(sig, box, frame_aspect, i[redo], j[redo],
                               good_enough=at.good_enough, mirrored=at.mirrored,
                               fine_enough=min(at.detail, default=-1.0))
        out[:, redo] = np.stack(got)
    return tuple(out)


def _plain_from_rows(unit: tuple, li: np.ndarray, lj: np.ndarray, at: Thresholds,
                     out: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Fill ``out[:4, q]`` (a view) with the plain scores of pairs (li, lj) of unit rows
    ``unit`` (layout, detail); bool per pair: too close to a threshold to trust."""
    layout, detail = unit
    lowest = min(at.layout)
    unsure = np.zeros(q.size, bool)
    for k, flip in [(0, False)] + ([(2, True)] if at.mirrored else []):
        plain = _row_dots(layout, li, lj, flip)
        fine = np.full(q.size, -1.0, np.float32)
        need = plain >= lowest - MARGIN
        if need.any():
            fine[need] = _row_dots(detail, li[need], lj[need], flip)
        unsure |= at.close(plain, fine)
        out[k, q], out[k + 1, q] = plain, fine
    if at.mirrored:
        unsure |= np.abs(out[2, q] - out[0, q]) < 2 * MARGIN
    return unsure


def as_is_scores(sig: np.ndarray, box: np.ndarray, frame_aspect: np.ndarray, i: np.ndarray,
                 j: np.ndarray, lowest: float = -1.0) -> tuple[np.ndarray, np.ndarray]:
    """(layout, detail) of pairs (i, j) lined up as they are, from per-image unit rows
    (within ``MARGIN`` of the exact scores); -1 where the boxes' aspect ratios differ, and
    detail -1 where the layout is below ``lowest``."""
    import torch

    i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
    plain = np.full(i.size, -1.0, np.float32)
    fine = np.full(i.size, -1.0, np.float32)
    box = np.asarray(box, np.float32)
    aspect = box_aspect(box, frame_aspect)
    near = np.flatnonzero(np.abs(np.log(aspect[i] / aspect[j])) <= PLAIN_ASPECT)
    if near.size:
        rows, local = np.unique(np.concatenate([i[near], j[near]]), return_inverse=True)
        layout, detail = (torch.from_numpy(x) for x in unit_rows(np.asarray(sig)[rows]))
        li, lj = local[:near.size], local[near.size:]
        plain[near] = _row_dots(layout, li, lj)
        need = plain[near] >= lowest
        fine[near[need]] = _row_dots(detail, li[need], lj[need])
    return plain, fine
