""""More like this": nearest products to one product, within caller-built filters.

Filters are boolean masks aligned with ``ids`` (same category, in stock, ...), combined
with ``&`` by the caller; :func:`category_mask` and :func:`in_stock_mask` build the usual
ones. Works over a :class:`~vismerch.indexes.vector.VectorIndex` (large catalogs) or a plain
(N, d) array of L2-normalised vectors (exact, for small sets and tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from vismerch.errors import UsageError
from vismerch.indexes.vector import VectorIndex, top_k


def _norm(text: Any) -> str | None:
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return None
    text = str(text).strip().casefold()
    return text or None


def category_mask(categories: Sequence[Any], value: Any) -> np.ndarray:
    """True where the category equals ``value`` (case- and space-insensitive).

    ``value`` None (the query product has no category) means no filter: all True.
    """
    want = _norm(value)
    if want is None:
        return np.ones(len(categories), dtype=bool)
    return np.fromiter((_norm(c) == want for c in categories), dtype=bool, count=len(categories))


def in_stock_mask(stock: Sequence[Any], *, unknown: bool = True) -> np.ndarray:
    """True where stock > 0. Unknown stock (None/NaN) counts as ``unknown`` (default: in stock,
    since many catalogs carry no stock figures at all)."""
    values = np.array([np.nan if s is None else float(s) for s in stock], dtype=float)
    return np.where(np.isnan(values), unknown, values > 0)


def similar_items(index_or_vectors: VectorIndex | np.ndarray, ids: Sequence[str] | None,
                  query_id: str, k: int, *, allowed_mask: np.ndarray | None = None,
                  exclude_self: bool = True, exclude_ids: Iterable[str] | None = None,
                  ) -> list[tuple[str, float]]:
    """The ``k`` products most like ``query_id`` as (id, cosine), best first.

    ``ids`` names the rows of ``index_or_vectors`` (None: the index's own ids) and is the
    order ``allowed_mask`` follows. Returns ``min(k, allowed candidates)`` items.
    """
    if isinstance(index_or_vectors, VectorIndex):
        index = index_or_vectors
        ids = index.ids if ids is None else list(ids)
    else:
        index = None
        if ids is None:
            raise UsageError("similar_items needs ids when given a vector array")
        ids = list(ids)
    # the index keeps its id -> row map: no rebuild per query when ids are its own
    positions = index.positions if index is not None and ids is index.ids else \
        {v: p for p, v in enumerate(ids)}
    if query_id not in positions:
        raise UsageError(f"unknown product id {query_id!r}",
                         hint="pick an id listed by `vismerch tags` or the report")
    mask = np.ones(len(ids), bool) if allowed_mask is None else np.array(allowed_mask, bool)
    if mask.shape != (len(ids),):
        raise UsageError(f"allowed mask has shape {mask.shape}, expected ({len(ids)},)")
    if exclude_self:
        mask[positions[query_id]] = False
    for other in exclude_ids or ():
        if other in positions:
            mask[positions[other]] = False
    if k <= 0 or not mask.any():
        return []

    if index is None:
        vectors = np.asarray(index_or_vectors, dtype=np.float32)
        if vectors.shape[0] != len(ids):
            raise UsageError(f"{vectors.shape[0]} vectors but {len(ids)} ids")
        rows = np.flatnonzero(mask)
        scores, cols = top_k((vectors[rows] @ vectors[positions[query_id]])[None, :], k)
        return [(ids[rows[c]], float(s)) for s, c in zip(scores[0], cols[0], strict=True)]

    query = index.vectors_at([index.position(query_id)])
    if ids is index.ids or ids == index.ids:
        allowed: np.ndarray | set[str] = mask
    else:  # the mask follows the caller's order: pass the allowed ids instead
        allowed = {ids[p] for p in np.flatnonzero(mask)}
    return index.search(query, k, allowed=allowed)[0]


def fused_similar(parts: Sequence[tuple[VectorIndex, float]], query_id: str, k: int,
                  masks: Sequence[np.ndarray | None], *, depth: int | None = None,
                  ) -> list[tuple[str, float]]:
    """The ``k`` products nearest ``query_id`` in several spaces at once (``parts``: (index,
    weight); ``masks``: each index's allowed rows), as (id, score), best first.

    Candidates are each index's own ``depth`` nearest (default ``max(4k, 50)``); every
    candidate is scored in all of them, each space's cosines standardised over the
    candidates (their spreads differ: colour vectors' cosines span far more than style
    vectors', so raw cosines would let colour decide alone), and the score is the weighted
    sum of those z-scores. A product missing from any index is left out."""
    depth = depth or max(4 * k, 50)
    candidates: dict[str, None] = {}
    for (index, _), mask in zip(parts, masks, strict=True):
        for other, _score in similar_items(index, None, query_id, depth, allowed_mask=mask):
            candidates[other] = None
    names = [c for c in candidates if all(c in index.positions for index, _ in parts)]
    if not names or k <= 0:
        return []
    total = np.zeros(len(names), np.float64)
    for index, weight in parts:
        query = index.vectors_at([index.position(query_id)])[0]
        cosines = (index.vectors_at([index.position(c) for c in names]) @ query).astype(np.float64)
        spread = cosines.std()
        total += weight * ((cosines - cosines.mean()) / spread if spread > 1e-9 else 0.0)
    order = np.argsort(-total, kind="stable")[:k]
    return [(names[i], float(total[i])) for i in order]
