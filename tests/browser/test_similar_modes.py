"""The catalog drawer's "Same colour / Same style / Both" choice in a real browser: a
labelled radio group, moved with the keyboard, whose choice refetches the similar items."""

from __future__ import annotations

import pytest
from tests.browser.conftest import _axe_source, api, assert_accessible, sign_in

pytestmark = pytest.mark.browser


def _strip(page) -> list[str]:
    return page.locator("#similar-items .mini").evaluate_all("els => els.map(e => e.dataset.id)")


def test_drawer_similar_mode_is_labelled_keyboard_usable_and_refetches(page, server, store):
    _, keys, rows = store
    sign_in(page, keys["viewer"])
    pid = rows[1]["id"]
    page.locator(f"#catalog-grid .card.product[data-id='{pid}']").click()
    page.wait_for_selector("#similar-mode input[type=radio]", state="attached", timeout=60_000)
    page.locator("#similar-mode").scroll_into_view_if_needed()  # the drawer scrolls
    assert page.inner_text("#similar-mode legend") == "Similar by"
    labels = page.locator("#similar-mode label").all_inner_texts()
    assert [t.strip() for t in labels] == ["Same colour", "Same style", "Both"]
    assert page.get_by_label("Same style", exact=True).is_checked()  # the default where style vectors exist
    wanted = {}
    for mode in ("colour", "style", "both"):
        status, _, body = api(server, "GET", f"/products/{pid}/similar?k=12&mode={mode}",
                              keys["viewer"])
        assert status == 200
        wanted[mode] = [hit["id"] for hit in body["hits"]]
    assert wanted["style"] != wanted["both"]  # so the refetch below shows
    page.wait_for_function("n => document.querySelectorAll('#similar-items .mini').length === n",
                           arg=len(wanted["style"]))
    assert _strip(page) == wanted["style"]
    axe = _axe_source()  # where axe-core is installed (make axe); the rest runs without it
    if axe is not None:
        assert_accessible(page, axe, "catalog drawer with the similar-items choice")
    # keyboard only: focus the checked radio, arrow to the next one (Both)
    page.get_by_label("Same style", exact=True).focus()
    page.keyboard.press("ArrowRight")
    assert page.get_by_label("Both", exact=True).is_checked()
    page.wait_for_function("ids => [...document.querySelectorAll('#similar-items .mini')]"
                           ".map(e => e.dataset.id).join() === ids.join()", arg=wanted["both"])
    # the choice is kept for the next product the drawer opens
    other = rows[2]["id"]
    page.locator(f"#catalog-grid .card.product[data-id='{other}']").click()
    page.wait_for_function("id => document.querySelector('#drawer p.muted')?.textContent === id", arg=other)
    page.wait_for_selector("#similar-mode input[type=radio]", state="attached", timeout=60_000)
    assert page.get_by_label("Both", exact=True).is_checked()
