"""The vectors and FAISS index of a store that answer "more like this"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vismerch.config import setting

if TYPE_CHECKING:
    from vismerch.catalog.store import Store
    from vismerch.config import Settings


def vector_backend(store: Store, prefer: str | None = None) -> str:
    """The backend whose vectors answer "more like this": a neural one when the store has it."""
    from vismerch.features.base import list_backends

    return store.pick_backend(prefer, tuple(list_backends(visual=True))) or "colour"


def build_index(vectors: Any, ids: Sequence[str], settings: Settings, meta: dict | None = None):
    """A VectorIndex over ``vectors`` with the index_* settings (exact up to index_exact_max)."""
    from vismerch.indexes.vector import Tuning, VectorIndex

    tuning = Tuning(large=str(setting(settings, "index_large_kind")),
                    hnsw_m=int(setting(settings, "index_hnsw_m")),
                    ef_construction=int(setting(settings, "index_ef_construction")),
                    ef_search=int(setting(settings, "index_ef_search")),
                    nprobe=int(setting(settings, "index_nprobe")))
    return VectorIndex.build(np.asarray(vectors, np.float32), ids,
                             exact_max=int(setting(settings, "index_exact_max")), tuning=tuning, meta=meta)


def load_index(directory: Any, name: str, settings: Settings):
    """``VectorIndex.load`` with the query-breadth settings."""
    from vismerch.indexes.vector import VectorIndex

    return VectorIndex.load(directory, name, ef_search=int(setting(settings, "index_ef_search")),
                            nprobe=int(setting(settings, "index_nprobe")))


def similarity_index(store: Store, backend: str | None = None, settings: Settings | None = None):
    """The FAISS index that ingest built for ``backend`` (default: ``vector_backend``), or,
    when it is missing or older than the store's newest features, one built from them."""
    from vismerch.errors import StoreError

    backend = vector_backend(store, backend)
    newest = store.fingerprints(backend)[:1]
    try:
        index = load_index(store.path / "index", backend, settings)
    except StoreError:
        index = None
    if index is not None and (index.meta or {}).get("fingerprint") in newest:
        return index
    features = store.load_features(backend)
    return build_index(features.vectors, features.ids, settings, meta={"fingerprint": features.fingerprint})
