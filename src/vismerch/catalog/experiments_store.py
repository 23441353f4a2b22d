"""Store-owned SQL of A/B experiments: rows, the running one of a collection, ending one.

At most one experiment per collection runs at a time (a partial unique index), so two
merchandisers starting one at once get exactly one; the loser's insert fails inside its
transaction and is reported as a conflict by the service.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp

RUNNING = "running"


def _decode(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["variants"] = json.loads(out["variants"])
    out["guardrails"] = json.loads(out["guardrails"])
    out["plan"] = json.loads(out["plan"]) if out["plan"] else None
    return out


def insert(store: Store, fields: dict[str, Any]) -> int | None:
    """A new running experiment; None when the collection already has one running."""
    row = {**fields, "variants": json.dumps(fields["variants"]),
           "guardrails": json.dumps(fields["guardrails"]),
           "plan": json.dumps(fields["plan"]) if fields.get("plan") else None,
           "status": RUNNING, "created_at": utc_timestamp()}
    names = ", ".join(row)
    try:
        with store.transaction() as con:
            cur = con.execute(f"INSERT INTO experiments ({names}) VALUES ({', '.join('?' * len(row))})",
                              tuple(row.values()))
    except sqlite3.IntegrityError:
        return None
    return int(cur.lastrowid)


def get(store: Store, experiment_id: int) -> dict[str, Any] | None:
    row = store.db.execute("SELECT * FROM experiments WHERE id = ?", (experiment_id,)).fetchone()
    return None if row is None else _decode(row)


def select(store: Store, collection: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
    sql, args = "SELECT * FROM experiments WHERE 1 = 1", []
    if collection is not None:
        sql, args = sql + " AND collection = ?", [*args, collection]
    if status is not None:
        sql, args = sql + " AND status = ?", [*args, status]
    return [_decode(r) for r in store.db.execute(sql + " ORDER BY id", args)]


def running(store: Store, collection: str) -> dict[str, Any] | None:
    """The collection's running experiment (one indexed read), or None."""
    row = store.db.execute("SELECT * FROM experiments WHERE collection = ? AND status = 'running'",
                           (collection,)).fetchone()
    return None if row is None else _decode(row)


def running_versions(store: Store, collection: str | None = None) -> set[int]:
    """Version ids that running experiments show (they may not be edited or deleted)."""
    sql = "SELECT variants FROM experiments WHERE status = 'running'"
    rows = store.db.execute(sql + (" AND collection = ?" if collection else ""),
                            (collection,) if collection else ()).fetchall()
    return {v["version_id"] for (text,) in rows for v in json.loads(text)}


def end(store: Store, experiment_id: int, status: str, *, by: str | None, winner: str | None = None,
        con: Any = None) -> bool:
    """Mark a running experiment stopped or promoted (inside ``con``'s transaction when given);
    False when it was not running."""
    def run(c: Any) -> bool:
        cur = c.execute("UPDATE experiments SET status = ?, ended_at = ?, ended_by = ?, winner = ? "
                        "WHERE id = ? AND status = 'running'",
                        (status, utc_timestamp(), by, winner, experiment_id))
        return cur.rowcount == 1
    if con is not None:
        return run(con)
    with store.transaction() as c:
        return run(c)
