"""Search events in DuckDB: per query (stored normalised), how often it was searched, how
often it found nothing, and how many clicks its results got.

A ``search`` event carries the query and its result count; a ``click`` that carries a query
is a click on that query's results. Segments written before the log had these columns
read them as null (``union_by_name``).
"""

from __future__ import annotations

from typing import Any

import duckdb

from vismerch.events.log import EventLog
from vismerch.events.query import Period


def _connect(log: EventLog) -> duckdb.DuckDBPyConnection:
    files, inbox = log.snapshot()
    con = duckdb.connect(":memory:")
    con.register("inbox_rows", inbox)
    sql = 'SELECT type, ts, "query", results FROM inbox_rows'
    if files:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        sql = (f"SELECT type, ts, \"query\", results FROM inbox_rows UNION ALL BY NAME "
               f"SELECT * FROM read_parquet([{listed}], union_by_name = true, hive_partitioning = false)")
    con.execute(f"CREATE TEMP VIEW searched AS SELECT type, ts, \"query\", results FROM ({sql}) "
                "WHERE type IN ('search', 'click') AND \"query\" IS NOT NULL")
    return con


def query_stats(log: EventLog, period: Period | None = None) -> list[dict[str, Any]]:
    """One row per query searched in ``period``: searches, zero_results, clicks, click_rate
    (clicks per search that found something; None when none did), avg_results, last_seen."""
    where, args = (period or Period()).where()
    con = _connect(log)
    try:
        cur = con.execute(f"""
            WITH s AS (SELECT "query" AS q, results, ts FROM searched WHERE type = 'search' AND {where}),
                 c AS (SELECT "query" AS q, COUNT(*) AS clicks FROM searched
                       WHERE type = 'click' AND {where} GROUP BY 1)
            SELECT s.q AS query, COUNT(*) AS searches, COUNT(*) FILTER (WHERE s.results = 0) AS zero_results,
                   COALESCE(ANY_VALUE(c.clicks), 0) AS clicks, AVG(s.results) AS avg_results,
                   strftime(MAX(s.ts) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ') AS last_seen
            FROM s LEFT JOIN c ON c.q = s.q GROUP BY s.q ORDER BY s.q
        """, [*args, *args])
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()
    for row in rows:
        found = row["searches"] - row["zero_results"]
        row["click_rate"] = round(row["clicks"] / found, 4) if found else None
        row["avg_results"] = None if row["avg_results"] is None else round(float(row["avg_results"]), 2)
    return rows
