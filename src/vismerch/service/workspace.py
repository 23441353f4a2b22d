"""An open store with its settings and caches, shared by every request of a process.

SQLite connections do not cross threads well, so each thread gets its own ``Store`` on
first use (WAL lets them read while an ingest job writes). Feature matrices, FAISS
indexes and neural encoders are cached and keyed by the store's newest shard, so an
ingest that adds features invalidates them without anyone calling ``refresh``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vismerch.catalog.store import DB_NAME, Features, Store
from vismerch.config import Settings, load_settings
from vismerch.errors import StoreError


class Workspace:
    """``Workspace.open(path)``; ``ws.store`` is this thread's connection."""

    def __init__(self, path: Path, settings: Settings, *, writable: bool = True):
        self.path = path
        self.settings = settings
        # False: each connection is read-only until its first write (CLI read commands)
        self.writable = writable
        self._local = threading.local()
        self._stores: list[Store] = []
        self._lock = threading.Lock()
        self._cache: dict[tuple, Any] = {}
        self._search: tuple[Any, Any] | None = None  # (manifest stamp, search bundle)
        self._search_lock = threading.Lock()
        self._text: Any = None
        self.jobs: Any = None  # service.jobs.JobRunner, made on first use

    @classmethod
    def open(cls, path: str | os.PathLike, settings: Settings | None = None, *,
             create: bool = False, writable: bool = True) -> Workspace:
        """Open (and migrate) the store at ``path``; ``create`` makes an empty one.
        ``writable=False`` connects read-only until a command first writes (so reads work
        on a read-only store and never touch it)."""
        path = Path(path)
        if not create and not (path / DB_NAME).exists():
            raise StoreError(f"{path} is not a vismerch store (no {DB_NAME})",
                             hint=f"create one with: vismerch ingest SOURCE --store {path}", exit_code=2)
        ws = cls(path, settings or load_settings(), writable=writable or create)
        ws.store  # noqa: B018 - opens and migrates now, in the caller's thread
        return ws

    @classmethod
    def over(cls, store: Store, settings: Settings | None = None) -> Workspace:
        """A Workspace on the calling thread's already open ``store`` (the caller keeps and
        closes it); other threads open their own connections as usual."""
        ws = cls(store.path, settings or load_settings(), writable=getattr(store, "_writable", True))
        ws._local.store = store
        return ws

    @property
    def store(self) -> Store:
        store = getattr(self._local, "store", None)
        if store is None:
            store = Store.open(self.path, create=self.writable)
            self._local.store = store
            with self._lock:
                self._stores.append(store)
        return store

    def close(self) -> None:
        if self.jobs is not None:
            self.jobs.wait()
        with self._lock:
            for store in self._stores:
                with contextlib.suppress(Exception):  # a finished thread's connection
                    store.close()
            self._stores.clear()
            self._cache.clear()
            self._search = None
        self._local = threading.local()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- caches -----------------------------------------------------------------------
    def generation(self) -> int:
        """Changes whenever an ingest commits a feature shard."""
        row = self.store.db.execute("SELECT COALESCE(MAX(id), 0) FROM shards").fetchone()
        return int(row[0])

    def cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        """``make()`` once per ``key`` and store generation (thread-safe)."""
        full = (*key, self.generation())
        with self._lock:
            if full in self._cache:
                return self._cache[full]
        value = make()
        with self._lock:
            stale = [k for k in self._cache if k[:-1] == key and k != full]
            for k in stale:
                del self._cache[k]
            self._cache[full] = value
        return value

    def features(self, backend: str) -> Features:
        return self.cached(("features", backend), lambda: self.store.load_features(backend))

    def similarity_index(self, backend: str | None = None, whitened: bool = False) -> Any:
        from vismerch.indexes.stored import similarity_index, vector_backend

        name = vector_backend(self.store, backend)
        return self.cached(("index", name, whitened),
                           lambda: similarity_index(self.store, name, self.settings, whitened))

    def search_index(self) -> Any:
        """The store's search bundle (``indexes.catalog``), loaded once per process and again
        only when an ingest saves a new one (its manifest changes); built here, once, for a
        store that has none."""
        from vismerch.indexes import catalog

        with self._search_lock:  # one load or build at a time; requests wait for it
            stamp = catalog.stamp(self.path)
            if self._search is not None and self._search[0] == stamp and stamp is not None:
                return self._search[1]
            if self._search is not None and stamp is None:
                return self._search[1]  # built in memory for a store that cannot keep it
            bundle = catalog.search_index(self.store, self.settings)
            self._search = (catalog.stamp(self.path), bundle)
            return bundle

    def text_encoder(self) -> Any:
        """The offline text encoder that embeds search queries (loaded once)."""
        from vismerch.features.text import TextBackend

        with self._search_lock:
            if self._text is None:
                self._text = TextBackend()
            return self._text

    def encoder(self, fingerprint: str) -> Any:
        from vismerch.features.base import encoder_for

        device = self.settings.device
        return self.cached(("encoder", fingerprint, device),
                           lambda: encoder_for(fingerprint, device=device))
