"""Learn what sells, end to end in a real browser: the example shop (/shop/) renders a
published collection with a storefront key and sends impression, click and add-to-cart
events with vismerch-events.js, which the analytics endpoint then counts exactly once (a
failed POST is retried with the same event ids); the workbench shows that collection's
funnel, trend and slot plots, the product table, the editor's real-unit overlays and the
performance of two versions in their diff."""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from tests.browser.conftest import api, sign_in, snap

pytestmark = pytest.mark.browser
WAIT_S = 20  # how long events may take to show in the analytics


def _categories(server, keys) -> list[dict]:
    status, _, page = api(server, "GET", "/collections?limit=200", keys["viewer"])
    assert status == 200, page
    items = page["items"]
    return sorted((c for c in items if c["kind"] == "category"), key=lambda c: -c["size"])


def _publish(server, keys, collection: str, name: str, order: list[str] | None = None) -> int:
    """Save the current arrangement (or ``order``) as version ``name`` and publish it: its id."""
    status, headers, saved = api(server, "POST", f"/collections/{collection}/versions", keys["merchandiser"],
                                 {"name": name, "columns": [4]})
    assert status == 201, saved
    if order:
        status, _, saved = api(server, "PUT", f"/collections/{collection}/versions/{name}",
                               keys["merchandiser"], {"ids": order}, headers={"If-Match": headers["etag"]})
        assert status == 200, saved
    status, headers, _ = api(server, "GET", f"/collections/{collection}/versions", keys["viewer"])
    assert status == 200
    status, _, done = api(server, "POST", f"/collections/{collection}/publish", keys["publisher"],
                          {"version": name}, headers={"If-Match": headers["etag"]})
    assert status == 200 and done["published"] == name, done
    return saved["id"]


def _totals(server, keys, collection: str) -> dict:
    status, _, body = api(server, "GET", f"/analytics/collections/{collection}", keys["viewer"])
    assert status == 200, body
    return body["totals"]


def _wait_for(page, server, keys, collection: str, want: dict) -> dict:
    """Poll the analytics until every count in ``want`` is reached (bounded). Waits in the
    page: Playwright's sync API runs the page's request handlers only during its own calls."""
    deadline = time.monotonic() + WAIT_S
    while True:
        totals = _totals(server, keys, collection)
        if all(totals[k] >= v for k, v in want.items()) or time.monotonic() > deadline:
            return totals
        page.wait_for_timeout(300)


@pytest.fixture(scope="module")
def shop_collection(store, server):
    """The second-largest category (the editor tests use the largest), published."""
    _, keys, _ = store
    collection = _categories(server, keys)[1]["id"]
    version_id = _publish(server, keys, collection, "shop-v1")
    return collection, version_id


def _open_shop(page, collection, key, columns=4):
    page.goto(f"/shop/?collection={collection}&key={key}&columns={columns}")
    page.wait_for_selector("#grid .tile")


def _scroll_through(page):
    """Scroll to the end a screen at a time (every tile passes through the view), and back."""
    for _ in range(40):
        done = page.evaluate("() => { scrollBy(0, innerHeight * 0.6);"
                             " return innerHeight + scrollY >= document.body.scrollHeight - 2; }")
        page.wait_for_timeout(120)
        if done and page.locator("#more").is_hidden():
            break
    page.evaluate("() => scrollTo(0, 0)")


