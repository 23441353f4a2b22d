"""Store-owned SQL for background jobs (ingest): status, progress, outcome.

The row is the record a client polls; the one-writer rule itself is a file lock
(``service.jobs``), which also holds against a CLI ingest in another process.
"""

from __future__ import annotations

import json
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp

JOB_STATES = ("queued", "running", "done", "failed")


def create_job(store: Store, kind: str, params: dict[str, Any], by: str | None) -> int:
    with store.transaction() as con:
        cur = con.execute("INSERT INTO jobs (kind, status, params, created_at, by) "
                          "VALUES (?, 'queued', ?, ?, ?)",
                          (kind, json.dumps(params, default=str, sort_keys=True), utc_timestamp(), by))
    return int(cur.lastrowid)


def update_job(store: Store, job_id: int, **fields: Any) -> None:
    """Set any of status, done, total, started_at, finished_at, summary (JSON-encoded
    here), error."""
    if "summary" in fields and fields["summary"] is not None:
        fields["summary"] = json.dumps(fields["summary"], default=str)
    names = sorted(fields)
    with store.transaction() as con:
        con.execute(f"UPDATE jobs SET {', '.join(n + ' = ?' for n in names)} WHERE id = ?",
                    (*[fields[n] for n in names], job_id))


def start_job(store: Store, job_id: int) -> None:
    update_job(store, job_id, status="running", started_at=utc_timestamp())


def finish_job(store: Store, job_id: int, summary: dict[str, Any] | None, error: str | None) -> None:
    update_job(store, job_id, status="failed" if error else "done", finished_at=utc_timestamp(),
               summary=summary, error=error)


def get_job(store: Store, job_id: int) -> dict[str, Any] | None:
    row = store.db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row is None else _decode(row)


def list_jobs(store: Store, limit: int = 50, before: int | None = None) -> list[dict[str, Any]]:
    """Newest first; with ``before`` only jobs older than that id (the next page)."""
    rows = store.db.execute("SELECT * FROM jobs WHERE id < ? ORDER BY id DESC LIMIT ?",
                            (2**63 - 1 if before is None else int(before), limit)).fetchall()
    return [_decode(r) for r in rows]


def orphaned_jobs(store: Store) -> None:
    """Jobs left queued/running by a process that died: marked failed (called when a
    workspace takes the writer lock, so no live job can be running)."""
    with store.transaction() as con:
        con.execute("UPDATE jobs SET status = 'failed', finished_at = ?, error = ? "
                    "WHERE status IN ('queued', 'running')",
                    (utc_timestamp(), "interrupted: the process running it stopped"))


def _decode(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["params"] = json.loads(out["params"] or "{}")
    out["summary"] = json.loads(out["summary"]) if out.get("summary") else None
    return out


def refused_in_run(store: Store, run_id: int, limit: int = 1000) -> list[dict[str, Any]]:
    """Files an ingest run refused and still stand refused: path, reason, detail."""
    rows = store.db.execute(
        "SELECT product_id, image_path, reason, detail FROM errors WHERE run_id = ? "
        "ORDER BY product_id LIMIT ?", (run_id, limit)).fetchall()
    return [{"product": r[0], "path": r[1], "reason": r[2], "detail": r[3]} for r in rows]
