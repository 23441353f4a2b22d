"""A/B tests of arrangements, end to end in a real browser: a publisher starts an experiment
of two versions of a collection in the workbench; two shoppers (two browser contexts, so two
localStorage visitor ids) open the example shop and each sees their own variant on every
reload; their events carry that variant and land in it in the results; promoting a variant
in the workbench publishes it, and a new shopper sees it. The experiment page shows the
chart, the per-variant table and a sample-ratio-mismatch warning when the split is broken."""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from tests.browser.conftest import api, sign_in, snap

pytestmark = pytest.mark.browser
WAIT_S = 20  # how long events may take to show in the results


def _category(server, keys, rank: int) -> str:
    """A category collection by size rank (the other browser tests use ranks 0-2)."""
    status, _, page = api(server, "GET", "/collections?limit=200", keys["viewer"])
    assert status == 200, page
    items = page["items"]
    cats = sorted((c for c in items if c["kind"] == "category" and c["size"] >= 3), key=lambda c: -c["size"])
    assert len(cats) > rank, [c["id"] for c in cats]
    return cats[rank]["id"]


def _grid(server, keys, collection: str, visitor: str | None = None) -> dict:
    path = f"/storefront/collections/{collection}?limit=500" + (f"&visitor={visitor}" if visitor else "")
    status, _, page = api(server, "GET", path, keys["storefront"])
    assert status == 200, page
    return page


def _two_versions(server, keys, collection: str, prefix: str) -> dict[str, dict]:
    """Publish the current arrangement as ``<prefix>-a`` and save its reverse as the draft
    ``<prefix>-b``: {name: {id, order}}."""
    out = {}
    for name in (f"{prefix}-a", f"{prefix}-b"):
        status, headers, saved = api(server, "POST", f"/collections/{collection}/versions",
                                     keys["merchandiser"], {"name": name, "columns": [4]})
        assert status == 201, saved
        out[name] = {"id": saved["id"]}
        if name.endswith("-a"):
            status, vh, _ = api(server, "GET", f"/collections/{collection}/versions", keys["viewer"])
            status, _, done = api(server, "POST", f"/collections/{collection}/publish", keys["publisher"],
                                  {"version": name}, headers={"If-Match": vh["etag"]})
            assert status == 200, done
            out[name]["order"] = [i["id"] for i in _grid(server, keys, collection)["items"]]
        else:
            order = out[f"{prefix}-a"]["order"][::-1]
            status, _, saved = api(server, "PUT", f"/collections/{collection}/versions/{name}",
                                   keys["merchandiser"], {"ids": order},
                                   headers={"If-Match": headers["etag"]})
            assert status == 200, saved
            out[name]["order"] = order
    return out


def _visitors_by_variant(server, keys, collection: str, want: dict[str, int],
                         prefix: str) -> dict[str, list[str]]:
    """Visitor ids whose (sticky, hashed) variant the storefront reports, ``want[v]`` of each."""
    found: dict[str, list[str]] = {v: [] for v in want}
    for i in range(400):
        if all(len(found[v]) >= n for v, n in want.items()):
            return found
        vid = f"{prefix}-{i}"
        variant = _grid(server, keys, collection, vid)["variant"]
        if variant in found and len(found[variant]) < want[variant]:
            found[variant].append(vid)
    raise AssertionError(f"too few visitors of each variant: {found}")


def _results(server, keys, exp_id: int) -> dict:
    status, _, body = api(server, "GET", f"/experiments/{exp_id}/results", keys["viewer"])
    assert status == 200, body
    return body


def _shopper(browser, server, visitor: str | None):
    """A new browser context (own localStorage); with ``visitor``, the snippet's stored id is
    set before any page script runs, so the shopper's variant is known in advance."""
    context = browser.new_context(base_url=server, viewport={"width": 1200, "height": 900})
    if visitor:
        context.add_init_script(f"localStorage.setItem('vismerch.visitor', {json.dumps(visitor)})")
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.sent = []
    page.on("request", lambda r: page.sent.extend(json.loads(r.post_data)["events"])
            if r.url.endswith("/api/v1/events") and r.method == "POST" else None)
    return context, page


def _open_shop(page, collection: str, key: str) -> tuple[list[str], str, str]:
    """Load the shop: (the order shown, the version id and the variant it names)."""
    page.goto(f"/shop/?collection={collection}&key={key}&columns=4")
    page.wait_for_selector("#grid .tile")
    page.wait_for_function("() => document.querySelector('#more').hidden")
    order = page.eval_on_selector_all("#grid .tile", "els => els.map(e => e.dataset.id)")
    return order, page.get_attribute("#grid", "data-version"), page.get_attribute("#grid", "data-variant")