def test_the_shop_sends_impressions_clicks_and_add_to_carts_that_the_analytics_count(
        page, store, server, shop_collection):
    _, keys, _ = store
    collection, version_id = shop_collection
    before = _totals(server, keys, collection)
    sent: list[dict] = []
    page.on("request", lambda r: sent.extend(json.loads(r.post_data)["events"])
            if r.url.endswith("/api/v1/events") and r.method == "POST" else None)

    # two wide columns: the lower rows are out of view until the shopper scrolls
    _open_shop(page, collection, keys["storefront"], columns=2)
    assert page.get_attribute("#grid", "data-version") == str(version_id)
    total = len(_grid(server, keys, collection))
    page.wait_for_timeout(1500)  # the snippet's batch interval is 1 s
    seen_unscrolled = {e["product_id"] for e in sent if e["type"] == "impression"}
    assert 1 <= len(seen_unscrolled) < total, seen_unscrolled
    _scroll_through(page)
    assert page.locator("#grid .tile").count() == total
    second = page.locator("#grid .tile").nth(1)
    clicked = second.get_attribute("data-id")
    second.locator(".open").click()
    page.wait_for_selector("#product[open]")
    page.wait_for_function("() => document.querySelector('#product-img').src.startsWith('blob:')")
    page.click("#product-add")
    page.wait_for_selector("#cart:text('Cart: 1')")
    assert page.evaluate("() => document.querySelector('#grid .tile img').src.startsWith('blob:')")

    want = {"impressions": before["impressions"] + total, "clicks": before["clicks"] + 1,
            "add_to_carts": before["add_to_carts"] + 1}
    after = _wait_for(page, server, keys, collection, want)
    assert {k: after[k] for k in want} == want, (after, sent)  # exactly once each, no double count
    page.wait_for_timeout(300)  # hand over the page's last request events
    mine = [e for e in sent if e["collection"] == collection]
    assert {e["version_id"] for e in mine} == {version_id}
    assert all(e["columns"] == 2 and e["position"] >= 1 for e in mine)
    click = next(e for e in mine if e["type"] == "click")
    assert click["product_id"] == clicked and click["position"] == 2
    assert len({e["visitor"] for e in mine}) == 1 and len({e["event_id"] for e in mine}) == len(mine)
    assert not page.console_errors


def test_a_failed_post_is_retried_with_the_same_event_ids_and_counted_once(page, store, server,
                                                                            shop_collection):
    _, keys, _ = store
    collection, _ = shop_collection
    before = _totals(server, keys, collection)
    attempts: list[list[str]] = []

    def flaky(route):
        ids = [e["event_id"] for e in json.loads(route.request.post_data)["events"]]
        attempts.append(ids)
        if len(attempts) == 1:
            route.fulfill(status=503, body="{}", content_type="application/json")
        else:
            route.continue_()

    page.route("**/api/v1/events", flaky)
    _open_shop(page, collection, keys["storefront"])
    page.locator("#grid .tile .add").first.click()
    after = _wait_for(page, server, keys, collection, {"add_to_carts": before["add_to_carts"] + 1})
    assert after["add_to_carts"] == before["add_to_carts"] + 1
    assert len(attempts) >= 2 and set(attempts[0]) <= {i for a in attempts[1:] for i in a}
    page.evaluate("() => document.activeElement.blur()")
    snap(page, "shop")


@pytest.fixture(scope="module")
def traffic(store, server):
    """A third category with two published versions and a week of synthetic events, sent
    through the API as a storefront would: (collection, {version name: id}, totals,
    {version name: its order})."""
    _, keys, _ = store
    collection = _categories(server, keys)[2]["id"]
    ids = {"week-a": _publish(server, keys, collection, "week-a")}
    orders = {"week-a": _grid(server, keys, collection)}
    # week b puts week a's last product first, and a rule pins it there
    last = orders["week-a"][-1]
    status, _, rule = api(server, "POST", "/rules", keys["merchandiser"],
                          {"kind": "pin", "collection": collection, "product": last, "position": 1})
    assert status in (200, 201), rule
    ids["week-b"] = _publish(server, keys, collection, "week-b", [last, *orders["week-a"][:-1]])
    orders["week-b"] = _grid(server, keys, collection)
    assert orders["week-b"][0] == last
    events = _week_of_traffic(collection, orders, ids)
    for start in range(0, len(events), 500):
        batch = {"events": events[start:start + 500]}
        status, _, answer = api(server, "POST", "/events", keys["storefront"], batch)
        assert status == 200 and not answer["refused"], answer
    return collection, ids, _totals(server, keys, collection), orders


def _grid(server, keys, collection: str) -> list[str]:
    status, _, grid = api(server, "GET", f"/storefront/collections/{collection}?limit=500",
                          keys["storefront"])
    assert status == 200, grid
    return [item["id"] for item in grid["items"]]


