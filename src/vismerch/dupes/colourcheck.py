"""Is the product's colour the same up to a light edit? Pair checks on the 8x8 CIELAB
cells of the product box (``dup_colour``, dupes/signature.py).

* **summary**: after the white balance is undone, the product's mean a*b* and L* (cells
  weighted by their distance from white) must agree within ``colour_ab`` (or
  ``colour_ab_share`` of the larger chroma) and ``colour_l``: light edits move them a
  little, a colourway (same shot, another colour) a lot.
* **cells**: for pairs that line up as they are, no cell may change colour beyond what
  one global light edit explains (``colour_cell``): a colourway that recolours part of
  the product (a skin tone, a sole) leaves cells the fit cannot reach.
* **fine cells**: the same at the signature's 32x32 cells (``dup_chroma`` and the log-luma
  signature, ``colour_fine``), where a thin product (a racket's frame, a bassoon in a
  scene) fills cells the 8x8 ones average away; its fit has a white balance's a*b* offset
  and allows boxes half a cell apart, so a pair **cells** refuses is kept when it fits the
  fine cells within ``colour_cell``. Stores without ``dup_chroma`` keep **cells** alone.
* **hue turn**: a light edit never turns a colour's hue round; a colourway does, however
  dull the product (a grey-green plant turned blue moves few ΔE): the fine cells whose
  hue turned most, weighted by their chroma, must stay under ``colour_turn``.
"""

from __future__ import annotations

import numpy as np

from vismerch.dupes.signature import LAB_CODE_OFFSET, LAB_CODE_SCALE, ab_cells, lab_cells, luma_cells

_BLOCK = 65_536  # rows per block of the whole-catalog pass: bounded temporaries


def colour_summary(colour: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, 8, 8, 3) stored Lab cells -> product mean a*b* (N, 2) and L* (N,), cells weighted by
    their distance from white (backdrop cells weigh nothing).

    In blocks of rows (whole-catalog temporaries at a million images, ~0.8 GB each, made it
    ~4x slower) and on channel planes: each pass runs over contiguous rows of cells,
    where the (cells, 3) layout's norms and einsums strode over threes (262,144 images on
    one core: 0.75 -> 0.17 s; the values agree with that layout's within float rounding)."""
    n = len(colour)
    ab = np.empty((n, 2), np.float32)
    lightness = np.empty(n, np.float32)
    for s in range(0, n, _BLOCK):
        block = np.asarray(colour[s:s + _BLOCK])
        cells = block.reshape(len(block), -1, 3)
        # (3, rows, cells) L*, a*, b* codes; order "C": contiguous planes, not a strided view
        planes = cells.transpose(2, 0, 1).astype(np.float32, order="C")
        # lab_cells' decoding, plane by plane
        planes -= LAB_CODE_OFFSET[:, None, None]
        planes /= LAB_CODE_SCALE[:, None, None]
        light, a, b = planes
        d = light - np.float32(100.0)  # distance from white
        d *= d
        d += a * a
        d += b * b
        w = np.sqrt(d, out=d)
        w -= np.float32(4.0)
        np.clip(w, 0.0, None, out=w)
        w += np.float32(1e-3)
        w /= w.sum(axis=1, keepdims=True)
        ab[s:s + len(cells), 0] = (a * w).sum(axis=1)
        ab[s:s + len(cells), 1] = (b * w).sum(axis=1)
        lightness[s:s + len(cells)] = (light * w).sum(axis=1)
    return ab, lightness


def colour_agrees(ab: np.ndarray, lightness: np.ndarray, i: np.ndarray, j: np.ndarray, *,
                  max_ab: float, ab_share: float, max_l: float) -> np.ndarray:
    """bool per pair: the product's colour is the same up to a light edit."""
    dab = np.linalg.norm(ab[i] - ab[j], axis=1)
    chroma = np.maximum(np.linalg.norm(ab[i], axis=1), np.linalg.norm(ab[j], axis=1))
    return (dab <= np.maximum(max_ab, ab_share * chroma)) & (
        np.abs(lightness[i] - lightness[j]) <= max_l)