def _start_in_the_workbench(page, collection: str) -> int:
    page.goto(f"/ui/#/collections/{collection}/experiments")
    page.wait_for_selector("#x-create")
    # no traffic yet: the form says the sample cannot be estimated, and still lets it start
    page.wait_for_function("() => !document.querySelector('#plan-estimate')"
                           ".textContent.startsWith('Estimating')")
    assert "Too little recent traffic" in page.text_content("#plan-estimate")
    assert page.is_checked("#xv-ab-a") and page.is_checked("#xv-ab-b")
    assert page.input_value("#x-versions tr[data-version='ab-a'] .share") == "50"
    page.select_option("#x-metric", "ctr")
    page.check(".x-guardrail[value='conversion_per_visitor']")
    page.fill("#x-name", "reverse order")
    page.click("#x-start")
    page.wait_for_url(lambda url: "#/experiments/" in url)
    page.wait_for_selector("#x-status")
    return int(page.url.rsplit("/", 1)[1])


def _shop_as(browser, server, keys, collection: str, visitor: str, expect: tuple[int, str, dict]) -> None:
    """One shopper (own context) sees variant ``expect`` on every reload, opens the first
    product, and every event sent says so."""
    exp_id, variant, version = expect
    context, shop = _shopper(browser, server, visitor)
    try:
        first = _open_shop(shop, collection, keys["storefront"])
        assert first == (version["order"], str(version["id"]), variant)
        for _ in range(2):  # sticky: the same variant on every reload
            shop.reload()
            assert _open_shop(shop, collection, keys["storefront"]) == first
        shop.locator("#grid .tile .open").first.click()
        shop.wait_for_selector("#product[open]")
        shop.wait_for_function("() => (sessionStorage.getItem('vismerch.pending') || '[]') === '[]'")
        mine = [e for e in shop.sent if e["collection"] == collection]
        assert {e["type"] for e in mine} == {"impression", "click"}
        assert {(e["experiment"], e["variant"], e["version_id"], e["visitor"]) for e in mine} == {
            (exp_id, variant, version["id"], visitor)}
    finally:
        context.close()


def test_two_shoppers_see_their_own_variant_and_promoting_changes_what_a_new_one_sees(
        page, browser, store, server):
    _, keys, _ = store
    t0 = time.monotonic()
    collection = _category(server, keys, 3)
    versions = _two_versions(server, keys, collection, "ab")
    sign_in(page, keys["publisher"])
    exp_id = _start_in_the_workbench(page, collection)
    status, _, exp = api(server, "GET", f"/experiments/{exp_id}", keys["viewer"])
    assert status == 200 and exp["status"] == "running"
    assert [v["name"] for v in exp["variants"]] == ["ab-a", "ab-b"]
    assert exp["metric"] == "ctr" and exp["guardrails"] == ["conversion_per_visitor"]

    who = {v: ids[0] for v, ids in _visitors_by_variant(server, keys, collection, {"ab-a": 1, "ab-b": 1},
                                                         f"shopper-{uuid.uuid4().hex[:6]}").items()}
    for variant, visitor in who.items():
        _shop_as(browser, server, keys, collection, visitor, (exp_id, variant, versions[variant]))

    # the events landed in each shopper's variant: one visitor each, one click each, none mislabelled
    deadline = time.monotonic() + WAIT_S
    while True:
        res = _results(server, keys, exp_id)
        n = {v["variant"]: v["n"] for v in res["primary"]["variants"]}
        if n == {"ab-a": 1, "ab-b": 1} or time.monotonic() > deadline:
            break
        page.wait_for_timeout(300)
    assert n == {"ab-a": 1, "ab-b": 1}, res
    assert res["data_quality"] == {"visitors": 2, "holdout": 0, "mislabelled": 0}
    assert all(v["value"] > 0 for v in res["primary"]["variants"])  # each clicked what it saw

    # promote: no winner yet, so the publisher picks ab-b, and confirms in the dialog
    page.reload()
    page.wait_for_selector("#x-promote")
    assert page.locator("#x-stop").count() == 1
    page.select_option("#x-promote-variant", "ab-b")
    page.click("#x-promote")
    page.wait_for_selector("dialog#confirm[open]")
    assert "ab-b" in page.text_content("#confirm-title")
    page.click("#confirm-ok")
    page.wait_for_selector("#x-ended")
    assert "Promoted: ab-b" in page.text_content("#x-ended")
    assert page.locator("#x-promote").count() == 0 and page.locator("#x-stop").count() == 0
    status, _, exp = api(server, "GET", f"/experiments/{exp_id}", keys["viewer"])
    assert exp["status"] == "promoted" and exp["winner"] == "ab-b"

    context, shop = _shopper(browser, server, None)  # a new shopper, no stored id
    try:
        order, version, variant = _open_shop(shop, collection, keys["storefront"])
        assert (order, version, variant) == (versions["ab-b"]["order"], str(versions["ab-b"]["id"]), "")
    finally:
        context.close()
    assert not page.console_errors
    assert time.monotonic() - t0 < 60