def _week_of_traffic(collection: str, orders: dict[str, list[str]], ids: dict[str, int]) -> list[dict]:
    """Six days of visits (week a three days, then week b): each product has its own appeal
    (week a's order, best first), lower positions are seen less."""
    rng = random.Random(7)
    first = orders["week-a"]
    appeal = {pid: 0.6 - 0.5 * k / len(first) for k, pid in enumerate(first)}
    now = datetime.now(UTC)
    events = []
    for day in range(6):
        name = "week-a" if day >= 3 else "week-b"
        version = ids[name]
        for visit in range(12 + 4 * day):
            ts = (now - timedelta(days=day, minutes=visit)).isoformat()
            for pos, pid in enumerate(orders[name], start=1):
                base = {"ts": ts, "visitor": f"v{day}-{visit}", "collection": collection,
                        "version_id": version, "position": pos, "columns": 4, "product_id": pid}
                events.append({**base, "event_id": str(uuid.uuid4()), "type": "impression"})
                if rng.random() < appeal[pid] / (1 + 0.4 * (pos - 1)):
                    events.append({**base, "event_id": str(uuid.uuid4()), "type": "click"})
                    if rng.random() < 0.3:
                        events.append({**base, "event_id": str(uuid.uuid4()), "type": "add_to_cart",
                                       "quantity": 1})
                        if rng.random() < 0.5:
                            events.append({**base, "event_id": str(uuid.uuid4()), "type": "purchase",
                                           "quantity": 1, "revenue": 40.0, "currency": "EUR"})
    return events


def test_the_workbench_shows_the_funnel_trend_slots_and_products(page, store, server, traffic):
    _, keys, _ = store
    collection, _, totals, orders = traffic
    sign_in(page, keys["viewer"])
    page.goto(f"/ui/#/collections/{collection}/analytics")
    page.wait_for_selector("#products-table tbody tr")
    assert page.text_content("#kpi-impressions").replace(",", "") == str(totals["impressions"])
    assert page.text_content("#kpi-orders") == str(totals["orders"])
    assert page.locator("#funnel rect.plot-bar").count() == 4
    assert page.locator("#trend rect.plot-bar").count() == 6  # six days of traffic
    assert page.locator("#slots-plot .observed").count() >= 3
    assert page.locator("#by-version tbody tr").count() == 2
    pinned = page.get_attribute(f"#pins tr[data-product='{orders['week-b'][0]}']", "data-verdict")
    assert pinned in ("below", "as_expected", "above"), pinned  # judged: it had traffic at 1
    snap(page, "analytics")
    page.select_option("#trend-metric", "ctr")
    page.wait_for_selector("#trend polyline")
    rows = page.locator("#products-table tbody tr")
    assert rows.count() >= 3
    # sorting by a column header (a button, so the keyboard reaches it) reorders the rows
    page.click("#products-table th button[data-sort='impressions']")
    page.wait_for_selector("#products-table th[aria-sort]")
    assert not page.console_errors


def test_the_editor_overlays_show_views_and_the_diff_shows_how_versions_did(page, store, server, traffic):
    _, keys, _ = store
    collection, ids, _, _ = traffic
    status, _, body = api(server, "GET", f"/analytics/collections/{collection}?products=true", keys["viewer"])
    assert status == 200
    views = {p["id"]: p["impressions"] for p in body["products"]}
    sign_in(page, keys["publisher"])
    page.goto(f"/ui/#/collections/{collection}")
    page.wait_for_selector("#arrangement .slot")
    page.select_option("#overlay", "views")
    first = page.locator("#arrangement .slot").first
    pid = first.get_attribute("data-id")
    page.wait_for_function("() => document.querySelector('#arrangement .slot .overlay.perf')")
    assert first.locator(".overlay").text_content().replace(",", "") == f"views {views[pid]}"
    page.select_option("#overlay-period", "7")
    page.click("button[data-tab=versions]")
    page.click("#versions-list tr[data-version='week-a'] .diff-btn")
    table = page.locator("#diff-performance")
    table.wait_for()
    by_version = {r["version_id"]: r for r in body["by_version"]}
    for name, vid in ids.items():
        row = table.locator(f"tr[data-version='{name}']")
        shown = row.locator("td.impressions").text_content().replace(",", "")
        assert shown == str(by_version[vid]["impressions"])
