"""Workbench defects a merchandiser met, each checked in a real browser: the storefront view
shows what is live right after a publish; the catalog grid survives 429s; colour swatches
and facets; "why here" after a pin; publish and rollback ask first and leave no stale
message; names (not ids) in toasts and alt text; a spinner while finding a product to place;
the change history in words."""

from __future__ import annotations

import re

import pytest
from tests.browser.conftest import api, sign_in, snap

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def fixes(store, server):
    """A collection of its own (12 products) and their titles by id."""
    _, keys, rows = store
    chosen = rows[14:26]
    where = "id in [" + ", ".join(f'"{r["id"]}"' for r in chosen) + "]"
    status, _, body = api(server, "POST", "/collections", keys["merchandiser"],
                          {"id": "fixes", "where": where})
    assert status == 201, body
    return "fixes", {r["id"]: r["title"] for r in chosen}


def _publish(server, keys, collection, version):
    status, _, _ = api(server, "POST", f"/collections/{collection}/versions", keys["merchandiser"],
                       {"name": version})
    assert status == 201
    _, headers, _ = api(server, "GET", f"/collections/{collection}/versions", keys["viewer"])
    status, _, _ = api(server, "POST", f"/collections/{collection}/publish", keys["publisher"],
                       {"version": version}, headers={"If-Match": headers["etag"]})
    assert status == 200


def _open(page, collection):
    page.goto(f"/ui/#/collections/{collection}")
    page.wait_for_selector("#arrangement .slot")


def test_the_storefront_view_shows_what_is_live_right_after_a_publish(page, store, server, fixes):
    collection, _ = fixes
    _, keys, _ = store
    _publish(server, keys, collection, "live-1")
    sign_in(page, keys["viewer"])
    _open(page, collection)
    page.click("#view-switch button[data-view=storefront]")
    page.wait_for_selector("#storefront-version:text('Published: live-1')")
    _publish(server, keys, collection, "live-2")  # someone publishes (the browser holds a 60 s copy)
    page.click("#view-switch button[data-view=editor]")
    page.click("#view-switch button[data-view=storefront]")
    page.wait_for_selector("#storefront-version:text('Published: live-2')", timeout=5_000)


def test_the_catalog_grid_retries_after_429_and_fills(page, store):
    _, keys, _ = store
    refused = []

    def refuse_twice(route):
        if len(refused) < 2:
            refused.append(route.request.url)
            route.fulfill(status=429, headers={"Retry-After": "1", "Content-Type": "application/json"},
                          body='{"error": {"code": "rate_limited", "message": "too many requests"}}')
        else:
            route.continue_()

    sign_in(page, keys["viewer"])
    page.wait_for_selector("#catalog-grid .card.product")
    page.route(re.compile(r".*/api/v1/products\?.*"), refuse_twice)
    page.click("#facets ul[data-facet=in_stock] button >> nth=0")  # a new query: its first page is refused
    page.wait_for_selector("#catalog-status:text('trying again')")
    page.wait_for_function(
        "() => /^\\d+ products/.test(document.getElementById('catalog-status').textContent)", timeout=30_000)
    page.wait_for_selector("#catalog-grid .card.product")
    assert len(refused) == 2


def test_colour_swatches_show_the_colour_tables_hex(page, store, server):
    _, keys, _ = store
    _, _, facets = api(server, "GET", "/products/facets", keys["viewer"])
    sign_in(page, keys["viewer"])
    page.wait_for_selector("#facets ul[data-facet=colour] .swatch")
    shown = page.eval_on_selector_all(
        "#facets ul[data-facet=colour] button",
        "els => els.map(b => [b.dataset.value,"
        " getComputedStyle(b.querySelector('.swatch')).backgroundColor])")

    def rgb(hex_):
        return f"rgb({int(hex_[1:3], 16)}, {int(hex_[3:5], 16)}, {int(hex_[5:7], 16)})"

    want = {f["value"]: rgb(f["hex"]) for f in facets["colour"] if f["hex"]}
    assert want and {v: c for v, c in shown if v in want} == want


def test_a_colour_facet_narrows_a_text_search(page, store, server):
    _, keys, rows = store
    sign_in(page, keys["viewer"])
    page.wait_for_selector("#facets ul[data-facet=colour] button")
    page.fill("#search-q", rows[3]["title"])
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#catalog-status:text('text results')", timeout=90_000)
    page.click("#facets ul[data-facet=colour] button >> nth=0")
    page.wait_for_selector("#catalog-status:text('hybrid results')", timeout=60_000)


def test_why_here_follows_a_pin_and_toasts_and_alt_text_name_products(page, store, server, fixes):
    collection, titles = fixes
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    _open(page, collection)
    card = page.locator("#arrangement .slot[data-position='5']")
    pid = card.get_attribute("data-id")
    assert card.locator("img").get_attribute("alt") == titles[pid]
    card.click()
    page.wait_for_selector("#tab-why p.muted:text('position 5')")
    page.fill("#why-position", "1")
    page.click("#pin-form button[type=submit]")
    page.wait_for_selector(f"#arrangement .slot[data-position='1'][data-id='{pid}']")
    # the panel shows the product where it is now, with the rule that put it there
    page.wait_for_selector("#tab-why p.muted:text('position 1')", timeout=5_000)
    assert "pin" in page.inner_text("#tab-why")
    assert page.inner_text("#toast") == f"Pinned {titles[pid]} at 1"


