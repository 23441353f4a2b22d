"""A week of simulated storefront traffic on a real collection, for `vismerch demo`.

Three versions of the collection are saved and published in turn (the simulator's orders of
the collection's own products, so position and product effects can be told apart), and the
shopper simulator's impressions, clicks, add-to-carts and purchases are written to the
store's event log as if the storefront had sent them (visitor ids hashed as the API does).
The workbench then has analytics out of the box. Shoppers also search (``simulate_searches``):
queries made of the catalog's common title words, and some for things it does not sell, so
the search report has zero-result and low-click queries to show.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vismerch.events.intake import hash_visitor
from vismerch.merch import collections as colls
from vismerch.service import events, versions
from vismerch.service.workspace import Workspace

VERSION_NAMES = ("week-a", "week-b", "week-c")
SEARCH_MISSES = ("gilet", "swimsuit", "wedding dress", "umbrella", "kids shoes", "raincoat")
SEARCH_PAGE = 12  # results a simulated search shows at most


def simulate_week(ws: Workspace, collection: str, *, visitors: int = 3000, days: int = 7,
                  seed: int = 0) -> dict[str, Any]:
    """Publish three versions of ``collection`` and log ``days`` of simulated traffic on them,
    ending now. Returns what was written (counts, version ids)."""
    from vismerch.sample.shoppers import simulate_shoppers

    members = sorted(colls.members(ws.store, collection))
    ok = {p.id for p in ws.store.products()}
    members = [m for m in members if m in ok]
    start = (datetime.now(UTC) - timedelta(days=days)).date()
    traffic = simulate_shoppers(len(members), visitors=visitors, days=days, n_versions=len(VERSION_NAMES),
                                seed=seed, collection=collection, start=start)
    rng = np.random.default_rng(seed)
    real = np.asarray(members, dtype=object)[rng.permutation(len(members))]  # sim product k -> real[k]
    sim_index = {pid: k for k, pid in enumerate(traffic.truth.product_ids)}
    version_ids = {}
    for version, name in zip(traffic.truth.versions, VERSION_NAMES, strict=True):
        order = [str(real[sim_index[pid]]) for pid in version.order]
        version_ids[version.version_id] = _publish_order(ws, collection, name, order)
    table = _as_storefront_events(ws, traffic.to_table(), real, sim_index, version_ids)
    new = events.event_log(ws).append(table, "demo")
    searched = simulate_searches(ws, searches=visitors // 3, days=days, seed=seed)
    return {"collection": collection, "events": int(new.sum()), "visitors": visitors, "days": days,
            "searches": searched, "versions": {VERSION_NAMES[k - 1]: v for k, v in version_ids.items()}}


def simulate_searches(ws: Workspace, *, searches: int = 1000, days: int = 7, seed: int = 0) -> int:
    """Log ``searches`` simulated searches over ``days`` ending now, and clicks on their results.
    A query's results are the products whose title has all its words (at most a page); the
    popular words' queries are clicked often but every third one seldom (a poor result
    list), and the queries for things not sold find nothing. Returns the events written."""
    from vismerch.events.types import LOG_SCHEMA
    from vismerch.merch.queryrules import normalise

    rng = np.random.default_rng(seed + 101)
    titles = {p.id: normalise(p.title).split() for p in ws.store.products() if p.title}
    common = Counter(w for words in titles.values() for w in set(words) if len(w) > 3 and w.isalpha())
    queries = [w for w, _ in common.most_common(12)] + list(SEARCH_MISSES)
    share = 1.0 / np.arange(1, len(queries) + 1)  # a few queries are most of the searches
    rate = {q: (0.03 if i % 3 == 2 else 0.35) for i, q in enumerate(queries)}
    salt, end = events.visitor_salt(ws), datetime.now(UTC) - timedelta(minutes=1)
    rows: list[dict[str, Any]] = []
    for i, k in enumerate(rng.choice(len(queries), size=searches, p=share / share.sum()).tolist()):
        query, visitor = queries[k], hash_visitor(salt, f"searcher-{i}")
        found = sorted(pid for pid, words in titles.items() if set(query.split()) <= set(words))[:SEARCH_PAGE]
        ts = end - timedelta(seconds=float(rng.uniform(0, days * 86400)))
        rows.append({"event_id": f"demo-search-{seed}-{i}", "type": "search", "ts": ts, "visitor": visitor,
                     "query": query, "results": len(found)})
        if found and rng.random() < rate[query]:
            slot = int(rng.integers(len(found)))
            rows.append({"event_id": f"demo-search-click-{seed}-{i}", "type": "click", "visitor": visitor,
                         "ts": ts + timedelta(seconds=20), "query": query, "product_id": found[slot],
                         "position": slot + 1})
    table = pa.Table.from_pylist(rows, schema=LOG_SCHEMA)
    return int(events.event_log(ws).append(table, "demo").sum())


def _publish_order(ws: Workspace, collection: str, name: str, order: list[str]) -> int:
    versions.save_draft(ws, collection, name)
    versions.edit_draft(ws, collection, name, order, expect=None)
    return versions.publish(ws, collection, name).version_id


def _as_storefront_events(ws: Workspace, table: pa.Table, real: np.ndarray, sim_index: dict[str, int],
                          version_ids: dict[int, int]) -> pa.Table:
    """The simulator's events with the store's product and version ids, visitors hashed and
    times shifted so the newest event is a minute old."""
    products = [str(real[sim_index[p]]) for p in table.column("product_id").to_pylist()]
    vids = [version_ids[int(v)] for v in table.column("version_id").to_pylist()]
    salt = events.visitor_salt(ws)
    cache: dict[str, str] = {}
    visitors = [cache.setdefault(v, hash_visitor(salt, v)) for v in table.column("visitor").to_pylist()]
    ts = table.column("ts")
    shift = datetime.now(UTC) - timedelta(minutes=1) - pc.max(ts).as_py()
    shifted = pc.add(ts, pa.scalar(shift, pa.duration("us")))
    return (table.set_column(table.schema.get_field_index("product_id"), "product_id", pa.array(products))
            .set_column(table.schema.get_field_index("version_id"), "version_id", pa.array(vids, pa.int64()))
            .set_column(table.schema.get_field_index("visitor"), "visitor", pa.array(visitors))
            .set_column(table.schema.get_field_index("ts"), "ts", shifted)
            .set_column(table.schema.get_field_index("event_id"), "event_id",
                        pc.binary_join_element_wise("demo-", table.column("event_id"), "")))
