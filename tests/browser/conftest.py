"""A real server and a real headless Chromium for the web app's browser tests.

The fixtures build a small store (a generated catalog, one product titled with an HTML
injection), make a key of every role, start ``vismerch serve`` on a free loopback port in a
subprocess and drive Debian's ``/usr/bin/chromium`` with Playwright (its own browser
download is never used). A failed test leaves a screenshot of its page in
``browser-failures/``; with ``VISMERCH_SCREENSHOTS=docs/screenshots`` the tests also write
the README's screenshots there.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("VISMERCH_CHROMIUM", "/usr/bin/chromium")
HOSTILE = "<img src=x onerror=alert(1)>"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
FAILURES = Path("browser-failures")
# axe-core (npm), injected by the tests only; `make axe` (a prerequisite of `make test`) puts it here
AXE_GLOB = ".tools/axe-*/node_modules/axe-core/axe.min.js"
AXE_IMPACTS = ("serious", "critical")  # what fails a page



@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.report_call = report
    return report


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    """A small ingested store whose first product's title is an HTML injection, and a key
    of every kind: (store path, {role: key})."""
    from vismerch.catalog import access
    from vismerch.cli import main
    from vismerch.config import load_settings
    from vismerch.service.workspace import Workspace
    from vismerch.testing.catalog import make_manifest, read_manifest_rows, small_catalog

    catalog = small_catalog(tmp_path_factory.mktemp("catalog"), n=36, seed=5)
    rows = read_manifest_rows(catalog.manifest_path)
    rows[0]["title"] = HOSTILE
    manifest = make_manifest(catalog.manifest_path, rows)
    path = tmp_path_factory.mktemp("store") / "store"
    assert main(["ingest", str(manifest), "--store", str(path), "--workers", "1", "--json"]) == 0
    ws = Workspace.open(path, load_settings())
    try:
        keys = {kind: access.create_key(ws.store, kind, name=f"browser {kind}")[0]
                for kind in access.KEY_KINDS}
    finally:
        ws.close()
    return path, keys, rows


@pytest.fixture(scope="session")
def server(store, tmp_path_factory):
    """``vismerch serve`` over the store on a free loopback port: its base URL."""
    path, _, _ = store
    port = _free_port()
    env = {**os.environ, "VISMERCH_SERVE_RATE_LIMIT": "0",
           "VISMERCH_SERVE_SOURCE_ROOT": str(path.parent.parent)}
    log = tmp_path_factory.mktemp("server") / "serve.log"
    proc = subprocess.Popen([sys.executable, "-m", "vismerch.cli", "serve", str(path), "--port", str(port)],
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/v1/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = log.read_text(errors="replace")
                pytest.fail(f"vismerch serve did not start: {out[-2000:]}")
            time.sleep(0.2)
    # the first text search loads the text encoder (many seconds on a busy machine): warm it
    # in the background while the first tests run
    key = store[1]["viewer"]

    def warm() -> None:
        with contextlib.suppress(OSError):  # only a warm-up: the search tests wait for themselves
            api(base, "GET", "/search?q=warm&k=1", key, timeout=300)

    threading.Thread(target=warm, daemon=True).start()
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (`make` installs Debian's chromium)")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server, request):
    """A fresh browser context (no cookies) on the server; records dialogs that fire and
    takes a screenshot when the test fails."""
    context = browser.new_context(base_url=server, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.dialogs = []

    def on_dialog(dialog):
        page.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.console_errors = []
    page.on("pageerror", lambda exc: page.console_errors.append(str(exc)))
    page.set_default_timeout(15_000)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        FAILURES.mkdir(exist_ok=True)
        shot = FAILURES / f"{request.node.name}.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot of the failed page: {shot}")
        except Exception as exc:  # a crashed page still lets the other tests run
            print(f"no screenshot: {exc}")
    context.close()


def snap(page, name: str) -> None:
    """Write docs screenshot ``name``.png when VISMERCH_SCREENSHOTS names a folder."""
    folder = os.environ.get("VISMERCH_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.wait_for_function("() => [...document.images].filter(i => { const r = i.getBoundingClientRect();"
                               " return r.bottom > 0 && r.top < innerHeight && r.width > 0; })"
                               ".every(i => i.complete)")  # thumbnails in view have loaded
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def sign_in(page, key: str) -> None:
    page.goto("/ui/")
    page.fill("#api-key", key)
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#nav a")


def api(server: str, method: str, path: str, key: str, body: dict | None = None,
        headers: dict | None = None, timeout: float = 60) -> tuple[int, dict, object]:
    """A plain HTTP call with a key (what a storefront or a script does): (status, headers, json)."""
    import json

    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(server + "/api/v1" + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, dict(res.headers), json.loads(res.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read() or b"null")



def _axe_source() -> str | None:
    named = os.environ.get("VISMERCH_AXE")
    root = Path(__file__).resolve().parents[2]
    found = [root / named] if named else sorted(root.glob(AXE_GLOB))
    found = [p for p in found if p.is_file()]
    return found[-1].read_text(encoding="utf-8") if found else None


@pytest.fixture(scope="session")
def axe_source() -> str:
    """axe-core's script, or a skip saying how to get it (a failure where
    VISMERCH_REQUIRE_AXE is set, as CI sets it)."""
    source = _axe_source()
    if source is None:
        why = "no axe-core: `make axe` installs it with npm (.tools/), or set VISMERCH_AXE to axe.min.js"
        if os.environ.get("VISMERCH_REQUIRE_AXE"):
            pytest.fail(why)
        pytest.skip(why)
    return source


def assert_accessible(page, axe_source: str, where: str = "") -> None:
    """Run axe-core on the page as it is now; fail listing every serious or critical
    violation (rule, impact, what to fix, the elements). The script is evaluated through the
    DevTools protocol, so the app's CSP (script-src 'self') stays on and nothing is served."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source)
    result = page.evaluate("""async () => {
        const r = await axe.run(document, { resultTypes: ["violations"] });
        return r.violations.map(v => ({ id: v.id, impact: v.impact, help: v.help,
          nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + " :: "
            + n.failureSummary.split("\\n").slice(0, 2).join(" ")) }));
    }""")
    bad = [v for v in result if v["impact"] in AXE_IMPACTS]
    if bad:
        lines = [f"{v['impact']} {v['id']}: {v['help']}\n    " + "\n    ".join(v["nodes"]) for v in bad]
        raise AssertionError(f"accessibility violations on {where or page.url}:\n" + "\n".join(lines))