def test_publish_and_rollback_ask_first_and_the_diff_is_never_stale(page, store, server):
    _, keys, rows = store
    where = "id in [" + ", ".join(f'"{r["id"]}"' for r in rows[27:33]) + "]"
    assert api(server, "POST", "/collections", keys["merchandiser"], {"id": "asks", "where": where})[0] == 201
    sign_in(page, keys["publisher"])
    _open(page, "asks")
    page.click("button[data-tab=versions]")
    page.fill("#draft-name", "one")
    page.click("#save-draft button[type=submit]")
    page.wait_for_selector("#diff p:text('Nothing is published yet')")
    page.click("#versions-list tr[data-version='one'] .publish-btn")
    page.wait_for_selector("dialog#confirm[open]")
    assert "one" in page.inner_text("#confirm-title")
    page.click("#confirm-cancel")  # cancelled: nothing is published
    page.wait_for_selector("dialog#confirm", state="detached")
    assert api(server, "GET", "/storefront/collections/asks", keys["storefront"])[0] == 404
    page.click("#versions-list tr[data-version='one'] .publish-btn")
    page.click("#confirm-ok")
    page.wait_for_selector("#published-now:text('Published: one')")
    page.wait_for_selector("#diff h3:text('one → one')", timeout=5_000)  # compared again, with what is live
    assert "Nothing is published yet" not in page.inner_text("#diff")
    page.fill("#draft-name", "two")
    page.click("#save-draft button[type=submit]")
    page.click("#versions-list tr[data-version='two'] .publish-btn")
    page.click("#confirm-ok")
    page.wait_for_selector("#published-now:text('Published: two')")
    page.click("#rollback")
    page.wait_for_selector("dialog#confirm[open]")
    page.click("#confirm-cancel")
    assert api(server, "GET", "/storefront/collections/asks", keys["storefront"])[2]["version"] == "two"
    page.click("#rollback")
    page.click("#confirm-ok")
    page.wait_for_selector("#published-now:text('Published: one')")
    assert api(server, "GET", "/storefront/collections/asks", keys["storefront"])[2]["version"] == "one"


def test_the_pinned_badge_reads_at_4_5_to_1(page, store, server, fixes):
    collection, _ = fixes
    _, keys, _ = store
    sign_in(page, keys["viewer"])
    _open(page, collection)
    page.wait_for_selector("#arrangement .badge.pinned")  # pinned by the test above
    ratio = page.eval_on_selector("#arrangement .badge.pinned", """el => {
      const lum = (c) => { const [r, g, b] = c.match(/\\d+/g).slice(0, 3).map(v => { v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
      const s = getComputedStyle(el), a = lum(s.color), b = lum(s.backgroundColor);
      return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); }""")
    assert ratio >= 4.5


def test_finding_a_product_to_place_shows_a_spinner(page, store, fixes):
    collection, titles = fixes
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    _open(page, collection)
    pid = next(iter(titles))
    held, released = [], []  # the lookup is held (a slow search) while the page is looked at

    def hold(route):
        route.continue_() if released else held.append(route)

    page.route(re.compile(r".*/api/v1/products/[^/?]+\?similar=0.*"), hold)
    page.fill("#place-q", pid)
    page.click(".place button[type=submit]")
    page.wait_for_selector("#place-busy[role=status]:text('Searching')")
    assert page.locator(".place button[type=submit]").is_disabled()
    for _ in range(100):  # the held lookup may follow a search the page makes first
        if held:
            break
        page.wait_for_timeout(50)
    assert held
    released.append(True)
    for route in held:  # every lookup held so far (a slow machine may see the page send two)
        route.continue_()
    page.wait_for_selector(f"#place-results button[title='Place {pid}']")
    assert page.locator("#place-busy").count() == 0
    assert page.inner_text(f"#place-results button[title='Place {pid}'] span") == titles[pid]


def test_the_history_page_tells_who_changed_what(page, store, server, fixes):
    collection, titles = fixes
    _, keys, _ = store
    sign_in(page, keys["viewer"])
    page.click("#nav a[data-page=history]")
    page.wait_for_selector("#history tbody tr")
    page.select_option("#history-collection", collection)
    page.wait_for_selector(f"#history caption:text('Changes to {collection}')")
    page.wait_for_selector("#history tbody tr")
    texts = page.locator("#history tbody tr td.what").all_inner_texts()
    assert texts[-1] == f"Created collection {collection}"
    assert any(t.startswith("Pinned ") and t.endswith(f"at position 1 in {collection}") for t in texts), texts
    assert any(t.startswith("Published live-2 of fixes") for t in texts), texts
    who = page.locator("#history tbody tr").first.locator("td").nth(1).inner_text()
    assert who.startswith("browser ")  # the key's name, not only its id
    snap(page, "history")
