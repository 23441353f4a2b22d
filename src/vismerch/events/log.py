"""The shopper event log: append-only, idempotent by event id, columnar by day.

Layout, under ``<store>/events/``:

- ``log.sqlite``: ``seen`` (a 64-bit hash of every event id ever accepted: idempotence),
  ``inbox`` (events accepted but not yet in Parquet) and ``segments`` (the Parquet files
  that count). An API batch is one transaction on it, so an acknowledged event is on disk
  (the WAL) before the answer leaves, and survives a SIGKILL of the server.
- ``day=YYYY-MM-DD/part-<uuid>.parquet``: the columns of ``types.LOG_SCHEMA``, one file per
  compaction or import and day (hive partitioning, readable by any Parquet engine).

``compact`` moves the inbox into Parquet in one transaction (the files are renamed into
place inside it); a file that no committed ``segments`` row names is a crash's leftover
and is deleted under the same write lock. Readers take the segment list and the inbox
in one read transaction, so a concurrent compaction never shows an event twice or not
at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vismerch.events.types import COLUMNS, LOG_SCHEMA

log = logging.getLogger(__name__)
LOG_DIR = "events"
DB_FILE = "log.sqlite"
_INBOX_COLUMNS = ", ".join(f'"{c}"' for c in COLUMNS)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS seen (h INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS inbox (seq INTEGER PRIMARY KEY, {", ".join(f'"{c}"' for c in COLUMNS)});
CREATE TABLE IF NOT EXISTS segments (
    path TEXT PRIMARY KEY, day TEXT NOT NULL, n INTEGER NOT NULL,
    min_ts INTEGER NOT NULL, max_ts INTEGER NOT NULL, source TEXT NOT NULL);
"""
_INSERT = f"INSERT INTO inbox ({_INBOX_COLUMNS}) VALUES ({', '.join('?' * len(COLUMNS))})"
BULK_ROWS = 5_000  # larger appends go straight to a Parquet segment
SORT_ORDER = "UTC day, collection, ts"


def id_hash(event_id: str) -> int:
    """The 64-bit key ``seen`` keeps of an event id (``ID_HASH_SQL`` in DuckDB): two ids share
    one with odds of about n^2 / 2^65 over n events (3 in 10,000 at 10^8), and the later one
    would be taken for a retry."""
    return int(hashlib.md5(event_id.encode()).hexdigest()[:16], 16) - 2**63


ID_HASH_SQL = "(('0x' || md5(event_id)[1:16])::UBIGINT::HUGEINT - 9223372036854775808)::BIGINT"


def _to_micros(ts: Any) -> int:
    return int(ts.timestamp() * 1_000_000) if hasattr(ts, "timestamp") else int(ts)


