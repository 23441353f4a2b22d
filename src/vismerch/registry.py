"""Named registries (backends, distributors, exporters) fed by code and by entry points.

Built-ins register through the same door as third-party plugins: a ``vismerch.<kind>``
entry-point group is read lazily on the first lookup, never at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from vismerch.errors import UnknownName

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> factory map with a clear error for unknown names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Callable[[], T] | T] = {}
        self._entry_points_loaded = False

    def register(self, name: str, item: Callable[[], T] | T | None = None):
        """Register ``item`` under ``name``; usable as a decorator when ``item`` is omitted."""
        if item is None:
            def deco(obj):
                self._items[name] = obj
                return obj
            return deco
        self._items[name] = item
        return item

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in entry_points(group=f"vismerch.{self.kind}"):
            self._items.setdefault(ep.name, ep)  # loaded on first get()

    def get(self, name: str):
        self._load_entry_points()
        if name not in self._items:
            known = ", ".join(sorted(self._items)) or "none"
            raise UnknownName(
                f"unknown {self.kind[:-1] if self.kind.endswith('s') else self.kind} {name!r}",
                hint=f"choose one of: {known}",
            )
        item = self._items[name]
        if hasattr(item, "load") and hasattr(item, "group"):  # an EntryPoint
            item = item.load()
            self._items[name] = item
        return item

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        self._load_entry_points()
        return name in self._items
