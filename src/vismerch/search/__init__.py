"""vismerch.search: vector indexes (``index``) and a store's similarity index (``stored``).

``vismerch.search(store, query, ...)`` is also the Python API's search function: once this
package is imported, Python binds ``vismerch.search`` to it, hiding the lazy export in
``vismerch/__init__.py``; so the package itself is callable and hands the call on.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from vismerch.api import search

        return search(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
