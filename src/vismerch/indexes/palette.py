"""Colour search without scoring every palette: palette colours bucketed in CIELAB cells.

A product's colour score for a query colour q is ``sum_j w_j * exp(-(dE00(p_j, q) / sigma)^2)``
over its palette (``merch.search``). A palette colour further than r from q adds less than
``w_j * g(r)``, g(r) = exp(-(r / sigma)^2), so a product none of whose colours lies within r
scores below g(r). The index keeps every palette colour in a cubic cell of CIELAB (``CELL``
units a side, compressed sparse rows: cell -> entries -> product row). A query measures
CIEDE2000 from q to the nearest point of each cell only, takes the cells that may hold a
colour within r, scores the colours found there, rescores exactly the products that may
reach the top k, and widens r until the k-th best score is at least g(r): no unseen product
can then enter the top k. Results equal a full scan's up to CIEDE2000's own discontinuities
(near-opposite hues), which only move colours that add a fraction of a percent.
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


CELL = 3.0  # CIELAB units per cell side
# dE00 from a query to a colour in a cell is at least its dE00 to the cell's nearest point
# less this (CIEDE2000 is not a distance along straight lines; 1.0 covers 99.99 % of pairs
# within 30 units, the rest being its jumps at near-opposite hues)
MARGIN = 1.0
FIRST_RADIUS = 1.5  # dense colours stop here; sparse ones widen at the cost of one cell scan
_L_BINS, _AB_BINS, _AB_MIN = 34, 88, -132.0


def _cell_of(lab: np.ndarray) -> np.ndarray:
    """Linear cell number of Lab colours (..., 3)."""
    li = np.clip(np.floor(lab[..., 0] / CELL), 0, _L_BINS - 1).astype(np.int64)
    ai = np.clip(np.floor((lab[..., 1] - _AB_MIN) / CELL), 0, _AB_BINS - 1).astype(np.int64)
    bi = np.clip(np.floor((lab[..., 2] - _AB_MIN) / CELL), 0, _AB_BINS - 1).astype(np.int64)
    return (li * _AB_BINS + ai) * _AB_BINS + bi


def _corner_of(cells: np.ndarray) -> np.ndarray:
    """The lowest (L, a, b) corner of each cell."""
    bi = cells % _AB_BINS
    ai = (cells // _AB_BINS) % _AB_BINS
    li = cells // (_AB_BINS * _AB_BINS)
    return np.stack([li * CELL, _AB_MIN + ai * CELL, _AB_MIN + bi * CELL], -1).astype(np.float32)


@dataclass
class PaletteIndex:
    """Palettes of ``rows`` (positions in the caller's product list) and their cells."""

    rows: np.ndarray      # (n,) int64: the product each palette belongs to
    lab: np.ndarray       # (n, K, 3) float32
    weight: np.ndarray    # (n, K) float32, 0 for padded slots
    cells: np.ndarray     # (c,) int64: non-empty cells, sorted
    corners: np.ndarray   # (c, 3) float32: each cell spans corner .. corner + CELL
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
        return cls(np.asarray(rows, np.int64), lab, weight, cells, _corner_of(cells), starts,
                   entries[sort].astype(np.int64))

    def __len__(self) -> int:
        return len(self.rows)

    def cell_bounds(self, query_lab: np.ndarray) -> np.ndarray:
        """A lower bound of CIEDE2000 from the query to any colour of each cell."""
        import torch

        from vismerch.features.colourspace import ciede2000

        query = np.asarray(query_lab, np.float32).reshape(1, 3)
        nearest = np.clip(query, self.corners, self.corners + CELL)
        return ciede2000(torch.from_numpy(nearest), torch.from_numpy(query)).numpy() - MARGIN

    def entries_near(self, query_lab: np.ndarray, radius: float, bounds: np.ndarray | None = None,
                     ) -> np.ndarray:
        """Palette colours (palette * K + slot) in the cells that may hold a colour within
        ``radius`` CIEDE2000 of the query (``bounds``: ``cell_bounds`` of it, when known)."""
        if not len(self.cells):
            return np.zeros(0, np.int64)
        bounds = self.cell_bounds(query_lab) if bounds is None else bounds
        picked = np.flatnonzero(bounds < radius)
        lo, hi = self.starts[picked], self.starts[picked + 1]
        lengths = hi - lo
        offsets = np.repeat(lo - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        return self.order[np.arange(int(lengths.sum())) + offsets]

    def candidates(self, query_lab: np.ndarray, radius: float) -> np.ndarray:
        """Palettes (positions into ``rows``) with a colour that may lie within ``radius``."""
        return np.unique(self.entries_near(query_lab, radius) // self.lab.shape[1])

    def search(self, query_lab: np.ndarray, k: int, allowed: np.ndarray | None = None, *,
               sigma: float, min_score: float) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the top ``k`` palettes scoring at least ``min_score``, best first
        (ties by row); ``allowed``: a bool mask over the caller's rows."""
        query_lab = np.asarray(query_lab, np.float32).reshape(3)
        if min_score > 1.0:  # a share above the whole palette: nothing can pass
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        last = sigma * float(np.sqrt(np.log(1.0 / max(min_score, 1e-12))))
        radius = min(FIRST_RADIUS, last)
        bounds = self.cell_bounds(query_lab) if len(self.cells) else None
        while True:
            pos, scores = self._near(query_lab, radius, k, allowed, sigma, bounds)
            keep = scores >= min_score
            pos, scores = pos[keep], scores[keep]
            bound = float(np.exp(-((radius / sigma) ** 2)))  # no unseen palette scores this much
            enough = pos.size >= k and np.partition(scores, -k)[-k] >= bound
            if enough or radius >= last:
                break
            # the k-th best so far only rises: the radius whose bound it beats is far enough
            kth = float(np.partition(scores, -k)[-k]) if pos.size >= k else 0.0
            radius = min(sigma * float(np.sqrt(np.log(1.0 / kth))) if kth > 0 else radius * 2.0, last)
        order = np.lexsort((self.rows[pos], -scores))[:k]
        return self.rows[pos[order]], scores[order]

    def _near(self, query_lab: np.ndarray, radius: float, k: int, allowed: np.ndarray | None,
              sigma: float, bounds: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Exact scores of the palettes with a colour in the cells near the query that may
        reach the top ``k``. Each palette's colours in those cells give a partial score; its
        other colours lie beyond ``radius`` and add less than their weight times g(radius),
        so a palette whose partial score plus that is below the k-th best partial score is out."""
        import torch

        from vismerch.features.colourspace import ciede2000

        entries = self.entries_near(query_lab, radius, bounds)
        palette = entries // self.lab.shape[1]
        if allowed is not None and entries.size:
            keep = allowed[self.rows[palette]]
            entries, palette = entries[keep], palette[keep]
        if not entries.size:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        delta = ciede2000(torch.from_numpy(self.lab.reshape(-1, 3)[entries]), torch.from_numpy(query_lab))
        weight = self.weight.reshape(-1)[entries]
        pos, inverse = np.unique(palette, return_inverse=True)
        partial = np.bincount(inverse, weight * np.exp(-((delta.numpy() / sigma) ** 2)), minlength=pos.size)
        if pos.size > k:
            unseen = np.maximum(self.weight[pos].sum(1) - np.bincount(inverse, weight, minlength=pos.size), 0)
            upper = partial + unseen * float(np.exp(-((radius / sigma) ** 2)))
            pos = pos[upper >= np.partition(partial, -k)[-k]]
        return pos, colour_scores(self.lab[pos], self.weight[pos], query_lab, sigma=sigma)

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
            return cls(data["rows"], data["lab"], data["weight"], cells, _corner_of(cells),
                       data["starts"], data["order"])
