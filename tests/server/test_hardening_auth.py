"""Issue 29, what a hostile caller does before it has a key: bodies are not read before
authentication and are capped, failed sign-ins are throttled and cached (no scrypt per
guess), one key cannot sign the others out, refusals are counted, sign-out and writes are
audited before the answer leaves, and a client that goes away is no server error."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from fastapi.testclient import TestClient
from tests.server.conftest import auth

from vismerch.catalog import access
from vismerch.config import load_settings
from vismerch.serve.app import API_PREFIX, create_app

RULES = f"{API_PREFIX}/rules"


@pytest.fixture
def app_with(served):
    """A fresh app over the served store with some settings changed (its own throttle,
    sessions and counters)."""
    _, ws, keys = served

    def make(**overrides) -> TestClient:
        settings = load_settings(overrides={"serve_rate_limit": 0, **overrides})
        return TestClient(create_app(ws, settings), raise_server_exceptions=False)

    return make, ws, keys


def test_malformed_json_without_a_key_is_401_and_with_a_key_422(served):
    client, _, keys = served
    headers = {"Content-Type": "application/json"}
    r = client.post(RULES, content=b"{not json", headers=headers)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    r = client.post(RULES, content=b"{not json", headers={**headers, **auth(keys["merchandiser"])})
    assert r.status_code == 422


def test_a_body_without_a_key_is_never_read(served):
    """The guard answers 401 from the headers: the body iterator is never pulled."""
    client, _, _ = served
    pulled = []

    def body():
        for i in range(1000):
            pulled.append(i)
            yield b"x" * 65536

    r = client.post(RULES, content=body(), headers={"Content-Type": "application/json"})
    assert r.status_code == 401
    assert len(pulled) <= 1  # the test client may take the first chunk before the app runs


def test_bodies_over_the_cap_are_413_by_length_and_by_streamed_bytes(app_with):
    make, _, keys = app_with
    client = make(serve_body_max_bytes=1000)
    m = {**auth(keys["merchandiser"]), "Content-Type": "application/json"}
    big = json.dumps({"kind": "boost", "where": "true", "note": "n" * 2000}).encode()
    r = client.post(RULES, content=big, headers=m)
    assert r.status_code == 413 and r.json()["error"]["field"] == "body", r.text

    def chunks():  # no Content-Length: counted as it streams
        for _ in range(4):
            yield big[:500]

    r = client.post(RULES, content=chunks(), headers=m)
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large", r.text
    small = client.post(RULES, json={"kind": "boost", "where": "price < 0"},
                        headers=auth(keys["merchandiser"]))
    assert small.status_code == 201, small.text
    client.delete(f"{RULES}/{small.json()['id']}", headers=auth(keys["merchandiser"]))


def test_wrong_secrets_are_throttled_per_key_and_address_and_cost_one_scrypt(app_with, monkeypatch):
    make, ws, keys = app_with
    client = make(serve_auth_fail_limit=3, serve_auth_fail_window=60)
    checks = []
    real = access._hash
    monkeypatch.setattr(access, "_hash", lambda secret, salt: checks.append(1) or real(secret, salt))
    assert client.get(f"{API_PREFIX}/products?limit=1", headers=auth(keys["admin"])).status_code == 200
    key_id = keys["viewer"].split("_")[1]
    wrong = f"vmk_{key_id}_{'w' * 40}"
    codes = [client.get(f"{API_PREFIX}/products", headers=auth(wrong)).status_code for _ in range(3)]
    assert codes == [401, 401, 401]
    assert len(checks) == 2  # the admin key's, one for the wrong secret: repeating it costs none
    r = client.get(f"{API_PREFIX}/products", headers=auth(f"vmk_{key_id}_{'z' * 40}"))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"]["code"] == "auth_throttled" and len(checks) == 2
    assert client.get(f"{API_PREFIX}/products", headers=auth(keys["viewer"])).status_code == 429
    # a key verified in this process before is never locked out by someone guessing from its address
    assert client.get(f"{API_PREFIX}/products?limit=1", headers=auth(keys["admin"])).status_code == 200
    fresh = make(serve_auth_fail_limit=3)
    assert fresh.get(f"{API_PREFIX}/products?limit=1", headers=auth(keys["viewer"])).status_code == 200
    counts = client.get(f"{API_PREFIX}/audit/refusals", headers=auth(keys["admin"])).json()["counts"]
    assert counts["401 unauthenticated"] == 3 and counts["429 auth_throttled"] == 2


def test_refusals_are_counted_csrf_403_and_401_alike(app_with):
    make, _, keys = app_with
    client = make()
    assert client.get(f"{API_PREFIX}/products").status_code == 401
    assert client.post(RULES, json={}, headers=auth(keys["viewer"])).status_code == 403
    client.post("/ui/session", headers=auth(keys["merchandiser"]))
    assert client.post(RULES, json={"kind": "boost", "where": "true"}).status_code == 403  # no CSRF token
    counts = client.get(f"{API_PREFIX}/audit/refusals", headers=auth(keys["admin"])).json()["counts"]
    assert counts == {"401 unauthenticated": 1, "403 forbidden": 1, "403 csrf": 1}


def test_one_key_signing_in_again_and_again_ends_only_its_own_oldest_sessions(app_with):
    make, _, keys = app_with
    client = make(serve_sessions_per_key=3)
    other = TestClient(client.app)
    assert other.post("/ui/session", headers=auth(keys["viewer"])).status_code == 200
    first = TestClient(client.app)
    assert first.post("/ui/session", headers=auth(keys["merchandiser"])).status_code == 200
    for _ in range(5):
        again = TestClient(client.app).post("/ui/session", headers=auth(keys["merchandiser"]))
        assert again.status_code == 200
    assert first.get("/ui/session").status_code == 401  # the merchandiser's oldest went
    assert other.get("/ui/session").json()["role"] == "viewer"  # the viewer's was never touched


def test_sign_out_is_audited(app_with):
    make, ws, keys = app_with
    client = make()
    csrf = client.post("/ui/session", headers=auth(keys["publisher"])).json()["csrf"]
    assert client.delete("/ui/session", headers={"X-CSRF-Token": csrf}).status_code == 200
    key_id = keys["publisher"].split("_")[1]
    rows = [e for e in access.audit_entries(ws.store, limit=100_000, actor=key_id)
            if e["action"] == "DELETE /ui/session"]
    assert rows and rows[-1]["status"] == 200 and rows[-1]["role"] == "publisher"


def test_the_audit_row_exists_before_the_response_starts(app_with):
    make, ws, keys = app_with
    inner = make().app
    seen = {}

    async def outer(scope, receive, send):
        async def watch(message):
            if message["type"] == "http.response.start":
                seen["rows"] = len(access.audit_entries(ws.store, limit=100_000, actor=key_id))
            await send(message)

        await inner(scope, receive, watch)

    key_id = keys["merchandiser"].split("_")[1]
    before = len(access.audit_entries(ws.store, limit=100_000, actor=key_id))
    r = TestClient(outer).post(RULES, json={"kind": "boost", "where": "price < 0"},
                               headers=auth(keys["merchandiser"]))
    assert r.status_code == 201
    assert seen["rows"] == before + 1
    TestClient(inner).delete(f"{RULES}/{r.json()['id']}", headers=auth(keys["merchandiser"]))


def test_a_client_that_goes_away_is_audited_as_499_and_logged_as_no_error(app_with, caplog):
    make, ws, keys = app_with
    app = make().app
    sent = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": f"{API_PREFIX}/search/image", "raw_path": b"",
             "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"authorization", f"Bearer {keys['viewer']}".encode()),
                         (b"content-type", b"image/png")]}
    with caplog.at_level("ERROR"):  # on a thread of its own: another test's loop may run here
        runner = threading.Thread(target=lambda: asyncio.run(app(scope, receive, send)))
        runner.start()
        runner.join(30)
    assert sent[0]["status"] == 499
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    key_id = keys["viewer"].split("_")[1]
    rows = access.audit_entries(ws.store, limit=100_000, actor=key_id)
    assert rows[-1]["action"] == f"POST {API_PREFIX}/search/image" and rows[-1]["status"] == 499


def test_docs_serve_swagger_ui_from_the_package_and_load_nothing_from_elsewhere(served):
    import re

    client, _, _ = served
    page = client.get("/docs")
    assert page.status_code == 200 and "SwaggerUIBundle" in page.text
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
    assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    for url in urls:
        assert client.get(url).status_code == 200, url


def test_a_writes_audit_row_is_committed_with_the_write(app_with, monkeypatch):
    """With the audit's own later writes switched off (as if the server died right after
    the write committed), the row is there anyway: it was in the write's transaction."""
    make, ws, keys = app_with
    client = make()
    monkeypatch.setattr(access, "set_status", lambda *a, **k: None)
    monkeypatch.setattr(access, "record", lambda *a, **k: None)
    key_id = keys["merchandiser"].split("_")[1]
    before = len(access.audit_entries(ws.store, limit=100_000, actor=key_id))
    r = client.post(RULES, json={"kind": "boost", "where": "price < 0"}, headers=auth(keys["merchandiser"]))
    assert r.status_code == 201, r.text
    rows = access.audit_entries(ws.store, limit=100_000, actor=key_id)[before:]
    assert [(e["action"], e["detail"]["body"]["where"]) for e in rows] == [(f"POST {RULES}", "price < 0")]
    refused = client.post(RULES, json={"kind": "boost", "where": "price <"},
                          headers=auth(keys["merchandiser"]))
    assert refused.status_code == 422  # nothing written: no row inside any transaction
    assert len(access.audit_entries(ws.store, limit=100_000, actor=key_id)) == before + 1
    monkeypatch.undo()
    client.delete(f"{RULES}/{r.json()['id']}", headers=auth(keys["merchandiser"]))
