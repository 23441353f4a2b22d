"""Kill an ingest mid-run for resume tests: wait until it has committed some shards, then
SIGKILL it (the shared step of the local, Ray and URL resume tests)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path


def committed_shards(store: Path) -> int:
    """Shards the store has committed so far (0 while it does not exist or is locked)."""
    db = Path(store) / "store.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as con:
            return int(con.execute("SELECT COUNT(*) FROM shards").fetchone()[0])
    except sqlite3.Error:
        return 0


def kill_after_shards(proc: subprocess.Popen, store: Path, shards: int, timeout: float = 120.0) -> int:
    """SIGKILL ``proc`` once ``store`` holds ``shards`` committed shards; the count seen.
    Raises AssertionError when the run ends first (make its catalog larger) or never gets
    there within ``timeout`` seconds."""
    deadline, seen = time.time() + timeout, 0
    while time.time() < deadline and proc.poll() is None and seen < shards:
        seen = committed_shards(store)
        time.sleep(0.02)
    if proc.poll() is not None:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise AssertionError(f"the run finished before it could be killed; make the catalog larger {err}")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert seen >= shards, f"only {seen} of {shards} shards committed within {timeout:.0f}s"
    return seen
