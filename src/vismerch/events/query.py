"""The log's analytical reads, in DuckDB over the Parquet segments and the inbox.

``open_events(log)`` gives a DuckDB connection with one view, ``events``: every event once,
add-to-carts and purchases that came without a collection attributed to the visitor's last
click on that product (an as-of join), so a purchase made from the product page still
counts for the grid that sold it. Everything else here is a query over that view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from vismerch.events.log import EventLog

ATTRIBUTION_DAYS = 7  # a purchase counts for the grid clicked at most this long before
_RAW_COLUMNS = ("event_id, type, ts, visitor, collection, version_id, position, columns, product_id, "
                "quantity, revenue, currency, experiment, variant")


@dataclass(frozen=True)
class Period:
    """A half-open time window; None = unbounded."""

    since: datetime | None = None
    until: datetime | None = None

    def where(self, column: str = "ts") -> tuple[str, list[Any]]:
        parts, args = [], []
        if self.since is not None:
            parts.append(f"{column} >= ?")
            args.append(self.since)
        if self.until is not None:
            parts.append(f"{column} < ?")
            args.append(self.until)
        return (" AND ".join(parts) or "TRUE"), args


def open_events(log: EventLog, collection: str | None = None, period: Period | None = None, *,
                threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose ``events`` table holds the events of ``collection``
    (all collections when None) in ``period``, read from ``log`` once, as of now."""
    period = period or Period()
    files, inbox = log.snapshot()
    con = duckdb.connect(":memory:")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    con.register("inbox_rows", inbox)
    sources = [f"SELECT {_RAW_COLUMNS} FROM inbox_rows"]
    if files:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        sources.append(f"SELECT {_RAW_COLUMNS} FROM read_parquet([{listed}])")
    con.execute(f"CREATE TEMP VIEW raw_events AS {' UNION ALL '.join(sources)}")
    where, args = period.where()
    scope, scope_args = ("collection = ?", [collection]) if collection else ("collection IS NOT NULL", [])
    con.execute(f"CREATE TEMP TABLE lacking AS SELECT * FROM raw_events WHERE collection IS NULL "
                f"AND type IN ('add_to_cart', 'purchase') AND {where}", args)
    con.execute(f"""
        CREATE TEMP TABLE events AS
        SELECT {_RAW_COLUMNS} FROM raw_events WHERE {scope} AND {where}
        UNION ALL
        SELECT * FROM (
            SELECT l.event_id, l.type, l.ts, l.visitor, c.c_collection AS collection, c.c_version,
                   c.c_position, c.c_columns, l.product_id, l.quantity, l.revenue, l.currency,
                   COALESCE(l.experiment, c.c_experiment), COALESCE(l.variant, c.c_variant)
            FROM lacking l ASOF JOIN (
                SELECT visitor, product_id, ts AS click_ts, collection AS c_collection,
                       version_id AS c_version, position AS c_position, columns AS c_columns,
                       experiment AS c_experiment, variant AS c_variant
                FROM raw_events WHERE type = 'click' AND collection IS NOT NULL
                  AND (visitor, product_id) IN (SELECT visitor, product_id FROM lacking)) c
              ON l.visitor = c.visitor AND l.product_id = c.product_id AND l.ts >= c.click_ts
            WHERE l.ts - c.click_ts <= INTERVAL {ATTRIBUTION_DAYS} DAY)
        WHERE {scope}
    """, [*scope_args, *args, *scope_args])
    return con


_FUNNEL = """
    COUNT(*) FILTER (WHERE type = 'impression') AS impressions,
    COUNT(*) FILTER (WHERE type = 'click') AS clicks,
    COALESCE(SUM(quantity) FILTER (WHERE type = 'add_to_cart'), 0) AS add_to_carts,
    COUNT(*) FILTER (WHERE type = 'purchase') AS orders,
    COALESCE(SUM(quantity) FILTER (WHERE type = 'purchase'), 0) AS units,
    COALESCE(SUM(revenue) FILTER (WHERE type = 'purchase'), 0.0) AS revenue,
    COUNT(DISTINCT visitor) AS visitors
"""


