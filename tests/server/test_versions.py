"""Versions over HTTP: save a draft, diff, publish (the storefront changes), roll back (it
changes back); two editors and two publishers with ETags (first wins, the second gets 412
and nothing is lost); 428 without If-Match; published versions are immutable (409); the CSV
export neutralises a product title that a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io

import pytest
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX
from vismerch.testing import small_catalog
from vismerch.testing.catalog import make_manifest, read_manifest_rows

SF = f"{API_PREFIX}/storefront/collections"
HOSTILE_TITLE = '=HYPERLINK("x")'
HOSTILE_ID = "formula-title-1"


@pytest.fixture(scope="module")
def coll(served, tmp_path_factory):
    """The biggest collection of the served store, after ingesting into it one more product
    (of that category) titled like a spreadsheet formula."""
    from vismerch.merch.collections import list_collections
    from vismerch.pipeline.ingest import ingest

    _, ws, _ = served
    name = max(list_collections(ws.store), key=lambda c: c["size"])["name"]
    category = ws.store.db.execute("SELECT category FROM products WHERE category = ?", (name,)).fetchone()
    assert category is not None, "the biggest collection is a category"
    root = tmp_path_factory.mktemp("formula")
    cat = small_catalog(root / "cat", n=2, seed=21, corrupt=False, flawed=False, duplicates=False)
    row = read_manifest_rows(cat.manifest_path)[0]
    row.update(id=HOSTILE_ID, title=HOSTILE_TITLE, category=name)
    manifest = make_manifest(root / "cat" / "formula.csv", [row])
    ingest(manifest, ws.path, workers=1, progress=False)
    return name


def _url(coll: str, tail: str = "") -> str:
    return f"{API_PREFIX}/collections/{coll}{tail}"


def _save(client, keys, coll, name, **body):
    r = client.post(_url(coll, "/versions"), headers=auth(keys["merchandiser"]), json={"name": name, **body})
    assert r.status_code == 201, r.text
    assert r.headers["ETag"] == r.json()["etag"]
    return r.json()


def _state(client, keys, coll) -> str:
    r = client.get(_url(coll, "/versions"), headers=auth(keys["viewer"]))
    assert r.status_code == 200, r.text
    return r.headers["ETag"]


def _storefront(client, keys, coll, etag=None):
    headers = {**auth(keys["storefront"]), **({"If-None-Match": etag} if etag else {})}
    return client.get(f"{SF}/{coll}?columns=4&offset=0&limit=500", headers=headers)


def test_save_diff_publish_changes_the_storefront_and_rollback_changes_it_back(served, coll):
    client, _, keys = served
    listed = client.get(_url(coll, "/versions"), headers=auth(keys["viewer"]))
    assert listed.status_code == 200 and listed.json()["items"] == [] and listed.headers["ETag"] == '"p0"'
    spring = _save(client, keys, coll, "spring", columns=[4, 2], mode="mix")
    assert spring["published"] is False and spring["editable"] and HOSTILE_ID in spring["ids"]
    assert len(spring["ids"]) >= 4 and spring["created_by"] == keys["merchandiser"].split("_")[1]
    again = client.post(_url(coll, "/versions"), headers=auth(keys["merchandiser"]), json={"name": "spring"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    summer = _save(client, keys, coll, "summer")
    r = client.put(_url(coll, "/versions/summer"), headers={**auth(keys["merchandiser"]),
                                                            "If-Match": summer["etag"]},
                   json={"ids": spring["ids"][::-1]})
    assert r.status_code == 200, r.text
    summer = r.json()
    assert summer["ids"] == spring["ids"][::-1] and r.headers["ETag"] == summer["etag"]
    got = client.get(_url(coll, "/versions/summer"), headers=auth(keys["viewer"]))
    assert got.json()["ids"] == summer["ids"] and got.headers["ETag"] == summer["etag"]

    d = client.get(_url(coll, "/diff?a=spring&b=summer"), headers=auth(keys["viewer"])).json()
    n = len(spring["ids"])
    # reversed: a minimal edit keeps one product (the middle one when n is odd) and moves the rest
    moves = {m["id"]: (m["from"], m["to"]) for m in d["moved"]}
    assert len(moves) == n - 1 and (n % 2 == 0 or spring["ids"][n // 2] not in moves)
    assert all(moves[pid] == (k + 1, n - k) for k, pid in enumerate(spring["ids"]) if pid in moves)
    assert d["added"] == [] and d["removed"] == []

    assert _storefront(client, keys, coll).status_code == 404  # nothing published yet
    state0 = _state(client, keys, coll)
    r = client.post(_url(coll, "/publish"), headers={**auth(keys["publisher"]), "If-Match": state0},
                    json={"version": "spring"})
    assert r.status_code == 200, r.text
    assert r.json()["published"] == "spring" and r.json()["collection"] == coll
    state1 = r.json()["etag"]
    assert r.headers["ETag"] == state1 != state0 and _state(client, keys, coll) == state1
    shown = _storefront(client, keys, coll)
    assert shown.status_code == 200 and [i["id"] for i in shown.json()["items"]] == spring["ids"]
    etag1 = shown.headers["ETag"]
    assert _storefront(client, keys, coll, etag1).status_code == 304

    r = client.post(_url(coll, "/publish"), headers={**auth(keys["publisher"]), "If-Match": state1},
                    json={"version": "summer"})
    assert r.status_code == 200, r.text
    state2 = r.json()["etag"]
    shown = _storefront(client, keys, coll, etag1)  # the old ETag no longer matches
    assert shown.status_code == 200 and shown.json()["version"] == "summer"
    assert [i["id"] for i in shown.json()["items"]] == summer["ids"]
    etag2 = shown.headers["ETag"]
    assert etag2 != etag1
    assert client.get(_url(coll, "/diff?a=summer&b=published"),
                      headers=auth(keys["viewer"])).json()["moved"] == []
    listed = client.get(_url(coll, "/versions"), headers=auth(keys["viewer"])).json()["items"]
    assert [(v["name"], v["published"], v["editable"]) for v in listed] == [
        ("spring", False, False), ("summer", True, False)]

    r = client.post(_url(coll, "/rollback"), headers={**auth(keys["publisher"]), "If-Match": state2}, json={})
    assert r.status_code == 200, r.text
    assert r.json()["published"] == "spring" and r.json()["etag"] not in (state1, state2)
    shown = _storefront(client, keys, coll, etag2)
    assert shown.status_code == 200 and [i["id"] for i in shown.json()["items"]] == spring["ids"]
    assert shown.headers["ETag"] not in (etag2,)
    assert _storefront(client, keys, coll, shown.headers["ETag"]).status_code == 304


def test_two_editors_first_put_wins_the_second_gets_412_and_nothing_is_lost(served, coll):
    client, _, keys = served
    draft = _save(client, keys, coll, "two-editors", columns=3)  # one width: taken as [3]
    assert draft["params"]["columns"] == [3]
    read_a = client.get(_url(coll, "/versions/two-editors"), headers=auth(keys["merchandiser"]))
    read_b = client.get(_url(coll, "/versions/two-editors"), headers=auth(keys["merchandiser"]))
    assert read_a.headers["ETag"] == read_b.headers["ETag"] == draft["etag"]
    ids = draft["ids"]
    a_order = ids[1:] + ids[:1]
    b_order = ids[::-1]
    r = client.put(_url(coll, "/versions/two-editors"),
                   headers={**auth(keys["merchandiser"]), "If-Match": read_a.headers["ETag"]},
                   json={"ids": a_order})
    assert r.status_code == 200, r.text
    a_etag = r.headers["ETag"]
    assert a_etag != draft["etag"]
    r = client.put(_url(coll, "/versions/two-editors"),
                   headers={**auth(keys["merchandiser"]), "If-Match": read_b.headers["ETag"]},
                   json={"ids": b_order})
    assert r.status_code == 412, r.text
    err = r.json()["error"]
    assert err["code"] == "stale" and "edited since you read it" in err["message"]
    assert r.headers["ETag"] == a_etag  # the current ETag, to re-read and retry
    now = client.get(_url(coll, "/versions/two-editors"), headers=auth(keys["viewer"])).json()
    assert now["ids"] == a_order and now["etag"] == a_etag  # A's edit is intact
    r = client.put(_url(coll, "/versions/two-editors"),
                   headers={**auth(keys["merchandiser"]), "If-Match": a_etag}, json={"ids": b_order})
    assert r.status_code == 200 and r.json()["ids"] == b_order and r.json()["revision"] == 3


def test_a_stale_publish_or_rollback_is_412_and_changes_nothing(served, coll):
    client, _, keys = served
    _save(client, keys, coll, "pub-a")
    _save(client, keys, coll, "pub-b")
    seen = _state(client, keys, coll)  # both publishers read the same state
    first = client.post(_url(coll, "/publish"), headers={**auth(keys["publisher"]), "If-Match": seen},
                        json={"version": "pub-a"})
    assert first.status_code == 200, first.text
    shown = _storefront(client, keys, coll)
    second = client.post(_url(coll, "/publish"), headers={**auth(keys["admin"]), "If-Match": seen},
                         json={"version": "pub-b"})
    assert second.status_code == 412, second.text
    assert "published or rolled back since you read it" in second.json()["error"]["message"]
    assert second.headers["ETag"] == first.json()["etag"]
    after = _storefront(client, keys, coll, shown.headers["ETag"])
    assert after.status_code == 304  # the storefront still shows pub-a
    r = client.post(_url(coll, "/rollback"), headers={**auth(keys["publisher"]), "If-Match": seen}, json={})
    assert r.status_code == 412
    assert _storefront(client, keys, coll, shown.headers["ETag"]).status_code == 304
    listed = client.get(_url(coll, "/versions"), headers=auth(keys["viewer"])).json()["items"]
    assert [v["name"] for v in listed if v["published"]] == ["pub-a"]


def test_writes_without_if_match_are_428(served, coll):
    client, _, keys = served
    draft = _save(client, keys, coll, "needs-if-match")
    for method, tail, body, key in (
            ("PUT", "/versions/needs-if-match", {"ids": draft["ids"][:2]}, "merchandiser"),
            ("POST", "/publish", {"version": "needs-if-match"}, "publisher"),
            ("POST", "/rollback", {}, "publisher")):
        for extra in ({}, {"If-Match": "*"}):
            r = client.request(method, _url(coll, tail), headers={**auth(keys[key]), **extra}, json=body)
            assert r.status_code == 428, (method, tail, extra, r.text)
            assert r.json()["error"]["field"] == "If-Match"
    assert client.get(_url(coll, "/versions/needs-if-match"), headers=auth(keys["viewer"])).json()["ids"] \
        == draft["ids"]
    r = client.put(_url(coll, "/versions/needs-if-match"),
                   headers={**auth(keys["merchandiser"]), "If-Match": '"not-an-etag"'}, json={"ids": []})
    assert r.status_code == 422 and r.json()["error"]["field"] == "If-Match"


def test_a_published_version_cannot_be_edited(served, coll):
    client, _, keys = served
    v = _save(client, keys, coll, "locked")
    r = client.post(_url(coll, "/publish"),
                    headers={**auth(keys["publisher"]), "If-Match": _state(client, keys, coll)},
                    json={"version": "locked", "version_etag": v["etag"]})
    assert r.status_code == 200, r.text
    r = client.put(_url(coll, "/versions/locked"),
                   headers={**auth(keys["merchandiser"]), "If-Match": v["etag"]},
                   json={"ids": v["ids"][::-1]})
    assert r.status_code == 409 and "published" in r.json()["error"]["message"]
    assert client.get(_url(coll, "/versions/locked"), headers=auth(keys["viewer"])).json()["ids"] == v["ids"]
    # publishing a draft edited after it was reviewed is refused too
    draft = _save(client, keys, coll, "reviewed")
    r = client.put(_url(coll, "/versions/reviewed"), headers={**auth(keys["merchandiser"]),
                                                              "If-Match": draft["etag"]},
                   json={"ids": draft["ids"][:3]})
    assert r.status_code == 200
    r = client.post(_url(coll, "/publish"),
                    headers={**auth(keys["publisher"]), "If-Match": _state(client, keys, coll)},
                    json={"version": "reviewed", "version_etag": draft["etag"]})
    assert r.status_code == 412 and "nothing was published" in r.json()["error"]["message"]


def test_csv_export_neutralises_a_formula_title(served, coll):
    client, _, keys = served
    v = _save(client, keys, coll, "export-me")
    assert HOSTILE_ID in v["ids"]
    r = client.get(_url(coll, "/versions/export-me/export?format=csv"), headers=auth(keys["viewer"]))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert 'filename="' in r.headers["content-disposition"] and r.headers["content-disposition"].startswith(
        "attachment")
    rows = list(csv.reader(io.StringIO(r.text)))
    assert rows[0] == ["position", "product_id", "title"]
    by_id = {row[1]: row for row in rows[1:]}
    assert by_id[HOSTILE_ID][2] == "'" + HOSTILE_TITLE
    assert [row[1] for row in rows[1:]] == v["ids"]
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for cell in row)
    j = client.get(_url(coll, "/versions/export-me/export?format=json"), headers=auth(keys["viewer"]))
    assert j.status_code == 200 and j.headers["content-type"].startswith("application/json")
    items = j.json()["items"]
    assert [i["id"] for i in items] == v["ids"]
    assert next(i["title"] for i in items if i["id"] == HOSTILE_ID) == HOSTILE_TITLE  # JSON keeps it as is


def test_bad_input_is_a_4xx_naming_the_field(served, coll):
    client, _, keys = served
    m = auth(keys["merchandiser"])
    new = _url(coll, "/versions")
    cases = [
        (client.post(new, headers=m, json={"name": "x", "mode": "zigzag"}), 422, "mode"),
        (client.post(new, headers=m, json={"name": "x", "columns": [0]}), 422, "columns[0]"),
        (client.post(new, headers=m, json={"name": "bad name!"}), 422, "name"),
        (client.post(new, headers=m, json={"name": "published"}), 422, "name"),
        (client.get(_url(coll, "/versions/export-me/export?format=xml"), headers=m), 422, "format"),
        (client.get(_url(coll, "/diff?a=spring"), headers=m), 422, "b"),
    ]
    for r, status, field in cases:
        assert r.status_code == status, r.text
        assert r.json()["error"]["field"] == field, r.text
    draft = _save(client, keys, coll, "bad-ids")
    r = client.put(_url(coll, "/versions/bad-ids"), headers={**m, "If-Match": draft["etag"]},
                   json={"ids": [draft["ids"][0], "no-such-product"]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "ids[1]"
    r = client.put(_url(coll, "/versions/bad-ids"), headers={**m, "If-Match": draft["etag"]},
                   json={"ids": [draft["ids"][0], draft["ids"][0]]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "ids[1]"
    r = client.put(_url(coll, "/versions/bad-ids"), headers={**m, "If-Match": draft["etag"]},
                   json={"ids": []})
    assert r.status_code == 422 and r.json()["error"]["field"] == "ids"
    assert client.get(_url(coll, "/versions/bad-ids"), headers=m).json()["ids"] == draft["ids"]
    assert client.get(_url("no-such-collection", "/versions"), headers=m).status_code == 404
    assert client.get(_url(coll, "/versions/nope"), headers=m).status_code == 404
    assert client.get(_url(coll, "/diff?a=nope&b=published"), headers=m).status_code == 404
