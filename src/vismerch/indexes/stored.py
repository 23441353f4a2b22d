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


def style_backend(store: Store) -> str | None:
    """The backend whose vectors answer "same style": a neural image model's where the store
    has one (learned on far more than ImageNet's classes), else the ``style`` backend's;
    None when the store has neither."""
    from vismerch.features.base import list_backends

    return store.pick_backend(None, (*list_backends(neural=True), "style"))


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


WHITE = ".white"  # the name suffix of a backend's whitened index, beside its own


def wants_whitening(backend: str) -> bool:
    """Whether ``backend``'s vectors are also indexed whitened (``BackendInfo.whiten``)."""
    from vismerch.features.base import BACKENDS, backend_info

    return backend in BACKENDS and backend_info(backend).whiten


def index_vectors(backend: str, vectors: Any, whitened: bool = False) -> np.ndarray:
    """``backend``'s vectors as its index holds them: ``whitened`` (where the backend asks
    for it) in the catalog's whitened space, else as they are."""
    from vismerch.indexes.whiten import whiten

    if whitened and wants_whitening(backend):
        return whiten(vectors)
    return np.asarray(vectors, np.float32)


def _meta(backend: str, fingerprint: str | None, whitened: bool) -> dict[str, Any]:
    from vismerch.indexes import whiten

    meta: dict[str, Any] = {"fingerprint": fingerprint}
    if whitened and wants_whitening(backend):
        meta["whiten"] = whiten.VERSION
    return meta


def _build(backend: str, features: Any, settings: Settings | None, whitened: bool):
    """One backend's index over its ``Features``, whitened or not, its meta saying which."""
    return build_index(index_vectors(backend, features.vectors, whitened), features.ids, settings,
                       meta=_meta(backend, features.fingerprint, whitened))


def backend_indexes(backend: str, features: Any, settings: Settings) -> dict[str, Any]:
    """{index name: VectorIndex} of one backend's ``Features``: its own, and where the
    backend asks for it (``BackendInfo.whiten``) a whitened one named ``backend + WHITE``."""
    out = {backend: _build(backend, features, settings, False)}
    if wants_whitening(backend):
        out[backend + WHITE] = _build(backend, features, settings, True)
    return out


def similarity_index(store: Store, backend: str | None = None, settings: Settings | None = None,
                     whitened: bool = False):
    """The FAISS index that ingest built for ``backend`` (default: ``vector_backend``;
    ``whitened``: its whitened one, where the backend has one), or, when it is missing, older
    than the store's newest features or built another way, one built from them."""
    from vismerch.errors import StoreError

    backend = vector_backend(store, backend)
    whitened = whitened and wants_whitening(backend)
    name = backend + WHITE if whitened else backend
    newest = store.fingerprints(backend)[:1]
    try:
        index = load_index(store.path / "index", name, settings)
    except StoreError:
        index = None
    meta = (index.meta or {}) if index is not None else {}
    want = _meta(backend, None, whitened).get("whiten")
    if index is not None and meta.get("fingerprint") in newest and meta.get("whiten") == want:
        return index
    return _build(backend, store.load_features(backend), settings, whitened)
