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
from dataclasses import dataclass
from typing import Any

import numpy as np

from vismerch.errors import UsageError
from vismerch.indexes.palette import COLOUR_SIGMA, colour_scores

__all__ = ["COLOUR_SIGMA", "Palettes", "colour_scores", "reciprocal_rank_fusion", "search_by_colour"]


@dataclass(frozen=True)
class Palettes:
    """Products' palettes, row by row: ``lab`` ``(N, P, 3)`` CIELAB colours and ``weight``
    ``(N, P)`` their foreground shares, of the products ``ids``."""

    ids: Sequence[str]
    lab: Any
    weight: Any


def search_by_colour(palettes: Palettes, query_lab: Any, k: int,
                     allowed_mask: np.ndarray | None = None, *, sigma: float = COLOUR_SIGMA,
                     min_score: float = 1e-3, device: str = "cpu") -> list[tuple[str, float]]:
    """Top ``k`` (id, score) for a query colour, best first (ties by id).

    Products scoring below ``min_score`` (less than 0.1 % of the foreground near the colour)
    are not matches and are left out, so the list may be shorter than k.
    """
    ids = list(palettes.ids)
    if not ids or k <= 0:
        return []
    scores = colour_scores(palettes.lab, palettes.weight, query_lab, sigma=sigma, device=device)
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
