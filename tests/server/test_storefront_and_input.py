"""The storefront read (ETag, 304, Cache-Control, paging, publish changes it) and bad input:
JSON errors naming the field, no tracebacks, traversal and oversized uploads refused."""

from __future__ import annotations

import io

from PIL import Image
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX

SF = f"{API_PREFIX}/storefront/collections"


def _publish(ws, collection: str, name: str, ids: list[str]) -> None:
    from vismerch.service import versions

    versions.save_order(ws, collection, name, ids)
    versions.publish(ws, collection, name)


def _collection(ws) -> tuple[str, list[str]]:
    from vismerch.merch.collections import list_collections, members

    name = max(list_collections(ws.store), key=lambda c: c["size"])["name"]
    return name, members(ws.store, name)


def test_storefront_pages_the_published_grid_with_etag_and_304(served):
    client, ws, keys = served
    name, ids = _collection(ws)
    assert len(ids) >= 4
    headers = auth(keys["storefront"])
    assert client.get(f"{SF}/{name}", headers=headers).status_code == 404  # not published yet
    _publish(ws, name, "sf-1", ids)
    r = client.get(f"{SF}/{name}?columns=3&offset=1&limit=2", headers=headers)
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["total"] == len(ids) and page["version"] == "sf-1"
    assert [i["id"] for i in page["items"]] == ids[1:3]
    assert [(i["position"], i["row"], i["column"]) for i in page["items"]] == [(2, 0, 1), (3, 0, 2)]
    assert page["items"][0]["thumbnail"].endswith(f"/products/{ids[1]}/thumbnail")
    thumb = client.get(page["items"][0]["thumbnail"], headers=headers)
    assert thumb.status_code == 200 and thumb.headers["content-type"].startswith("image/")
    etag = r.headers["ETag"]
    assert "max-age" in r.headers["Cache-Control"]
    again = client.get(f"{SF}/{name}?columns=3&offset=1&limit=2", headers={**headers, "If-None-Match": etag})
    assert again.status_code == 304 and again.headers["ETag"] == etag and not again.content
    other_width = client.get(f"{SF}/{name}?columns=4&offset=1&limit=2", headers=headers)
    assert other_width.headers["ETag"] != etag
    _publish(ws, name, "sf-2", list(reversed(ids)))  # a new publish changes page and ETag
    r = client.get(f"{SF}/{name}?columns=3&offset=1&limit=2", headers={**headers, "If-None-Match": etag})
    assert r.status_code == 200 and r.headers["ETag"] != etag
    assert [i["id"] for i in r.json()["items"]] == list(reversed(ids))[1:3]


def test_storefront_never_touches_features_or_models(served, monkeypatch):
    client, ws, keys = served
    name, ids = _collection(ws)
    _publish(ws, name, "sf-nomodel", ids)
    from vismerch.catalog.store import Store

    def refuse(*args, **kwargs):
        raise AssertionError("the storefront read features")

    monkeypatch.setattr(Store, "load_features", refuse)
    monkeypatch.setattr("vismerch.catalog.shards.read_shard", refuse)
    r = client.get(f"{SF}/{name}?columns=2&offset=0&limit=3", headers=auth(keys["storefront"]))
    assert r.status_code == 200 and len(r.json()["items"]) == 3


