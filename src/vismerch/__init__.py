"""vismerch: GPU-accelerated visual merchandising.

The public Python API is exported lazily so ``import vismerch`` stays light:
``vismerch.Store``, ``vismerch.ingest``, ``vismerch.similar``, ``vismerch.search`` (the functions of
``vismerch.api``; the indexes behind search are the ``vismerch.indexes`` package).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Store": ("vismerch.catalog.store", "Store"),
    "ingest": ("vismerch.pipeline.ingest", "ingest"),
    "load_settings": ("vismerch.config", "load_settings"),
    "similar": ("vismerch.api", "similar"),
    "search": ("vismerch.api", "search"),
    "colour_search": ("vismerch.api", "colour_search"),
    "arrange": ("vismerch.arrange.engine", "arrange"),
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        module, attr = _EXPORTS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'vismerch' has no attribute {name!r}")