def cell_colour_residual(colour: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Per pair, the largest colour change of one 8x8 cell of the box that a global light
    edit does not explain: L* of j's cells is fitted as a + b * L* of i's and the a*b* as
    c * a*b* (least squares, cells weighted by their distance from white), and the worst
    remaining ΔE76 of a product cell is returned. A colourway that recolours part of the
    product (a skin tone, a sole) leaves cells the fit cannot reach; a light edit does not.
    Meaningful for pairs aligned as they are (not for crops)."""
    # only the pairs' cells are decoded (the whole store's, at a million images, cost ~2.4 s
    # and 0.8 GB per incremental dedup)
    a = lab_cells(colour[i]).reshape(len(i), -1, 3)
    b = lab_cells(colour[j]).reshape(len(j), -1, 3)
    white = np.array([100.0, 0.0, 0.0], np.float32)
    w = np.maximum(np.linalg.norm(a - white, axis=2), np.linalg.norm(b - white, axis=2))
    w = np.clip(w - 4.0, 0.0, None)
    sw = np.maximum(w.sum(axis=1, keepdims=True), 1e-6)
    la, lb = a[..., 0], b[..., 0]
    ma, mb = (w * la).sum(1, keepdims=True) / sw, (w * lb).sum(1, keepdims=True) / sw
    slope = ((w * (la - ma) * (lb - mb)).sum(1, keepdims=True)
             / np.maximum((w * (la - ma) ** 2).sum(1, keepdims=True), 1e-6))
    rl = lb - (mb + slope * (la - ma))
    aba, abb = a[..., 1:], b[..., 1:]
    # a light edit scales chroma, never turns it round: a negative gain would explain a
    # colourway whose hue is turned by half a circle (red to cyan) as a light edit
    gain = np.maximum((w[..., None] * aba * abb).sum((1, 2)) /
                      np.maximum((w[..., None] * aba * aba).sum((1, 2)), 1e-6), 0.0)[:, None, None]
    rab = np.linalg.norm(abb - gain * aba, axis=2)
    resid = np.sqrt(rl ** 2 + rab ** 2)
    return np.where(w > 8.0, resid, 0.0).max(axis=1)


def has_chroma(chroma: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
    """bool per row: its ``dup_chroma`` was stored (shards written before it read back as
    zeros, a code no colour has: a* and b* of -128)."""
    if chroma is None:
        return np.zeros(len(rows), bool)
    return np.asarray(chroma[rows]).reshape(len(rows), -1).any(axis=1)


def _half_shifts(x: np.ndarray) -> np.ndarray:
    """(P, S, S, C) -> (9, P, S, S, C): ``x`` moved by -1/2, 0 and +1/2 cell along each axis
    (linear interpolation, edges repeated): boxes placed a fraction of a cell apart."""
    def along(v: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
        n = v.shape[axis]
        lo = np.take(v, np.r_[0, np.arange(n - 1)], axis=axis)
        hi = np.take(v, np.r_[np.arange(1, n), n - 1], axis=axis)
        return (v + lo) * 0.5, v, (v + hi) * 0.5
    return np.stack([c for r in along(x, 1) for c in along(r, 2)])


def fine_colour_residual(sig: np.ndarray, chroma: np.ndarray, i: np.ndarray, j: np.ndarray,
                         block: int = 256) -> np.ndarray:
    """Per pair lined up as it is, the largest colour change of one 32x32 signature cell
    that a global light edit does not explain: j's lightness (luma x 100) is fitted as an
    affine map of i's, and its a*b* as i's about their mean times a gain >= 0 plus j's mean
    (a white balance moves a*b* by an offset, contrast and saturation scale them; a hue
    turned round is neither); each cell keeps its smallest ΔE over the fit moved by up to
    half a cell (boxes placed a fraction of a cell apart), the rim left out. A colourway of
    a thin product changes a line of cells the fit cannot reach; a light edit does not."""
    out = np.zeros(len(i), np.float32)
    for s in range(0, len(i), block):
        pi, pj = i[s:s + block], j[s:s + block]
        la, lb = luma_cells(sig[pi]), luma_cells(sig[pj])
        ca, cb = ab_cells(chroma[pi]), ab_cells(chroma[pj])
        n = len(pi)
        a, b = la.reshape(n, -1), lb.reshape(n, -1)
        da, db = a - a.mean(1, keepdims=True), b - b.mean(1, keepdims=True)
        slope = (da * db).sum(1) / np.maximum((da * da).sum(1), 1e-6)
        light = b.mean(1, keepdims=True) + slope[:, None] * da
        ab_a, ab_b = ca.reshape(n, -1, 2), cb.reshape(n, -1, 2)
        ea, eb = ab_a - ab_a.mean(1, keepdims=True), ab_b - ab_b.mean(1, keepdims=True)
        gain = np.maximum((ea * eb).sum((1, 2)) / np.maximum((ea * ea).sum((1, 2)), 1e-6), 0.0)
        ab = ab_b.mean(1, keepdims=True) + gain[:, None, None] * ea
        fit = np.concatenate([light[..., None], ab], axis=2).reshape(n, *la.shape[1:], 3)
        target = np.concatenate([lb[..., None], cb], axis=3)
        d = np.linalg.norm(_half_shifts(fit) - target[None], axis=-1).min(axis=0)
        out[s:s + block] = d[:, 1:-1, 1:-1].reshape(n, -1).max(axis=1)
    return out


TURN_CELLS = 20  # the most turned fine cells averaged: a thin or small product fills ~20
TURN_CHROMA = 8.0  # a*b* chroma under which a cell has no hue to speak of


def hue_turn(chroma: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Per pair lined up as it is: the mean, over the ``TURN_CELLS`` fine cells turned most,
    of (1 - cos of the hue turn) x the cell's chroma (the smaller of the two), after j's
    mean a*b* shift (a white balance) is taken out; cells under ``TURN_CHROMA`` in either
    count nothing. A hue turned by 90 degrees at chroma 10 scores 10; true copies on the
    real-photo and OpenMoji sets stay under 3.5."""
    a = ab_cells(chroma[i]).reshape(len(i), -1, 2)
    b = ab_cells(chroma[j]).reshape(len(j), -1, 2)
    b = b - (b.mean(axis=1, keepdims=True) - a.mean(axis=1, keepdims=True))
    na, nb = np.linalg.norm(a, axis=2), np.linalg.norm(b, axis=2)
    cos = (a * b).sum(axis=2) / np.maximum(na * nb, 1e-6)
    weight = np.minimum(na, nb)
    turned = np.where(weight > TURN_CHROMA, (1.0 - cos) * weight, 0.0)
    k = min(TURN_CELLS, turned.shape[1])
    return np.partition(turned, turned.shape[1] - k, axis=1)[:, -k:].mean(axis=1)