def _events(collection: str, visitors: dict[str, list[str]], variant_versions: dict[str, int],
            exp_id: int, products: list[str]) -> list[dict]:
    """Three days of visits, each visitor once: impressions of the first products, a click
    now and then (the treatment's a bit more often), labelled as the storefront said."""
    rng = random.Random(11)
    now = datetime.now(UTC)
    events = []
    for variant, ids in visitors.items():
        for k, vid in enumerate(ids):
            ts = (now - timedelta(days=k % 3, minutes=5 + k)).isoformat()
            for pos, pid in enumerate(products[:4], start=1):
                base = {"ts": ts, "visitor": vid, "collection": collection,
                        "version_id": variant_versions[variant], "position": pos, "columns": 4,
                        "product_id": pid, "experiment": exp_id, "variant": variant}
                events.append({**base, "event_id": str(uuid.uuid4()), "type": "impression"})
                if rng.random() < (0.25 if variant.endswith("-a") else 0.35):
                    events.append({**base, "event_id": str(uuid.uuid4()), "type": "click"})
    return events


def test_the_experiment_page_shows_the_chart_the_table_and_a_sample_ratio_mismatch(page, store, server):
    _, keys, _ = store
    t0 = time.monotonic()
    collection = _category(server, keys, 4)
    versions = _two_versions(server, keys, collection, "srm")
    started = (datetime.now(UTC) - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status, _, exp = api(server, "POST", "/experiments", keys["merchandiser"], {
        "collection": collection, "variants": ["srm-a", "srm-b"], "metric": "ctr",
        "guardrails": ["conversion_per_visitor"], "starts_at": started, "name": "broken split"})
    assert status == 201, exp
    # a broken split: 40 visitors of the control against 12 of the treatment
    visitors = _visitors_by_variant(server, keys, collection, {"srm-a": 40, "srm-b": 12}, "srm")
    events = _events(collection, visitors, {k: v["id"] for k, v in versions.items()}, exp["id"],
                     versions["srm-a"]["order"])
    status, _, answer = api(server, "POST", "/events", keys["storefront"], {"events": events})
    assert status == 200 and not answer["refused"], answer
    res = _results(server, keys, exp["id"])
    assert res["srm"]["flagged"] and res["status"] == "sample_ratio_mismatch", res["srm"]

    sign_in(page, keys["merchandiser"])
    page.click("#nav a[data-page=experiments]")  # every collection's experiments
    page.click(f"#experiments-table tr[data-id='{exp['id']}'] a.watch")
    page.wait_for_selector("#x-table tbody tr")
    warning = page.locator("#srm-warning")
    assert warning.is_visible() and warning.get_attribute("role") == "alert"
    assert "Sample ratio mismatch" in warning.text_content() and "srm-a 40" in warning.text_content()
    assert page.text_content("#x-verdict").startswith("Sample ratio mismatch")
    rows = page.locator("#x-table tbody tr")
    assert rows.count() == 2
    assert [rows.nth(i).locator("td.n").text_content() for i in (0, 1)] == ["40", "12"]
    assert rows.nth(1).locator("td.lift").text_content().endswith("%")
    assert page.locator("#x-guardrail-conversion_per_visitor tbody tr").count() == 2
    chart = page.locator("#x-timeline")
    assert chart.get_attribute("role") == "img"
    for variant in ("srm-a", "srm-b"):  # a line, a shaded interval and whiskers per variant
        series = chart.locator(f"g[data-variant='{variant}']")
        assert series.locator("polyline").count() == 1 and series.locator("polygon").count() == 1
        assert series.locator("circle").count() >= 3 and series.locator("line.xwhisker").count() >= 3
    # a merchandiser may stop but not promote: the promote control is not drawn
    assert page.locator("#x-stop").count() == 1 and page.locator("#x-promote").count() == 0
    page.evaluate("() => document.activeElement.blur()")
    snap(page, "experiments")

    page.goto(f"/ui/#/collections/{collection}/experiments")
    page.wait_for_selector(f"#experiments-table tr[data-id='{exp['id']}'][data-status='running']")
    assert page.locator("#x-running").is_visible() and page.locator("#x-create").count() == 0  # one at a time
    page.click("#x-running a")
    page.click("#x-stop")
    page.click("#confirm-cancel")  # cancelling changes nothing
    assert page.locator("#x-stop").count() == 1 and page.locator("#x-ended").count() == 0
    page.click("#x-stop")
    page.click("#confirm-ok")
    page.wait_for_selector("#x-ended")
    assert "Stopped" in page.text_content("#x-ended")
    # stopped: the form is back, with a sample-size estimate from the collection's traffic
    page.click("#experiments-link")
    page.wait_for_selector("#x-create")
    page.select_option("#x-metric", "ctr")
    page.wait_for_selector("#plan-per-variant")
    assert int(page.text_content("#plan-total").replace(",", "")) > 0
    assert "day" in page.text_content("#plan-estimate")
    assert not page.console_errors
    assert time.monotonic() - t0 < 60
