"""Issue 29, what a hostile key holder does to merchandising data: a poison rule is refused
on save and cannot crash a preview if one is stored anyway; a published collection is only
deleted by a publisher, who takes its grid and versions down, so a collection made again
under its name never serves the old grid."""

from __future__ import annotations

import pytest
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX

C, R = f"{API_PREFIX}/collections", f"{API_PREFIX}/rules"
SF = f"{API_PREFIX}/storefront/collections"
HUGE = "9" * 400  # an integer literal no float can hold


@pytest.fixture
def no_rules(served):
    from vismerch.service import rules

    _, ws, _ = served
    yield served
    for rule in rules.list_rules(ws):
        rules.delete_rule(ws, rule.id)


@pytest.mark.parametrize("url, body", [
    (R, {"kind": "boost", "where": f"price < {HUGE}"}),
    (R, {"kind": "hide", "where": "price > 1e999"}),
    (C, {"id": "poison", "where": f"price < {HUGE}"}),
])
def test_a_where_with_a_number_outside_float_range_is_refused_naming_where(no_rules, url, body):
    client, _, keys = no_rules
    r = client.post(url, headers=auth(keys["merchandiser"]), json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "where" and "outside the range" in r.json()["error"]["message"]
    assert client.get(R, headers=auth(keys["viewer"])).json()["items"] == []


def test_a_poison_rule_stored_anyway_cannot_crash_a_preview_or_a_draft(no_rules):
    """A rule written before the parser refused such literals (straight into the store) now
    matches nothing instead of raising in every preview and draft save."""
    from vismerch.catalog import rules as db
    from vismerch.rules import Rule

    client, ws, keys = no_rules
    name = next(c["id"] for c in client.get(C, headers=auth(keys["viewer"])).json()["items"]
                if c["kind"] == "category")
    db.insert(ws.store, Rule(0, "boost", name, f"price < {HUGE}", None, None, 50.0, "release", True,
                             None, "2026-01-01T00:00:00Z", None, None, "collection").as_dict())
    m = auth(keys["merchandiser"])
    r = client.post(f"{C}/{name}/preview", headers=m, json={"columns": [4]})
    assert r.status_code == 200, r.text
    r = client.post(f"{C}/{name}/versions", headers=m, json={"name": "after-poison"})
    assert r.status_code == 201, r.text


def _publish(client, keys, coll: str, version: str) -> None:
    r = client.post(f"{C}/{coll}/versions", headers=auth(keys["merchandiser"]), json={"name": version})
    assert r.status_code == 201, r.text
    state = client.get(f"{C}/{coll}/versions", headers=auth(keys["viewer"])).headers["ETag"]
    r = client.post(f"{C}/{coll}/publish", headers={**auth(keys["publisher"]), "If-Match": state},
                    json={"version": version})
    assert r.status_code == 200, r.text


def test_a_published_collection_is_deleted_only_by_a_publisher_with_its_grid(served):
    client, _, keys = served
    m, p = auth(keys["merchandiser"]), auth(keys["publisher"])
    assert client.post(C, headers=m, json={"id": "live", "where": "price < 100"}).status_code == 201
    _publish(client, keys, "live", "v1")
    old = client.get(f"{SF}/live", headers=auth(keys["storefront"]))
    assert old.status_code == 200 and old.json()["items"]

    r = client.delete(f"{C}/live", headers=m)  # a merchandiser may not take a live grid down
    assert r.status_code == 409 and "publisher" in r.json()["error"]["hint"]
    assert client.get(f"{SF}/live", headers=auth(keys["storefront"])).status_code == 200

    r = client.delete(f"{C}/live", headers=p)
    assert r.status_code == 200 and r.json()["versions_removed"] == 1, r.text
    assert client.get(f"{SF}/live", headers=auth(keys["storefront"])).status_code == 404
    assert client.get(f"{C}/live/versions", headers=p).status_code == 404

    # the same id made again with another rule starts with nothing published or saved
    assert client.post(C, headers=m, json={"id": "live", "where": "price >= 100"}).status_code == 201
    assert client.get(f"{SF}/live", headers=auth(keys["storefront"])).status_code == 404
    assert client.get(f"{C}/live/versions", headers=p).json()["items"] == []
    assert client.delete(f"{C}/live", headers=m).status_code == 200  # never published: a merchandiser may
