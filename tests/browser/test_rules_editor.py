"""The rule editor in a real browser: every kind made through the form (pin with a product
picker, boost and bury with a strength, hide, bury-out-of-stock), the condition builder's live
match count, a conflicting pin warned before saving, edit, disable/enable, delete, undo of
the session's last edits, a bad condition naming its field, and the preview as of a date."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from tests.browser.conftest import api, sign_in, snap

pytestmark = pytest.mark.browser
GONE = "id => !document.querySelector(`#arrangement .slot[data-id='${id}']`)"
AT = ("id => { const c = document.querySelector(\"#arrangement .slot[data-position='POS']\");"
      " return !!c && c.dataset.id === id; }")


@pytest.fixture(scope="module")
def collection(store, server):
    """A collection of this module's own (the second-largest category's products), so its
    rules never reach the grids the other browser tests arrange."""
    _, keys, _ = store
    _, _, listing = api(server, "GET", "/collections", keys["viewer"])
    categories = sorted((c for c in listing["items"] if c["kind"] == "category"), key=lambda c: -c["size"])
    assert len(categories) > 1 and categories[1]["size"] >= 5
    name = "rule-editor-tests"
    code, _, made = api(server, "POST", "/collections", keys["merchandiser"],
                        {"id": name, "where": f"category == {json.dumps(categories[1]['id'])}"})
    assert code == 201, made
    yield name
    api(server, "DELETE", f"/collections/{name}", keys["admin"])


@pytest.fixture
def own_rules(store, server):
    """The ids of the rules that existed before the test (other browser tests leave some);
    deletes the rules the test made, so the other browser tests see the store as it was."""
    _, keys, _ = store

    def ids():
        _, _, got = api(server, "GET", "/rules?limit=1000", keys["admin"])
        return {r["id"] for r in got["items"]}

    before = ids()
    yield before
    for rule_id in ids() - before:
        api(server, "DELETE", f"/rules/{rule_id}", keys["admin"])


def _rules(server, keys, collection, before):
    """The collection's rules made by this test (not those in ``before``)."""
    _, _, got = api(server, "GET", f"/rules?collection={quote(collection)}&limit=1000", keys["viewer"])
    return [r for r in got["items"] if r["id"] not in before]


def _open_rules(page, collection):
    page.goto(f"/ui/#/collections/{collection}")
    page.wait_for_selector("#arrangement .slot")
    page.click("button[data-tab=rules]")
    page.wait_for_selector("#new-rule")


def _new(page, kind):
    page.click("#new-rule")
    page.wait_for_selector("#rule-form")
    page.select_option("#rule-form select[name=kind]", kind)


def _save(page):
    page.click("#rule-form button[type=submit]")
    page.wait_for_selector("#rule-form", state="detached")


def _slot_ids(page):
    return page.eval_on_selector_all("#arrangement .slot", "els => els.map(e => e.dataset.id)")


