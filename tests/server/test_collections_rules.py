"""Collections and rules over HTTP: CRUD, scheduled rules that apply only inside their
window, rule reach over sub-collections, the explained preview (a pin is pinned at its
position at every width; pages), and 422 naming the field / 404 / 409."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX

C, R = f"{API_PREFIX}/collections", f"{API_PREFIX}/rules"
BIG = "trousers"  # the largest category of the served sample catalog


def _stamp(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _members(ws, name: str) -> list[str]:
    from vismerch.service.collections import members

    return members(ws, name)


def _preview(client, key, name, **body) -> dict:
    r = client.post(f"{C}/{name}/preview", headers=auth(key), json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _last(client, key, name) -> str:
    """The in-stock product without quality flags a plain preview puts last: pinning or
    boosting it to the top is a visible change (flagged ones stay below the first screen
    unless pinned; out-of-stock ones are buried by default)."""
    page = _preview(client, key, name, columns=[4], mode="plain", limit=1000)
    return [s["id"] for s in page["slots"] if not s["flags"] and not (s["stock"] is not None
                                                                     and s["stock"] <= 0)][-1]


@pytest.fixture
def clean_rules(served):
    """Every test starts and ends without rules (the served store is shared by the module)."""
    from vismerch.service import rules

    client, ws, keys = served
    for rule in rules.list_rules(ws):
        rules.delete_rule(ws, rule.id)
    yield served
    for rule in rules.list_rules(ws):
        rules.delete_rule(ws, rule.id)


def test_collections_crud(served):
    client, ws, keys = served
    m, v = auth(keys["merchandiser"]), auth(keys["viewer"])
    cheap = sorted(p.id for p in ws.store.products() if p.price is not None and p.price < 100)
    assert cheap, "the sample catalog has products under 100"
    r = client.post(C, headers=m, json={"id": "cheap", "where": "price < 100"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["id"], made["kind"], made["where"], made["size"], made["parent"]) == (
        "cheap", "rule", "price < 100", len(cheap), None)
    assert _members(ws, "cheap") == cheap
    listed = {c["id"]: c for c in client.get(C, headers=v).json()["items"]}
    assert listed["cheap"]["size"] == len(cheap) and listed[BIG]["kind"] == "category"
    assert client.get(f"{C}/cheap", headers=v).json() == made
    assert client.post(C, headers=m, json={"id": "cheap", "where": "price < 5"}).status_code == 409
    assert client.post(C, headers=v, json={"id": "nope", "where": "true"}).status_code == 403

    r = client.delete(f"{C}/cheap", headers=m)
    assert r.status_code == 200 and r.json()["id"] == "cheap"
    assert client.get(f"{C}/cheap", headers=v).status_code == 404
    assert client.delete(f"{C}/cheap", headers=m).status_code == 404

    r = client.delete(f"{C}/{BIG}", headers=m)  # categories come from the catalog: 409
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    assert client.get(f"{C}/{BIG}", headers=v).status_code == 200


def test_published_version_shows_on_the_collection(served):
    from vismerch.service import versions

    client, ws, keys = served
    assert client.get(f"{C}/dress", headers=auth(keys["viewer"])).json()["published_version"] is None
    versions.save_order(ws, "dress", "pub-1", _members(ws, "dress"), publish=True)
    assert client.get(f"{C}/dress", headers=auth(keys["viewer"])).json()["published_version"] == "pub-1"


def test_sub_collections_hold_only_their_parents_products(served):
    client, ws, keys = served
    m = auth(keys["merchandiser"])
    parent = _members(ws, BIG)
    prices = sorted(p.price for p in ws.store.products() if p.id in parent)
    mid = prices[len(prices) // 2]
    r = client.post(C, headers=m, json={"id": "sub-cheap", "where": f"price < {mid}", "parent": BIG})
    assert r.status_code == 201, r.text
    sub = _members(ws, "sub-cheap")
    assert sub and set(sub) < set(parent)
    everywhere = {p.id for p in ws.store.products() if p.price < mid}
    assert everywhere - set(parent), "the same where outside the parent matches more"
    r = client.post(C, headers=m, json={"id": "sub-all", "parent": BIG})  # no where: all of it
    assert r.status_code == 201 and _members(ws, "sub-all") == parent
    r = client.delete(f"{C}/sub-all", headers=m)
    assert r.status_code == 200
    r = client.post(C, headers=m, json={"id": "sub-sub", "where": "true", "parent": "sub-cheap"})
    assert r.status_code == 201
    r = client.delete(f"{C}/sub-cheap", headers=m)  # it has a sub-collection: 409
    assert r.status_code == 409 and "sub-sub" in r.json()["error"]["message"]
    assert client.delete(f"{C}/sub-sub", headers=m).status_code == 200
    assert client.delete(f"{C}/sub-cheap", headers=m).status_code == 200


def test_rules_crud(clean_rules):
    client, ws, keys = clean_rules
    m, v = auth(keys["merchandiser"]), auth(keys["viewer"])
    pid = _members(ws, BIG)[0]
    r = client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": pid,
                                        "position": 2, "note": "hero"})
    assert r.status_code == 201, r.text
    pin = r.json()
    assert (pin["kind"], pin["collection"], pin["product"], pin["position"], pin["reach"],
            pin["active"], pin["starts_at"], pin["ends_at"]) == (
        "pin", BIG, pid, 2, "collection", True, None, None)
    r = client.post(R, headers=m, json={"kind": "boost", "where": 'colour == "red"', "factor": 20})
    assert r.status_code == 201
    boost = r.json()
    assert boost["collection"] is None and boost["where"] == 'colour == "red"' and boost["factor"] == 20

    assert [x["id"] for x in client.get(R, headers=v).json()["items"]] == [pin["id"], boost["id"]]
    scoped = client.get(R, params={"collection": BIG}, headers=v).json()["items"]
    assert [x["id"] for x in scoped] == [pin["id"]]
    assert client.get(f"{R}/{pin['id']}", headers=v).json()["note"] == "hero"

    r = client.patch(f"{R}/{pin['id']}", headers=m, json={"position": 5, "note": None})
    assert r.status_code == 200, r.text
    assert (r.json()["position"], r.json()["note"], r.json()["product"]) == (5, None, pid)
    assert client.get(f"{R}/{pin['id']}", headers=v).json()["position"] == 5
    r = client.patch(f"{R}/{pin['id']}", headers=m, json={"enabled": False})
    assert r.json()["enabled"] is False and r.json()["active"] is False
    assert client.patch(f"{R}/{pin['id']}", headers=v, json={"position": 1}).status_code == 403

    r = client.delete(f"{R}/{pin['id']}", headers=m)
    assert r.status_code == 200
    assert [x["id"] for x in client.get(R, headers=v).json()["items"]] == [boost["id"]]
    for method in ("get", "patch", "delete"):
        r = client.request(method, f"{R}/{pin['id']}", headers=m, json={"position": 1})
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", method


@pytest.mark.parametrize("window, applies", [
    ((-2, -1), False),   # ended yesterday
    ((1, 2), False),     # starts tomorrow
    ((-1, 1), True),     # running now
    ((-1, None), True),  # started, never ends
    ((None, 1), True),   # always, until tomorrow
])
def test_a_scheduled_pin_applies_only_inside_its_window(clean_rules, window, applies):
    client, ws, keys = clean_rules
    m, v = auth(keys["merchandiser"]), auth(keys["viewer"])
    last = _last(client, keys["viewer"], BIG)
    starts, ends = (None if d is None else _stamp(d) for d in window)
    r = client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": last,
                                        "position": 1, "starts_at": starts, "ends_at": ends,
                                        "oos_policy": "keep"})
    assert r.status_code == 201, r.text
    rule = r.json()
    assert rule["active"] is applies and (rule["starts_at"], rule["ends_at"]) == (starts, ends)
    page = _preview(client, keys["viewer"], BIG, columns=[2, 3, 4, 5])
    top = page["slots"][0]
    assert (top["id"] == last and top["pinned"]) is applies
    assert (rule["id"] in page["rules"]) is applies
    active = [x["id"] for x in client.get(R, params={"active": "true"}, headers=v).json()["items"]]
    inactive = [x["id"] for x in client.get(R, params={"active": "false"}, headers=v).json()["items"]]
    assert (rule["id"] in active, rule["id"] in inactive) == (applies, not applies)


def test_a_scheduled_boost_and_dates_as_plain_days(clean_rules):
    client, ws, keys = clean_rules
    m = auth(keys["merchandiser"])
    last = _last(client, keys["viewer"], BIG)
    later = (datetime.now(UTC) + timedelta(days=3)).date().isoformat()
    r = client.post(R, headers=m, json={"kind": "boost", "collection": BIG, "where": f'id == "{last}"',
                                        "factor": 100, "starts_at": later})
    assert r.status_code == 201 and r.json()["starts_at"] == f"{later}T00:00:00Z"
    assert _preview(client, keys["viewer"], BIG, columns=[4])["slots"][0]["id"] != last
    r = client.patch(f"{R}/{r.json()['id']}", headers=m, json={"starts_at": None})
    assert r.json()["active"] is True
    top = _preview(client, keys["viewer"], BIG, columns=[4])["slots"][0]
    assert top["id"] == last and top["score"]["parts"]["rules"] > 0


def test_reach_subtree_reaches_sub_collections_and_reach_collection_does_not(clean_rules):
    client, ws, keys = clean_rules
    m, v = auth(keys["merchandiser"]), auth(keys["viewer"])
    assert client.post(C, headers=m, json={"id": "reach-child", "parent": BIG}).status_code == 201
    try:
        last = _last(client, keys["viewer"], "reach-child")
        r = client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": last,
                                            "position": 1, "reach": "subtree", "oos_policy": "keep"})
        assert r.status_code == 201, r.text
        rule = r.json()
        child = _preview(client, keys["viewer"], "reach-child", columns=[3, 4])
        assert child["slots"][0]["id"] == last and child["slots"][0]["pinned"]
        assert rule["id"] in child["rules"]
        seen = client.get(f"{C}/reach-child/rules", headers=v).json()["items"]
        assert [(x["id"], x["inherited_from"], x["active"]) for x in seen] == [(rule["id"], BIG, True)]

        r = client.patch(f"{R}/{rule['id']}", headers=m, json={"reach": "collection"})
        assert r.status_code == 200 and r.json()["reach"] == "collection"
        child = _preview(client, keys["viewer"], "reach-child", columns=[3, 4])
        assert child["slots"][0]["id"] != last and rule["id"] not in child["rules"]
        assert client.get(f"{C}/reach-child/rules", headers=v).json()["items"] == []
        parent = _preview(client, keys["viewer"], BIG, columns=[3, 4])  # still on its own page
        assert parent["slots"][0]["id"] == last
        assert [x["id"] for x in client.get(f"{C}/{BIG}/rules", headers=v).json()["items"]] == [rule["id"]]
    finally:
        for rule in client.get(R, headers=v).json()["items"]:
            client.delete(f"{R}/{rule['id']}", headers=m)
        client.delete(f"{C}/reach-child", headers=m)


def test_preview_shows_a_pin_pinned_at_its_position_at_every_width_and_pages(clean_rules):
    client, ws, keys = clean_rules
    m, v = auth(keys["merchandiser"]), keys["viewer"]
    last = _last(client, v, BIG)
    rule = client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": last,
                                           "position": 3, "oos_policy": "keep"}).json()
    widths = [2, 3, 4, 5]
    page = _preview(client, v, BIG, columns=widths, mode="mix")
    assert page["columns"] == widths and page["total"] == len(_members(ws, BIG))
    assert [s["position"] for s in page["slots"]] == list(range(1, page["total"] + 1))
    slot = page["slots"][2]
    assert (slot["id"], slot["pinned"], slot["kind"]) == (last, True, "pinned")
    assert slot["reasons"][0] == f"pinned to position 3 by rule #{rule['id']}"
    assert sum(s["pinned"] for s in page["slots"]) == 1
    assert page["rules"] == [rule["id"]] and 0 < page["business_share"] <= 1.5
    for c in widths:  # the same slot when arranged for each width alone, in every mode
        for mode in ("mix", "flow", "plain"):
            one = _preview(client, v, BIG, columns=[c], mode=mode)
            assert one["slots"][2]["id"] == last and one["slots"][2]["pinned"], (c, mode)
    for s in page["slots"]:
        assert s["reasons"] and set(s["lookalike_at"]) <= set(widths)
        assert {"sales", "stock", "rules"} <= set(s["score"]["parts"])
        assert s["thumbnail_url"] is None or s["thumbnail_url"].endswith(f"/products/{s['id']}/thumbnail")
    # pages are slices of the same arrangement
    part = _preview(client, v, BIG, columns=widths, offset=2, limit=3)
    assert [s["id"] for s in part["slots"]] == [s["id"] for s in page["slots"][2:5]]
    assert (part["offset"], part["limit"], part["total"]) == (2, 3, page["total"])
    assert _preview(client, v, BIG, columns=widths, offset=10_000)["slots"] == []
    thumb = client.get(page["slots"][0]["thumbnail_url"], headers=auth(v))
    assert thumb.status_code == 200


def test_preview_marks_look_alike_neighbours_at_the_widths_where_they_meet(clean_rules):
    """The most alike pair of the catalog and a product unlike both, pinned in two orders:
    ``lookalike_at`` lists exactly the widths at which the pair are neighbours."""
    from vismerch.arrange.layout import collection_vectors

    client, ws, keys = clean_rules
    m = auth(keys["merchandiser"])
    ids = sorted(p.id for p in ws.store.products())
    vec = collection_vectors(ws.store, ids, ws.store.pick_backend(None, ("colour",)))
    sims = vec @ vec.T
    np.fill_diagonal(sims, -1)
    a, b = divmod(int(sims.argmax()), len(ids))
    z = int(np.argmin(np.maximum(sims[a], sims[b]) + 9 * (np.arange(len(ids)) == a)))
    tau = float(ws.settings.arrange_lookalike_cosine)
    assert sims[a, b] >= tau > max(sims[a, z], sims[b, z])
    trio = [ids[a], ids[b], ids[z]]
    where = "id in [" + ", ".join(f'"{i}"' for i in trio) + "]"
    assert client.post(C, headers=m, json={"id": "alike", "where": where}).status_code == 201
    try:
        rules = [client.post(R, headers=m, json={"kind": "pin", "collection": "alike", "product": pid,
                                                 "position": pos, "oos_policy": "keep"}).json()["id"]
                 for pid, pos in zip(trio, (1, 2, 3), strict=True)]
        page = _preview(client, keys["viewer"], "alike", columns=[1, 2, 3])
        assert [s["id"] for s in page["slots"]] == trio  # a b z
        assert [s["lookalike_at"] for s in page["slots"]] == [[1, 2, 3], [1, 2, 3], []]
        client.patch(f"{R}/{rules[1]}", headers=m, json={"position": 3})
        client.patch(f"{R}/{rules[2]}", headers=m, json={"position": 2})
        page = _preview(client, keys["viewer"], "alike", columns=[1, 2, 3])
        assert [s["id"] for s in page["slots"]] == [trio[0], trio[2], trio[1]]  # a z b
        assert [s["lookalike_at"] for s in page["slots"]] == [[2], [], [2]]  # one above the other
    finally:
        client.delete(f"{C}/alike", headers=m)


@pytest.mark.parametrize("body, field", [
    ({"kind": "shove"}, "kind"),
    ({"kind": "pin", "position": 1}, "product"),
    ({"kind": "pin", "product": "P1"}, "position"),
    ({"kind": "pin", "product": "P1", "position": 0}, "position"),
    ({"kind": "boost", "where": "price <"}, "where"),
    ({"kind": "boost", "where": "no_such_field > 1"}, "where"),
    ({"kind": "hide"}, "where"),
    ({"kind": "boost", "where": "true", "factor": 101}, "factor"),
    ({"kind": "boost", "where": "true", "starts_at": "tomorrow"}, "starts_at"),
    ({"kind": "boost", "where": "true", "starts_at": "2026-12-24", "ends_at": "2026-12-01"}, "ends_at"),
    ({"kind": "boost", "where": "true", "starts_at": "2026-12-24", "ends_at": "2026-12-24"}, "ends_at"),
    ({"kind": "boost", "where": "true", "reach": "subtree"}, "reach"),
    ({"kind": "boost", "where": "true", "reach": "everywhere", "collection": BIG}, "reach"),
    ({"kind": "boost", "where": "true", "collection": "no-such"}, "collection"),
    ({"kind": "pin", "product": "P1", "position": 1, "oos_policy": "pray"}, "oos_policy"),
])
def test_bad_rules_are_422_naming_the_field(served, body, field):
    client, _, keys = served
    r = client.post(R, headers=auth(keys["merchandiser"]), json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field and "Traceback" not in r.text


def test_bad_patches_collections_and_previews_are_422(clean_rules):
    client, _, keys = clean_rules
    m = auth(keys["merchandiser"])
    rule = client.post(R, headers=m, json={"kind": "boost", "where": "true", "collection": BIG,
                                           "starts_at": "2026-01-01"}).json()
    for patch, field in (({"ends_at": "2025-12-31"}, "ends_at"), ({"kind": None}, "kind"),
                         ({"enabled": None}, "enabled"), ({"where": "price >"}, "where"),
                         ({"collection": None, "reach": "subtree"}, "reach")):
        r = client.patch(f"{R}/{rule['id']}", headers=m, json=patch)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (patch, r.text)
    assert client.get(f"{R}/{rule['id']}", headers=m).json() == {**rule, "active": rule["active"]}
    for body, field in (({"id": "bad name!", "where": "true"}, "id"),
                        ({"id": "x1"}, "where"),
                        ({"id": "x2", "where": "price <"}, "where"),
                        ({"id": "x3", "where": "true", "parent": "no-such"}, "parent")):
        r = client.post(C, headers=m, json=body)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (body, r.text)
    for body, field in (({"columns": [0]}, "columns"), ({"columns": [13]}, "columns"),
                        ({"columns": []}, "columns"), ({"mode": "zigzag"}, "mode"),
                        ({"limit": 0}, "limit"), ({"offset": -1}, "offset")):
        r = client.post(f"{C}/{BIG}/preview", headers=m, json=body)
        assert r.status_code == 422 and r.json()["error"]["field"].startswith(field), (body, r.text)


def test_unknown_ids_are_404(served):
    client, _, keys = served
    v = auth(keys["merchandiser"])
    for method, url, body in (("get", f"{C}/no-such", None), ("delete", f"{C}/no-such", None),
                              ("get", f"{C}/no-such/rules", None),
                              ("post", f"{C}/no-such/preview", {"columns": [4]}),
                              ("get", f"{R}?collection=no-such", None),
                              ("get", f"{R}/999999", None), ("delete", f"{R}/999999", None),
                              ("patch", f"{R}/999999", {"position": 2})):
        r = client.request(method, url, headers=v, json=body)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", (method, url, r.text)


def test_paging_a_preview_reads_the_shards_once_and_follows_the_clock(clean_rules, monkeypatch):
    """Later pages reuse the arrangement (not arranged again, no feature read, same order,
    no audit row: a preview writes nothing); a rule that starts while nothing is written
    still takes effect at its start; any write re-arranges."""
    import time

    from vismerch.catalog.store import Store
    from vismerch.service import arrangements

    client, ws, keys = clean_rules
    v, m = keys["viewer"], auth(keys["merchandiser"])
    first = _preview(client, v, BIG, columns=[2, 3, 4, 5], limit=4)
    reads, arranged = [], []
    original, arrange = Store.load_features, arrangements.arrange_collection
    monkeypatch.setattr(Store, "load_features",
                        lambda self, *a, **k: reads.append(a) or original(self, *a, **k))
    monkeypatch.setattr(arrangements, "arrange_collection",
                        lambda *a, **k: arranged.append(a) or arrange(*a, **k))
    pages = [_preview(client, v, BIG, columns=[2, 3, 4, 5], offset=o, limit=4) for o in (0, 4, 8)]
    assert reads == [] and arranged == [] and pages[0]["slots"] == first["slots"]
    assert [s["id"] for p in pages for s in p["slots"]] == [
        s["id"] for s in _preview(client, v, BIG, columns=[2, 3, 4, 5], limit=12)["slots"]]
    audit = client.get(f"{API_PREFIX}/audit?limit=1000", headers=auth(keys["admin"])).json()["items"]
    assert not [e for e in audit if e["action"].endswith("/preview")]

    last = _last(client, v, BIG)
    soon = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    rule = client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": last,
                                           "position": 1, "oos_policy": "keep",
                                           "starts_at": soon.strftime("%Y-%m-%dT%H:%M:%SZ")}).json()
    assert _preview(client, v, BIG, columns=[4])["slots"][0]["id"] != last  # not yet
    time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 0.2)
    top = _preview(client, v, BIG, columns=[4])["slots"][0]  # no write in between
    assert (top["id"], top["pinned"]) == (last, True) and rule["id"]
    client.patch(f"{R}/{rule['id']}", headers=m, json={"position": 2})  # a write re-arranges
    again = _preview(client, v, BIG, columns=[4])
    assert again["slots"][1]["id"] == last and again["slots"][0]["id"] != last
    assert len(arranged) == 4  # the plain order (_last), before the start, at it, after the write
