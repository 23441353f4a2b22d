"""Events into the log: an API batch (checked one by one, each refusal named) or a whole
file (checked by DuckDB in one pass). Visitor ids are hashed here, with the store's salt,
before anything is written; the raw id is never stored.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from vismerch.events.importers import FORMATS, ImportOptions, _lit
from vismerch.events.log import ID_HASH_SQL, EventLog
from vismerch.events.types import LOG_SCHEMA, MAX_POSITION, Refusal, check_batch


def hash_visitor(salt: str, visitor: str) -> str:
    """The stored form of a visitor id (the same function as the importers' SQL)."""
    return hashlib.sha256((salt + visitor).encode()).hexdigest()[:32]


@dataclass
class BatchResult:
    accepted: int
    duplicates: int
    refused: list[Refusal]

    def as_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates,
                "refused": [r.as_dict() for r in self.refused]}


def take_batch(log: EventLog, events: list[Any], *, salt: str, source: str,
               known_product: Callable[[str], bool], now: datetime | None = None,
               future_slack_s: float = 300.0) -> BatchResult:
    """Check ``events`` and append the good ones; returns once they are on disk."""
    now = now or datetime.now(UTC)
    rows, _, refused = check_batch(events, now=now, future_slack_s=future_slack_s,
                                   known_product=known_product)
    if not rows:
        return BatchResult(0, 0, refused)
    hashed: dict[str, str] = {}  # a page's batch is usually one visitor's
    for row in rows:
        visitor = row["visitor"]
        row["visitor"] = hashed.get(visitor) or hashed.setdefault(visitor, hash_visitor(salt, visitor))
    new = log.append_rows(rows, source)
    added = int(new.sum())
    return BatchResult(added, len(rows) - added, refused)


@dataclass
class ImportReport:
    format: str
    file: str
    lines: int = 0
    events: int = 0
    added: int = 0
    duplicates: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    index_base: int = 1

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


_SKIP = ("other-event",)  # not an error: the export's page views and the like


def import_file(log: EventLog, path: Path, fmt: str, *, salt: str, product_ids: list[str],
                publications: list[tuple[str, str, int]], options: ImportOptions | None = None,
                now: datetime | None = None) -> ImportReport:
    """Read ``path`` as ``fmt``, check every event, append the new ones to ``log``.
    ``publications``: (collection, RFC 3339 time, version id) of every publish and rollback,
    so an event that names no version gets the one live at its time."""
    options = options or ImportOptions()
    now = now or datetime.now(UTC)
    report = ImportReport(fmt, str(path))
    # lines are counted on a thread while DuckDB parses (both release the GIL)
    lines = concurrent.futures.ThreadPoolExecutor(1).submit(_count_lines, path, fmt)
    con = duckdb.connect(":memory:")
    con.execute("SET threads = 2")
    con.execute("SET TimeZone = 'UTC'")  # days are UTC days, as the log's partitions
    con.register("known_arrow", pa.table({"product_id": pa.array(product_ids, pa.string())}))
    con.execute("CREATE TEMP TABLE known AS SELECT * FROM known_arrow")
    pubs = pa.table({"collection": pa.array([p[0] for p in publications], pa.string()),
                     "at": pa.array([p[1] for p in publications], pa.string()),
                     "version_id": pa.array([p[2] for p in publications], pa.int64())})
    con.register("pubs_arrow", pubs)
    con.execute('CREATE TEMP TABLE pubs AS SELECT collection, CAST("at" AS TIMESTAMPTZ) AS "at", '
                "version_id FROM pubs_arrow")
    reader = FORMATS.get(fmt)()
    con.execute(f"CREATE TEMP TABLE src AS {reader.source(path)}")
    report.lines = lines.result()
    (parsed, malformed, other) = con.execute(
        f"SELECT COUNT(*), COUNT(*) FILTER (WHERE {reader.malformed}), "
        f"COUNT(*) FILTER (WHERE {reader.other}) FROM src").fetchone()
    if report.lines - parsed + malformed:
        report.refused["malformed-row"] = report.lines - int(parsed) + int(malformed)
    if other:
        report.skipped["other-event"] = int(other)
    con.execute(f"CREATE TEMP TABLE imp AS {reader.select(options)}")
    report.index_base = _fix_positions(con, options.index_base)
    _mark(con, now + timedelta(seconds=options.future_slack_s))
    for reason, n in con.execute("SELECT reason, COUNT(*) FROM imp WHERE reason IS NOT NULL GROUP BY 1 "
                                 "ORDER BY 1").fetchall():
        bucket = report.skipped if reason in _SKIP else report.refused
        bucket[reason] = bucket.get(reason, 0) + int(n)
    table, hashes = _good_rows(con, salt)
    report.events = table.num_rows
    if table.num_rows:
        new = log.append(table, f"{fmt}:{Path(path).name}", hashes, presorted=True)
        report.added = int(new.sum())
        report.duplicates = table.num_rows - report.added
    return report


def _count_lines(path: Path, fmt: str) -> int:
    with open(path, "rb") as fh:
        n = 0
        last = b"\n"
        while chunk := fh.read(1 << 22):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    n += last != b"\n"
    return max(0, n - 1) if fmt == "csv" else n


def _fix_positions(con: duckdb.DuckDBPyConnection, base: str) -> int:
    """Make list positions 1-based; ``auto`` takes a file with any position 0 as 0-based."""
    if base == "auto":
        (lowest,) = con.execute("SELECT MIN(position) FROM imp WHERE reason IS NULL").fetchone()
        base = "0" if lowest == 0 else "1"
    if base == "0":
        con.execute("UPDATE imp SET position = position + 1 WHERE position IS NOT NULL")
    return int(base)


def _mark(con: duckdb.DuckDBPyConnection, latest: datetime) -> None:
    """Refusals the format's SQL cannot know: products, future times, positions, visitors."""
    con.execute(f"""UPDATE imp SET reason = CASE
        WHEN visitor IS NULL OR visitor = '' THEN 'missing-visitor'
        WHEN position IS NOT NULL AND (position < 1 OR position > {MAX_POSITION}) THEN 'out-of-range'
        WHEN columns IS NOT NULL AND (columns < 1 OR columns > 12) THEN 'out-of-range'
        WHEN ts > ? THEN 'future-timestamp'
        WHEN ts < TIMESTAMPTZ '2000-01-01 00:00:00+00' THEN 'bad-timestamp'
        WHEN product_id NOT IN (SELECT product_id FROM known) THEN 'unknown-product'
        END WHERE reason IS NULL""", [latest])


def _good_rows(con: duckdb.DuckDBPyConnection, salt: str) -> tuple[pa.Table, list[int]]:
    """The good rows in the log's columns (sorted as its segments are) and their id hashes."""
    table = con.sql(f"""
        SELECT {ID_HASH_SQL.replace("event_id", "i.event_id")} AS h, i.event_id, i.type,
               i.ts, sha256({_lit(salt)} || i.visitor)[1:32] AS visitor, i.collection,
               COALESCE(i.version_id, p.version_id) AS version_id, i.position, i.columns, i.product_id,
               i.quantity, i.revenue, i.currency
        FROM (SELECT * FROM imp WHERE reason IS NULL) i
        ASOF LEFT JOIN pubs p ON i.collection = p.collection AND i.ts >= p."at"
        ORDER BY CAST(i.ts AS DATE), i.collection, i.ts
    """).to_arrow_table()
    out = {}
    for f in LOG_SCHEMA:
        if f.name in table.column_names:
            out[f.name] = table.column(f.name).cast(f.type)
    return pa.table(out), table.column("h").to_pylist()
