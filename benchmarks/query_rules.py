"""Benchmark: what search-query merchandising costs.

Questions:
1. How long do matching the query rules, applying them to the hits and expanding synonyms
   take per search, with many rules and synonyms in the store? Target: under 1 ms at
   1,000 rules and 1,000 synonym sets (a text search itself takes tens of ms). Floor: the
   irreducible pass (normalise the query, copy the hit list) in the same run.
2. The same through the service (``service.query_rules.merchandised``, the search itself
   replaced by a fixed hit list) on a store holding the rules and synonyms: the rules are
   read from SQLite only after a write, so a search pays the pure part plus one small query.
   Peer: reading the rules and synonyms from SQLite (what every search paid before caching).
3. How long does the zero-result / low-click report take over a log of search events?
   Peer: a DuckDB COUNT(*) over the same events (reading the same files) in the same run.

Rules and synonyms are synthetic: patterns of one to three words from a 5,000-word
vocabulary, each match kind equally often; one rule in 50 matches the timed query.

    .venv/bin/python benchmarks/query_rules.py [--rules 10,1000,10000] [--events 100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

os.environ.setdefault("OMP_NUM_THREADS", "1")

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from vismerch.events.log import EventLog  # noqa: E402
from vismerch.events.query import Period  # noqa: E402
from vismerch.events.search_report import query_stats  # noqa: E402
from vismerch.events.types import LOG_SCHEMA  # noqa: E402
from vismerch.merch import queryrules as Q  # noqa: E402
from vismerch.merch import synonyms as S  # noqa: E402

QUERY = "red summer dress"
KINDS = ("pin", "hide", "boost", "bury")
MATCHES = ("exact", "prefix", "contains", "glob")


def _rules(n: int, rng: np.random.Generator, words: list[str]) -> list[Q.QueryRule]:
    out = []
    for i in range(n):
        kind, match = KINDS[i % 4], MATCHES[(i // 4) % 4]
        pattern = QUERY if i % 50 == 0 else " ".join(rng.choice(words, int(rng.integers(1, 4))))
        if match == "glob":
            pattern = pattern.replace(" ", " * ", 1)
        out.append(Q.QueryRule(i + 1, kind, pattern, match, (f"p{int(rng.integers(5000))}",),
                               position=int(rng.integers(1, 12)) if kind == "pin" else None,
                               factor=40.0 if kind in ("boost", "bury") else None))
    return out


def _synonyms(n: int, rng: np.random.Generator, words: list[str]) -> list[S.Synonym]:
    return [S.Synonym(i + 1, "equivalent", tuple(dict.fromkeys(rng.choice(words, 3))) + (f"w{i}",))
            for i in range(n)]


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def per_search(n_rules: int, n_synonyms: int, hits_k: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    words = [f"word{i}" for i in range(5000)] + QUERY.split()
    rules, synonyms = _rules(n_rules, rng, words), _synonyms(n_synonyms, rng, words)
    hits = [(f"p{i}", 1.0 - i / hits_k) for i in range(hits_k)]
    now = "2026-06-01T00:00:00Z"

    def merchandise():
        S.expand(QUERY, synonyms)
        Q.apply(hits, Q.matching(QUERY, rules, now), 12)

    def floor():
        Q.normalise(QUERY)
        list(hits)[:12]

    repeat = 50 if n_rules <= 1000 else 10
    ms, floor_ms = _median_ms(merchandise, repeat), _median_ms(floor, repeat)
    return {"rules": n_rules, "synonyms": n_synonyms, "hits": hits_k, "median_ms": round(ms, 4),
            "floor_ms": round(floor_ms, 5), "ratio_to_floor": round(ms / max(floor_ms, 1e-9), 1),
            "matched": len(Q.matching(QUERY, rules, now))}


def service_path(n: int, seed: int = 0) -> dict:
    from vismerch.catalog import query_rules as db
    from vismerch.catalog.store import Store
    from vismerch.config import load_settings
    from vismerch.service import query_rules as service
    from vismerch.service.workspace import Workspace

    rng = np.random.default_rng(seed)
    words = [f"word{i}" for i in range(5000)] + QUERY.split()
    hits = [(f"p{i}", 1.0 - i / 12) for i in range(12)]
    with tempfile.TemporaryDirectory() as tmp:
        Store.open(tmp, create=True).close()
        with Workspace.open(tmp, load_settings()) as ws:
            for r in _rules(n, rng, words):
                db.insert(ws.store, "query_rules", {**r.__dict__, "created_at": "2026-01-01T00:00:00Z"})
            for syn in _synonyms(n, rng, words):
                db.insert(ws.store, "synonyms", {"kind": syn.kind, "synonyms": syn.synonyms, "enabled": True,
                                                 "created_at": "2026-01-01T00:00:00Z"})
            ms = _median_ms(lambda: service.merchandised(ws, QUERY, lambda q, d: hits, 12), 20)
            peer = _median_ms(lambda: (db.select(ws.store, "query_rules", enabled_only=True),
                                       db.select(ws.store, "synonyms", enabled_only=True)), 5)
    return {"rules": n, "synonyms": n, "median_ms": round(ms, 3), "peer_sql_read_ms": round(peer, 2),
            "ratio_to_peer": round(ms / peer, 3)}


def report(n_events: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    queries = [f"query {i}" for i in range(2000)]
    picks = rng.zipf(1.3, n_events) % len(queries)
    now = datetime.now(UTC) - timedelta(minutes=1)
    clicks = rng.random(n_events) < 0.2
    table = pa.table({
        "event_id": [f"e{i}" for i in range(n_events)],
        "type": np.where(clicks, "click", "search").tolist(),
        "ts": [now - timedelta(seconds=int(s)) for s in rng.integers(0, 7 * 86400, n_events)],
        "visitor": [f"v{i % 5000}" for i in range(n_events)],
        "product_id": np.where(clicks, "p1", None).tolist(),
        "query": [queries[i] for i in picks],
        "results": np.where(clicks, None, rng.integers(0, 3, n_events) * 6).tolist(),
    })
    with tempfile.TemporaryDirectory() as tmp:
        log = EventLog(tmp)
        log.append(table.cast(pa.schema([LOG_SCHEMA.field(n) for n in table.column_names])), "bench")
        log.compact()
        period = Period(now - timedelta(days=30), None)
        ms = _median_ms(lambda: query_stats(log, period), 5)
        files, _ = log.snapshot()
        listed = ", ".join(f"'{f}'" for f in files)
        peer = _median_ms(lambda: duckdb.connect().execute(
            f"SELECT COUNT(*) FROM read_parquet([{listed}]) WHERE ts >= ?", [period.since]).fetchone(), 5)
        rows = len(query_stats(log, period))
    return {"events": n_events, "queries": rows, "median_ms": round(ms, 1), "peer_count_ms": round(peer, 1),
            "ratio_to_peer": round(ms / peer, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules", default="10,1000,10000")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = {"per_search": [per_search(n, n, k) for n in map(int, args.rules.split(",")) for k in (12, 200)],
           "service": [service_path(n) for n in map(int, args.rules.split(","))],
           "report": report(args.events)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for row in out["per_search"]:
        print(f"{row['rules']:>6} rules, {row['synonyms']:>6} synonym sets, {row['hits']:>3} hits: "
              f"{row['median_ms']:.3f} ms per search ({row['ratio_to_floor']}x the floor "
              f"{row['floor_ms']:.4f} ms), {row['matched']} rules matched")
    for row in out["service"]:
        print(f"service path, {row['rules']:>6} rules and synonym sets: {row['median_ms']:.3f} ms per search "
              f"(reading them from SQLite: {row['peer_sql_read_ms']} ms)")
    r = out["report"]
    print(f"report over {r['events']:,} events ({r['queries']} queries): {r['median_ms']} ms "
          f"({r['ratio_to_peer']}x a DuckDB COUNT(*) of the same files, {r['peer_count_ms']} ms)")


if __name__ == "__main__":
    main()
