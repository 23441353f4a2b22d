"""Search events in the event log: checked (query and results required, no product), the
query stored normalised, and the per-query report read over segments and an inbox made
before the log had the search columns."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from vismerch.events import query as q
from vismerch.events.intake import take_batch
from vismerch.events.log import EventLog
from vismerch.events.search_report import query_stats
from vismerch.events.types import LOG_SCHEMA

NOW = datetime.now(UTC)


def _take(log, events):
    return take_batch(log, events, salt="s", source="api", known_product=lambda p: p == "p1", now=NOW)


def _search(i, query, results, **kw):
    return {"event_id": f"s{i}", "type": "search", "ts": NOW.isoformat(), "visitor": f"v{i}",
            "query": query, "results": results, **kw}


def test_search_events_are_checked_and_normalised(tmp_path):
    log = EventLog(tmp_path)
    result = _take(log, [_search(1, "  Robe ÉTÉ ", 0), _search(2, "x", None), _search(3, "   ", 2),
                         _search(4, "x", -1), _search(5, "x", 1, product_id="nope"),
                         {"event_id": "c", "type": "click", "ts": NOW.isoformat(), "visitor": "v"}])
    assert result.accepted == 1
    assert [(r.index, r.field, r.reason) for r in result.refused] == [
        (1, "results", "missing"), (2, "query", "out-of-range"), (3, "results", "out-of-range"),
        (4, "product_id", "unknown-product"), (5, "product_id", "missing")]
    assert log.snapshot()[1].column("query").to_pylist() == ["robe ete"]


def test_report_reads_old_segments_and_an_old_inbox(tmp_path):
    root = tmp_path / "events"
    root.mkdir()
    old_columns = [f for f in LOG_SCHEMA if f.name not in ("query", "results")]
    with sqlite3.connect(root / "log.sqlite") as con:  # an inbox from before the search columns
        con.execute(f"CREATE TABLE inbox (seq INTEGER PRIMARY KEY, {', '.join(c.name for c in old_columns)})")
        con.execute("INSERT INTO inbox (event_id, type, ts, visitor, collection, product_id, position) "
                    "VALUES ('old-1', 'click', ?, 'v', 'all', 'p1', 1)", (int(NOW.timestamp() * 1e6),))
    log = EventLog(tmp_path, compact_rows=10_000)
    old = pa.table({f.name: pa.array([{"event_id": "old-2", "type": "impression", "ts": NOW, "visitor": "v",
                                       "collection": "all", "product_id": "p1", "position": 1,
                                       "source": "api"}.get(f.name)], f.type) for f in old_columns})
    with log._write() as con:  # a Parquet segment without the new columns
        log._write_segments(con, old, "import")
    _take(log, [_search(1, "Jeans", 4), _search(2, "jeans", 4), _search(3, "gilet", 0),
                {"event_id": "c1", "type": "click", "ts": NOW.isoformat(), "visitor": "v1", "query": "JEANS",
                 "product_id": "p1", "position": 2}])
    rows = {r["query"]: r for r in query_stats(log)}
    jeans = rows["jeans"]
    assert (jeans["searches"], jeans["clicks"], jeans["click_rate"]) == (2, 1, 0.5)
    assert rows["gilet"]["zero_results"] == 1 and rows["gilet"]["click_rate"] is None
    assert query_stats(log, q.Period(since=NOW + timedelta(hours=1))) == []
    log.compact()  # the old inbox row and the new ones in one segment
    assert {r["query"] for r in query_stats(log)} == {"jeans", "gilet"}
    funnel = q.funnel(q.open_events(log, "all"))[0]  # grids' analytics ignore search events
    assert (funnel["impressions"], funnel["clicks"]) == (1, 1)
