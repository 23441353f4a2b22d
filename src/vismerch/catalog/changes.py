"""Has anything been committed to the store since I last looked?

``ChangeCounter`` holds one read-only connection that never writes; SQLite's
``PRAGMA data_version`` on it changes whenever any other connection (any thread of this
process, an ingest job, another process) commits. Caches of derived results key on it.
Reads commit nothing, so a run of read requests keeps the same value.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path


class ChangeCounter:
    def __init__(self, db_path: Path):
        self._lock = threading.Lock()
        # a read-only mount cannot change under us: immutable reads it as it is (as Store does)
        mode = "?mode=ro" if os.access(db_path.parent, os.W_OK) else "?immutable=1"
        try:
            self._con: sqlite3.Connection | None = sqlite3.connect(
                db_path.resolve().as_uri() + mode, uri=True, check_same_thread=False)
        except sqlite3.Error:
            self._con = None

    def value(self) -> int | None:
        """The current count; None when it cannot be read (then nothing may be cached)."""
        with self._lock:
            if self._con is None:
                return None
            try:
                return int(self._con.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error:
                return None

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def next_rule_change(store: object, after: str) -> str | None:
    """The first rule start or end later than ``after``: until then no rule's activity
    changes by the clock alone."""
    row = store.db.execute(  # type: ignore[attr-defined]
        "SELECT MIN(t) FROM (SELECT starts_at AS t FROM rules WHERE starts_at > ?"
        " UNION ALL SELECT ends_at FROM rules WHERE ends_at > ?)", (after, after)).fetchone()
    return row[0] if row else None
