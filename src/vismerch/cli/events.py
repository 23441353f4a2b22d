"""Shopper events and analytics, over ``service.events``:

    vismerch events import STORE FILE --format ga4|ubi|csv [--json]
    vismerch events stats STORE [--json]
    vismerch analytics STORE --collection C [--since --until] [--products] [--json]
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.output import JsonOpt, StoreArg
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import say as _say
from vismerch.cli.output import table as _table

events_app = typer.Typer(help="Shopper events: import exports (GA4, UBI, CSV), log statistics.",
                         no_args_is_help=True)


def _workspace(store: Path):
    from vismerch.cli.context import open_workspace

    return open_workspace(store, {})


@events_app.command("import")
def events_import(
    store: StoreArg,
    file: Annotated[Path, typer.Argument(help="The export (JSON lines for ga4/ubi, CSV with a header).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="ga4 | ubi | csv")] = "ga4",
    currency: Annotated[str, typer.Option(help="Currency of purchases that name none.")] = "USD",
    collection: Annotated[str | None, typer.Option(help="Collection of rows that name none (UBI).")] = None,
    index_base: Annotated[str, typer.Option(
        help="Is the list index 0- or 1-based: auto (0-based when any row has 0), 0 or 1.")] = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Import an export; malformed rows and unknown products are counted by reason, and a
    second import of the same file adds nothing."""
    from vismerch.service import events

    with _workspace(store) as ws:
        report = events.import_events(ws, file, fmt, currency=currency, collection=collection,
                                      index_base=index_base)
    if json_out:
        _print_json(report.as_dict())
        return
    _say(f"{_safe(file)}: {report.lines:,} lines, {report.events:,} events checked, "
         f"{report.added:,} added, {report.duplicates:,} already in the log")
    rows = [[reason, f"{n:,}", "refused"] for reason, n in sorted(report.refused.items())]
    rows += [[reason, f"{n:,}", "skipped"] for reason, n in sorted(report.skipped.items())]
    if rows:
        _table("not imported", ["reason", "rows", ""], rows)


@events_app.command("stats")
def events_stats(store: StoreArg, json_out: JsonOpt = False) -> None:
    """How many events the log holds, in Parquet and waiting in its inbox."""
    from vismerch.service import events

    with _workspace(store) as ws:
        counts = events.event_log(ws).counts()
    if json_out:
        _print_json(counts)
        return
    _table("event log", ["events", "in Parquet", "in inbox", "Parquet files"],
           [[f"{counts['events']:,}", f"{counts['in_segments']:,}", f"{counts['inbox']:,}",
             f"{counts['segments']:,}"]])


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.2f}%"


def analytics_cmd(
    store: StoreArg,
    collection: Annotated[str, typer.Option("--collection", "-c", help="Collection id.")],
    since: Annotated[str | None, typer.Option(help="From this date or RFC 3339 time (inclusive).")] = None,
    until: Annotated[str | None, typer.Option(help="Up to this date or time (exclusive).")] = None,
    products: Annotated[bool, typer.Option("--products", help="Each product's position-corrected "
                                           "attractiveness with its interval.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """A collection's funnel, per version and slot, pin verdicts and (--products) products."""
    from vismerch.service import events

    with _workspace(store) as ws:
        out = events.collection_analytics(ws, collection, since=since, until=until, products=products)
    if json_out:
        _print_json(out)
        return
    t = out["totals"]
    _table(f"{_safe(collection)}: funnel", ["impressions", "clicks", "CTR", "add to carts", "orders",
                                            "revenue", "rev / 1000 imp"],
           [[f"{t['impressions']:,}", f"{t['clicks']:,}", _pct(t["ctr"]), f"{t['add_to_carts']:,}",
             f"{t['orders']:,}", f"{t['revenue']:,.2f}", f"{t['revenue_per_1000_impressions'] or 0:,.2f}"]])
    _table("by version", ["version id", "impressions", "CTR", "orders", "revenue"],
           [[v["version_id"], f"{v['impressions']:,}", _pct(v["ctr"]), f"{v['orders']:,}",
             f"{v['revenue']:,.2f}"] for v in out["by_version"]])
    if out["pins"]:
        _table("pins", ["product", "position", "verdict"],
               [[_safe(p["product_id"]), p["position"], _safe(p["text"])] for p in out["pins"]])
    if products:
        _table("products (position-corrected)", ["product", "impressions", "clicks", "raw CTR",
                                                  "attractiveness", "95% interval"],
               [[_safe(p["id"]), f"{p['impressions']:,}", f"{p['clicks']:,}", _pct(p["raw_ctr"]),
                 _pct(p["attractiveness_corrected"]), f"{_pct(p['ci_low'])} - {_pct(p['ci_high'])}"]
                for p in out["products"][:50]])


def register(app: typer.Typer) -> None:
    app.add_typer(events_app, name="events")
    app.command("analytics")(analytics_cmd)
