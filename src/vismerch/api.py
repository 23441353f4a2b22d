"""The Python API over a store: the functions the CLI, the report and the REST API call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from vismerch.catalog.store import Store
from vismerch.errors import UsageError


def check_k(k: int) -> int:
    """How many results: at least 1 (an empty answer to -k 0 would look like no match)."""
    if int(k) < 1:
        raise UsageError(f"-k must be at least 1, not {k}", hint="-k 12 asks for the 12 best")
    return int(k)


def _open(store: Store | str | os.PathLike) -> Store:
    return store if isinstance(store, Store) else Store.open(Path(store))


def _masks(s: Store, ids: list[str], category: str | None, in_stock: bool) -> np.ndarray | None:
    from vismerch.merch.similar import category_mask, in_stock_mask

    if category is None and not in_stock:
        return None
    products = {p.id: p for p in s.products()}
    mask = category_mask([products[i].category for i in ids], category)
    if in_stock:
        mask &= in_stock_mask([products[i].stock for i in ids])
    return mask


def vector_backend(s: Store, prefer: str | None = None) -> str:
    """The backend whose vectors answer "more like this": a neural one when the store has it."""
    from vismerch.merch.layout import VISUAL_BACKENDS

    return s.pick_backend(prefer, VISUAL_BACKENDS) or "colour"


def similarity_index(s: Store, backend: str | None = None):
    """The FAISS index that ingest built for ``backend`` (default: ``vector_backend``), or,
    when it is missing or older than the store's newest features, one built from them."""
    from vismerch.config import load_settings
    from vismerch.errors import StoreError
    from vismerch.search.index import VectorIndex

    backend = vector_backend(s, backend)
    newest = s.fingerprints(backend)[:1]
    try:
        index = VectorIndex.load(s.path / "index", backend, ef_search=load_settings().index_ef_search)
    except StoreError:
        index = None
    if index is not None and (index.meta or {}).get("fingerprint") in newest:
        return index
    features = s.load_features(backend)
    return VectorIndex.build(features.vectors, features.ids, meta={"fingerprint": features.fingerprint})


def similar(
    store: Store | str | os.PathLike,
    product_id: str,
    k: int = 12,
    *,
    same_category: bool = False,
    in_stock: bool = False,
    backend: str | None = None,
) -> list[dict[str, Any]]:
    """More like this: the k products most similar to ``product_id``."""
    from vismerch.merch.similar import similar_items

    k = check_k(k)
    s = _open(store)
    product = s.product(product_id)
    if product is None:
        raise UsageError(f"no product {product_id!r} in {s.path}", hint="list ids with: vismerch tags STORE")
    if product.status != "ok":
        raise UsageError(f"product {product_id!r} has no features (its image was refused)")
    index = similarity_index(s, backend)
    mask = _masks(s, index.ids, product.category if same_category else None, in_stock)
    hits = similar_items(index, None, product_id, k, allowed_mask=mask)
    return [{"id": i, "score": round(float(score), 4)} for i, score in hits]


def colour_search(
    store: Store | str | os.PathLike,
    colour: str,
    k: int = 12,
    *,
    category: str | None = None,
    in_stock: bool = False,
) -> list[dict[str, Any]]:
    """Products whose foreground is closest to a colour name or ``#hex``."""
    from vismerch.features.colour import parse_colour
    from vismerch.merch.search import search_by_colour

    k = check_k(k)
    s = _open(store)
    lab = parse_colour(colour)
    features = s.load_features("colour")
    if not len(features):
        return []
    mask = _masks(s, features.ids, category, in_stock)
    hits = search_by_colour(
        features.ids, features.columns["palette_lab"], features.columns["palette_weight"], lab, k,
        allowed_mask=mask,
    )
    return [{"id": i, "score": round(float(score), 4)} for i, score in hits]


def search(
    store: Store | str | os.PathLike,
    query: str | None = None,
    *,
    colour: str | None = None,
    category: str | None = None,
    k: int = 12,
) -> list[dict[str, Any]]:
    """Text search (neural, when the store has text/image-text features) with an optional
    colour constraint, or colour search alone."""
    k = check_k(k)
    if not query and not colour:
        raise UsageError("give a text query, --colour, or both", hint='vismerch search STORE --colour navy')
    if not query:
        return colour_search(store, colour, k, category=category)
    from vismerch.merch.semantic import semantic_search

    hits = semantic_search(_open(store), query, colour=colour, category=category, k=k)
    return [{"id": i, "score": round(float(score), 4)} for i, score in hits]
