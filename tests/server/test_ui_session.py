"""The web app's session: an API key exchanged for an HttpOnly, SameSite=Strict cookie that
the API accepts, a CSRF token required on writes made with it, sign-out and revocation, and
the UI files served with a strict Content-Security-Policy (in-process, no browser)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.server.conftest import auth

from vismerch.serve.app import API_PREFIX

DECISION = {"items": [{"product_id": "nope", "item": "blur"}], "decision": "resolved"}


def _signed_in(client: TestClient, key: str) -> str:
    r = client.post("/ui/session", headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()["csrf"]


def _fresh(served) -> TestClient:
    client, _, _ = served
    return TestClient(client.app, raise_server_exceptions=False)


def test_sign_in_sets_a_strict_httponly_cookie_the_api_accepts(served):
    _, _, keys = served
    client = _fresh(served)
    r = client.post("/ui/session", headers=auth(keys["merchandiser"]))
    assert r.status_code == 200 and r.json()["role"] == "merchandiser"
    cookie = r.headers["set-cookie"]
    assert "vm_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert keys["merchandiser"] not in cookie and keys["merchandiser"] not in r.text
    assert client.get(f"{API_PREFIX}/products").status_code == 200
    assert client.get("/ui/session").json()["role"] == "merchandiser"


def test_no_cookie_or_a_made_up_one_is_401(served):
    client = _fresh(served)
    assert client.get(f"{API_PREFIX}/products").status_code == 401
    client.cookies.set("vm_session", "forged")
    r = client.get(f"{API_PREFIX}/products")
    assert r.status_code == 401 and "sign in" in r.json()["error"]["hint"]
    assert client.get("/ui/session").status_code == 401


def test_bad_keys_cannot_sign_in_and_storefront_keys_may_not(served):
    _, _, keys = served
    client = _fresh(served)
    assert client.post("/ui/session").status_code == 401
    assert client.post("/ui/session", headers=auth("vmk_nonsense")).status_code == 401
    r = client.post("/ui/session", headers=auth(keys["storefront"]))
    assert r.status_code == 403 and "vm_session" not in r.headers.get("set-cookie", "")


def test_cookie_writes_need_the_sessions_csrf_token(served):
    _, _, keys = served
    client = _fresh(served)
    csrf = _signed_in(client, keys["merchandiser"])
    url = f"{API_PREFIX}/queues/quality/decisions"
    for headers in ({}, {"X-CSRF-Token": "forged"}, {"X-CSRF-Token": csrf[:-1]}):
        r = client.post(url, json=DECISION, headers=headers)
        assert r.status_code == 403 and r.json()["error"]["code"] == "csrf", headers
    r = client.post(url, json=DECISION, headers={"X-CSRF-Token": csrf})
    assert r.status_code not in (401, 403), r.text  # past auth and CSRF (the item is unknown)
    other = _fresh(served)
    other_csrf = _signed_in(other, keys["merchandiser"])
    assert other_csrf != csrf
    r = client.post(url, json=DECISION, headers={"X-CSRF-Token": other_csrf})
    assert r.status_code == 403  # another session's token is no good here


def test_roles_hold_through_the_cookie(served):
    _, _, keys = served
    client = _fresh(served)
    csrf = _signed_in(client, keys["viewer"])
    r = client.post(f"{API_PREFIX}/queues/quality/decisions", json=DECISION, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 403 and "merchandiser" in r.json()["error"]["message"]
    assert client.get(f"{API_PREFIX}/keys").status_code == 403


def test_sign_out_and_revocation_end_the_session(served):
    _, _, keys = served
    client = _fresh(served)
    csrf = _signed_in(client, keys["admin"])
    assert client.delete("/ui/session").status_code == 403  # sign-out needs the token too
    r = client.delete("/ui/session", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200
    assert client.get(f"{API_PREFIX}/products").status_code == 401
    # a revoked key's sessions stop at once
    admin = _fresh(served)
    made = admin.post(f"{API_PREFIX}/keys", json={"role": "viewer"}, headers=auth(keys["admin"])).json()
    viewer = _fresh(served)
    _signed_in(viewer, made["key"])
    assert viewer.get(f"{API_PREFIX}/products").status_code == 200
    assert admin.delete(f"{API_PREFIX}/keys/{made['id']}", headers=auth(keys["admin"])).status_code == 200
    r = viewer.get(f"{API_PREFIX}/products")
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]


def test_sign_in_is_audited_without_the_key(served):
    _, ws, keys = served
    client = _fresh(served)
    _signed_in(client, keys["publisher"])
    r = client.get(f"{API_PREFIX}/audit", headers=auth(keys["admin"]), params={"limit": 1000})
    rows = [e for e in r.json()["items"] if e["action"] == "POST /ui/session" and e["role"] == "publisher"]
    assert rows and all(keys["publisher"] not in str(e) for e in rows)


def test_ui_files_come_with_a_strict_csp_and_never_from_outside_the_ui_folder(served):
    client = _fresh(served)
    r = client.get("/ui/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert "<script type=\"module\" src=\"js/app.js\">" in r.text and "<script>" not in r.text
    js = client.get("/ui/js/app.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "content-security-policy" in js.headers
    for path in ("/ui/../routes/ui.py", "/ui/%2e%2e/auth.py", "/ui/js/../../auth.py", "/ui/nope.js"):
        assert client.get(path).status_code == 404, path
    assert client.get("/", follow_redirects=False).headers["location"] == "/ui/"
    assert "/ui/" not in client.get("/openapi.json").json()["paths"]


def test_the_app_never_builds_html_from_strings():
    """Product text reaches the page as text nodes only: no HTML sinks anywhere in the app."""
    import re

    from vismerch.serve.routes.ui import UI_ROOT

    sources = {p.name: p.read_text() for p in (UI_ROOT / "js").glob("*.js")}
    assert len(sources) >= 8
    sinks = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function")
    assert {name: sinks.findall(text) for name, text in sources.items() if sinks.search(text)} == {}


def test_replicate_products_grows_a_store_whose_copies_share_images(store_template, tmp_path):
    """The web app benchmark's 100,000-product store: copies under new ids, same images."""
    import shutil

    from vismerch.catalog.replicate import replicate_products
    from vismerch.catalog.store import Store

    path = tmp_path / "store"
    shutil.copytree(store_template, path)
    with Store.open(path) as store:
        before = len(store.products(status=None))
        original = store.products()[0]
        assert replicate_products(store, before + 95) == 95
        assert replicate_products(store, 10) == 0  # never shrinks
        assert len(store.products(status=None)) == before + 95
        copy = store.product(f"{original.id}~1")
        assert copy is not None and copy.title == f"{original.title or original.id} #1"
        assert store.thumbnail(copy.id) == store.thumbnail(original.id) is not None
