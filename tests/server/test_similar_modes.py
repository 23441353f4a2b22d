"""Similar items by mode over the REST API: colour, style (the default where the store has
style vectors), both, and a bad mode is a 422 naming the field."""

from __future__ import annotations

from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX


def test_similar_items_answer_each_mode_and_default_to_style(served):
    client, _, keys = served
    h = auth(keys["viewer"])
    pid = client.get(f"{API_PREFIX}/products?limit=1", headers=h).json()["items"][0]["id"]
    found = {}
    for mode in ("colour", "style", "both", None):
        query = f"?k=8&mode={mode}" if mode else "?k=8"
        r = client.get(f"{API_PREFIX}/products/{pid}/similar{query}", headers=h)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["similar_mode"] == (mode or "style") and len(body["hits"]) == 8
        assert pid not in {hit["id"] for hit in body["hits"]}
        found[mode] = [hit["id"] for hit in body["hits"]]
    assert found[None] == found["style"]
    assert found["colour"] != found["style"]  # two kinds of likeness, two lists
    detail = client.get(f"{API_PREFIX}/products/{pid}?similar=8&similar_mode=style", headers=h).json()
    assert detail["similar_mode"] == "style" and [hit["id"] for hit in detail["similar"]] == found["style"]


def test_a_bad_similar_mode_is_a_422_naming_the_field(served):
    client, _, keys = served
    h = auth(keys["viewer"])
    pid = client.get(f"{API_PREFIX}/products?limit=1", headers=h).json()["items"][0]["id"]
    for url, field in ((f"/products/{pid}/similar?mode=shape", "mode"),
                       (f"/products/{pid}?similar_mode=texture", "similar_mode")):
        r = client.get(API_PREFIX + url, headers=h)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == field