class EventLog:
    """The log of one store; safe to share between threads (a connection per thread)."""

    def __init__(self, store_path: str | os.PathLike, *, compact_rows: int = 50_000):
        self.root = Path(store_path) / LOG_DIR
        self.compact_rows = compact_rows
        self._local = threading.local()
        self._compacting = threading.Lock()
        self._writing = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[_Pending] = []

    # -- connections --------------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        con = getattr(self._local, "db", None)
        if con is None:
            self.root.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(self.root / DB_FILE, timeout=60, isolation_level=None,
                                  check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a commit survives a process kill
            con.executescript(_SCHEMA)
            _add_new_columns(con)
            self._local.db = con
        return con

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        con = self._db()
        # this process's writers queue here: SQLite's busy handler would make them sleep and poll
        with self._writing:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def close(self) -> None:
        con = getattr(self._local, "db", None)
        if con is not None:
            con.close()
            self._local.db = None

    # -- writing ------------------------------------------------------------------------
    def append(self, table: pa.Table, source: str, hashes: list[int] | None = None,
               presorted: bool = False) -> np.ndarray:
        """Append the rows of ``table`` (``LOG_SCHEMA`` columns, ``source`` filled here) whose
        event id was never seen; a boolean mask of the rows that were new. ``hashes``: the
        rows' ``id_hash`` when the caller has them already; ``presorted``: rows in
        ``SORT_ORDER`` (a Parquet segment is sorted so, so that one collection's query skips
        the other row groups)."""
        table = _conform(table, source)
        if hashes is None:
            hashes = [id_hash(e) for e in table.column("event_id").to_pylist()]
        if table.num_rows < BULK_ROWS:
            return self.append_rows(table.to_pylist(), None, hashes)
        new = self._append_segment(table, hashes, source, presorted)
        if new.any():
            self.maybe_compact()
        return new

    def append_rows(self, rows: list[dict[str, Any]], source: str | None,
                    hashes: list[int] | None = None) -> np.ndarray:
        """``append`` for a small batch of row dicts (an API batch: no Arrow round trip);
        ``source`` None keeps each row's own."""
        if hashes is None:
            hashes = [id_hash(r["event_id"]) for r in rows]
        mine = _Pending(rows, source, hashes)
        with self._queue_lock:
            self._queue.append(mine)
        with self._writing:  # the first thread here commits every batch queued by then
            if not mine.finished.is_set():
                self._commit_queued()
        if mine.error is not None:
            raise mine.error
        if mine.new.any():
            self.maybe_compact()
        return mine.new

    def _commit_queued(self) -> None:
        """Group commit: all queued batches in one transaction (one WAL write for many
        concurrent requests); each batch learns which of its events were new."""
        with self._queue_lock:
            batch, self._queue = self._queue, []
        con = self._db()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                for item in batch:
                    item.new = self._claim(con, item.hashes)
                    con.executemany(_INSERT, [_inbox_row(item.rows[i], item.source)
                                              for i in np.flatnonzero(item.new).tolist()])
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        except BaseException as exc:  # every batch of the failed transaction fails with it
            for item in batch:
                item.error = exc
        for item in batch:
            item.finished.set()

    @staticmethod
    def _claim(con: sqlite3.Connection, hashes: list[int]) -> np.ndarray:
        """Add ``hashes`` to ``seen`` inside ``con``'s transaction; a mask of the rows whose id
        is new (a repeat within the batch counts once, its first occurrence)."""
        h = np.asarray(hashes, np.int64)
        # one JSON array parsed by SQLite, and RETURNING names the ids not seen before
        inserted = con.execute(
            "INSERT INTO seen (h) SELECT DISTINCT value FROM json_each(?) WHERE true ORDER BY value "
            "ON CONFLICT DO NOTHING RETURNING h", (json.dumps(hashes),)).fetchall()
        first = np.zeros(len(h), bool)
        first[np.unique(h, return_index=True)[1]] = True
        return first & np.isin(h, np.fromiter((x for (x,) in inserted), np.int64, len(inserted)))

    def _append_segment(self, table: pa.Table, hashes: list[int], source: str, presorted: bool) -> np.ndarray:
        with self._write() as con:
            new = self._claim(con, hashes)
            if new.any():
                kept = table if new.all() else table.filter(pa.array(new))
                self._write_segments(con, kept, source, presorted)
        return new

    def _write_segments(self, con: sqlite3.Connection, table: pa.Table, source: str,
                        presorted: bool = False) -> None:
        """One Parquet file per day of ``table``, renamed into place inside ``con``'s transaction.
        ``presorted``: the rows are in ``SORT_ORDER`` already."""
        table = table.append_column("_day", pc.strftime(table.column("ts"), format="%Y-%m-%d"))
        if not presorted:
            table = table.sort_by([("_day", "ascending"), ("collection", "ascending"), ("ts", "ascending")])
        days = table.column("_day").to_numpy(zero_copy_only=False)
        table = table.drop_columns(["_day"])
        cuts = [0, *(np.flatnonzero(days[1:] != days[:-1]) + 1).tolist(), len(days)]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            day, part = str(days[lo]), table.slice(lo, hi - lo)
            rel = f"day={day}/part-{uuid.uuid4().hex}.parquet"
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            pq.write_table(part, tmp, compression="zstd", row_group_size=64_000)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            ts = part.column("ts").cast(pa.int64())
            con.execute("INSERT INTO segments (path, day, n, min_ts, max_ts, source) VALUES (?,?,?,?,?,?)",
                        (rel, day, part.num_rows, pc.min(ts).as_py(), pc.max(ts).as_py(), source))

    def maybe_compact(self) -> int:
        """Compact when the inbox holds ``compact_rows`` events (skipped if another thread is at it)."""
        # two index reads (one MIN and MAX in one SELECT would scan the table)
        lo, hi = self._db().execute(
            "SELECT (SELECT MIN(seq) FROM inbox), (SELECT MAX(seq) FROM inbox)").fetchone()
        waiting = 0 if lo is None else hi - lo + 1
        if waiting < self.compact_rows or not self._compacting.acquire(blocking=False):
            return 0
        try:
            return self.compact()
        finally:
            self._compacting.release()

    def compact(self) -> int:
        """Move every inbox event into Parquet and delete leftover files; events moved."""
        with self._write() as con:
            self._remove_orphans(con)
            rows = con.execute(f"SELECT {_INBOX_COLUMNS} FROM inbox ORDER BY seq").fetchall()
            if not rows:
                return 0
            self._write_segments(con, _rows_to_table(rows), "compaction")
            con.execute("DELETE FROM inbox")
        return len(rows)

    def _remove_orphans(self, con: sqlite3.Connection) -> None:
        named = {p for (p,) in con.execute("SELECT path FROM segments")}
        for path in self.root.glob("day=*/*"):
            rel = path.relative_to(self.root).as_posix()
            if rel not in named:
                log.warning("removing %s: no committed segment names it (an interrupted write)", path)
                path.unlink(missing_ok=True)

    # -- reading ------------------------------------------------------------------------
    def snapshot(self) -> tuple[list[str], pa.Table]:
        """The committed segment files and the inbox's events, as of one moment."""
        con = self._db()
        con.execute("BEGIN")
        try:
            files = [str(self.root / p) for (p,) in con.execute("SELECT path FROM segments ORDER BY path")]
            rows = con.execute(f"SELECT {_INBOX_COLUMNS} FROM inbox ORDER BY seq").fetchall()
        finally:
            con.execute("COMMIT")
        return files, _rows_to_table(rows)

    def counts(self) -> dict[str, int]:
        con = self._db()
        (seen,) = con.execute("SELECT COUNT(*) FROM seen").fetchone()
        (inbox,) = con.execute("SELECT COUNT(*) FROM inbox").fetchone()
        (files, stored) = con.execute("SELECT COUNT(*), COALESCE(SUM(n), 0) FROM segments").fetchone()
        return {"events": int(seen), "inbox": int(inbox), "segments": int(files), "in_segments": int(stored)}


def _add_new_columns(con: sqlite3.Connection) -> None:
    """An inbox made before a column joined LOG_SCHEMA gets it (null in its old rows)."""
    have = {row[1] for row in con.execute("PRAGMA table_info(inbox)")}
    for name in COLUMNS:
        if name not in have:
            con.execute(f'ALTER TABLE inbox ADD COLUMN "{name}"')


class _Pending:
    """One API batch waiting for a group commit."""

    def __init__(self, rows: list[dict[str, Any]], source: str | None, hashes: list[int]):
        self.rows, self.source, self.hashes = rows, source, hashes
        self.new = np.zeros(len(rows), bool)
        self.error: BaseException | None = None
        self.finished = threading.Event()


def _inbox_row(row: dict[str, Any], source: str | None) -> tuple:
    return tuple(_to_micros(row["ts"]) if c == "ts" else (source if c == "source" and source else row.get(c))
                 for c in COLUMNS)


def _conform(table: pa.Table, source: str) -> pa.Table:
    """``table`` with exactly LOG_SCHEMA's columns, in order (missing ones null, source set)."""
    n = table.num_rows
    cols = []
    for field in LOG_SCHEMA:
        if field.name == "source":
            cols.append(pa.array([source] * n, pa.string()))
        elif field.name in table.column_names:
            cols.append(table.column(field.name).cast(field.type))
        else:
            cols.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(cols, schema=LOG_SCHEMA)


def _rows_to_table(rows: list[tuple]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in COLUMNS]
    arrays = []
    for field, values in zip(LOG_SCHEMA, columns, strict=True):
        if field.name == "ts":
            arrays.append(pa.array(values, pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=LOG_SCHEMA)
