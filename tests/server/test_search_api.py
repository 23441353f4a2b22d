"""The search endpoints over the indexes ingest saved: each kind answers, and bad input is
a 4xx naming the field."""

from __future__ import annotations

from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX


def test_each_search_kind_answers_from_the_saved_indexes(served):
    client, ws, keys = served
    h = auth(keys["viewer"])
    assert (ws.path / "index" / "search" / "catalog.json").exists()
    products = client.get(f"{API_PREFIX}/products?limit=5", headers=h).json()["items"]
    pid = products[0]["id"]
    text = client.get(f"{API_PREFIX}/search?q=dress&k=5", headers=h)
    colour = client.get(f"{API_PREFIX}/search/colour?colour=red&k=5", headers=h)
    hybrid = client.get(f"{API_PREFIX}/search?q=dress&colour=red&k=5", headers=h)
    similar = client.get(f"{API_PREFIX}/products/{pid}/similar?k=5", headers=h)
    for r, mode in ((text, "text"), (colour, "colour"), (hybrid, "hybrid"), (similar, "similar")):
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["mode"] == mode and len(body["hits"]) >= 1
        scores = [hit["score"] for hit in body["hits"]]
        assert scores == sorted(scores, reverse=True)
    # hybrid keeps only products that are also red enough: a subset of the colour matches
    red = {hit["id"] for hit in client.get(f"{API_PREFIX}/search/colour?colour=red&k=200",
                                           headers=h).json()["hits"] if hit["score"] >= 0.1}
    assert {hit["id"] for hit in hybrid.json()["hits"]} <= red


def test_bad_search_input_is_a_4xx_naming_the_field(served):
    client, _, keys = served
    h = auth(keys["viewer"])
    for url, field in ((f"{API_PREFIX}/search?q=dress&k=0", "k"),
                       (f"{API_PREFIX}/search?q=dress&colour=zzz", "colour"),
                       (f"{API_PREFIX}/search/colour?colour=red&k=201", "k"),
                       (f"{API_PREFIX}/search?q=" + "x" * 501, "q"),
                       (f"{API_PREFIX}/search/colour", "colour")):
        r = client.get(url, headers=h)
        assert r.status_code == 422, (url, r.text)
        assert r.json()["error"]["field"] == field, (url, r.json())
    r = client.get(f"{API_PREFIX}/products/no-such-product/similar", headers=h)
    assert r.status_code == 404
