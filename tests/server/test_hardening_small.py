"""Issue 29, the smaller findings: key expiry compared as time, a NUL in a web app path,
private thumbnails, pins and drafts checked against the catalog and the collection, CSV
exports without bidi or control characters, and ingest jobs off until a folder is named."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient
from tests.server.conftest import auth

from vismerch.catalog import access
from vismerch.config import load_settings
from vismerch.serve.app import API_PREFIX, create_app

C = f"{API_PREFIX}/collections"


def test_a_long_key_lifetime_is_a_future_time_or_refused_never_expired_at_birth(served):
    client, ws, keys = served
    a = auth(keys["admin"])
    r = client.post(f"{API_PREFIX}/keys", headers=a, json={"role": "viewer", "expires": "4000w"})
    assert r.status_code == 201 and r.json()["active"] is True, r.text
    assert client.get(f"{API_PREFIX}/products?limit=1", headers=auth(r.json()["key"])).status_code == 200
    r = client.post(f"{API_PREFIX}/keys", headers=a, json={"role": "viewer", "expires": "450000w"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "expires", r.text
    # a key an older version stored with a five-digit year is far in the future, not past
    key = access.ApiKey("x", "viewer", None, "2026-01-01T00:00:00Z", "10656-03-01T00:00:00Z", None)
    assert key.usable() and not access.ApiKey("y", "viewer", None, "2026-01-01T00:00:00Z",
                                              "2020-01-01T00:00:00Z", None).usable()


@pytest.mark.parametrize("path", ["/ui/%00", "/ui/a%00b.js", "/ui/" + "x" * 5000])
def test_odd_web_app_paths_without_a_key_are_404_not_500(served, path):
    client, _, _ = served
    r = client.get(path)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_thumbnails_behind_a_key_are_private_to_the_browser(served):
    client, ws, keys = served
    pid = next(p.id for p in ws.store.products() if ws.store.has_thumbnail(p.id))
    r = client.get(f"{API_PREFIX}/products/{pid}/thumbnail", headers=auth(keys["storefront"]))
    assert r.status_code == 200 and r.headers["Cache-Control"].startswith("private")


def test_a_pin_to_an_unknown_product_is_422_naming_product(served):
    client, _, keys = served
    r = client.post(f"{API_PREFIX}/rules", headers=auth(keys["merchandiser"]),
                    json={"kind": "pin", "product": "no-such-product", "position": 1})
    assert r.status_code == 422 and r.json()["error"]["field"] == "product", r.text


def _two_categories(ws) -> tuple[str, list[str], list[str]]:
    from vismerch.merch.collections import list_collections, members

    cats = [c["name"] for c in list_collections(ws.store) if c["kind"] == "category"][:2]
    return cats[0], members(ws.store, cats[0]), members(ws.store, cats[1])


def test_a_draft_refuses_products_of_another_collection(served):
    client, ws, keys = served
    name, own, other = _two_categories(ws)
    m = auth(keys["merchandiser"])
    made = client.post(f"{C}/{name}/versions", headers=m, json={"name": "mine-only"})
    assert made.status_code == 201, made.text
    ids = made.json()["ids"]
    r = client.put(f"{C}/{name}/versions/mine-only", headers={**m, "If-Match": made.json()["etag"]},
                   json={"ids": [*ids[:-1], other[0]]})
    assert r.status_code == 422 and r.json()["error"]["field"] == f"ids[{len(ids) - 1}]", r.text
    assert name in r.json()["error"]["message"]
    r = client.put(f"{C}/{name}/versions/mine-only", headers={**m, "If-Match": made.json()["etag"]},
                   json={"ids": ids[::-1]})
    assert r.status_code == 200, r.text


def test_csv_exports_drop_bidi_and_control_characters(served):
    from vismerch.service import versions

    client, ws, keys = served
    name, own, _ = _two_categories(ws)
    hostile = ["\u202egpj.exe", "a\x00b\x1bc", "\u2066=SUM(A1)\u2069", "ok\ttab"]
    versions.save_order(ws, name, "bidi", hostile)
    r = client.get(f"{C}/{name}/versions/bidi/export?format=csv", headers=auth(keys["viewer"]))
    assert r.status_code == 200, r.text
    cells = [row[1] for row in csv.reader(io.StringIO(r.text))][1:]
    assert cells == ["gpj.exe", "abc", "'=SUM(A1)", "ok\ttab"]


def test_ingest_jobs_are_off_until_serve_source_root_names_a_folder(served):
    _, ws, keys = served
    client = TestClient(create_app(ws, load_settings(overrides={"serve_rate_limit": 0})),
                        raise_server_exceptions=False)
    r = client.post(f"{API_PREFIX}/jobs", headers=auth(keys["admin"]), json={"source": "."})
    assert r.status_code == 409 and "serve_source_root" in r.json()["error"]["hint"], r.text