def test_every_kind_through_the_form_with_count_conflicts_and_undo(page, store, server, collection,
                                                                   own_rules):
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    _open_rules(page, collection)
    ids = _slot_ids(page)

    # boost: the condition builder writes the expression; the live count matches the API's
    _, _, members = api(server, "GET", f"/rules/count?where=true&collection={quote(collection)}",
                        keys["viewer"])
    prices = sorted(api(server, "GET", f"/products/{quote(pid)}?similar=0", keys["viewer"])[2]["price"]
                    for pid in ids)
    cut = f"{prices[len(prices) // 2]:g}"  # about half the page is cheaper
    _new(page, "boost")
    page.select_option("#rule-form .cond-field", "price")
    page.select_option("#rule-form .cond-op", "<")
    page.fill("#rule-form .cond-value", cut)
    assert page.input_value("#rule-form textarea[name=where]") == f"price < {cut}"
    where = quote(f"price < {cut}")
    _, _, want = api(server, "GET", f"/rules/count?where={where}&collection={quote(collection)}",
                     keys["viewer"])
    assert 0 < want["matches"] < members["total"]
    counted = f"{want['matches']} of {members['total']} products match"
    page.wait_for_selector(f"#rule-form .match-count strong:text-is('{counted}')")
    page.fill("#rule-form input[name=factor]", "30")
    snap(page, "rule-form")
    _save(page)
    page.wait_for_selector("#rule-list li[data-kind=boost]")
    boost = next(r for r in _rules(server, keys, collection, own_rules) if r["kind"] == "boost")
    assert boost["where"] == f"price < {cut}" and boost["factor"] == 30

    # bury with a strength, hide (typed expression), bury-out-of-stock
    _new(page, "bury")
    page.fill("#rule-form textarea[name=where]", f"price >= {cut}")
    page.fill("#rule-form input[name=factor]", "20")
    _save(page)
    hidden = ids[0]
    _new(page, "hide")
    page.fill("#rule-form textarea[name=where]", f'id == "{hidden}"')
    one = f"1 of {members['total']} products match"
    page.wait_for_selector(f"#rule-form .match-count strong:text-is('{one}')")
    _save(page)
    page.wait_for_function(GONE, arg=hidden)
    # the hide shows the product by thumbnail and name, not as an id list
    page.wait_for_selector(f"#rule-list li[data-kind=hide] .product-cell[title='{hidden}'] img")
    _new(page, "bury-out-of-stock")
    assert page.is_hidden("#rule-form .cond-fields")
    _save(page)
    kinds = sorted(r["kind"] for r in _rules(server, keys, collection, own_rules))
    assert kinds == ["boost", "bury", "bury-out-of-stock", "hide"]
    assert next(r for r in _rules(server, keys, collection, own_rules) if r["kind"] == "bury")["factor"] == 20

    # pin through the product picker: found by name, shown with its thumbnail
    target = ids[-1]
    _, _, product = api(server, "GET", f"/products/{quote(target)}?similar=0", keys["viewer"])
    _new(page, "pin")
    page.fill("#rule-form input[type=search]", target)
    page.click(f"#rule-form .choice[title='Pin {product['title'] or target}']")
    page.fill("#rule-form input[name=position]", "2")
    _save(page)
    page.wait_for_function(AT.replace("POS", "2"), arg=target)
    snap(page, "rules")

    # a second pin on slot 2 is warned about before it is saved; a second click would save
    _new(page, "pin")
    other = next(i for i in ids[1:] if i != target)
    page.fill("#rule-form input[type=search]", other)
    page.click("#rule-form .choice >> nth=0")
    page.fill("#rule-form input[name=position]", "2")
    page.click("#rule-form button[type=submit]")
    page.wait_for_selector("#rule-form .conflicts li[data-kind=same-slot]")
    assert "position 2 is also pinned" in page.inner_text("#rule-form .conflicts")
    assert page.inner_text("#rule-form button[type=submit]") == "Save anyway"
    assert sum(r["kind"] == "pin" for r in _rules(server, keys, collection, own_rules)) == 1
    _save(page)  # "Save anyway": the page says which pin lost the slot; undo takes it back
    page.wait_for_selector("#page-conflicts li[data-kind=same-slot]")
    assert "already pinned" in page.inner_text("#page-conflicts")
    page.click("#rule-undo")
    page.wait_for_selector("#page-conflicts li", state="detached")
    assert sum(r["kind"] == "pin" for r in _rules(server, keys, collection, own_rules)) == 1

    # edit the boost's strength; disable and enable the bury; delete the hide
    page.click(f"#rule-list li[data-rule='{boost['id']}'] button.edit")
    page.fill("#rule-form input[name=factor]", "45")
    _save(page)
    page.wait_for_function("() => true")
    mine = _rules(server, keys, collection, own_rules)
    assert next(r for r in mine if r["id"] == boost["id"])["factor"] == 45
    bury = next(r for r in _rules(server, keys, collection, own_rules) if r["kind"] == "bury")
    page.click(f"#rule-list li[data-rule='{bury['id']}'] button.toggle")
    page.wait_for_selector(f"#rule-list li[data-rule='{bury['id']}'] .state.disabled")
    page.click(f"#rule-list li[data-rule='{bury['id']}'] button.toggle")
    page.wait_for_selector(f"#rule-list li[data-rule='{bury['id']}'] .state.active")
    hide = next(r for r in _rules(server, keys, collection, own_rules) if r["kind"] == "hide")
    page.click(f"#rule-list li[data-rule='{hide['id']}'] button.delete")
    page.wait_for_selector(f"#arrangement .slot[data-id='{hidden}']")

    # undo, newest first: the delete (the hide is back), the enable, the disable, the edit
    page.click("#rule-undo")
    page.wait_for_function(GONE, arg=hidden)
    again = [r for r in _rules(server, keys, collection, own_rules) if r["kind"] == "hide"]
    assert len(again) == 1 and again[0]["where"] == hide["where"]
    page.click("#rule-undo")  # undo the enable: disabled again
    page.wait_for_selector(f"#rule-list li[data-rule='{bury['id']}'] .state.disabled")
    page.click("#rule-undo")  # undo the disable: enabled
    page.wait_for_selector(f"#rule-list li[data-rule='{bury['id']}'] .state.active")
    page.click("#rule-undo")  # undo the edit: strength 30 again
    page.wait_for_function("() => !document.querySelector('#rule-undo').textContent.includes('edit')")
    mine = _rules(server, keys, collection, own_rules)
    assert next(r for r in mine if r["id"] == boost["id"])["factor"] == 30
    assert not page.console_errors


def test_a_bad_condition_names_its_field_in_the_form(page, store, server, collection, own_rules):
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    _open_rules(page, collection)
    _new(page, "hide")
    page.fill("#rule-form textarea[name=where]", "price <")
    page.wait_for_selector("#rule-form .match-count .error")
    page.click("#rule-form button[type=submit]")
    page.wait_for_selector("#rule-form textarea[name=where][aria-invalid=true]")
    assert page.inner_text("#rule-form .error[role=alert]")
    assert _rules(server, keys, collection, own_rules) == []


def test_preview_as_of_a_date_shows_a_scheduled_pin(page, store, server, collection, own_rules):
    _, keys, _ = store
    sign_in(page, keys["merchandiser"])
    page.goto(f"/ui/#/collections/{collection}")
    page.wait_for_selector("#arrangement .slot")
    last = _slot_ids(page)[-1]
    status, _, _ = api(server, "POST", "/rules", keys["merchandiser"], {
        "kind": "pin", "collection": collection, "product": last, "position": 1, "oos_policy": "keep",
        "starts_at": "2031-01-01", "ends_at": "2031-01-08"})
    assert status == 201
    page.reload()
    page.wait_for_selector("#arrangement .slot")
    assert _slot_ids(page)[0] != last
    page.fill("#preview-at", "2031-01-02T09:00")
    page.wait_for_function(AT.replace("POS", "1"), arg=last)
    assert "as of 2031-01-02T09:00:00Z" in page.inner_text("#editor-summary")
    page.fill("#preview-at", "2031-01-09T00:00")
    page.wait_for_function(f"id => !({AT.replace('POS', '1')})(id)", arg=last)
