"""Search merchandising in the workbench, in a real browser: a merchandiser previews a
query, adds a pin rule for it in the form and sees the product move to the pinned position
in the "with query rules" list while the plain list is unchanged; a bad rule shows the
field the server names; synonyms are added; search events appear in the report."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from tests.browser.conftest import api, sign_in, snap

pytestmark = pytest.mark.browser
QUERY = "striped shirt"


def _ids(page, list_id: str) -> list[str]:
    return page.eval_on_selector_all(f"#{list_id} li[data-id]", "els => els.map(e => e.dataset.id)")


def _plain(server, keys) -> list[str]:
    status, _, res = api(server, "GET", "/search/preview?k=12&q=" + QUERY.replace(" ", "+"), keys["viewer"],
                         timeout=300)
    assert status == 200, res
    return [h["id"] for h in res["before"]["hits"]]


def test_pin_rule_changes_the_preview(page, server, store):
    _, keys, _ = store
    plain = _plain(server, keys)  # also waits for the text encoder to load
    status, _, products = api(server, "GET", "/products?limit=200", keys["viewer"])
    assert status == 200, products
    outsider = next(p["id"] for p in products["items"]
                    if p["id"] not in plain and "<" not in (p["title"] or ""))  # a readable screenshot
    events = [{"event_id": f"bq-{uuid.uuid4().hex}", "type": "search", "ts": datetime.now(UTC).isoformat(),
               "visitor": f"v{i}", "query": "Gilet Fluo", "results": 0} for i in range(3)]
    status, _, answer = api(server, "POST", "/events", keys["storefront"], {"events": events})
    assert status == 200 and answer["accepted"] == 3, answer

    sign_in(page, keys["merchandiser"])
    page.click("#nav a[data-page=queries]")
    page.wait_for_selector("#zero-results-table")
    assert "gilet fluo" in page.inner_text("#zero-results-table")

    page.fill("#qp-q", QUERY)
    page.click("#qp-form button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll('#qp-after li[data-id]').length > 0",
                           timeout=120_000)
    assert _ids(page, "qp-before") == plain and _ids(page, "qp-after") == plain

    # a bad rule: the server names the field, the form shows it
    page.select_option("#qr-kind", "pin")
    page.fill("#qr-query", QUERY)
    page.fill("#qr-products", "no-such-product")
    page.click("#qr-form button[type=submit]")
    page.wait_for_function("() => document.querySelector('#qr-error').textContent.includes('products')")

    page.fill("#qr-products", "")
    page.click(f"#qp-before li[data-id='{plain[3]}'] button.pick")  # a preview product into the form
    assert page.input_value("#qr-products") == plain[3]
    assert page.evaluate("document.activeElement.id") == "qr-products"
    page.fill("#qr-products", outsider)
    page.fill("#qr-position", "2")
    page.click("#qr-form button[type=submit]")
    page.wait_for_selector("#query-rules-table")
    page.wait_for_function(f"() => {{ const li = document.querySelectorAll('#qp-after li[data-id]');"
                           f" return li.length > 1 && li[1].dataset.id === {outsider!r}; }}", timeout=120_000)
    after = _ids(page, "qp-after")
    assert after[1] == outsider and after[0] == plain[0]
    assert _ids(page, "qp-before") == plain
    assert "pinned" in page.inner_text(f"#qp-after li[data-id='{outsider}']")
    snap(page, "query-rules")

    # disabling the rule takes the pin away again
    page.click("#query-rules-table button[aria-label^='Disable query rule']")
    page.wait_for_function(f"() => !document.querySelector('#qp-after li[data-id=\"{outsider}\"]')",
                           timeout=120_000)
    assert _ids(page, "qp-after") == plain
    assert "disabled" in page.inner_text("#query-rules-table")

    page.select_option("#qs-kind", "equivalent")
    page.fill("#qs-terms", "shirt, blouse")
    page.click("#qs-form button[type=submit]")
    page.wait_for_selector("#synonyms-table")
    page.wait_for_function(
        "() => document.querySelector('#qp-status').textContent.includes('striped blouse')", timeout=120_000)
    assert page.console_errors == []
