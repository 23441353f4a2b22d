"""Is the product's colour the same up to a light edit? Pair checks on the 8x8 CIELAB
cells of the product box (``dup_colour``, dupes/signature.py).

* **summary**: after the white balance is undone, the product's mean a*b* and L* (cells
  weighted by their distance from white) must agree within ``colour_ab`` (or
  ``colour_ab_share`` of the larger chroma) and ``colour_l``: light edits move them a
  little, a colourway (same shot, another colour) a lot.
* **cells**: for pairs that line up as they are, no cell may change colour beyond what
  one global light edit explains (``colour_cell``): a colourway that recolours part of
  the product (a skin tone, a sole) leaves cells the fit cannot reach.
"""

from __future__ import annotations

import numpy as np

from vismerch.dupes.signature import LAB_CODE_OFFSET, LAB_CODE_SCALE, lab_cells

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
