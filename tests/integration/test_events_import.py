"""`vismerch events import`: GA4 exports typed as the export types them, UBI and CSV; bad rows
counted by reason; a second import adds nothing; the list index base; versions inferred
from the publication history; visitor ids hashed the same way as the API hashes them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from vismerch.cli import main
from vismerch.config import load_settings
from vismerch.events.intake import hash_visitor
from vismerch.events.query import funnel, open_events
from vismerch.service import events
from vismerch.service.workspace import Workspace
from vismerch.testing.catalog import small_catalog
from vismerch.testing.exports import write_ga4, write_ubi


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    catalog = small_catalog(tmp_path_factory.mktemp("catalog"), n=24, seed=4)
    path = tmp_path_factory.mktemp("store") / "store"
    assert main(["ingest", str(catalog.manifest_path), "--store", str(path), "--workers", "1", "--json"]) == 0
    return path


def _events(products: list[str], n: int, start: datetime) -> list[dict]:
    out = []
    for i in range(n):
        kind = ("impression", "impression", "impression", "click", "add_to_cart", "purchase")[i % 6]
        out.append({"event_id": f"x{i}", "type": kind, "ts": start + timedelta(minutes=i),
                    "visitor": f"visitor-{i % 7}", "collection": "summer", "version_id": None,
                    "position": 1 + i % 12, "columns": 4, "product_id": products[i % len(products)],
                    "quantity": 2 if kind == "purchase" else 1,
                    "revenue": 50.0 if kind == "purchase" else None, "currency": "EUR"})
    return out


def _log_rows(ws) -> list[dict]:
    con = open_events(events.event_log(ws))
    return con.sql("SELECT * FROM events ORDER BY ts").to_arrow_table().to_pylist()


def test_ga4_export_imports_once_with_bad_rows_counted(store, tmp_path, capsys):
    with Workspace.open(store, load_settings()) as ws:
        products = [p.id for p in ws.store.products()]
    start = datetime.now(UTC) - timedelta(days=2)
    rows = _events(products, 60, start)
    path = tmp_path / "events_20261201.json"
    write_ga4(rows, path, index_base=0, page_views_every=20)
    with open(path, "a") as fh:
        fh.write("{this is not json\n")
        bad = json.loads(path.read_text().splitlines()[0])
        bad["items"][0]["item_id"] = "nobody-sells-this"
        fh.write(json.dumps(bad) + "\n")
        bad["event_timestamp"] = str(int((datetime.now(UTC) + timedelta(days=3)).timestamp() * 1e6))
        bad["items"][0]["item_id"] = products[0]
        fh.write(json.dumps(bad) + "\n")
    assert main(["events", "import", str(store), str(path), "--format", "ga4", "--currency", "EUR",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["added"] == 60 and report["duplicates"] == 0
    assert report["refused"] == {"malformed-row": 1, "unknown-product": 1, "future-timestamp": 1}
    assert report["skipped"] == {"other-event": 3}  # the page views
    assert report["index_base"] == 0
    assert main(["events", "import", str(store), str(path), "--format", "ga4", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["added"] == 0 and again["duplicates"] == 60
    with Workspace.open(store, load_settings()) as ws:
        logged = [r for r in _log_rows(ws) if r["event_id"].startswith("ga4:")]
        salt = events.visitor_salt(ws)
    assert len(logged) == 60
    assert sorted({r["position"] for r in logged}) == list(range(1, 13))  # 0-based index -> 1-based
    purchases = [r for r in logged if r["type"] == "purchase"]
    assert purchases and all(r["revenue"] == 50.0 and r["quantity"] == 2 and r["currency"] == "EUR"
                             for r in purchases)
    assert {r["columns"] for r in logged} == {4}
    assert {r["visitor"] for r in logged} == {hash_visitor(salt, f"visitor-{k}") for k in range(7)}


def test_a_one_based_export_keeps_its_positions(store, tmp_path):
    with Workspace.open(store, load_settings()) as ws:
        products = [p.id for p in ws.store.products()]
        rows = _events(products, 12, datetime.now(UTC) - timedelta(hours=5))
        for r in rows:
            r["event_id"] = "one-" + r["event_id"]
            r["visitor"] = "one-based-" + r["visitor"]
        path = tmp_path / "one.json"
        write_ga4(rows, path, index_base=1, page_views_every=0)
        report = events.import_events(ws, path, "ga4")
        assert report.index_base == 1 and report.added == 12
        salt = events.visitor_salt(ws)
        mine = [r for r in _log_rows(ws) if r["visitor"] in {hash_visitor(salt, x["visitor"]) for x in rows}]
    assert sorted(r["position"] for r in mine) == sorted(r["position"] for r in rows)


def test_ubi_and_csv_imports_and_bad_formats(store, tmp_path):
    with Workspace.open(store, load_settings()) as ws:
        products = [p.id for p in ws.store.products()]
        rows = _events(products, 18, datetime.now(UTC) - timedelta(hours=3))
        for r in rows:
            r["event_id"] = "u-" + r["event_id"]
        write_ubi(rows, tmp_path / "ubi.jsonl")
        ubi = events.import_events(ws, tmp_path / "ubi.jsonl", "ubi")
        assert ubi.added == 18 and not ubi.refused
        csv_path = tmp_path / "events.csv"
        csv_path.write_text(
            "event_id,type,ts,visitor,collection,version_id,position,columns,product_id,quantity,revenue,currency\n"
            f"c1,impression,2026-11-30T10:00:00Z,v1,summer,,3,4,{products[0]},,,\n"
            f"c2,purchase,2026-11-30T10:05:00Z,v1,summer,,3,4,{products[0]},1,12.5,EUR\n"
            f"c3,purchase,2026-11-30T10:06:00Z,v1,summer,,3,4,{products[0]},1,,EUR\n"
            f"c4,teleport,2026-11-30T10:07:00Z,v1,summer,,3,4,{products[0]},,,\n"
            f"c5,click,not-a-time,v1,summer,,3,4,{products[0]},,,\n")
        report = events.import_events(ws, csv_path, "csv")
        assert report.added == 2
        assert report.refused == {"missing-revenue": 1, "bad-timestamp": 1}
        assert report.skipped == {"other-event": 1}
        with pytest.raises(Exception, match="unknown event_format 'parquet'"):
            events.import_events(ws, csv_path, "parquet")
        with pytest.raises(Exception, match="not a file"):
            events.import_events(ws, tmp_path / "missing.json", "ga4")


def test_imported_events_get_the_version_live_at_their_time(store, tmp_path):
    from vismerch.service.collections import create_collection
    from vismerch.service.versions import publish, save_draft

    with Workspace.open(store, load_settings()) as ws:
        create_collection(ws, "autumn", where="true")
        save_draft(ws, "autumn", "a1")
        live = publish(ws, "autumn", "a1")
        products = [p.id for p in ws.store.products()]
        rows = _events(products, 6, datetime.now(UTC) - timedelta(minutes=30))
        for k, r in enumerate(rows):
            r["collection"], r["event_id"] = "autumn", "autumn-" + r["event_id"]
            if k % 2:  # after the publication
                r["ts"] = datetime.now(UTC) + timedelta(seconds=k)
        write_ga4(rows, tmp_path / "autumn.json", page_views_every=0)
        report = events.import_events(ws, tmp_path / "autumn.json", "ga4")
        assert report.added == 6
        con = open_events(events.event_log(ws), "autumn")
        by_version = {r["version_id"]: r for r in funnel(con, "version_id")}
    # before the publication nothing was live; after it, its version
    assert set(by_version) == {None, live.version_id}
    assert by_version[live.version_id]["visitors"] == 3
