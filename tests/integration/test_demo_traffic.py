"""The demo's simulated week (three published versions, the simulator's events in the log)
and behaviour in the business score: what shoppers click ranks first, pins still win."""

from __future__ import annotations

import numpy as np
import pytest

from vismerch.cli import main
from vismerch.config import load_settings
from vismerch.service import arrangements, events, rules
from vismerch.service.collections import create_collection
from vismerch.service.demo_traffic import simulate_week
from vismerch.service.workspace import Workspace
from vismerch.testing.catalog import small_catalog


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    catalog = small_catalog(tmp_path_factory.mktemp("catalog"), n=40, seed=6)
    path = tmp_path_factory.mktemp("store") / "store"
    assert main(["ingest", str(catalog.manifest_path), "--store", str(path), "--workers", "1", "--json"]) == 0
    ws = Workspace.open(path, load_settings())
    create_collection(ws, "everything", where="true")
    written = simulate_week(ws, "everything", visitors=1500, seed=2)
    yield ws, written
    ws.close()


def test_a_week_of_traffic_lands_on_three_published_versions(week):
    ws, written = week
    assert written["events"] > 10_000
    data = events.collection_analytics(ws, "everything", products=True)
    assert sorted(v["version_id"] for v in data["by_version"]) == sorted(written["versions"].values())
    assert 6 <= len(data["by_day"]) <= 8
    assert data["totals"]["clicks"] > 0 and data["totals"]["orders"] > 0 and data["totals"]["revenue"] > 0
    slots = data["slots"]
    assert slots[0]["position"] == 1 and slots[0]["examination"] == pytest.approx(1.0, abs=0.05)
    assert slots[-1]["examination"] < slots[0]["examination"]  # deeper slots are seen less


def test_ctr_in_the_score_ranks_what_shoppers_click_and_pins_still_apply(week):
    ws, _ = week
    members = [p.id for p in ws.store.products()]
    signals = events.behaviour_signals(ws, "everything", members)
    ctr = signals["ctr"]
    assert set(ctr) == set(members)  # cold-start products too, at their category's prior
    plain = arrangements.arrange(ws, "everything", weights="ctr=1", mode="plain", log=False)
    top = plain.ids[:5]
    assert np.mean([ctr[p] for p in top]) > np.mean(list(ctr.values()))
    weakest = min(ctr, key=ctr.get)
    pin = rules.add_rule(ws, "pin", collection="everything", product=weakest, position=1)
    try:
        pinned = arrangements.arrange(ws, "everything", weights="ctr=1", mode="plain", log=False)
        assert pinned.ids[0] == weakest
        verdicts = {p["product_id"]: p for p in events.collection_analytics(ws, "everything")["pins"]}
        assert verdicts[weakest]["verdict"] in ("below", "as_expected", "too_little_data")
    finally:
        rules.delete_rule(ws, pin.id)


def test_the_demo_week_has_searches_for_the_query_report(week):
    from vismerch.service import query_rules

    ws, written = week
    assert written["searches"] > 400  # 500 searches and their clicks
    report = query_rules.report(ws, min_searches=3)
    assert report.searches == 500
    zero = {r.query for r in report.zero_results}
    assert zero and zero <= {"gilet", "swimsuit", "wedding dress", "umbrella", "kids shoes", "raincoat"}
    assert report.low_clicks and all(r.click_rate <= 0.1 for r in report.low_clicks)
