"""Shopper events and what they say: take an API batch, import an export file, and the
analytics of one collection (funnel, per version, per day, per slot, per product with
position-corrected attractiveness, pin verdicts).

The log lives in ``<store>/events/`` (``events/log.py``); the store's salt for visitor ids
is kept in the store's ``meta`` table, made on first use.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from vismerch.catalog import collections as colls
from vismerch.catalog import event_meta
from vismerch.config import setting
from vismerch.errors import InvalidInput, NotFound
from vismerch.events import query as q
from vismerch.events.importers import FORMATS, ImportOptions
from vismerch.events.intake import BatchResult, ImportReport, import_file, take_batch
from vismerch.events.log import EventLog
from vismerch.service._util import parse_time
from vismerch.service.workspace import Workspace

TRENDING_DAYS = 7  # "recent" in the trending term


def event_log(ws: Workspace) -> EventLog:
    """The workspace's event log (one per workspace, shared by its threads)."""
    log = ws.__dict__.get("_event_log")
    if log is None:
        log = EventLog(ws.path, compact_rows=int(setting(ws.settings, "events_compact_rows")))
        ws.__dict__["_event_log"] = log
    return log


def visitor_salt(ws: Workspace) -> str:
    return event_meta.visitor_salt(ws.store)


def _product_ids(ws: Workspace) -> frozenset[str]:
    return ws.cached(("event_product_ids",), lambda: frozenset(event_meta.product_ids(ws.store)))


def _known_product(ws: Workspace):
    ids = _product_ids(ws)

    def known(pid: str) -> bool:  # a product added since the cache was made is looked up
        return pid in ids or ws.store.product(pid) is not None
    return known


def take_events(ws: Workspace, events: list[Any], source: str, now: datetime | None = None) -> BatchResult:
    """Check and append one batch (the API's POST /events); each bad event refused by index."""
    limit = int(setting(ws.settings, "events_batch_max"))
    if len(events) > limit:
        raise InvalidInput("events", f"a batch holds at most {limit} events ({len(events)} sent)",
                           hint="split it into several requests")
    return take_batch(event_log(ws), events, salt=visitor_salt(ws), source=source,
                      known_product=_known_product(ws), now=now,
                      future_slack_s=float(setting(ws.settings, "events_future_slack_s")))


def _publications(ws: Workspace) -> list[tuple[str, str, int]]:
    return event_meta.publication_history(ws.store)


def import_events(ws: Workspace, path: Path, fmt: str, *, currency: str = "USD",
                  collection: str | None = None, index_base: str = "auto") -> ImportReport:
    """Import an export file (``ga4``, ``ubi`` or ``csv``); a second import of it adds nothing."""
    FORMATS.get(fmt)  # unknown format: a clear error naming the known ones
    if not Path(path).is_file():
        raise InvalidInput("file", f"{path} is not a file")
    if index_base not in ("auto", "0", "1"):
        raise InvalidInput("index_base", "index base must be auto, 0 or 1")
    options = ImportOptions(currency=currency, collection=collection, index_base=index_base,
                            future_slack_s=float(setting(ws.settings, "events_future_slack_s")))
    return import_file(event_log(ws), Path(path), fmt, salt=visitor_salt(ws),
                       product_ids=sorted(_product_ids(ws)), publications=_publications(ws), options=options)


def _ratio(a: float, b: float) -> float | None:
    return None if not b else a / b


