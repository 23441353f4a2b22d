"""Issue 29, finding 5: every list answers a page ({items, next_cursor}) with a default and
a capped limit, and walking the cursors gives every item once, in order."""

from __future__ import annotations

import pytest
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX
from vismerch.service.paging import DEFAULT_LIMIT


@pytest.fixture(scope="module")
def lists(served):
    """The served store with two rules and two versions, so every list has two items or more."""
    from vismerch.service import collections, rules, versions

    client, ws, keys = served
    collection = next(c.id for c in collections.list_collections(ws) if c.kind == "category")
    made = [rules.add_rule(ws, "boost", collection=collection, where="price > 1"),
            rules.add_rule(ws, "bury", collection=collection, where="price < 1")]
    for name in ("a", "b"):
        versions.save_draft(ws, collection, name)
    with ws.store.transaction() as con:  # a second refused image (the catalog plants one)
        con.execute("INSERT OR REPLACE INTO errors (product_id, image_path, reason, detail)"
                    " VALUES ('ZZ-refused', 'x.jpg', 'truncated', 'made by the test')")
        free = [r[0] for r in con.execute("SELECT id FROM products WHERE id NOT IN"
                                          " (SELECT product_id FROM dup_groups) ORDER BY id LIMIT 2")]
        con.executemany("INSERT INTO dup_groups (group_id, product_id, representative) VALUES (?, ?, ?)",
                        [(999, pid, int(i == 0)) for i, pid in enumerate(free)])
    yield client, keys, collection
    for rule in made:
        rules.delete_rule(ws, rule.id)


def _walk(client, key, url, **params) -> list:
    items, cursor = [], None
    for _ in range(500):
        r = client.get(url, headers=auth(key), params={**params, "limit": 1,
                                                       **({"cursor": cursor} if cursor else {})})
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["items"]) <= 1
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError("the cursors never ended")


@pytest.mark.parametrize("path, role, params", [
    ("/collections", "viewer", {}),
    ("/rules", "viewer", {}),
    ("/collections/{c}/rules", "viewer", {}),
    ("/collections/{c}/versions", "viewer", {}),
    ("/errors", "viewer", {}),
    ("/duplicates", "viewer", {}),
    ("/queues/quality", "viewer", {"status": "all"}),
    ("/keys", "admin", {}),
])
def test_every_list_pages_with_a_cursor_and_the_walk_equals_the_whole(lists, path, role, params):
    client, keys, collection = lists
    url = API_PREFIX + path.replace("{c}", collection)
    whole = client.get(url, headers=auth(keys[role]), params={**params, "limit": 200}).json()
    assert whole["next_cursor"] is None and len(whole["items"]) >= 2, (path, whole)
    assert _walk(client, keys[role], url, **params) == whole["items"]


def test_limits_default_and_cap_and_a_bad_cursor_is_422_naming_it(lists, served):
    client, keys, _ = lists
    v = auth(keys["viewer"])
    url = f"{API_PREFIX}/collections"
    everything = _walk(client, keys["viewer"], url)
    default = client.get(url, headers=v).json()
    assert len(default["items"]) == min(DEFAULT_LIMIT, len(everything))
    capped = client.get(url, headers=v, params={"limit": 100_000}).json()
    assert len(capped["items"]) == min(200, len(everything))  # serve_page_limit
    first = client.get(f"{API_PREFIX}/rules", headers=v, params={"limit": 1}).json()
    for cursor in ("garbage", first["next_cursor"][:-2] + "AA"):
        r = client.get(url, headers=v, params={"cursor": cursor})
        assert r.status_code == 422 and r.json()["error"]["field"] == "cursor", r.text
    r = client.get(url, headers=v, params={"cursor": first["next_cursor"]})  # another list's cursor
    assert r.status_code == 422 and r.json()["error"]["field"] == "cursor", r.text


def test_the_flag_filter_takes_the_registered_flags_and_refuses_others_naming_it(lists):
    client, keys, _ = lists
    v = auth(keys["viewer"])
    for flag in ("blur", "off-centre", "any"):
        assert client.get(f"{API_PREFIX}/products", headers=v, params={"flag": flag}).status_code == 200
    r = client.get(f"{API_PREFIX}/products", headers=v, params={"flag": "blurry"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "flag", r.text
