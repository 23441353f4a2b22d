"""The collection editor in a real browser against the real routes: drag a product to
position 1 and see it pinned, keyboard moves, width switch and row boundaries, save a draft,
diff, publish and see the storefront endpoint change, a stale publish shown as a conflict
that loses nothing, roll back; a viewer sees no edit controls and the API refuses it."""

from __future__ import annotations

import pytest
from tests.browser.conftest import HOSTILE, api, sign_in, snap

pytestmark = pytest.mark.browser
# a page predicate: the card at position 1 shows product `id` (callers close the function)
FIRST_IS = ("id => { const c = document.querySelector(\"#arrangement .slot[data-position='1']\");"
            " return c && c.dataset.id === id")


@pytest.fixture(scope="module")
def collection(store, server):
    """The largest category collection of the test store."""
    _, keys, _ = store
    status, _, listing = api(server, "GET", "/collections", keys["viewer"])
    items = listing["items"]
    assert status == 200, items
    categories = sorted((c for c in items if c["kind"] == "category"), key=lambda c: -c["size"])
    assert categories and categories[0]["size"] >= 5
    return categories[0]["id"]


def _open(page, collection):
    page.goto(f"/ui/#/collections/{collection}")
    page.wait_for_selector("#arrangement .slot")


def _at(page, position: int):
    return page.locator(f"#arrangement .slot[data-position='{position}']")


def _storefront(server, keys, collection):
    return api(server, "GET", f"/storefront/collections/{collection}?columns=4", keys["storefront"])


