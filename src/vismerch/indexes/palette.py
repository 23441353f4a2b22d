"""Colour search without scoring every palette: palette colours bucketed in CIELAB cells.

A product's colour score for a query colour q is ``sum_j w_j * exp(-(dE00(p_j, q) / sigma)^2)``
over its palette (``merch.search``). A palette colour further than r from q adds less than
``w_j * g(r)``, g(r) = exp(-(r / sigma)^2), so a product none of whose colours lies within r
scores below g(r). The index keeps every palette colour in a cubic cell of CIELAB (``CELL``
units a side, compressed sparse rows: cell -> entries -> product row). A query measures
CIEDE2000 from q to the cells' centres only, takes the cells that may hold a colour within r
(a margin covers the distance from a centre to the cell's corners), scores exactly the
products found there, and widens r until the k-th best score is at least g(r): no unseen
product can then enter the top k. Results equal a full scan's up to CIEDE2000's own
discontinuities (near-opposite hues), which only move colours scoring under 0.2 %.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vismerch.errors import StoreError, UsageError

COLOUR_SIGMA = 10.0
_ROWS_PER_CHUNK = 200_000  # products per CIEDE2000 batch (bounds temporary memory)


def colour_scores(palette_lab: Any, palette_weight: Any, query_lab: Any, *,
                  sigma: float = COLOUR_SIGMA, device: str = "cpu") -> np.ndarray:
    """Score (N,) of every palette for one query colour (``merch.search``'s docstring)."""
    import torch

    from vismerch.features.colourspace import ciede2000

    lab = torch.as_tensor(np.asarray(palette_lab, dtype=np.float32), device=device)
    weight = torch.as_tensor(np.asarray(palette_weight, dtype=np.float32), device=device)
    if lab.ndim != 3 or lab.shape[-1] != 3 or weight.shape != lab.shape[:2]:
        raise UsageError(f"palettes must be (N, K, 3) Lab with (N, K) weights, got "
                         f"{tuple(lab.shape)} and {tuple(weight.shape)}")
    query = torch.as_tensor(np.asarray(query_lab, dtype=np.float32).reshape(3), device=device)
    out = torch.zeros(lab.shape[0], dtype=torch.float32, device=device)
    for s in range(0, lab.shape[0], _ROWS_PER_CHUNK):
        part, w = lab[s:s + _ROWS_PER_CHUNK], weight[s:s + _ROWS_PER_CHUNK]
        valid = torch.isfinite(part).all(-1) & torch.isfinite(w) & (w > 0)  # padded slots
        delta = ciede2000(torch.nan_to_num(part), query)
        near = torch.exp(-((delta / sigma) ** 2))
        out[s:s + _ROWS_PER_CHUNK] = torch.where(valid, w * near, 0.0).sum(-1)
    return out.cpu().numpy()


CELL = 4.0  # CIELAB units per cell side
# dE00 from a query to a colour is at most this much below its distance to the colour's cell
# centre: CIEDE2000 changes at most ~1.25x as fast as Lab distance, plus its small jumps
MARGIN = 1.25 * CELL * 3**0.5 / 2 + 1.0
FIRST_RADIUS = 6.0
_L_BINS, _AB_BINS, _AB_MIN = 26, 66, -132.0


def _cell_of(lab: np.ndarray) -> np.ndarray:
    """Linear cell number of Lab colours (..., 3)."""
    li = np.clip(np.floor(lab[..., 0] / CELL), 0, _L_BINS - 1).astype(np.int64)
    ai = np.clip(np.floor((lab[..., 1] - _AB_MIN) / CELL), 0, _AB_BINS - 1).astype(np.int64)
    bi = np.clip(np.floor((lab[..., 2] - _AB_MIN) / CELL), 0, _AB_BINS - 1).astype(np.int64)
    return (li * _AB_BINS + ai) * _AB_BINS + bi


def _centre_of(cells: np.ndarray) -> np.ndarray:
    bi = cells % _AB_BINS
    ai = (cells // _AB_BINS) % _AB_BINS
    li = cells // (_AB_BINS * _AB_BINS)
    return np.stack([(li + 0.5) * CELL, _AB_MIN + (ai + 0.5) * CELL, _AB_MIN + (bi + 0.5) * CELL],
                    -1).astype(np.float32)


@dataclass
class PaletteIndex:
    """Palettes of ``rows`` (positions in the caller's product list) and their cells."""

    rows: np.ndarray      # (n,) int64: the product each palette belongs to
    lab: np.ndarray       # (n, K, 3) float32
    weight: np.ndarray    # (n, K) float32, 0 for padded slots
    cells: np.ndarray     # (c,) int64: non-empty cells, sorted
    centres: np.ndarray   # (c, 3) float32
    starts: np.ndarray    # (c + 1,) int64: entries of cell i are order[starts[i]:starts[i+1]]
    order: np.ndarray     # (e,) int64: entry = palette * K + slot

    @classmethod
    def build(cls, rows: np.ndarray, lab: np.ndarray, weight: np.ndarray) -> PaletteIndex:
        lab = np.asarray(lab, np.float32)
        weight = np.asarray(weight, np.float32)
        if lab.ndim != 3 or lab.shape[-1] != 3 or weight.shape != lab.shape[:2] or len(rows) != len(lab):
            raise StoreError(f"palettes must be (N, K, 3) Lab with (N, K) weights for N rows, got "
                             f"{lab.shape}, {weight.shape} and {len(rows)} rows")
        valid = np.isfinite(lab).all(-1) & np.isfinite(weight) & (weight > 0)
        weight = np.where(valid, weight, 0.0).astype(np.float32)
        lab = np.nan_to_num(lab).astype(np.float32)
        entries = np.flatnonzero(valid.reshape(-1))
        cell = _cell_of(lab.reshape(-1, 3)[entries])
        sort = np.argsort(cell, kind="stable")
        cells, counts = np.unique(cell[sort], return_counts=True)
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(np.asarray(rows, np.int64), lab, weight, cells, _centre_of(cells), starts,
                   entries[sort].astype(np.int64))

    def __len__(self) -> int:
        return len(self.rows)

    def candidates(self, query_lab: np.ndarray, radius: float) -> np.ndarray:
        """Palettes (positions into ``rows``) with a colour that may lie within ``radius``
        CIEDE2000 of the query, sorted."""
        from vismerch.features.colourspace import ciede2000_np

        if not len(self.cells):
            return np.zeros(0, np.int64)
        near = ciede2000_np(self.centres, np.asarray(query_lab, np.float32).reshape(1, 3)) - MARGIN < radius
        picked = np.flatnonzero(near)
        if not picked.size:
            return np.zeros(0, np.int64)
        lo, hi = self.starts[picked], self.starts[picked + 1]
        lengths = hi - lo
        offsets = np.repeat(lo - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        entries = self.order[np.arange(int(lengths.sum())) + offsets]
        hit = np.zeros(len(self.rows), bool)  # a mark per palette: linear, unlike a sort
        hit[entries // self.lab.shape[1]] = True
        return np.flatnonzero(hit)

    def search(self, query_lab: np.ndarray, k: int, allowed: np.ndarray | None = None, *,
               sigma: float, min_score: float) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the top ``k`` palettes scoring at least ``min_score``, best first
        (ties by row); ``allowed``: a bool mask over the caller's rows."""
        last = sigma * float(np.sqrt(np.log(1.0 / max(min_score, 1e-12))))
        radius = min(FIRST_RADIUS, last)
        while True:
            pos = self.candidates(query_lab, radius)
            if allowed is not None and pos.size:
                pos = pos[allowed[self.rows[pos]]]
            scores = colour_scores(self.lab[pos], self.weight[pos], query_lab, sigma=sigma) \
                if pos.size else np.zeros(0, np.float32)
            keep = scores >= min_score
            pos, scores = pos[keep], scores[keep]
            bound = float(np.exp(-((radius / sigma) ** 2)))  # no unseen palette scores this much
            enough = pos.size >= k and np.partition(scores, -k)[-k] >= bound
            if enough or radius >= last:
                break
            radius = min(radius * 2.0, last)
        order = np.lexsort((self.rows[pos], -scores))[:k]
        return self.rows[pos[order]], scores[order]

    # -- persistence --------------------------------------------------------------------
    def save(self, file: Any, token: str) -> None:
        """Write to ``file`` (a path or binary file) with the caller's build ``token``."""
        np.savez(file, rows=self.rows, lab=self.lab, weight=self.weight, cells=self.cells,
                 starts=self.starts, order=self.order, token=np.array(token))

    @classmethod
    def load(cls, path: Path, token: str) -> PaletteIndex | None:
        """The index saved with ``token``; None when the file holds another build's."""
        with np.load(path) as data:
            if str(data["token"]) != token:
                return None
            cells = data["cells"]
            return cls(data["rows"], data["lab"], data["weight"], cells, _centre_of(cells),
                       data["starts"], data["order"])
