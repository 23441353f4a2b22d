"""Auth against the app's own route table: every route and every kind of key (401/403),
expired and revoked keys, the rate limit, the audit log and the CLI that makes keys."""

from __future__ import annotations

import json
import re
import time

import pytest
from fastapi.testclient import TestClient
from tests.server.conftest import auth

from vismerch.catalog import access
from vismerch.config import load_settings
from vismerch.serve.app import API_PREFIX, create_app
from vismerch.serve.auth import allowed

PUBLIC = {("GET", f"{API_PREFIX}/health")}


def _routes(app) -> list[tuple[str, str, str | None]]:
    return app.state.route_table


def _url(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


def test_every_route_but_health_needs_a_key(served):
    client, _, _ = served
    routes = _routes(client.app)
    assert len(routes) >= 15
    unguarded = {(m, p) for m, p, role in routes if role is None}
    assert unguarded == PUBLIC


def test_role_matrix_401_403_for_every_route_and_role(served):
    client, _, keys = served
    checked = 0
    for method, path, needed in _routes(client.app):
        if needed is None:
            continue
        url = _url(path)
        r = client.request(method, url)
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["error"]["code"] == "unauthenticated"
        for kind, key in keys.items():
            r = client.request(method, url, headers=auth(key))
            if allowed(kind, needed):
                assert r.status_code not in (401, 403), (kind, method, path, r.text)
            else:
                assert r.status_code == 403, (kind, method, path, r.text)
                assert needed in r.json()["error"]["message"]
            checked += 1
    assert checked >= 15 * len(keys)


def test_storefront_scope_reads_grids_only(served):
    client, _, keys = served
    assert client.get(f"{API_PREFIX}/products", headers=auth(keys["storefront"])).status_code == 403
    assert client.get(f"{API_PREFIX}/storefront/collections/nope",
                      headers=auth(keys["storefront"])).status_code == 404


def test_wrong_expired_and_revoked_keys_are_401(served):
    client, ws, keys = served
    url = f"{API_PREFIX}/products"
    for bad in ("nonsense", keys["admin"][:-1] + ("A" if keys["admin"][-1] != "A" else "B")):
        r = client.get(url, headers=auth(bad))
        assert r.status_code == 401 and r.json()["error"]["message"] == "unknown API key"
    text, key = access.create_key(ws.store, "viewer", expires_in=2)
    assert client.get(url, headers=auth(text)).status_code == 200
    time.sleep(2.05)
    r = client.get(url, headers=auth(text))
    assert r.status_code == 401 and "expired" in r.json()["error"]["message"]
    text, key = access.create_key(ws.store, "viewer")
    assert client.get(url, headers={"X-API-Key": text}).status_code == 200
    r = client.delete(f"{API_PREFIX}/keys/{key.id}", headers=auth(keys["admin"]))
    assert r.status_code == 200 and r.json()["active"] is False
    r = client.get(url, headers={"X-API-Key": text})  # the verified-key cache does not outlive a revoke
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]


def test_only_a_salted_hash_is_stored(served):
    _, ws, _ = served
    text, key = access.create_key(ws.store, "viewer")
    other, _ = access.create_key(ws.store, "viewer")
    secret = text.split("_", 2)[2]
    rows = ws.store.db.execute("SELECT * FROM api_keys").fetchall()
    dump = repr([tuple(r) for r in rows])
    assert secret not in dump and secret.encode().hex() not in dump
    salts = [bytes(r["salt"]) for r in rows]
    assert len(set(salts)) == len(salts)  # a salt per key
    assert access.verify_key(ws.store, text).id == key.id
    assert access.verify_key(ws.store, other).id != key.id


def test_rate_limit_answers_429_with_retry_after(served):
    _, ws, keys = served
    settings = load_settings(overrides={"serve_rate_limit": 0.5, "serve_rate_burst": 3})
    with TestClient(create_app(ws, settings)) as client:
        codes = [client.get(f"{API_PREFIX}/products?limit=1", headers=auth(keys["viewer"])).status_code
                 for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = client.get(f"{API_PREFIX}/products?limit=1", headers=auth(keys["viewer"]))
        assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 2
        # the limit is per key: another key still gets through
        assert client.get(f"{API_PREFIX}/products?limit=1", headers=auth(keys["admin"])).status_code == 200


def test_every_write_is_audited_and_only_admins_read_the_log(served):
    client, _, keys = served
    r = client.post(f"{API_PREFIX}/keys", headers=auth(keys["admin"]),
                    json={"role": "viewer", "name": "audit-me"})
    assert r.status_code == 201
    r = client.post(f"{API_PREFIX}/queues/quality/decisions", headers=auth(keys["merchandiser"]),
                    json={"items": [{"product_id": "nope", "item": "blur"}], "decision": "ignored"})
    assert r.status_code == 404
    assert client.get(f"{API_PREFIX}/audit", headers=auth(keys["publisher"])).status_code == 403
    entries = client.get(f"{API_PREFIX}/audit?limit=1000", headers=auth(keys["admin"])).json()["items"]
    admin_id = keys["admin"].split("_")[1]
    merch_id = keys["merchandiser"].split("_")[1]
    made = [e for e in entries if e["action"] == f"POST {API_PREFIX}/keys" and e["actor"] == admin_id]
    assert made and made[-1]["status"] == 201 and made[-1]["detail"]["body"]["name"] == "audit-me"
    refused = [e for e in entries if e["actor"] == merch_id and e["action"].endswith("/decisions")]
    assert refused and refused[-1]["status"] == 404 and refused[-1]["role"] == "merchandiser"
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", e["at"]) for e in entries)


def test_keys_cli_prints_the_key_once_and_revoke_locks_it_out(served, capsys):
    from vismerch.cli import main

    client, ws, _ = served
    assert main(["keys", "create", str(ws.path), "--role", "publisher", "--expires", "30d", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["role"] == "publisher" and made["expires_at"] > made["created_at"]
    assert client.get(f"{API_PREFIX}/products", headers=auth(made["key"])).status_code == 200
    assert main(["keys", "list", str(ws.path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert made["id"] in {k["id"] for k in listed} and made["key"] not in json.dumps(listed)
    assert main(["keys", "revoke", str(ws.path), made["id"]]) == 0
    assert client.get(f"{API_PREFIX}/products", headers=auth(made["key"])).status_code == 401
    assert main(["keys", "create", str(ws.path), "--role", "owner"]) == 2
    assert main(["keys", "create", str(ws.path), "--role", "viewer", "--expires", "soon"]) == 2
    assert "bad duration 'soon'" in capsys.readouterr().err
    assert main(["keys", "revoke", str(ws.path), "nosuchkey"]) == 2
    assert "no API key 'nosuchkey'" in capsys.readouterr().err
    from vismerch.catalog import access

    by_cli = [(e["action"], e["target"]) for e in access.audit_entries(ws.store, limit=10_000)
              if e["actor"] == "cli"]
    assert by_cli == [("keys create", made["id"]), ("keys revoke", made["id"])]


@pytest.mark.parametrize("origin_setting, expect_cors", [("", False), ("https://shop.example", True)])
def test_cors_is_off_unless_configured(served, origin_setting, expect_cors):
    _, ws, keys = served
    settings = load_settings(overrides={"serve_cors_origins": origin_setting, "serve_rate_limit": 0})
    client = TestClient(create_app(ws, settings))
    r = client.get(f"{API_PREFIX}/health", headers={"Origin": "https://shop.example"})
    assert ("access-control-allow-origin" in r.headers) is expect_cors
    r = client.get(f"{API_PREFIX}/health", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers
