"""Accessibility in a real browser: axe-core (injected by the test, never served by the app)
finds no serious or critical violation on any page of the workbench, found by following the
app's own navigation and links (so pages added later are checked too), with each page's
in-page tabs and views, nor on the example shop; and a keyboard move keeps the focus."""

from __future__ import annotations

import pytest
from tests.browser.conftest import api, assert_accessible, sign_in

pytestmark = pytest.mark.browser

PER_SHAPE = 3  # pages checked per route shape (three collections' editors, not all of them)
MAX_PAGES = 60
# a test's own counter of the page's fetches in flight: a page is checked once they settle
COUNT_FETCHES = """(() => { window.__inflight = 0; const f = window.fetch;
  window.fetch = (...a) => { window.__inflight++;
    return f(...a).finally(() => { window.__inflight--; }); }; })();"""
SETTLED = ("() => window.__inflight === 0 && !document.querySelector('#main > p.muted:only-child')"
           " && !document.querySelector('[aria-busy=true]')")


@pytest.fixture(scope="module")
def published(store, server):
    """A collection of its own, published (the shop reads it), with a running experiment
    (so the experiment's own page is among those found)."""
    _, keys, rows = store
    ids = [r["id"] for r in rows[1:13]]
    where = "id in [" + ", ".join(f'"{i}"' for i in ids) + "]"
    merch = keys["merchandiser"]
    status, _, _ = api(server, "POST", "/collections", merch, {"id": "a11y-shop", "where": where})
    assert status == 201
    status, _, _ = api(server, "POST", "/collections/a11y-shop/versions", merch, {"name": "v1"})
    assert status == 201
    _, headers, _ = api(server, "GET", "/collections/a11y-shop/versions", keys["viewer"])
    status, _, _ = api(server, "POST", "/collections/a11y-shop/publish", keys["publisher"], {"version": "v1"},
                       headers={"If-Match": headers["etag"]})
    assert status == 200
    status, _, v2 = api(server, "POST", "/collections/a11y-shop/versions", merch, {"name": "v2"})
    status, _, _ = api(server, "PUT", "/collections/a11y-shop/versions/v2", merch, {"ids": v2["ids"][::-1]},
                       headers={"If-Match": v2["etag"]})
    assert status == 200
    status, _, body = api(server, "POST", "/experiments", merch, {"collection": "a11y-shop",
                                                                  "variants": ["v1", "v2"], "name": "a11y"})
    assert status == 201, body
    return "a11y-shop"


def _settle(page) -> None:
    page.wait_for_function(SETTLED, polling=100, timeout=90_000)
    page.wait_for_timeout(200)  # a fetch a finished one starts (a page's second request)
    page.wait_for_function(SETTLED, polling=100, timeout=90_000)


def _shape(route: str) -> tuple:
    """Pages of one kind: the same first segment and depth, and the same last segment (an
    editor of any collection is one kind; its analytics page another)."""
    parts = route.lstrip("#/").split("/")
    return (parts[0], len(parts), parts[-1] if len(parts) > 2 else None)


def _links(page) -> list[str]:
    return page.eval_on_selector_all("#nav a[href^='#/'], #main a[href^='#/']",
                                     "els => els.map(e => e.getAttribute('href'))")


def _check_views(page, axe_source, route: str) -> int:
    """Each in-page tab or view of the page (the editor's Why here / Rules / Versions, its
    storefront view), checked as it shows."""
    checked = 0
    switches = page.locator("#main .tabs button, #main #view-switch button")
    for k in range(switches.count()):
        switch = switches.nth(k)
        label = switch.inner_text()
        switch.click()
        _settle(page)
        assert_accessible(page, axe_source, f"{route} ({label})")
        checked += 1
    return checked


def test_every_workbench_page_has_no_serious_accessibility_violation(page, store, server, axe_source,
                                                                      published):
    _, keys, _ = store
    page.add_init_script(COUNT_FETCHES)
    page.goto("/ui/")
    page.wait_for_selector("#signin")
    assert_accessible(page, axe_source, "sign-in")
    sign_in(page, keys["admin"])  # an admin sees every page
    queue = _links(page)
    assert len(queue) >= 6, queue
    seen, shapes, checked = set(), {}, []
    while queue and len(checked) < MAX_PAGES:
        route = queue.pop(0)
        shape = _shape(route)
        if route in seen or shapes.get(shape, 0) >= PER_SHAPE:
            continue
        seen.add(route)
        shapes[shape] = shapes.get(shape, 0) + 1
        page.goto(f"/ui/{route}")
        _settle(page)
        assert_accessible(page, axe_source, route)
        checked.append(route)
        _check_views(page, axe_source, route)
        queue += [link for link in _links(page) if link not in seen]
    kinds = {_shape(r)[0] for r in checked}
    # the navigation's pages and the pages they link to (editors, analytics, review tabs)
    assert {"catalog", "collections", "review", "experiments", "plan", "history"} <= kinds, checked
    assert any(r.startswith("#/experiments/") for r in checked), checked  # an experiment's own page
    assert any(r.startswith(f"#/collections/{published}") or r.count("/") >= 2 for r in checked), checked
    assert page.console_errors == []


def test_the_example_shop_has_no_serious_accessibility_violation(page, store, axe_source, published):
    _, keys, _ = store
    page.goto(f"/shop/?collection={published}&key={keys['storefront']}&columns=4")
    page.wait_for_selector("#grid li")
    assert_accessible(page, axe_source, "/shop/")
    page.locator("#grid li button.open").first.click()
    page.wait_for_selector("dialog#product[open]")
    assert_accessible(page, axe_source, "/shop/ (product dialog)")


def test_keyboard_moves_keep_the_focus_on_the_moved_product(page, store, server, published):
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    page.goto(f"/ui/#/collections/{published}")
    page.wait_for_selector("#arrangement .slot[data-position='4']")
    moved = page.get_attribute("#arrangement .slot[data-position='4']", "data-id")
    page.focus("#arrangement .slot[data-position='4']")
    for to in (3, 2):
        page.keyboard.press("Alt+ArrowLeft")
        page.wait_for_function(
            "([id, p]) => { const c = document.querySelector(`#arrangement .slot[data-position='${p}']`);"
            " return c && c.dataset.id === id && c.querySelector('.badge.pinned'); }", arg=[moved, to])
        # the grid was redrawn: the focus is on the moved product's card, so the next key moves it on
        page.wait_for_function("id => document.activeElement && document.activeElement.dataset.id === id",
                               arg=moved, timeout=5_000)
    # plain arrows walk the grid from there
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.dataset.position") == "3"
    for rule in api(server, "GET", f"/collections/{published}/rules", keys["viewer"])[2]["items"]:
        api(server, "DELETE", f"/rules/{rule['id']}", keys["merchandiser"])
