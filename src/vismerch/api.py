"""The Python API: a thin veneer over ``vismerch.service`` for scripts and notebooks.

Each function takes a store path (or an open ``Store`` or service ``Workspace``) and returns
plain lists of dicts; settings come from ``settings`` or, by default, the environment and
``VISMERCH_CONFIG`` (``vismerch.load_settings()``).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vismerch.catalog.store import Store
from vismerch.config import Settings
from vismerch.errors import UsageError
from vismerch.indexes.stored import similarity_index, vector_backend

__all__ = ["check_k", "colour_search", "search", "similar", "similarity_index", "vector_backend"]


def check_k(k: int) -> int:
    """How many results: at least 1 (an empty answer to -k 0 would look like no match)."""
    if int(k) < 1:
        raise UsageError(f"-k must be at least 1, not {k}", hint="-k 12 asks for the 12 best")
    return int(k)


@contextmanager
def _workspace(store: Store, settings: Settings | None):
    """A Workspace over ``store``: the one given, one sharing an open Store's connection, or
    one opened (read-only until a write) and closed here."""
    from vismerch.service.workspace import Workspace

    if isinstance(store, Workspace):
        yield store
        return
    if isinstance(store, Store):
        yield Workspace.over(store, settings)  # the caller's connection; the caller closes it
        return
    ws = Workspace.open(Path(store), settings, writable=False)
    try:
        yield ws
    finally:
        ws.close()


def _dicts(result: Any) -> list[dict[str, Any]]:
    return [hit.model_dump() for hit in result.hits]


def similar(
    store: Store | str | os.PathLike,
    product_id: str,
    k: int = 12,
    *,
    same_category: bool = False,
    in_stock: bool = False,
    backend: str | None = None,
    mode: str | None = None,
    settings: Settings | None = None,
) -> list[dict[str, Any]]:
    """More like this: the k products most similar to ``product_id`` (``[{id, score}]``),
    by ``mode``: ``"colour"``, ``"style"`` (the kind of product: shape and structure) or
    ``"both"``; the default is ``"style"`` where the store has style vectors."""
    from vismerch.service import search as service

    with _workspace(store, settings) as ws:
        return _dicts(service.similar(ws, product_id, k=check_k(k), same_category=same_category,
                                      in_stock=in_stock, backend=backend, mode=mode))


def colour_search(
    store: Store | str | os.PathLike,
    colour: str,
    k: int = 12,
    *,
    category: str | None = None,
    in_stock: bool = False,
    settings: Settings | None = None,
) -> list[dict[str, Any]]:
    """Products whose foreground is closest to a colour name or ``#hex``."""
    from vismerch.service import search as service

    with _workspace(store, settings) as ws:
        return _dicts(service.colour(ws, colour, k=check_k(k), category=category, in_stock=in_stock))


def search(
    store: Store | str | os.PathLike,
    query: str | None = None,
    *,
    colour: str | None = None,
    category: str | None = None,
    k: int = 12,
    settings: Settings | None = None,
) -> list[dict[str, Any]]:
    """Text search (neural, when the store has text/image-text features) with an optional
    colour constraint, or colour search alone."""
    from vismerch.service import search as service

    with _workspace(store, settings) as ws:
        return _dicts(service.text(ws, query, colour=colour, category=category, k=check_k(k)))
