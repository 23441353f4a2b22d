"""Defects a merchandiser met in the workbench, over HTTP: thumbnails have a rate budget of
their own, facet counts are what the filter finds (with a swatch colour, no blank row), a
one-product move is one move in a diff, "keep chosen" takes a duplicate's copies off the
grid, and the change history tells who changed what, in words."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from tests.server.conftest import auth

from vismerch.config import load_settings
from vismerch.serve.app import API_PREFIX, create_app

C, R = f"{API_PREFIX}/collections", f"{API_PREFIX}/rules"


def _ids(ws) -> list[str]:
    return [r[0] for r in ws.store.db.execute("SELECT id FROM products WHERE status = 'ok' ORDER BY id")]


def test_thumbnails_spend_a_budget_of_their_own_not_the_apis(served):
    _, ws, keys = served
    pid = _ids(ws)[0]
    settings = load_settings(overrides={"serve_rate_limit": 0.5, "serve_rate_burst": 3,
                                        "serve_thumbnail_rate_limit": 0.5, "serve_thumbnail_rate_burst": 8})
    with TestClient(create_app(ws, settings)) as client:
        head = auth(keys["viewer"])
        assert [client.get(f"{API_PREFIX}/products?limit=1", headers=head).status_code
                for _ in range(4)] == [200, 200, 200, 429]
        # the API budget is spent; a scrolled grid's thumbnails still load
        thumbs = [client.get(f"{API_PREFIX}/products/{pid}/thumbnail", headers=head) for _ in range(8)]
        assert [t.status_code for t in thumbs] == [200] * 8
        assert thumbs[0].headers["content-type"].startswith("image/")
        # and they have a limit of their own
        over = client.get(f"{API_PREFIX}/products/{pid}/thumbnail", headers=head)
        assert over.status_code == 429 and "thumbnail" in over.json()["error"]["message"]
        assert int(over.headers["Retry-After"]) >= 1


def test_facet_counts_match_the_filter_and_colours_carry_their_hex(served):
    client, ws, keys = served
    head = auth(keys["viewer"])
    no_category = _ids(ws)[-1]
    with ws.store.transaction() as con:
        con.execute("UPDATE products SET category = NULL WHERE id = ?", (no_category,))
    facets = client.get(f"{API_PREFIX}/products/facets", headers=head).json()
    assert facets["colour"], "the sample catalog has coloured products"
    for facet in facets["colour"]:
        page = client.get(f"{API_PREFIX}/products", headers=head,
                          params={"colour": facet["value"], "limit": 1}).json()
        assert page["total"] == facet["count"], facet
        if facet["value"] != "multicolour":
            assert facet["hex"] and facet["hex"].startswith("#") and len(facet["hex"]) == 7, facet
    assert all(f["value"].strip() for f in facets["category"])  # no blank row
    assert sum(f["count"] for f in facets["category"]) == facets["total"] - 1


def test_facets_hex_comes_from_the_colour_table_for_multi_word_names(served):
    from vismerch.features.colournames import load_colour_table
    from vismerch.service.catalog import facets

    _, ws, _ = served
    table = load_colour_table()
    for facet in facets(ws).colour:
        if facet.value != "multicolour":
            assert facet.hex == table.hexes[table.index(facet.value)]
    for name in ("hot pink", "light blue", "burgundy", "mint", "mustard", "charcoal"):
        assert table.index(name) is not None  # the names the page used to grey out


def test_a_one_product_move_is_one_move_in_the_diff(served):
    client, ws, keys = served
    ids = _ids(ws)[:30]
    r = client.post(C, headers=auth(keys["merchandiser"]),
                    json={"id": "diffmove", "where": "id in [" + ", ".join(f'"{i}"' for i in ids) + "]"})
    assert r.status_code == 201, r.text
    saved = client.post(f"{C}/diffmove/versions", headers=auth(keys["merchandiser"]),
                        json={"name": "a"}).json()
    order = saved["ids"]
    moved = [order[-1], *order[:-1]]  # the last product dragged to the top
    client.post(f"{C}/diffmove/versions", headers=auth(keys["merchandiser"]), json={"name": "b"})
    tag = client.get(f"{C}/diffmove/versions/b", headers=auth(keys["viewer"])).headers["ETag"]
    r = client.put(f"{C}/diffmove/versions/b", headers={**auth(keys["merchandiser"]), "If-Match": tag},
                   json={"ids": moved})
    assert r.status_code == 200, r.text
    d = client.get(f"{C}/diffmove/diff?a=a&b=b", headers=auth(keys["viewer"])).json()
    assert d["moved"] == [{"id": order[-1], "from": len(order), "to": 1, "delta": 1 - len(order)}]
    assert d["shifted"] == len(order) - 1 and d["unchanged"] == 0


@pytest.fixture(scope="module")
def dup_collection(served):
    """A collection holding a planted near-duplicate group and a few other products."""
    client, ws, keys = served
    groups = client.get(f"{API_PREFIX}/duplicates", headers=auth(keys["viewer"])).json()["items"]
    assert groups, "the sample catalog plants a near-duplicate pair"
    group = groups[0]
    others = [i for i in _ids(ws) if i not in group["members"]][:10]
    where = "id in [" + ", ".join(f'"{i}"' for i in [*group["members"], *others]) + "]"
    r = client.post(C, headers=auth(keys["merchandiser"]), json={"id": "dupes", "where": where})
    assert r.status_code == 201, r.text
    return group


def _preview_ids(client, keys) -> list[str]:
    r = client.post(f"{C}/dupes/preview", headers=auth(keys["viewer"]), json={"columns": [4], "limit": 100})
    assert r.status_code == 200, r.text
    return [s["id"] for s in r.json()["slots"]]


def test_keep_chosen_takes_the_copies_off_the_grid(served, dup_collection):
    client, _, keys = served
    group = dup_collection
    before = _preview_ids(client, keys)
    assert set(group["members"]) <= set(before)  # pending: every copy is shown (spaced apart)
    keep = next(m for m in group["members"] if m != group["representative"])
    r = client.post(f"{API_PREFIX}/duplicates/{group['group']}/review", headers=auth(keys["merchandiser"]),
                    json={"decision": "keep", "keep": keep})
    assert r.status_code == 200, r.text
    after = _preview_ids(client, keys)
    assert keep in after
    assert not set(group["members"]) - {keep} & set(after)
    assert len(after) == len(before) - (len(group["members"]) - 1)
    # a pinned copy is an explicit choice: it stays
    copy = next(m for m in group["members"] if m != keep)
    r = client.post(R, headers=auth(keys["merchandiser"]),
                    json={"kind": "pin", "collection": "dupes", "product": copy, "position": 2})
    assert r.status_code == 201, r.text
    assert _preview_ids(client, keys)[1] == copy
    client.delete(f"{R}/{r.json()['id']}", headers=auth(keys["merchandiser"]))


def test_change_history_tells_who_did_what_in_words(served):
    client, ws, keys = served
    from vismerch.catalog import access

    text, _ = access.create_key(ws.store, "merchandiser", name="Dana")
    pid = _ids(ws)[3]
    title = ws.store.db.execute("SELECT title FROM products WHERE id = ?", (pid,)).fetchone()[0]
    r = client.post(C, headers=auth(text), json={"id": "told", "where": f'id == "{pid}" or price > 0'})
    assert r.status_code == 201, r.text
    r = client.post(R, headers=auth(text), json={"kind": "pin", "collection": "told", "product": pid,
                                                 "position": 1})
    assert r.status_code == 201, r.text
    rule = r.json()["id"]
    assert client.patch(f"{R}/{rule}", headers=auth(text), json={"enabled": False}).status_code == 200
    client.post(R, headers=auth(text), json={"kind": "pin", "collection": "nope", "product": pid,
                                             "position": 1})  # refused: not told
    client.post(f"{API_PREFIX}/keys", headers=auth(keys["admin"]), json={"role": "viewer", "name": "secret"})
    page = client.get(f"{API_PREFIX}/history", headers=auth(keys["viewer"]),
                      params={"collection": "told"}).json()
    texts = [c["text"] for c in page["items"]]
    assert texts == [f"Disabled rule #{rule}", f"Pinned {title} ({pid}) at position 1 in told",
                     "Created collection told"]
    newest = page["items"][0]
    assert newest["who"].startswith("Dana (") and newest["role"] == "merchandiser" and newest["at"]
    # key management is for admins' eyes
    everything = client.get(f"{API_PREFIX}/history?limit=200", headers=auth(keys["viewer"])).json()["items"]
    assert not any("key" in c["text"] for c in everything)
    admin = client.get(f"{API_PREFIX}/history?limit=5", headers=auth(keys["admin"])).json()["items"]
    assert admin[0]["text"] == "Made a viewer key secret"
    # pages follow next_before, oldest last
    first = client.get(f"{API_PREFIX}/history?limit=1&collection=told", headers=auth(keys["viewer"])).json()
    second = client.get(f"{API_PREFIX}/history", headers=auth(keys["viewer"]),
                        params={"limit": 1, "collection": "told", "before": first["next_before"]}).json()
    assert [c["text"] for c in first["items"] + second["items"]] == texts[:2]
    assert client.get(f"{API_PREFIX}/history?before=0", headers=auth(keys["viewer"])).status_code == 422
    # a write of a route added later is told plainly, not dropped
    merch_id = text.split("_")[1]
    access.record(ws.store, merch_id, f"POST {API_PREFIX}/query-rules", role="merchandiser", status=201,
                  detail={"body": {"collection": "told", "query": "red dress"}})
    newest = client.get(f"{API_PREFIX}/history?limit=1", headers=auth(keys["viewer"])).json()["items"][0]
    assert newest["text"] == f"Made a change at {API_PREFIX}/query-rules" and newest["collection"] == "told"
    assert newest["kind"] == "other" and newest["who"] == f"Dana ({merch_id})"


def test_titles_name_the_products_a_page_shows_by_id(served):
    client, ws, keys = served
    a, b = _ids(ws)[:2]
    r = client.get(f"{API_PREFIX}/products/titles", headers=auth(keys["viewer"]),
                   params={"ids": [a, b, "no-such-product"]})
    assert r.status_code == 200, r.text
    titles = r.json()["titles"]
    want = dict(ws.store.db.execute("SELECT id, title FROM products WHERE id IN (?, ?)", (a, b)).fetchall())
    assert titles == want
    r = client.get(f"{API_PREFIX}/products/titles", headers=auth(keys["viewer"]))
    assert r.status_code == 422 and r.json()["error"]["field"] == "ids"
