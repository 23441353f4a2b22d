"""Audit rows written in the same transaction as the write they record.

``audited(fields)`` marks what runs inside it as one audited action: the first
``Store.transaction`` that commits in it calls ``fields()`` and, unless that is None (no
one to name yet, or an action that only reads), inserts one ``audit_log`` row before its
COMMIT, so the row and the write land together or not at all; the row's id is kept in the
dict ``audited`` yields. A context variable carries it (into worker threads too), so the
service functions need no change. The CLI's merchandising commands run in it
(``cli.main``), and so does every write through the HTTP API (``serve/audit.py``, which
fills in the HTTP status before the answer leaves).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

Fields = Callable[[], "dict[str, Any] | None"]  # actor, action, role, target, status, detail
_PENDING: ContextVar[dict[str, Any] | None] = ContextVar("vismerch_audit_pending", default=None)


@contextmanager
def audited(fields: Fields) -> Iterator[dict[str, Any]]:
    """Yields ``{"row_id": None, "closed": False}``: ``row_id`` is the audit row once a write
    inserted it; set ``closed`` to stop further transactions (the caller's own) inserting one."""
    pending: dict[str, Any] = {"fields": fields, "row_id": None, "closed": False}
    token = _PENDING.set(pending)
    try:
        yield pending
    finally:
        _PENDING.reset(token)


def record_pending(con: Any) -> None:
    """Inside a write transaction: insert the audited action's row, once per action."""
    pending = _PENDING.get()
    if pending is None or pending["closed"] or pending["row_id"] is not None:
        return
    row = pending["fields"]()
    if row is None:
        return
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit_log'").fetchone() is None:
        return  # a migration of an old store, before the table exists: the write comes later
    cur = con.execute(
        "INSERT INTO audit_log (at, actor, role, action, target, status, detail)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), row["actor"], row.get("role"), row["action"],
         row.get("target"), row.get("status"),
         json.dumps(row["detail"], default=str) if row.get("detail") else None))
    pending["row_id"] = int(cur.lastrowid)
