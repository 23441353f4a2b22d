"""Has anything been committed to the store since I last looked?

``ChangeCounter`` holds one read-only connection that never writes; SQLite's
``PRAGMA data_version`` on it changes whenever any other connection (any thread of this
process, an ingest job, another process) commits. Caches of derived results key on it.
Reads commit nothing, so a run of read requests keeps the same value.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class ChangeCounter:
    def __init__(self, db_path: Path):
        self._con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()

    def value(self) -> int:
        with self._lock:
            return int(self._con.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._con.close()


def next_rule_change(store: object, after: str) -> str | None:
    """The first rule start or end later than ``after``: until then no rule's activity
    changes by the clock alone."""
    row = store.db.execute(  # type: ignore[attr-defined]
        "SELECT MIN(t) FROM (SELECT starts_at AS t FROM rules WHERE starts_at > ?"
        " UNION ALL SELECT ends_at FROM rules WHERE ends_at > ?)", (after, after)).fetchone()
    return row[0] if row else None
