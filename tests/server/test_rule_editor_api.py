"""The rule editor's API: kinds from the registry, the condition builder's fields and live
count, conflicting pins reported before saving, bad input naming the field, out-of-stock
buried by default, and dated rules going live on the storefront without a republish."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX

R = f"{API_PREFIX}/rules"
SF = f"{API_PREFIX}/storefront/collections"
C = f"{API_PREFIX}/collections"
BIG = "trousers"


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def clean(served):
    from vismerch.service import rules

    client, ws, keys = served
    for rule in rules.list_rules(ws):
        rules.delete_rule(ws, rule.id)
    yield served
    for rule in rules.list_rules(ws):
        rules.delete_rule(ws, rule.id)
    client.app.state.clock = lambda: stamp(datetime.now(UTC))


def _members(ws, name=BIG):
    from vismerch.service.collections import members

    return members(ws, name)


def test_kinds_come_from_the_registry_and_unknown_kinds_are_refused(clean):
    from vismerch.rules import kind_names

    client, ws, keys = clean
    got = client.get(f"{R}/kinds", headers=auth(keys["viewer"])).json()
    assert [k["name"] for k in got] == list(kind_names())
    by = {k["name"]: k for k in got}
    assert by["pin"]["target"] == "product" and by["bury"]["uses_factor"] and by["hide"]["hides"]
    r = client.post(R, headers=auth(keys["merchandiser"]), json={"kind": "spotlight", "where": "true"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "kind"
    schema = client.get("/openapi.json").json()["components"]["schemas"]["RuleIn"]
    assert schema["properties"]["kind"]["enum"] == list(kind_names())


def test_fields_and_live_match_count(clean):
    client, ws, keys = clean
    v = auth(keys["viewer"])
    fields = {f["name"]: f for f in client.get(f"{R}/fields", headers=v,
                                               params={"collection": BIG}).json()}
    assert fields["price"]["type"] == "number" and fields["category"]["values"] == [BIG]
    prices = [p.price for p in ws.store.products() if p.id in set(_members(ws))]
    cut = sorted(prices)[len(prices) // 2]
    r = client.get(f"{R}/count", headers=v, params={"where": f"price < {cut}", "collection": BIG})
    assert r.status_code == 200, r.text
    assert r.json()["matches"] == sum(p < cut for p in prices) and r.json()["total"] == len(prices)
    assert len(r.json()["sample"]) == min(8, r.json()["matches"]) and "title" in r.json()["sample"][0]
    everywhere = client.get(f"{R}/count", headers=v, params={"where": f"price < {cut}"}).json()
    assert everywhere["total"] == len(ws.store.products()) > len(prices)
    for where in ("price <", "colour_of_sky == 1"):
        r = client.get(f"{R}/count", headers=v, params={"where": where})
        assert r.status_code == 422 and r.json()["error"]["field"] == "where", r.text


def test_conflicting_pins_are_reported_before_saving(clean):
    client, ws, keys = clean
    m = auth(keys["merchandiser"])
    a, b, c = _members(ws)[:3]
    first = client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": a, "position": 2})
    assert first.status_code == 201
    same_slot = client.post(f"{R}/check", headers=m, json={"kind": "pin", "collection": BIG,
                                                          "product": b, "position": 2}).json()
    assert not same_slot["ok"] and [x["kind"] for x in same_slot["conflicts"]] == ["same-slot"]
    assert same_slot["conflicts"][0]["rule"] == first.json()["id"]
    assert "position 2" in same_slot["conflicts"][0]["message"]
    twice = client.post(f"{R}/check", headers=m, json={"kind": "pin", "product": a, "position": 5}).json()
    assert [x["kind"] for x in twice["conflicts"]] == ["pinned-twice"]
    assert "a collection's rule beats a global one" in twice["conflicts"][0]["message"]
    free = client.post(f"{R}/check", headers=m, json={"kind": "pin", "collection": BIG,
                                                     "product": b, "position": 3}).json()
    assert free == {"ok": True, "conflicts": []}
    # dates that do not meet do not conflict; an edit of the rule itself does not either
    client.patch(f"{R}/{first.json()['id']}", headers=m, json={"ends_at": "2029-06-01"})
    later = client.post(f"{R}/check", headers=m, json={
        "kind": "pin", "collection": BIG, "product": b, "position": 2,
        "starts_at": "2030-01-01", "ends_at": "2030-01-02"}).json()
    assert later["ok"]
    edit = client.post(f"{R}/check", headers=m, json={"id": first.json()["id"], "kind": "pin",
                                                     "collection": BIG, "product": a, "position": 2})
    assert edit.json()["ok"], edit.text
    client.post(R, headers=m, json={"kind": "hide", "collection": BIG, "where": f'id == "{c}"'})
    hidden = client.post(f"{R}/check", headers=m, json={"kind": "pin", "collection": BIG,
                                                       "product": c, "position": 1}).json()
    assert [x["kind"] for x in hidden["conflicts"]] == ["pin-on-hidden"]
    bad = client.post(f"{R}/check", headers=m, json={"kind": "pin", "collection": BIG, "position": 1})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "product"
    assert len(client.get(R, headers=m).json()["items"]) == 2  # a check saves nothing


def test_crud_of_every_kind_with_bad_input_naming_the_field(clean):
    client, ws, keys = clean
    m = auth(keys["merchandiser"])
    pid = _members(ws)[0]
    bodies = [{"kind": "pin", "product": pid, "position": 3},
              {"kind": "boost", "where": "price < 50", "factor": 20},
              {"kind": "bury", "where": "price > 100", "factor": 35, "reach": "subtree"},
              {"kind": "hide", "where": 'brand == "nobody"', "starts_at": "2026-12-24"},
              {"kind": "bury-out-of-stock", "factor": 60}]
    ids = []
    for body in bodies:
        r = client.post(R, headers=m, json={"collection": BIG, **body})
        assert r.status_code == 201, r.text
        assert {k: r.json()[k] for k in body if k not in ("starts_at",)} == \
            {k: v for k, v in body.items() if k != "starts_at"}
        ids.append(r.json()["id"])
    r = client.patch(f"{R}/{ids[2]}", headers=m, json={"factor": 80, "enabled": False})
    assert r.json()["factor"] == 80 and r.json()["enabled"] is False and r.json()["active"] is False
    assert client.delete(f"{R}/{ids[1]}", headers=m).status_code == 200
    assert client.get(f"{R}/{ids[1]}", headers=m).status_code == 404
    for body, field in [({"kind": "bury", "where": "true", "factor": 150}, "factor"),
                        ({"kind": "boost"}, "where"),
                        ({"kind": "pin", "product": pid, "position": 0}, "position"),
                        ({"kind": "hide", "where": "true", "starts_at": "soon"}, "starts_at"),
                        ({"kind": "hide", "where": "true", "collection": "nope"}, "collection")]:
        r = client.post(R, headers=m, json=body)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (body, r.text)


def test_out_of_stock_products_are_buried_by_default_and_say_why(clean):
    client, ws, keys = clean
    v = auth(keys["viewer"])

    def plain():
        return client.post(f"{C}/{BIG}/preview", headers=v,
                           json={"columns": [4], "limit": 1000, "mode": "plain"}).json()["slots"]

    top = [s["id"] for s in plain()[:2]]
    with ws.store.transaction() as con:
        con.executemany("UPDATE products SET stock = 0 WHERE id = ?", [(pid,) for pid in top])
    try:
        slots = plain()
        # every out-of-stock product below every in-stock one (quality-flagged ones are held
        # below the first screen, which comes first)
        stocked = [s["stock"] is None or s["stock"] > 0 for s in slots if not s["flags"]]
        assert stocked == sorted(stocked, reverse=True)
        assert set(top) <= {s["id"] for s in slots if not (s["stock"] is None or s["stock"] > 0)}
        assert any("rules_bury_out_of_stock" in r for r in slots[-1]["reasons"])
        assert slots[-1]["score"]["parts"]["rules"] < 0
    finally:
        with ws.store.transaction() as con:
            con.executemany("UPDATE products SET stock = 5 WHERE id = ?", [(pid,) for pid in top])


def _publish_plain(client, ws, keys, name):
    from vismerch.service import versions

    order = [s["id"] for s in client.post(f"{C}/{name}/preview", headers=auth(keys["viewer"]),
                                          json={"columns": [4], "limit": 1000, "mode": "plain"}
                                          ).json()["slots"]]
    version = f"live-{time.time_ns()}"
    versions.save_order(ws, name, version, order)
    versions.publish(ws, name, version)
    return order


def _storefront_ids(client, keys, name):
    r = client.get(f"{SF}/{name}", headers=auth(keys["storefront"]), params={"limit": 1000})
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["items"]]


def test_a_scheduled_boost_goes_live_at_its_start_without_a_republish(clean):
    """With a controllable clock: the boost dated a minute ahead is absent until its start,
    on the storefront from its start, and gone again at its end; nothing is republished."""
    client, ws, keys = clean
    now = datetime.now(UTC).replace(microsecond=0)
    client.app.state.clock = lambda: stamp(now)
    order = _publish_plain(client, ws, keys, BIG)
    target = next(pid for pid in reversed(order) if (ws.store.product(pid).stock or 1) > 0)
    start, end = now + timedelta(minutes=1), now + timedelta(minutes=3)
    r = client.post(R, headers=auth(keys["merchandiser"]), json={
        "kind": "boost", "collection": BIG, "where": f'id == "{target}"', "factor": 100,
        "starts_at": stamp(start), "ends_at": stamp(end)})
    assert r.status_code == 201, r.text
    assert _storefront_ids(client, keys, BIG) == order  # not yet
    r = client.get(f"{SF}/{BIG}", headers=auth(keys["storefront"]))
    assert "max-age=60," in r.headers["Cache-Control"]  # the start is a minute away: a full minute
    client.app.state.clock = lambda: stamp(start - timedelta(seconds=20))
    r = client.get(f"{SF}/{BIG}", headers=auth(keys["storefront"]))
    assert "max-age=20," in r.headers["Cache-Control"]  # no cache keeps it past the start
    client.app.state.clock = lambda: stamp(start - timedelta(seconds=1))
    assert _storefront_ids(client, keys, BIG) == order
    client.app.state.clock = lambda: stamp(start)
    live = _storefront_ids(client, keys, BIG)
    assert live[0] == target and sorted(live) == sorted(order)
    assert [p for p in live if p != target] == [p for p in order if p != target]  # the rest keep order
    client.app.state.clock = lambda: stamp(end)
    assert _storefront_ids(client, keys, BIG) == order  # its end takes it off again


def test_a_dated_hide_and_pin_go_live_and_end(clean):
    client, ws, keys = clean
    now = datetime.now(UTC).replace(microsecond=0)
    client.app.state.clock = lambda: stamp(now)
    order = _publish_plain(client, ws, keys, BIG)
    m = auth(keys["merchandiser"])
    start, end = stamp(now + timedelta(hours=1)), stamp(now + timedelta(hours=2))
    client.post(R, headers=m, json={"kind": "hide", "collection": BIG, "where": f'id == "{order[0]}"',
                                    "starts_at": start, "ends_at": end})
    client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": order[-1],
                                    "position": 2, "oos_policy": "keep", "starts_at": start})
    client.app.state.clock = lambda: start
    live = _storefront_ids(client, keys, BIG)
    assert order[0] not in live and live[1] == order[-1] and len(live) == len(order) - 1
    client.app.state.clock = lambda: end  # the hide ended: its product is back; the pin holds
    live = _storefront_ids(client, keys, BIG)
    assert order[0] in live and live[1] == order[-1] and len(live) == len(order)


def test_real_time_a_boost_starting_in_two_seconds_reaches_the_storefront(clean):
    """On the wall clock (the app's own clock, nothing mocked): proves that the kept live
    grid expires at the rule's start, so the boost shows within about a second of it, with
    no publish and no other write in between."""
    client, ws, keys = clean
    order = _publish_plain(client, ws, keys, BIG)
    target = next(pid for pid in reversed(order) if (ws.store.product(pid).stock or 1) > 0)
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    client.post(R, headers=auth(keys["merchandiser"]), json={
        "kind": "boost", "collection": BIG, "where": f'id == "{target}"', "factor": 100,
        "starts_at": stamp(start)})
    assert _storefront_ids(client, keys, BIG)[0] != target  # kept until the start
    seen = None
    while datetime.now(UTC) < start + timedelta(seconds=5):
        if _storefront_ids(client, keys, BIG)[0] == target:
            seen = datetime.now(UTC)
            break
        time.sleep(0.2)
    assert seen is not None and start <= seen < start + timedelta(seconds=2)


def test_preview_and_rules_take_at_as_a_query_parameter(clean):
    client, ws, keys = clean
    v, m = auth(keys["viewer"]), auth(keys["merchandiser"])
    last = _members(ws)[-1]
    r = client.post(R, headers=m, json={"kind": "pin", "collection": BIG, "product": last, "position": 1,
                                        "oos_policy": "keep", "starts_at": "2031-01-01",
                                        "ends_at": "2031-01-08"})
    assert r.status_code == 201

    def first(at=None):
        got = client.post(f"{C}/{BIG}/preview", headers=v, params={"at": at} if at else None,
                          json={"columns": [4], "limit": 4})
        assert got.status_code == 200, got.text
        return got.json()["slots"][0]["id"]

    assert first() != last and first("2031-01-02") == last and first("2031-01-08T00:00:00Z") != last
    active = client.get(f"{C}/{BIG}/rules", headers=v, params={"at": "2031-01-02"}).json()["items"]
    assert [x["active"] for x in active] == [True]
    assert client.get(f"{C}/{BIG}/rules", headers=v).json()["items"][0]["active"] is False
    bad = client.post(f"{C}/{BIG}/preview", headers=v, params={"at": "someday"}, json={})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "at"


def test_a_dated_boost_reaches_the_variants_of_a_running_experiment(clean):
    from vismerch.service import versions
    from vismerch.service.collections import create_collection

    client, ws, keys = clean
    now = datetime.now(UTC).replace(microsecond=0)
    client.app.state.clock = lambda: stamp(now)
    create_collection(ws, "ab-live", where=f'category == "{BIG}"')
    order = _publish_plain(client, ws, keys, "ab-live")
    versions.save_order(ws, "ab-live", "reversed", order[::-1])
    r = client.post(f"{API_PREFIX}/experiments", headers=auth(keys["merchandiser"]), json={
        "collection": "ab-live", "variants": [ws.store.db.execute(
            "SELECT name FROM arrangement_versions WHERE collection = 'ab-live' ORDER BY id").fetchone()[0],
            "reversed"]})
    assert r.status_code == 201, r.text
    target = order[len(order) // 2]
    start = now + timedelta(minutes=1)
    client.post(R, headers=auth(keys["merchandiser"]), json={
        "kind": "boost", "collection": "ab-live", "where": f'id == "{target}"', "factor": 100,
        "starts_at": stamp(start)})

    def firsts():
        out = {}
        for k in range(24):
            page = client.get(f"{SF}/ab-live", headers=auth(keys["storefront"]),
                              params={"visitor": f"v{k}"}).json()
            out[page["variant"]] = page["items"][0]["id"]
        return out

    before = firsts()
    assert len(before) == 2 and target not in before.values()
    client.app.state.clock = lambda: stamp(start)
    assert set(firsts().values()) == {target}  # both variants, without a republish
