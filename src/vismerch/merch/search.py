"""Colour search over product palettes, and reciprocal rank fusion of ranked lists.

Colour score of a product for a query colour q (CIELAB)::

    score = sum_j  w_j * exp(-(dE00(p_j, q) / sigma)^2)

over the product's palette colours p_j with foreground weights w_j (summing to 1): the
share of the product's foreground that is close to q. sigma = 10 CIEDE2000 units: a palette
colour within ~3 units (a just-visible difference) counts fully, one 10 units away (a
related but clearly different shade, navy vs royal blue) counts 37 %, 20 units 2 %. So a
product scores ~0.8 when 80 % of it is the query colour, and a small accent in that colour
scores little.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from vismerch.errors import UsageError
from vismerch.features.colourspace import ciede2000

COLOUR_SIGMA = 10.0
_ROWS_PER_CHUNK = 200_000  # products per CIEDE2000 batch (bounds temporary memory)


def colour_scores(palette_lab: Any, palette_weight: Any, query_lab: Any, *,
                  sigma: float = COLOUR_SIGMA, device: str = "cpu") -> np.ndarray:
    """Score (N,) of every product for one query colour; see the module docstring."""
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


def search_by_colour(ids: Sequence[str], palette_lab: Any, palette_weight: Any,
                     query_lab: Any, k: int, allowed_mask: np.ndarray | None = None, *,
                     sigma: float = COLOUR_SIGMA, min_score: float = 1e-3,
                     device: str = "cpu") -> list[tuple[str, float]]:
    """Top ``k`` (id, score) for a query colour, best first (ties by id).

    Products scoring below ``min_score`` (less than 0.1 % of the foreground near the colour)
    are not matches and are left out, so the list may be shorter than k.
    """
    ids = list(ids)
    if not ids or k <= 0:
        return []
    scores = colour_scores(palette_lab, palette_weight, query_lab, sigma=sigma, device=device)
    if scores.shape[0] != len(ids):
        raise UsageError(f"{scores.shape[0]} palettes but {len(ids)} ids")
    keep = scores >= min_score
    if allowed_mask is not None:
        keep &= np.asarray(allowed_mask, dtype=bool)
    rows = np.flatnonzero(keep)
    if rows.size > k:  # only rows scoring at least the k-th best can make the list
        cut = np.partition(scores[rows], -k)[-k]
        rows = rows[scores[rows] >= cut]
    order = sorted(rows.tolist(), key=lambda r: (-scores[r], ids[r]))[:k]
    return [(ids[r], float(scores[r])) for r in order]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[tuple[str, float]]], k: int = 60,
                           weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked lists: score(d) = sum_r weight_r / (k + rank_r(d)), rank from 1.

    Only ranks count (each list's own scores are on incomparable scales). ``k`` = 60 as in
    Cormack, Clarke & Buettcher (2009). An id repeated within one list counts at its best
    rank (later repeats are dropped). Returns every id seen, best first, ties by id.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise UsageError(f"{len(weights)} weights for {len(rankings)} rankings")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[str] = set()
        for item, _score in ranking:
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + weight / (k + len(seen))
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
