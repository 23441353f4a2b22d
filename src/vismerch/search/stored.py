"""The vectors and FAISS index of a store that answer "more like this"."""

from __future__ import annotations

from typing import Any

from vismerch.config import setting


def vector_backend(store: Any, prefer: str | None = None) -> str:
    """The backend whose vectors answer "more like this": a neural one when the store has it."""
    from vismerch.features.base import list_backends

    return store.pick_backend(prefer, tuple(list_backends(visual=True))) or "colour"


def similarity_index(store: Any, backend: str | None = None, settings: Any = None):
    """The FAISS index that ingest built for ``backend`` (default: ``vector_backend``), or,
    when it is missing or older than the store's newest features, one built from them."""
    from vismerch.errors import StoreError
    from vismerch.search.index import VectorIndex

    backend = vector_backend(store, backend)
    newest = store.fingerprints(backend)[:1]
    try:
        index = VectorIndex.load(store.path / "index", backend,
                                 ef_search=int(setting(settings, "index_ef_search")))
    except StoreError:
        index = None
    if index is not None and (index.meta or {}).get("fingerprint") in newest:
        return index
    features = store.load_features(backend)
    return VectorIndex.build(features.vectors, features.ids, meta={"fingerprint": features.fingerprint})
