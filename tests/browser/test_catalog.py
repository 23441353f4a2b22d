"""The web app in a real browser, on what needs no collection: sign-in and sign-out, the
catalog (search, facets, drawer), escaping of hostile product text, CSP, the review and
plan pages, and what a viewer key may not do (hidden in the page, 403 from the API)."""

from __future__ import annotations

import re

import pytest
from tests.browser.conftest import HOSTILE, api, sign_in, snap

pytestmark = pytest.mark.browser


def test_sign_in_with_a_key_sets_a_strict_httponly_cookie_and_sign_out_ends_it(page, store):
    _, keys, _ = store
    page.goto("/ui/")
    page.fill("#api-key", "vmk_not_a_key")
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#signin-error:text('unknown API key')")
    snap(page, "signin")
    sign_in(page, keys["merchandiser"])
    assert page.inner_text("#who").startswith("merchandiser")
    cookie = next(c for c in page.context.cookies() if c["name"] == "vm_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert keys["merchandiser"] not in page.content()
    assert page.evaluate("document.cookie") == ""  # the session cookie is out of JavaScript's reach
    page.reload()
    page.wait_for_selector("#nav a")  # the cookie keeps the session across a reload
    page.click("#signout")
    page.wait_for_selector("#signin")
    page.reload()
    page.wait_for_selector("#signin")
    status = page.evaluate("fetch('/api/v1/products').then(r => r.status)")
    assert status == 401


def test_catalog_search_facets_and_drawer(page, store):
    _, keys, rows = store
    sign_in(page, keys["viewer"])
    page.wait_for_selector("#catalog-grid .card.product")
    assert re.search(r"\d+ products", page.inner_text("#catalog-status"))
    total = int(page.inner_text("#catalog-status").split()[0])
    assert total >= 30
    # a category facet narrows the grid and its count matches the status line
    facet = page.locator("#facets ul[data-facet=category] button").first
    count = int(facet.locator(".count").inner_text())
    category = facet.get_attribute("data-value")
    facet.click()
    page.wait_for_function("n => document.getElementById('catalog-status').textContent.startsWith(n + ' ')",
                           arg=count)
    # the status line is set when the page arrives, the cards a moment later: wait for them
    page.wait_for_function(
        "c => { const m = [...document.querySelectorAll('#catalog-grid .card.product .meta')]"
        ".map(e => e.textContent); return m.length > 0 && m.every(t => !t || t.startsWith(c)); }",
        arg=category)
    titles = page.locator("#catalog-grid .card.product .meta").all_inner_texts()
    assert titles and all(t.startswith(category) for t in titles if t)
    page.click("#clear-filters")
    page.wait_for_function("n => document.getElementById('catalog-status').textContent.startsWith(n + ' ')",
                           arg=total)
    snap(page, "catalog")
    # text search finds a product by words of its title
    wanted = next(r for r in rows[1:] if r.get("title"))
    page.fill("#search-q", wanted["title"])
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#catalog-status:text('results')", timeout=90_000)  # the encoder may still load
    page.wait_for_function(  # the cards follow the status line
        "id => [...document.querySelectorAll('#catalog-grid .card.product')].slice(0, 5)"
        ".some(e => e.dataset.id === id)", arg=wanted["id"])
    ids = page.locator("#catalog-grid .card.product").evaluate_all("els => els.map(e => e.dataset.id)")
    assert wanted["id"] in ids[:5]
    # the drawer: colours, flags, duplicate group, more like this
    page.locator(f"#catalog-grid .card.product[data-id='{wanted['id']}']").click()
    page.wait_for_selector("#drawer h2.title")
    assert page.inner_text("#drawer h2.title") == wanted["title"]
    assert page.locator("#drawer .colours .chip").count() >= 1
    assert page.locator("#drawer .strip .mini").count() >= 1
    snap(page, "catalog-drawer")


def test_hostile_title_shows_as_text_and_no_dialog_fires(page, store):
    _, keys, rows = store
    sign_in(page, keys["viewer"])
    page.wait_for_selector("#catalog-grid .card.product")
    hostile_id = rows[0]["id"]
    card = page.locator(f"#catalog-grid .card.product[data-id='{hostile_id}']")
    card.scroll_into_view_if_needed()
    page.wait_for_function(
        "id => { const c = document.querySelector(`#catalog-grid .card.product[data-id='${id}'] .title`);"
        " return c && c.textContent.includes('<img'); }", arg=hostile_id)
    assert card.locator(".title").inner_text() == HOSTILE
    assert card.locator(".title img").count() == 0
    card.click()
    page.wait_for_selector("#drawer h2.title")
    assert page.inner_text("#drawer h2.title") == HOSTILE
    assert page.locator("#drawer h2.title img, img[src='x']").count() == 0
    page.wait_for_timeout(300)
    assert page.dialogs == []
    assert page.console_errors == []


def test_ui_pages_send_a_strict_content_security_policy(page, server):
    response = page.goto("/ui/")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    script = page.request.get("/ui/js/app.js")
    assert script.status == 200 and "javascript" in script.headers["content-type"]
    assert page.request.get("/ui/../auth.py").status == 404


def test_viewer_sees_no_edit_controls_and_the_api_refuses_its_writes(page, store, server):
    _, keys, _ = store
    sign_in(page, keys["viewer"])
    assert page.locator("#nav a[data-page=ingest]").count() == 0
    page.goto("/ui/#/review/quality")
    page.wait_for_selector("#review-body table, #review-body p")
    assert page.locator("#bulk-accept, #bulk-ignore, #review-body button").count() == 0
    page.goto("/ui/#/review/duplicates")
    page.wait_for_selector("#review-body .group, #review-body p")
    assert page.locator("#review-body button, #review-body input").count() == 0
    # the page hides it; the API refuses it all the same, through the cookie and with a key
    csrf = page.evaluate("fetch('/ui/session').then(r => r.json()).then(s => s.csrf)")
    status = page.evaluate(
        """csrf => fetch('/api/v1/queues/quality/decisions', {method: 'POST', headers:
           {'Content-Type': 'application/json', 'X-CSRF-Token': csrf},
           body: JSON.stringify({items: [{product_id: 'x', item: 'blur'}], decision: 'resolved'})})
           .then(r => r.status)""", csrf)
    assert status == 403
    status, _, body = api(server, "POST", "/queues/quality/decisions", keys["viewer"],
                          {"items": [{"product_id": "x", "item": "blur"}], "decision": "resolved"})
    assert status == 403 and "merchandiser" in body["error"]["message"]


def test_cookie_writes_need_the_sessions_csrf_token(page, store):
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    call = """token => fetch('/api/v1/queues/quality/decisions', {method: 'POST', headers: Object.assign(
              {'Content-Type': 'application/json'}, token ? {'X-CSRF-Token': token} : {}),
              body: JSON.stringify({items: [{product_id: 'nope', item: 'blur'}], decision: 'resolved'})})
              .then(async r => [r.status, (await r.json()).error.code])"""
    assert page.evaluate(call, None) == [403, "csrf"]
    assert page.evaluate(call, "forged") == [403, "csrf"]
    csrf = page.evaluate("fetch('/ui/session').then(r => r.json()).then(s => s.csrf)")
    assert page.evaluate(call, csrf)[1] != "csrf"  # past the CSRF check (the item itself is unknown)


def test_review_queues_accept_in_bulk(page, store, server):
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    page.goto("/ui/#/review/quality")
    page.wait_for_selector("#queue-quality tbody tr")
    rows = page.locator("#queue-quality tbody tr")
    before = rows.count()
    first = rows.nth(0)
    product, item = first.get_attribute("data-product"), first.get_attribute("data-item")
    first.locator("input.tick").check()
    snap(page, "review")
    page.click("#bulk-accept")
    page.wait_for_function("n => document.querySelectorAll('#queue-quality tbody tr').length === n",
                           arg=before - 1)
    _, _, resolved = api(server, "GET", "/queues/quality?status=resolved", keys["viewer"])
    assert any(r["product_id"] == product and r["item"] == item for r in resolved["items"])


def test_duplicate_group_keep_one(page, store, server):
    _, keys, _ = store
    _, _, groups = api(server, "GET", "/duplicates?status=pending", keys["viewer"])
    groups = groups["items"]
    assert groups, "the generated catalog plants a near-duplicate pair"
    group = groups[0]
    keep = group["members"][-1]
    sign_in(page, keys["merchandiser"])
    page.goto("/ui/#/review/duplicates")
    box = page.locator(f"#review-body .group[data-group='{group['group']}']")
    box.locator(f"input[type=radio][value='{keep}']").check()
    box.locator("button:text('Keep chosen')").click()
    page.wait_for_selector(f"#review-body .group[data-group='{group['group']}']", state="detached")
    _, _, reviewed = api(server, "GET", f"/duplicates/{group['group']}", keys["viewer"])
    assert reviewed["status"] == "reviewed" and reviewed["review"]["keep"] == keep