def _with_rates(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
    out["ctr"] = _ratio(row["clicks"], row["impressions"])
    out["conversion"] = _ratio(row["orders"], row["clicks"])
    out["revenue_per_1000_impressions"] = (None if not row["impressions"]
                                           else 1000.0 * row["revenue"] / row["impressions"])
    return out


def fit_collection(con: Any, categories: dict[str, str | None]) -> tuple[Any, list[str]]:
    """The click model of the events in ``con`` (see ``query.open_events``), and product ids by index."""
    from vismerch.events import clickmodel as cm  # scipy: loaded with the first analytics
    cells = q.click_cells(con)
    ids = sorted(set(cells.column("product_id").to_pylist()))
    cat_names = sorted({str(categories.get(p)) for p in ids})
    cat_index = {c: i for i, c in enumerate(cat_names)}
    category = np.array([cat_index[str(categories.get(p))] for p in ids], np.int64)
    counts = _cell_counts(cells, {pid: i for i, pid in enumerate(ids)})
    return cm.fit_click_model(counts, category), ids


def _cell_counts(cells: Any, index: dict[str, int]) -> Any:
    """``query.click_cells`` rows of the products in ``index`` as the click model's counts."""
    from vismerch.events import clickmodel as cm

    pids = cells.column("product_id").to_pylist()
    keep = np.array([p in index for p in pids], bool)
    col = {k: cells.column(k).to_numpy()[keep] for k in ("position", "columns", "impressions", "clicks")}
    return cm.CellCounts.build([index[p] for p in pids if p in index], col["position"], col["columns"],
                               col["impressions"], col["clicks"])


def _business(con: Any, fit: Any, ids: list[str]) -> Any:
    """Corrected add-to-cart, conversion and revenue per impression of ``ids``, from the
    events in ``con`` and the click model ``fit`` of the same events."""
    from vismerch.events import clickmodel as cm

    outcomes = {r["product_id"]: r for r in q.product_outcomes(con).to_pylist()}
    totals = [np.array([outcomes.get(p, {}).get(k, 0) for p in ids], np.float64)
              for k in ("add_to_carts", "orders", "revenue")]
    return cm.business_metrics(fit, *totals), totals


def _period(since: str | None, until: str | None) -> q.Period:
    period = q.Period(parse_time(since, "since"), parse_time(until, "until"))
    if period.since and period.until and period.since >= period.until:
        raise InvalidInput("until", "until must be after since")
    return period


def collection_analytics(ws: Workspace, collection: str, *, since: str | None = None,
                         until: str | None = None, products: bool = False) -> dict[str, Any]:
    """Everything the analytics page shows for one collection in one period."""
    period = _period(since, until)
    con = q.open_events(event_log(ws), collection, period, threads=2)
    totals = q.funnel(con)[0]
    if not totals["impressions"] and not totals["orders"] and not _collection_exists(ws, collection):
        raise NotFound("collection", collection, hint="see GET /api/v1/collections")
    out: dict[str, Any] = {
        "collection": collection, "since": since, "until": until,
        "totals": _with_rates(totals), "currencies": q.currencies(con),
        "by_version": [_with_rates(r) for r in q.funnel(con, "version_id")],
        "by_day": [_with_rates(r) for r in q.funnel(con, "day")],
    }
    catalog = {p.id: p for p in ws.store.products(status=None)}
    titles = {pid: p.title for pid, p in catalog.items()}
    if totals["clicks"]:
        fit, ids = fit_collection(con, {pid: p.category for pid, p in catalog.items()})
        out["slots"] = _slots(fit)
        out["pins"] = _pins(ws, collection, fit, ids)
        if products:
            out["products"] = _products(con, fit, ids, titles)
    else:  # no clicks: nothing to fit; products keep their counts
        out["slots"], out["pins"] = [], []
        if products:
            out["products"] = [{"id": r["product_id"], "title": titles.get(r["product_id"]),
                                "impressions": r["impressions"], "clicks": r["clicks"],
                                "raw_ctr": _ratio(r["clicks"], r["impressions"]),
                                "attractiveness_corrected": None, "ci_low": None, "ci_high": None,
                                "add_to_carts": r["add_to_carts"], "orders": r["orders"],
                                "revenue": r["revenue"]}
                               for r in q.funnel(con, "product_id")]
    return out


def _collection_exists(ws: Workspace, collection: str) -> bool:
    return colls.row(ws.store, collection) is not None


def _slots(fit: Any) -> list[dict[str, Any]]:
    pooled = fit.slots.by_position()
    return [{"position": int(p), "impressions": int(n), "clicks": int(k), "observed_ctr": float(o),
             "expected_ctr": float(e), "examination": float(x)}
            for p, n, k, o, e, x in zip(pooled["position"], pooled["impressions"], pooled["clicks"],
                                        pooled["observed_ctr"], pooled["expected_ctr"], pooled["examination"],
                                        strict=True)]


def _pins(ws: Workspace, collection: str, fit: Any, ids: list[str]) -> list[dict[str, Any]]:
    from vismerch.service.rules import rules_for_collection

    if not _collection_exists(ws, collection):  # a list id from an import, not a collection here
        return []
    index = {pid: i for i, pid in enumerate(ids)}
    out = []
    for rule in rules_for_collection(ws, collection):
        if rule.kind != "pin" or rule.product is None or rule.position is None:
            continue
        if rule.product not in index:
            out.append({"rule": rule.id, "product_id": rule.product, "position": rule.position,
                        "verdict": "too_little_data", "text": "no impressions of this product yet"})
            continue
        v = fit.pin_verdict(index[rule.product], rule.position)
        out.append({"rule": rule.id, "product_id": rule.product, "position": rule.position,
                    "verdict": v.code, "text": v.text, "impressions": v.impressions, "clicks": v.clicks,
                    "expected_clicks": v.expected_clicks,
                    "ratio": None if np.isnan(v.ratio) else v.ratio,
                    "ratio_ci": None if np.isnan(v.ci_low) else [v.ci_low, v.ci_high]})
    return out


def _products(con: Any, fit: Any, ids: list[str], titles: dict[str, str | None]) -> list[dict[str, Any]]:
    biz, (carts, orders, revenue) = _business(con, fit, ids)
    rows = []
    for i, pid in enumerate(ids):
        rec = fit.products.record(i)
        rows.append({"id": pid, "title": titles.get(pid), **rec,
                     "add_to_carts": int(carts[i]), "orders": int(orders[i]), "revenue": float(revenue[i]),
                     **_business_record(biz, i)})
    rows.sort(key=lambda r: -r["attractiveness_corrected"])
    return rows


def _business_record(biz: Any, i: int) -> dict[str, Any]:
    """Per effective (examination-weighted) impression, shrunk toward the category."""
    return {"add_to_cart_rate_corrected": float(biz.add_to_cart_rate[i]),
            "conversion_corrected": float(biz.conversion[i]),
            "revenue_per_impression_corrected": float(biz.revenue_per_impression[i])}


def behaviour_signals(ws: Workspace, collection: str, product_ids: list[str]) -> dict[str, dict[str, float]]:
    """The business score's behaviour signals for ``product_ids`` from the last
    ``events_window_days`` of ``collection``'s events: position-corrected ctr, conversion and
    revenue per impression, and trending (last 7 days against the window). Products with no
    traffic get their category's prior (cold start). Empty when the collection has no clicks."""
    from vismerch.events import clickmodel as cm

    end = datetime.now(UTC)
    window = q.Period(end - timedelta(days=int(setting(ws.settings, "events_window_days"))), end)
    con = q.open_events(event_log(ws), collection, window, threads=2)
    if not q.funnel(con)[0]["clicks"]:
        return {}
    categories = {p.id: p.category for p in ws.store.products(status=None)}
    fit, ids = fit_collection(con, categories)
    index = {pid: i for i, pid in enumerate(ids)}
    biz, _ = _business(con, fit, ids)
    recent = _cell_counts(q.click_cells(con, since=end - timedelta(days=TRENDING_DAYS)), index)
    trend = cm.trend(fit, recent).ratio
    priors = _category_priors(fit, biz, ids, categories)
    out: dict[str, dict[str, float]] = {k: {} for k in ("ctr", "conversion", "revenue_per_impression",
                                                         "trending")}
    for pid in product_ids:
        i = index.get(pid)
        if i is None:  # cold start: the category's prior, no trend
            ctr, conv, rpi = priors.get(str(categories.get(pid)), priors["*"])
            out["ctr"][pid], out["conversion"][pid], out["revenue_per_impression"][pid] = ctr, conv, rpi
            out["trending"][pid] = 1.0
            continue
        out["ctr"][pid] = float(fit.products.attractiveness_corrected[i])
        out["conversion"][pid] = float(biz.conversion[i])
        out["revenue_per_impression"][pid] = float(biz.revenue_per_impression[i])
        out["trending"][pid] = float(trend[i])
    return out


def _category_priors(fit: Any, biz: Any, ids: list[str], categories: dict[str, Any]) -> dict[str, tuple]:
    """Per category (and ``*`` for all): the mean corrected ctr, conversion and revenue per
    impression of its products with traffic, weighted by their effective impressions."""
    eff = fit.products.effective_impressions
    groups: dict[str, list[int]] = {"*": list(range(len(ids)))}
    for i, pid in enumerate(ids):
        groups.setdefault(str(categories.get(pid)), []).append(i)
    rates = (fit.products.attractiveness_corrected, biz.conversion, biz.revenue_per_impression)
    out = {}
    for name, members in groups.items():
        w = eff[members]
        total = float(w.sum()) or 1.0
        out[name] = tuple(float((r[members] * w).sum() / total) for r in rates)
    return out