def test_bad_input_is_a_json_4xx_naming_the_field(served):
    client, _, keys = served
    h = auth(keys["admin"])
    for url, field in ((f"{API_PREFIX}/products?limit=abc", "limit"),
                       (f"{API_PREFIX}/products?price_min=-3", "price_min"),
                       (f"{API_PREFIX}/products?price_min=50&price_max=10", "price_min"),
                       (f"{API_PREFIX}/search/colour?colour=notacolour", "colour"),
                       (f"{API_PREFIX}/search", "query"),
                       (f"{SF}/x?columns=0", "columns")):
        r = client.get(url, headers=h)
        assert r.status_code == 422, (url, r.text)
        assert r.json()["error"]["field"] == field, (url, r.json())
    r = client.post(f"{API_PREFIX}/keys", headers=h, json={"role": "root"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "role"
    r = client.post(f"{API_PREFIX}/keys", headers={**h, "Content-Type": "application/json"},
                    content=b"{not json")
    assert r.status_code == 422 and "Traceback" not in r.text
    r = client.get(f"{API_PREFIX}/products/nope", headers=h)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_an_unexpected_error_is_a_500_without_a_traceback(served, monkeypatch, caplog):
    client, _, keys = served

    def boom(*args, **kwargs):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr("vismerch.service.catalog.facets", boom)
    r = client.get(f"{API_PREFIX}/products/facets", headers=auth(keys["viewer"]))
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "internal"
    assert "secret" not in r.text and "Traceback" not in r.text
    assert "secret internals" in caplog.text  # logged on the server


def test_thumbnails_are_by_id_never_by_path(served):
    client, _, keys = served
    h = auth(keys["viewer"])
    for pid in ("..%2F..%2Fstore.sqlite", "%2Fetc%2Fpasswd", "....%2F%2F"):
        r = client.get(f"{API_PREFIX}/products/{pid}/thumbnail", headers=h)
        assert r.status_code == 404 and r.headers["content-type"] == "application/json"
    r = client.get(f"{API_PREFIX}/products/../../store.sqlite", headers=h)
    assert r.status_code == 404 and b"SQLite" not in r.content


def test_oversized_and_huge_uploads_are_refused(served):
    client, ws, keys = served
    from vismerch.config import setting

    h = auth(keys["viewer"])
    cap = setting(client.app.state.settings, "serve_upload_max_bytes")
    r = client.post(f"{API_PREFIX}/search/image", headers=h, content=b"\0" * (cap + 1))
    assert r.status_code == 413 and r.json()["error"]["field"] == "image"

    def chunks():  # no Content-Length: refused while streaming
        for _ in range(cap // 65536 + 2):
            yield b"\0" * 65536

    r = client.post(f"{API_PREFIX}/search/image", headers=h, content=chunks())
    assert r.status_code == 413
    buf = io.BytesIO()
    Image.new("L", (6000, 5000)).save(buf, "PNG")  # 30 MP in a few KB
    r = client.post(f"{API_PREFIX}/search/image", headers=h, content=buf.getvalue())
    assert r.status_code == 422 and "pixel" in r.json()["error"]["message"]
    r = client.post(f"{API_PREFIX}/search/image", headers=h, content=b"")
    assert r.status_code == 422
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 20, 20)).save(buf, "PNG")
    r = client.post(f"{API_PREFIX}/search/image?k=3", headers=h, content=buf.getvalue())
    assert r.status_code == 200 and len(r.json()["hits"]) == 3


def test_product_ids_with_slashes_reach_detail_similar_and_thumbnail(tmp_path):
    """Catalog ids like ``SKU/123`` are common: the product routes take them whole, raw or
    percent-encoded (as the web app and the storefront's thumbnail URLs spell them)."""
    from urllib.parse import quote

    from fastapi.testclient import TestClient

    from vismerch.catalog import access
    from vismerch.cli import main
    from vismerch.config import load_settings
    from vismerch.serve.app import create_app
    from vismerch.service.workspace import Workspace
    from vismerch.testing.catalog import make_manifest, read_manifest_rows, small_catalog

    catalog = small_catalog(tmp_path / "catalog", n=6, seed=5, corrupt=False, flawed=False,
                            duplicates=False, wrong_listed=False)
    rows = read_manifest_rows(catalog.manifest_path)
    for i, row in enumerate(rows):
        row["id"] = f"shoes/red/{i}" if i % 2 else f"SKU-{i}"
    manifest = make_manifest(catalog.manifest_path.with_name("slashes.csv"), rows)
    store = tmp_path / "store"
    assert main(["ingest", str(manifest), "--store", str(store), "--workers", "1", "--json"]) == 0
    ws = Workspace.open(store, load_settings(overrides={"serve_rate_limit": 0}))
    key = access.create_key(ws.store, "viewer")[0]
    with TestClient(create_app(ws, ws.settings), raise_server_exceptions=False) as client:
        h = auth(key)
        for pid in ("shoes/red/1", "shoes/red/3"):
            for spelled in (pid, quote(pid, safe="")):
                r = client.get(f"{API_PREFIX}/products/{spelled}", headers=h)
                assert r.status_code == 200, r.text
                assert r.json()["id"] == pid
                r = client.get(f"{API_PREFIX}/products/{spelled}/similar?k=3", headers=h)
                assert r.status_code == 200, r.text
                hits = [hit["id"] for hit in r.json()["hits"]]
                assert hits and pid not in hits
                r = client.get(f"{API_PREFIX}/products/{spelled}/thumbnail", headers=h)
                assert r.status_code == 200 and r.headers["content-type"].startswith("image/")
        r = client.get(f"{API_PREFIX}/products/shoes/red/99", headers=h)
        assert r.status_code == 404 and "shoes/red/99" in r.json()["error"]["message"]
        page = client.get(f"{API_PREFIX}/products?limit=10", headers=h).json()
        assert {item["id"] for item in page["items"]} >= {"shoes/red/1", "shoes/red/3"}
    ws.close()