def test_drag_to_position_1_pins_and_the_storefront_follows_publish_and_rollback(page, store, server,
                                                                                 collection):
    _, keys, _ = store
    sign_in(page, keys["publisher"])
    page.click("#nav a[data-page=collections]")
    page.wait_for_selector("#collections tbody tr")
    snap(page, "collections")
    page.click(f"#collections a:text-is('{collection}')")
    page.wait_for_selector("#arrangement .slot")
    moved = _at(page, 4).get_attribute("data-id")
    _at(page, 4).drag_to(_at(page, 1))
    page.wait_for_function(FIRST_IS + " && c.querySelector('.badge.pinned'); }", arg=moved)
    _, _, rules = api(server, "GET", f"/collections/{collection}/rules", keys["viewer"])
    rules = rules["items"]
    assert any(r["kind"] == "pin" and r["product"] == moved and r["position"] == 1 for r in rules)
    page.click("button[data-tab=rules]")
    page.wait_for_selector(f"#rule-list li[data-kind=pin] .product-cell[title='{moved}']")

    # the width switch redraws the rows: 2, then 5 cards a row
    for columns in (2, 5, 3):
        page.click(f"#width-switch button[data-columns='{columns}']")
        first_row = page.locator("#arrangement .row").first.locator(".slot")
        assert first_row.count() == columns
        slots = page.locator("#arrangement .slot").count()
        assert page.locator("#arrangement .row").count() == -(-slots // columns)
    page.click("#width-switch button[data-columns='4']")
    _at(page, 1).click()
    page.wait_for_selector("#tab-why .reasons li")
    snap(page, "editor")

    # save a draft, see its diff, publish it: the storefront endpoint shows it
    page.click("button[data-tab=versions]")
    page.fill("#draft-name", "first")
    page.click("#save-draft button[type=submit]")
    page.wait_for_selector("#versions-list tr[data-version='first']")
    before = _storefront(server, keys, collection)
    page.click("#versions-list tr[data-version='first'] .publish-btn")
    page.click("#confirm-ok")  # publishing asks first
    page.wait_for_selector("#published-now:text('Published: first')")
    status, headers, grid = _storefront(server, keys, collection)
    assert status == 200 and grid["version"] == "first" and grid["items"][0]["id"] == moved
    assert before[0] == 404 or before[1].get("etag") != headers.get("etag")

    # a keyboard move pins another product at 1; draft two shows it in the diff, as thumbnails
    second = _at(page, 2).get_attribute("data-id")
    _at(page, 2).focus()
    page.keyboard.press("Alt+ArrowLeft")
    page.wait_for_function(FIRST_IS + "; }", arg=second)
    page.fill("#draft-name", "second")
    page.click("#save-draft button[type=submit]")
    # one product changed places: a minimal edit, one move (not every shifted index)
    page.wait_for_selector("#diff .diff-group.moved h4:text-is('Moved (1)')")
    assert page.locator("#diff .diff-group.moved figure").count() == 1
    snap(page, "versions")

    # someone else publishes meanwhile: this page's publish is refused with a clear message
    # and nothing is lost (the draft is still there, the live version is what they published)
    _, list_headers, _ = api(server, "GET", f"/collections/{collection}/versions", keys["viewer"])
    status, _, _ = api(server, "POST", f"/collections/{collection}/publish", keys["admin"],
                       {"version": "first"}, headers={"If-Match": list_headers["etag"]})
    assert status == 200
    page.click("#versions-list tr[data-version='second'] .publish-btn")
    page.click("#confirm-ok")
    page.wait_for_selector("#conflict:visible")
    assert "Nothing was lost" in page.inner_text("#conflict")
    assert page.locator("#versions-list tr[data-version='second']").count() == 1
    assert _storefront(server, keys, collection)[2]["version"] == "first"
    # after reading the conflict, publishing again goes through
    page.click("#versions-list tr[data-version='second'] .publish-btn")
    page.click("#confirm-ok")
    page.wait_for_selector("#published-now:text('Published: second')")
    status, _, grid = _storefront(server, keys, collection)
    assert grid["version"] == "second" and grid["items"][0]["id"] == second

    # roll back: the storefront shows the first version again
    page.click("#rollback")
    page.click("#confirm-ok")
    page.wait_for_selector("#published-now:text('Published: first')")
    status, _, grid = _storefront(server, keys, collection)
    assert status == 200 and grid["version"] == "first" and grid["items"][0]["id"] == moved
    page.click("#view-switch button[data-view=storefront]")
    page.wait_for_selector("#storefront-version:text('Published: first')")


def test_viewer_sees_no_edit_controls_in_the_editor_and_gets_403(page, store, server, collection):
    _, keys, _ = store
    sign_in(page, keys["viewer"])
    _open(page, collection)
    assert page.locator("#edit-toolbar button").count() == 0
    assert _at(page, 1).get_attribute("draggable") == "false"
    page.click("button[data-tab=versions]")
    page.wait_for_selector("#versions-list p")
    assert page.locator("#save-draft, #rollback, .publish-btn, .update-btn").count() == 0
    page.click("button[data-tab=rules]")
    page.wait_for_selector("#rule-list")
    assert page.locator("#rule-list button, #new-rule").count() == 0
    # dragging does nothing for a viewer; the API refuses the pin and the publish
    first = _at(page, 1).get_attribute("data-id")
    _at(page, 3).drag_to(_at(page, 1))
    page.wait_for_timeout(300)
    assert _at(page, 1).get_attribute("data-id") == first
    other = _at(page, 3).get_attribute("data-id")
    status, _, body = api(server, "POST", "/rules", keys["viewer"],
                          {"kind": "pin", "collection": collection, "product": other, "position": 1})
    assert status == 403 and "merchandiser" in body["error"]["message"]
    status, _, _ = api(server, "POST", f"/collections/{collection}/rollback", keys["viewer"], {},
                       headers={"If-Match": '"x"'})
    assert status == 403


def test_multi_select_bury_search_to_place_and_hostile_titles_in_the_grid(page, store, server):
    _, keys, rows = store
    hostile = rows[0]
    sign_in(page, keys["merchandiser"])
    _open(page, hostile["category"])  # the category collection holding the hostile title
    card = page.locator(f"#arrangement .slot[data-id='{hostile['id']}']")
    assert card.locator(".title").inner_text() == HOSTILE and card.locator(".title img").count() == 0

    # a collection nobody edited yet: the second largest category
    _, _, listing = api(server, "GET", "/collections", keys["viewer"])
    items = listing["items"]
    other = sorted((c for c in items if c["kind"] == "category"), key=lambda c: -c["size"])[1]["id"]
    before = {r["id"] for r in api(server, "GET", "/rules?limit=1000", keys["admin"])[2]["items"]}
    _open(page, other)
    total = page.locator("#arrangement .slot").count()
    assert total >= 4
    # ctrl-click two products and bury them: every other unflagged product now comes first
    a, b = _at(page, 1).get_attribute("data-id"), _at(page, 2).get_attribute("data-id")
    _at(page, 1).click()
    _at(page, 2).click(modifiers=["Control"])
    assert page.inner_text("#selection-count") == "2 selected"
    page.click("#bury-selected")
    page.wait_for_selector("#selection-count:text('0 selected')")
    page.wait_for_function(FIRST_IS.replace("c.dataset.id === id", "c.dataset.id !== id") + "; }", arg=a)
    slots = page.locator("#arrangement .slot").evaluate_all(
        "els => els.map(e => [e.dataset.id, !!e.querySelector('.badge.flagged')])")
    order = [pid for pid, _ in slots]
    others = [order.index(pid) for pid, flagged in slots if pid not in (a, b) and not flagged]
    assert max(others) < min(order.index(a), order.index(b)), slots
    _, _, rules = api(server, "GET", f"/collections/{other}/rules", keys["viewer"])
    rules = rules["items"]
    assert any(r["kind"] == "bury" and a in (r["where"] or "") and b in (r["where"] or "") for r in rules)
    # search-to-place: find the last product by its id and place it at 1
    last = _at(page, total).get_attribute("data-id")
    page.fill("#place-q", last)
    page.fill("#place-pos", "1")
    page.click(".place button[type=submit]")
    page.click(f"#place-results button[title='Place {last}']")
    page.wait_for_function(FIRST_IS + " && c.querySelector('.badge.pinned'); }", arg=last)
    # overlays draw a bar per card; the why-here panel lists the score parts and the rule
    page.select_option("#overlay", "sales")
    assert page.locator("#arrangement .slot .overlay.sales").count() == total
    _at(page, 1).click()
    page.wait_for_selector("#tab-why table.parts tr")
    assert "pinned" in page.inner_text("#tab-why .reasons")
    assert page.dialogs == [] and page.console_errors == []
    # leave the store as it was for the other browser tests
    for rule in api(server, "GET", "/rules?limit=1000", keys["admin"])[2]["items"]:
        if rule["id"] not in before:
            api(server, "DELETE", f"/rules/{rule['id']}", keys["admin"])


def test_a_stale_draft_edit_shows_a_conflict_and_keeps_the_users_order(page, store, server):
    _, keys, _ = store
    _, _, listing = api(server, "GET", "/collections", keys["viewer"])
    items = listing["items"]
    third = sorted((c for c in items if c["kind"] == "category"), key=lambda c: -c["size"])[2]["id"]
    sign_in(page, keys["merchandiser"])
    _open(page, third)
    page.click("button[data-tab=versions]")
    page.fill("#draft-name", "mine")
    page.click("#save-draft button[type=submit]")
    page.wait_for_selector("#versions-list tr[data-version='mine'] .update-btn")
    # a colleague edits the same draft meanwhile (with the ETag they read): this page's is stale
    _, headers, draft = api(server, "GET", f"/collections/{third}/versions/mine", keys["merchandiser"])
    theirs = [item["id"] for item in draft["items"]][::-1]
    status, _, _ = api(server, "PUT", f"/collections/{third}/versions/mine", keys["merchandiser"],
                       {"ids": theirs}, headers={"If-Match": headers["etag"]})
    assert status == 200
    # this page moves a product, then saves its arrangement into the draft: 412, shown plainly
    # (an in-stock product: an out-of-stock pin is released under the default policy)
    pos = next(p for p in range(2, 9) if _at(page, p).locator(".badge.oos, .badge.flagged").count() == 0)
    moved = _at(page, pos).get_attribute("data-id")
    _at(page, pos).focus()
    page.keyboard.press("Alt+ArrowLeft")
    page.wait_for_function("([id, p]) => { const c = document.querySelector("
                           "`#arrangement .slot[data-position='${p}']`); return c && c.dataset.id === id; }",
                           arg=[moved, pos - 1])
    mine = page.locator("#arrangement .slot").evaluate_all("els => els.map(e => e.dataset.id)")
    page.click("#versions-list tr[data-version='mine'] .update-btn")
    page.wait_for_selector("#conflict:visible")
    assert "changed by someone else" in page.inner_text("#conflict")
    _, _, now = api(server, "GET", f"/collections/{third}/versions/mine", keys["viewer"])
    assert [item["id"] for item in now["items"]] == theirs  # theirs is intact
    # nothing of this page's work was lost: saving it over theirs stores exactly its order
    page.click("#save-mine")
    page.wait_for_selector("#conflict", state="hidden")
    _, _, now = api(server, "GET", f"/collections/{third}/versions/mine", keys["viewer"])
    assert [item["id"] for item in now["items"]] == mine
