"""Audit rows written in the same transaction as the write they record (CLI commands).

``audited(actor, action, ...)`` marks what runs inside it as one audited command: the first
``Store.transaction`` that commits in it inserts one ``audit_log`` row before its COMMIT, so
the row and the write land together or not at all. A context variable carries it, so it
needs no change to the service functions a command calls. The HTTP API audits in its
middleware instead (``serve/app.py``), where the status is known.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_PENDING: ContextVar[dict[str, Any] | None] = ContextVar("vismerch_audit_pending", default=None)


@contextmanager
def audited(actor: str, action: str, *, role: str | None = None, target: str | None = None,
            detail: dict[str, Any] | None = None) -> Iterator[None]:
    token = _PENDING.set({"actor": actor, "action": action, "role": role, "target": target,
                          "detail": detail, "done": False})
    try:
        yield
    finally:
        _PENDING.reset(token)


def record_pending(con: Any) -> None:
    """Inside a write transaction: insert the audited command's row, once per command."""
    pending = _PENDING.get()
    if pending is None or pending["done"]:
        return
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit_log'").fetchone() is None:
        return  # a migration of an old store, before the table exists: the write comes later
    con.execute("INSERT INTO audit_log (at, actor, role, action, target, status, detail)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), pending["actor"], pending["role"],
                 pending["action"], pending["target"], None,
                 json.dumps(pending["detail"], default=str) if pending["detail"] else None))
    pending["done"] = True
