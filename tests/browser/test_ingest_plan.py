"""Ingest and plan pages in a real browser: an admin starts a job on a folder, watches the
progress bar reach the end and sees the refused file with its reason; the planner's form
gives its table and plots; non-admins do not see the ingest page and the API refuses them."""

from __future__ import annotations

import io

import pytest
from PIL import Image
from tests.browser.conftest import api, sign_in, snap

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def dropin(store):
    """A folder under the server's source root: two good images and a file that is not one."""
    path = store[0].parent.parent / "dropin"
    path.mkdir(exist_ok=True)
    for name, rgb in (("red.png", (200, 30, 30)), ("blue.png", (30, 40, 200))):
        image = Image.new("RGB", (320, 320), (250, 250, 250))
        image.paste(Image.new("RGB", (160, 200), rgb), (80, 60))
        buf = io.BytesIO()
        image.save(buf, "PNG")
        (path / name).write_bytes(buf.getvalue())
    (path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg at all" * 4)
    return path


def test_admin_ingests_a_folder_and_sees_progress_and_the_refused_file(page, store, server, dropin):
    _, keys, _ = store
    sign_in(page, keys["admin"])
    page.click("#nav a[data-page=ingest]")
    page.fill("#ingest-source", str(dropin))
    page.click("#ingest-form button[type=submit]")
    page.wait_for_selector("#job [data-status=done], #job [data-status=failed]", timeout=120_000)
    assert page.get_attribute("#job [data-status]", "data-status") == "done", page.inner_text("#job")
    assert page.get_attribute("#job .progress", "aria-valuenow") == "100"
    refused = page.locator("#refused tr")
    assert refused.count() == 1
    assert "broken.jpg" in refused.first.inner_text()
    assert refused.first.locator("td").nth(1).inner_text().strip()  # the reason is shown
    snap(page, "ingest")
    # a second job on the same folder is allowed once the first is done; a merchandiser may not start one
    status, _, body = api(server, "POST", "/jobs", keys["merchandiser"], {"source": str(dropin)})
    assert status == 403 and "admin" in body["error"]["message"]


def test_non_admins_do_not_see_the_ingest_page(page, store):
    _, keys, _ = store
    sign_in(page, keys["publisher"])
    assert page.locator("#nav a[data-page=ingest]").count() == 0
    page.goto("/ui/#/ingest")
    page.wait_for_selector("main p.error")
    assert "admin" in page.inner_text("main")
    assert page.locator("#ingest-form").count() == 0


def test_plan_form_gives_a_table_and_plots(page, store):
    _, keys, _ = store
    sign_in(page, keys["viewer"])
    page.click("#nav a[data-page=plan]")
    page.fill("#plan-images", "2000000")
    page.fill("#plan-deadline", "2")
    page.click("#plan-form button[type=submit]")
    page.wait_for_selector("#plan-table tbody tr")
    rows = page.locator("#plan-table tbody tr").count()
    assert rows >= 2
    assert page.locator("#plot-hours rect").count() == rows
    assert page.locator("#plot-cost rect").count() == rows
    snap(page, "plan")
    page.fill("#plan-images", "-5")
    page.click("#plan-form button[type=submit]")
    page.wait_for_selector("#plan-out p.error")
    assert "images" in page.inner_text("#plan-out p.error")
