"""Search-query merchandising over HTTP: query rules applied by GET /search (pin, hide,
redirect), a dated rule inactive outside its window (and the preview at a date), synonyms
searched and fused, the before/after preview, CRUD with paging and audit, 4xx naming the
field, and the zero-result / low-click report from search events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX

QR, SYN, SEARCH = f"{API_PREFIX}/query-rules", f"{API_PREFIX}/synonyms", f"{API_PREFIX}/search"


def _stamp(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def clean(served):
    """Every test starts and ends without query rules or synonyms."""
    from vismerch.service import query_rules as service

    client, ws, keys = served

    def wipe():
        for r in service.list_rules(ws):
            service.delete_rule(ws, r.id)
        for s in service.list_synonyms(ws):
            service.delete_synonym(ws, s.id)
    wipe()
    yield served
    wipe()


def _search(client, key, q, **params) -> dict:
    r = client.get(SEARCH, params={"q": q, "k": 8, **params}, headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()


def _ids(result) -> list[str]:
    return [h["id"] for h in result["hits"]]


def _outsider(ws, result) -> str:
    """A product the plain search does not return."""
    shown = set(_ids(result))
    return next(p.id for p in ws.store.products() if p.id not in shown)


def test_pin_and_hide_apply_to_search_and_match_normalised(clean):
    client, ws, keys = clean
    m, v = auth(keys["merchandiser"]), keys["viewer"]
    plain = _search(client, v, "shirt")
    outsider, first = _outsider(ws, plain), _ids(plain)[0]
    r = client.post(QR, headers=m, json={"kind": "pin", "query": "  SHIRT ", "products": [outsider],
                                         "position": 2})
    assert r.status_code == 201, r.text
    assert r.json()["query"] == "shirt" and r.json()["active"] is True
    r = client.post(QR, headers=m, json={"kind": "hide", "query": "shi", "match": "prefix",
                                         "products": [first]})
    assert r.status_code == 201, r.text
    after = _search(client, v, "Shirt")
    assert _ids(after)[1] == outsider and first not in _ids(after) and len(after["hits"]) == 8
    actions = {(e["action"], e["product"]) for e in after["merchandising"]["effects"]}
    assert actions == {("pinned", outsider), ("hidden", first)}
    assert outsider not in _ids(_search(client, v, "trousers"))  # another query: no rule


def test_dated_rule_is_inactive_outside_its_window_and_previewed_at_a_date(clean):
    client, ws, keys = clean
    m, v = auth(keys["merchandiser"]), keys["viewer"]
    plain = _search(client, v, "shirt")
    outsider = _outsider(ws, plain)
    r = client.post(QR, headers=m, json={"kind": "pin", "query": "shirt", "products": [outsider],
                                         "position": 1, "starts_at": _stamp(1), "ends_at": _stamp(2)})
    assert r.status_code == 201 and r.json()["active"] is False
    now = _search(client, v, "shirt")
    assert _ids(now) == _ids(plain) and now["merchandising"]["rules"] == []
    ahead = client.get(f"{SEARCH}/preview", params={"q": "shirt", "k": 8, "at": _stamp(1.5)},
                       headers=auth(v)).json()
    assert _ids(ahead["before"]) == _ids(plain) and _ids(ahead["after"])[0] == outsider
    gone = client.get(f"{SEARCH}/preview", params={"q": "shirt", "k": 8, "at": _stamp(3)},
                      headers=auth(v)).json()
    assert _ids(gone["after"]) == _ids(plain)
    inactive = client.get(QR, params={"active": "false"}, headers=auth(v)).json()["items"]
    assert [x["id"] for x in inactive] == [r.json()["id"]]


def test_synonyms_expand_the_query(clean):
    client, ws, keys = clean
    m, v = auth(keys["merchandiser"]), keys["viewer"]
    r = client.post(SYN, headers=m, json={"kind": "equivalent",
                                          "synonyms": ["Jumper", "sweater", "pullover"]})
    assert r.status_code == 201, r.text
    assert r.json()["synonyms"] == ["jumper", "sweater", "pullover"]
    result = _search(client, v, "red jumper")
    assert result["merchandising"]["searched"] == ["red jumper", "red sweater", "red pullover"]
    assert [u["synonym"] for u in result["merchandising"]["synonyms"]] == [r.json()["id"]] * 2
    r = client.post(SYN, headers=m, json={"kind": "one-way", "term": "tee", "synonyms": ["t-shirt"]})
    assert r.status_code == 201, r.text
    assert _search(client, v, "tee")["merchandising"]["searched"] == ["tee", "t-shirt"]
    assert _search(client, v, "t-shirt")["merchandising"]["searched"] == ["t-shirt"]
    preview = client.get(f"{SEARCH}/preview", params={"q": "tee", "k": 8}, headers=auth(v)).json()
    assert preview["after"]["merchandising"]["searched"] == ["tee", "t-shirt"]
    assert preview["before"]["merchandising"] is None


def test_redirect_rule(clean):
    client, ws, keys = clean
    m, v = auth(keys["merchandiser"]), keys["viewer"]
    r = client.post(f"{API_PREFIX}/collections", headers=m, json={"id": "qr-sale", "where": "price < 100"})
    assert r.status_code in (201, 409), r.text
    r = client.post(QR, headers=m, json={"kind": "redirect", "query": "sale*", "match": "glob",
                                         "collection": "qr-sale"})
    assert r.status_code == 201, r.text
    assert _search(client, v, "Sale items")["redirect"] == "qr-sale"
    assert _search(client, v, "shirt")["redirect"] is None
    gone = client.delete(f"{API_PREFIX}/collections/qr-sale", headers=auth(keys["admin"]))
    assert gone.status_code == 200, gone.text
    assert _search(client, v, "Sale items")["redirect"] is None  # the redirect went with its page
    assert client.get(f"{QR}/{r.json()['id']}", headers=auth(v)).status_code == 404


def test_crud_paging_and_audit(clean):
    client, ws, keys = clean
    m, v = auth(keys["merchandiser"]), auth(keys["viewer"])
    product = next(p.id for p in ws.store.products())
    made = [client.post(QR, headers=m, json={"kind": "boost", "query": f"q{i}", "products": [product]}).json()
            for i in range(3)]
    assert made[0]["factor"] == 50
    page = client.get(QR, params={"limit": 2}, headers=v).json()
    assert [x["id"] for x in page["items"]] == [made[0]["id"], made[1]["id"]] and page["next_cursor"]
    rest = client.get(QR, params={"limit": 2, "cursor": page["next_cursor"]}, headers=v).json()
    assert [x["id"] for x in rest["items"]] == [made[2]["id"]] and rest["next_cursor"] is None
    r = client.patch(f"{QR}/{made[0]['id']}", headers=m, json={"factor": 80, "enabled": False})
    assert r.status_code == 200 and r.json()["factor"] == 80 and r.json()["active"] is False
    assert client.delete(f"{QR}/{made[1]['id']}", headers=m).status_code == 200
    assert client.get(f"{QR}/{made[1]['id']}", headers=v).status_code == 404
    syn = client.post(SYN, headers=m, json={"kind": "equivalent", "synonyms": ["a", "b"]}).json()
    r = client.patch(f"{SYN}/{syn['id']}", headers=m, json={"synonyms": ["a", "b", "c"]})
    assert r.status_code == 200 and r.json()["synonyms"] == ["a", "b", "c"]
    assert client.delete(f"{SYN}/{syn['id']}", headers=m).status_code == 200
    audit = client.get(f"{API_PREFIX}/audit?limit=1000", headers=auth(keys["admin"])).json()["items"]
    actions = [e["action"] for e in audit]
    assert f"POST {QR}" in actions and f"PATCH {QR}/{made[0]['id']}" in actions
    assert f"DELETE {SYN}/{syn['id']}" in actions
    refused = client.post(QR, headers=v, json={"kind": "hide", "query": "x", "products": [product]})
    assert refused.status_code == 403


@pytest.mark.parametrize(("body", "field"), [
    ({"kind": "promote", "query": "x", "products": ["P"]}, "kind"),
    ({"kind": "hide", "query": "x", "match": "regex", "products": ["P"]}, "match"),
    ({"kind": "hide", "query": "   ", "products": ["P"]}, "query"),
    ({"kind": "pin", "query": "x", "products": ["P"]}, "position"),
    ({"kind": "pin", "query": "x", "products": ["no-such-product"], "position": 1}, "products"),
    ({"kind": "hide", "query": "x"}, "products"),
    ({"kind": "boost", "query": "x", "products": ["P"], "factor": 500}, "factor"),
    ({"kind": "redirect", "query": "x", "collection": "no-such-collection"}, "collection"),
    ({"kind": "hide", "query": "x", "products": ["P"], "starts_at": "next tuesday"}, "starts_at"),
    ({"kind": "hide", "query": "x", "products": ["P"], "starts_at": "2026-02-01", "ends_at": "2026-01-01"},
     "ends_at"),
])
def test_bad_query_rules_are_refused_naming_the_field(clean, body, field):
    client, ws, keys = clean
    product = next(p.id for p in ws.store.products())
    body = {k: ([product if x == "P" else x for x in v] if k == "products" else v) for k, v in body.items()}
    r = client.post(QR, headers=auth(keys["merchandiser"]), json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert client.get(QR, headers=auth(keys["viewer"])).json()["items"] == []


@pytest.mark.parametrize(("body", "field"), [
    ({"kind": "similar", "synonyms": ["a", "b"]}, "kind"),
    ({"kind": "equivalent", "synonyms": ["a", "A "]}, "synonyms"),
    ({"kind": "one-way", "synonyms": ["a"]}, "term"),
    ({"kind": "equivalent", "synonyms": "a, b"}, "synonyms"),
])
def test_bad_synonyms_are_refused_naming_the_field(clean, body, field):
    client, ws, keys = clean
    r = client.post(SYN, headers=auth(keys["merchandiser"]), json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_report_lists_zero_result_and_low_click_queries(served):
    client, ws, keys = served
    product = next(p.id for p in ws.store.products())
    now = datetime.now(UTC).isoformat()

    def search(i, q, results):
        return {"event_id": f"qr-s{i}", "type": "search", "ts": now, "visitor": f"v{i}", "query": q,
                "results": results}
    events = [search(i, "Robe Été", 0) for i in range(3)] + [search(10 + i, "shirt", 8) for i in range(4)]
    events += [search(20 + i, "jeans", 8) for i in range(2)]
    events += [{"event_id": f"qr-c{i}", "type": "click", "ts": now, "visitor": f"v{20 + i}", "query": "jeans",
                "product_id": product, "position": 1} for i in range(2)]
    events += [{"event_id": "qr-bad", "type": "search", "ts": now, "visitor": "v", "query": "x"}]
    r = client.post(f"{API_PREFIX}/events", json={"events": events}, headers=auth(keys["storefront"]))
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == len(events) - 1
    assert [(x["index"], x["field"]) for x in r.json()["refused"]] == [(len(events) - 1, "results")]
    report = client.get(f"{SEARCH}/report", headers=auth(keys["viewer"])).json()
    assert [(z["query"], z["zero_results"]) for z in report["zero_results"]] == [("robe ete", 3)]
    assert [(x["query"], x["searches"], x["clicks"]) for x in report["low_clicks"]] == [("shirt", 4, 0)]
    assert report["searches"] == 9
    later = client.get(f"{SEARCH}/report", params={"since": _stamp(1)}, headers=auth(keys["viewer"])).json()
    assert later["searches"] == 0 and later["zero_results"] == []
    bad = client.get(f"{SEARCH}/report", params={"since": "soon"}, headers=auth(keys["viewer"]))
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "since"


def test_cli_adds_lists_previews_and_reports(clean):
    import json

    from typer.testing import CliRunner

    from vismerch.cli import app, main

    client, ws, keys = clean
    runner = CliRunner()
    product = next(p.id for p in ws.store.products())

    def run(*args):
        result = runner.invoke(app, ["queries", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)
    assert _search(client, keys["viewer"], "shirt")["merchandising"]["rules"] == []  # read and cached
    added = run("add", str(ws.path), "pin", "Shirt", "--product", product, "--position", "1", "--json")
    assert (added["kind"], added["query"], added["products"]) == ("pin", "shirt", [product])
    # written through another store connection (the CLI's): the server sees it on its next search
    assert _ids(_search(client, keys["viewer"], "shirt"))[0] == product
    assert main(["queries", "disable", str(ws.path), str(added["id"])]) == 0
    assert _search(client, keys["viewer"], "shirt")["merchandising"]["rules"] == []
    assert main(["queries", "enable", str(ws.path), str(added["id"])]) == 0
    assert [r["id"] for r in run("rules", str(ws.path), "--query", "SHIRT", "--json")] == [added["id"]]
    both = run("preview", str(ws.path), "shirt", "-k", "5", "--json")
    assert both["after"]["hits"][0]["id"] == product
    syn = run("synonym-add", str(ws.path), "one-way", "t-shirt", "--term", "tee", "--json")
    assert syn["term"] == "tee" and syn["synonyms"] == ["t-shirt"]
    now = datetime.now(UTC).isoformat()
    events = [{"event_id": f"cli-{i}", "type": "search", "ts": now, "visitor": "v", "query": "Gilet Jaune",
               "results": 0} for i in range(2)]
    assert client.post(f"{API_PREFIX}/events", json={"events": events},
                       headers=auth(keys["storefront"])).json()["accepted"] == 2
    zero = run("report", str(ws.path), "--json")["zero_results"]
    assert ("gilet jaune", 2) in [(z["query"], z["zero_results"]) for z in zero]
    assert main(["queries", "add", str(ws.path), "pin", "shirt", "--product", product]) == 2
