"""``store.sqlite`` as a file: connections (WAL; read-only until a command first writes, or
immutable on a read-only mount), a damaged or foreign file refused before SQLite would
treat it as new, and this process's count of open stores per database file."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from pathlib import Path

from vismerch.errors import StoreError

DB_NAME = "store.sqlite"


def can_write(path: Path) -> bool:
    """False on a read-only mount or a directory this user may not write."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return False
    except OSError:
        return False
    return os.access(path, os.W_OK) and os.access(path / DB_NAME, os.W_OK)


def connect(db_path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    try:
        db.execute("PRAGMA journal_mode=WAL")
    except sqlite3.DatabaseError as exc:
        db.close()
        raise damaged(db_path, exc) from exc
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def connect_read_only(db_path: Path) -> sqlite3.Connection:
    """``mode=ro``; where the WAL's shared-memory file cannot be made (a read-only mount or
    directory) ``immutable=1``, which reads the file as it is."""
    uri = db_path.resolve().as_uri()
    mode = "?mode=ro" if can_write(db_path.parent) else "?immutable=1"
    db = sqlite3.connect(uri + mode, uri=True, timeout=30.0, isolation_level=None,
                         check_same_thread=False)
    db.row_factory = sqlite3.Row
    return db


_HEADER = b"SQLite format 3\x00"


def disk_full(error: BaseException | str) -> bool:
    """Whether ``error`` says the disk is full: an OSError with ENOSPC, sqlite's SQLITE_FULL,
    or (a worker's error, which arrives as text) either one's message."""
    if isinstance(error, str):
        return "No space left on device" in error or "database or disk is full" in error
    if getattr(error, "errno", None) == errno.ENOSPC:
        return True
    if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return True
    return disk_full(str(error))


def damaged(db_path: Path, why: object) -> StoreError:
    return StoreError(
        f"{db_path} is damaged ({why}); nothing was changed",
        hint="restore store.sqlite from a backup, or move the store aside and ingest again "
             "(docs/operating-a-store.md: repair)",
        exit_code=2,
    )


# SQLite's locks are POSIX fcntl locks, which belong to the process and are all dropped
# when the process closes *any* descriptor of the file. Reading the header with open()
# while this process holds connections would therefore silently drop their locks; another
# process (an ingest job) closing its last connection then checkpoints and deletes the WAL
# under them ("disk I/O error"). So the raw header check runs only while this process has
# no connection to the file: one that is open already passed it.
_OPEN_FILES: dict[tuple[int, int], int] = {}
_OPEN_LOCK = threading.Lock()


def _file_key(db_path: Path) -> tuple[int, int]:
    st = db_path.stat()
    return st.st_dev, st.st_ino


def connected(db_path: Path) -> bool:
    with _OPEN_LOCK:
        return _OPEN_FILES.get(_file_key(db_path), 0) > 0


def track(key: Path | tuple[int, int], delta: int) -> tuple[int, int]:
    """Count this process's open Stores per database file; returns the file's key."""
    if isinstance(key, Path):
        key = _file_key(key)
    with _OPEN_LOCK:
        count = _OPEN_FILES.get(key, 0) + delta
        if count > 0:
            _OPEN_FILES[key] = count
        else:
            _OPEN_FILES.pop(key, None)
    return key


def check_database_file(db_path: Path) -> None:
    """Refuse an empty, foreign or truncated store.sqlite before SQLite would treat it as a
    new empty database or fail later with a raw DatabaseError."""
    size = db_path.stat().st_size
    if size == 0:
        raise damaged(db_path, "0 bytes: a new empty database would hide the lost catalog")
    with open(db_path, "rb") as fh:
        header = fh.read(100)
    if len(header) < 100 or not header.startswith(_HEADER):
        raise damaged(db_path, "not an SQLite database")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # SQLite trusts the in-header size only then
    wal = db_path.with_name(db_path.name + "-wal")
    pending = wal.exists() and wal.stat().st_size > 0  # pages not yet checkpointed live there
    if valid and pages and pages * page_size > size and not pending:
        raise damaged(db_path, f"truncated: {size:,} bytes of {pages * page_size:,}")
