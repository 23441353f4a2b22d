"""POST /events and the collection analytics: refusals by index and field, idempotence,
hashed visitors, the storefront's version id, and analytics over what was accepted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tests.server.conftest import auth


def _event(i: int, product: str, **over) -> dict:
    base = {"event_id": f"t-{i}", "type": "impression", "ts": datetime.now(UTC).isoformat(),
            "visitor": "shopper-123@example.com", "collection": "all", "position": 1 + i % 8,
            "columns": 4, "product_id": product}
    base.update(over)
    return base


@pytest.fixture(scope="module")
def products(served):
    _, ws, _ = served
    return [p.id for p in ws.store.products()][:8]


def test_a_batch_is_kept_and_a_retry_counts_once(served, products):
    client, ws, keys = served
    batch = {"events": [_event(i, products[i % 8], event_id=f"keep-{i}") for i in range(20)]}
    first = client.post("/api/v1/events", json=batch, headers=auth(keys["storefront"]))
    assert first.status_code == 200, first.text
    assert first.json() == {"accepted": 20, "duplicates": 0, "refused": []}
    again = client.post("/api/v1/events", json=batch, headers=auth(keys["storefront"]))
    assert again.json() == {"accepted": 0, "duplicates": 20, "refused": []}


def test_each_bad_event_is_refused_by_index_and_the_rest_kept(served, products):
    client, ws, keys = served
    future = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    events = [
        _event(100, products[0], event_id="bad-ok-1"),
        _event(101, "no-such-product", event_id="bad-1"),
        _event(102, products[1], event_id="bad-2", ts=future),
        _event(103, products[1], event_id="bad-3", position="first"),
        _event(104, products[1], event_id="bad-4", type="purchase", currency="EUR"),
        _event(105, products[1], event_id="bad-5", type="teleport"),
        "not an object",
        _event(107, products[2], event_id="bad-ok-2", type="purchase", revenue=19.5, currency="EUR",
               quantity=1),
    ]
    r = client.post("/api/v1/events", json={"events": events}, headers=auth(keys["storefront"]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accepted"] == 2
    refused = {(x["index"], x["field"], x["reason"]) for x in body["refused"]}
    assert refused == {(1, "product_id", "unknown-product"), (2, "ts", "future-timestamp"),
                       (3, "position", "wrong-type"), (4, "revenue", "missing"),
                       (5, "type", "unknown-type"), (6, "event", "wrong-type")}


@pytest.mark.parametrize(("body", "status", "field"), [
    (b"{not json", 400, "body"),
    (b'{"events": 3}', 422, "events"),
    (b'[]', 422, "events"),
])
def test_malformed_bodies_get_a_4xx_naming_the_field(served, body, status, field):
    client, _, keys = served
    r = client.post("/api/v1/events", content=body, headers={**auth(keys["storefront"]),
                                                              "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field


def test_an_oversized_batch_is_refused_whole(served, products):
    client, _, keys = served
    events = [_event(i, products[0], event_id=f"big-{i}") for i in range(501)]
    r = client.post("/api/v1/events", json={"events": events}, headers=auth(keys["storefront"]))
    assert r.status_code == 422 and r.json()["error"]["field"] == "events"
    assert "500" in r.json()["error"]["message"]


def test_events_need_a_key(served, products):
    client, _, _ = served
    r = client.post("/api/v1/events", json={"events": [_event(0, products[0])]})
    assert r.status_code == 401


def test_visitor_ids_are_stored_hashed(served, products):
    client, ws, keys = served
    from vismerch.service.events import event_log

    client.post("/api/v1/events", json={"events": [_event(900, products[0], event_id="hash-1")]},
                headers=auth(keys["storefront"]))
    log = event_log(ws)
    log.compact()
    files, inbox = log.snapshot()
    visitors = set(inbox.column("visitor").to_pylist())
    import pyarrow.parquet as pq

    for f in files:
        visitors |= set(pq.read_table(f, columns=["visitor"]).column("visitor").to_pylist())
    assert "shopper-123@example.com" not in visitors
    assert all(len(v) == 32 for v in visitors)
    raw = b"".join(p.read_bytes() for p in log.root.rglob("*") if p.is_file())
    assert b"shopper-123@example.com" not in raw


def test_the_storefront_names_its_version_and_analytics_count_by_it(served, products):
    client, ws, keys = served
    from vismerch.service.collections import create_collection

    create_collection(ws, "tops", where="true")
    admin = auth(keys["admin"])
    saved = client.post("/api/v1/collections/tops/versions", json={"name": "v1"}, headers=admin)
    assert saved.status_code in (200, 201), saved.text
    state = client.get("/api/v1/collections/tops/versions", headers=admin).headers["ETag"]
    pub = client.post("/api/v1/collections/tops/publish", json={"version": "v1"},
                      headers={**admin, "If-Match": state})
    assert pub.status_code == 200, pub.text
    page = client.get("/api/v1/storefront/collections/tops?columns=4&limit=8",
                      headers=auth(keys["storefront"])).json()
    version_id = page["version_id"]
    assert isinstance(version_id, int)
    events = []
    for v in range(30):
        for slot in page["items"]:
            events.append(_event(len(events), slot["id"], event_id=f"sf-{v}-{slot['position']}",
                                 collection="tops", version_id=version_id, position=slot["position"],
                                 visitor=f"visitor-{v}"))
        first = page["items"][v % 3]
        events.append(_event(len(events), first["id"], event_id=f"sf-click-{v}", type="click",
                             collection="tops", version_id=version_id, position=first["position"],
                             visitor=f"visitor-{v}"))
    for k in range(0, len(events), 100):
        r = client.post("/api/v1/events", json={"events": events[k:k + 100]},
                        headers=auth(keys["storefront"]))
        assert r.json()["refused"] == []
    out = client.get("/api/v1/analytics/collections/tops?products=true", headers=auth(keys["viewer"]))
    assert out.status_code == 200, out.text
    data = out.json()
    assert data["totals"]["impressions"] == 30 * len(page["items"])
    assert data["totals"]["clicks"] == 30
    assert data["totals"]["visitors"] == 30
    assert [v["version_id"] for v in data["by_version"]] == [version_id]
    assert data["totals"]["ctr"] == pytest.approx(30 / (30 * len(page["items"])))
    clicked = {p["id"]: p for p in data["products"]}
    assert {page["items"][k]["id"] for k in range(3)} <= {pid for pid, p in clicked.items() if p["clicks"]}
    assert all("attractiveness_corrected" in p and p["ci_low"] <= p["ci_high"] for p in data["products"])


def test_analytics_of_an_unknown_collection_is_404_and_bad_dates_422(served):
    client, _, keys = served
    r = client.get("/api/v1/analytics/collections/nope", headers=auth(keys["viewer"]))
    assert r.status_code == 404
    r = client.get("/api/v1/analytics/collections/all?since=yesterday", headers=auth(keys["viewer"]))
    assert r.status_code == 422 and r.json()["error"]["field"] == "since"
    r = client.get("/api/v1/analytics/collections/all", headers=auth(keys["storefront"]))
    assert r.status_code == 403


def test_products_are_listed_before_the_first_click(served, products):
    client, _, keys = served
    from vismerch.service.collections import create_collection

    _, ws, _ = served
    create_collection(ws, "quiet", where="true")
    events = [_event(i, products[i % 3], event_id=f"quiet-{i}", collection="quiet") for i in range(9)]
    client.post("/api/v1/events", json={"events": events}, headers=auth(keys["storefront"]))
    data = client.get("/api/v1/analytics/collections/quiet?products=true",
                      headers=auth(keys["viewer"])).json()
    assert data["totals"]["clicks"] == 0
    assert {p["id"]: p["impressions"] for p in data["products"]} == {products[k]: 3 for k in range(3)}
    assert all(p["attractiveness_corrected"] is None for p in data["products"])