_GROUPS = {None: None, "version_id": "version_id", "day": "CAST(ts AS DATE)", "position": "position",
           "product_id": "product_id", "collection": "collection"}


def _rows(con: duckdb.DuckDBPyConnection, sql: str, args: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def funnel(con: duckdb.DuckDBPyConnection, by: str | None = None) -> list[dict[str, Any]]:
    """Impressions .. revenue of the events, grouped ``by`` one of None (one row),
    ``version_id``, ``day``, ``position``, ``product_id``, ``collection``."""
    if by not in _GROUPS:
        raise ValueError(f"cannot group by {by!r}")
    key = _GROUPS[by]
    group = f"{key} AS {by}, " if by else ""
    tail = f"GROUP BY {key} ORDER BY {key}" if by else ""
    return _rows(con, f"SELECT {group}{_FUNNEL} FROM events {tail}", [])


def currencies(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [c for (c,) in con.execute(
        "SELECT DISTINCT currency FROM events WHERE type = 'purchase' AND currency IS NOT NULL ORDER BY 1"
    ).fetchall()]


def click_cells(con: duckdb.DuckDBPyConnection, since: datetime | None = None) -> pa.Table:
    """Impressions and clicks per (product, position, columns): the click model's input
    (only events from ``since`` on when given). A click counts in the cell of the position it
    was made at."""
    return con.sql(f"""
        SELECT product_id, position, COALESCE(columns, 0) AS columns,
               COUNT(*) FILTER (WHERE type = 'impression') AS impressions,
               COUNT(*) FILTER (WHERE type = 'click') AS clicks
        FROM events
        WHERE position IS NOT NULL AND type IN ('impression', 'click') {"AND ts >= ?" if since else ""}
        GROUP BY ALL ORDER BY product_id, position, columns
    """, params=[since] if since else None).to_arrow_table()


def product_outcomes(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """Per product: add-to-carts, orders, units and revenue."""
    return con.sql("""
        SELECT product_id,
               COALESCE(SUM(quantity) FILTER (WHERE type = 'add_to_cart'), 0) AS add_to_carts,
               COUNT(*) FILTER (WHERE type = 'purchase') AS orders,
               COALESCE(SUM(quantity) FILTER (WHERE type = 'purchase'), 0) AS units,
               COALESCE(SUM(revenue) FILTER (WHERE type = 'purchase'), 0.0) AS revenue
        FROM events WHERE type IN ('add_to_cart', 'purchase')
        GROUP BY product_id
    """).to_arrow_table()


def visitor_outcomes(con: duckdb.DuckDBPyConnection, experiment: str | None = None,
                     until: datetime | None = None) -> pa.Table:
    """One row per visitor: impressions, clicks, orders, revenue, first seen, and the variant
    the storefront labelled the events with; only ``experiment``'s events when given, only
    before ``until`` when given (a cumulative view at that time)."""
    where, args = ["TRUE"], []
    if experiment is not None:
        where.append("experiment = ?")
        args.append(experiment)
    if until is not None:
        where.append("ts < ?")
        args.append(until)
    return con.sql(f"""
        SELECT visitor,
               COUNT(*) FILTER (WHERE type = 'impression') AS impressions,
               COUNT(*) FILTER (WHERE type = 'click') AS clicks,
               COUNT(*) FILTER (WHERE type = 'purchase') AS orders,
               COALESCE(SUM(revenue) FILTER (WHERE type = 'purchase'), 0.0) AS revenue,
               MIN(ts) AS first_seen, ANY_VALUE(variant) AS labelled
        FROM events WHERE {" AND ".join(where)} GROUP BY visitor ORDER BY visitor
    """, params=args).to_arrow_table()
