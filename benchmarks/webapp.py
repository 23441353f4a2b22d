"""Benchmark: is the web app's catalog grid as smooth at 100,000 products as at 1,000?

The catalog page keeps only the rows in view in the DOM and fetches pages with the API's
cursor as the view reaches them. Measured in one run, on stores of each size (an ingested
sample catalog grown by copying its rows: same images, new ids), with a real headless
chromium against `vismerch serve` on loopback:

- first cards: sign-in to the first thumbnails drawn;
- scroll: 100 animation frames scrolling down the grid, one row a frame (within 1,000); the frame times
  (p50/p95/max) and the most product cards ever in the DOM;
- thumbnails requested during that scroll (they load when scrolling pauses);
- deep jump: scrolled to a position 5,000 products down, time until real cards (not
  placeholders) show there (the cursor pages are fetched in order to reach it).

The figure that matters is the ratio 100,000 vs 1,000 of the scroll frame times (1.0 = as
smooth) and the DOM card count staying flat.

    .venv/bin/python benchmarks/webapp.py [--sizes 1000,100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]

SCROLL = """async () => {
  const view = document.querySelector('#catalog-grid .vgrid');
  const times = []; let most = 0; let last = performance.now();
  for (let i = 0; i < 100; i++) {
    view.scrollTop += 236;
    await new Promise(r => requestAnimationFrame(r));
    const now = performance.now(); times.push(now - last); last = now;
    most = Math.max(most, view.querySelectorAll('.card').length);
  }
  times.sort((a, b) => a - b);
  const q = p => times[Math.min(times.length - 1, Math.floor(p * times.length))];
  return {p50: q(0.5), p95: q(0.95), max: times[times.length - 1], dom_cards_max: most};
}"""

JUMP = """async (index) => {
  const view = document.querySelector('#catalog-grid .vgrid');
  const cols = Math.max(1, Math.floor((view.clientWidth - 8) / 170));
  const t0 = performance.now();
  view.scrollTop = Math.floor(index / cols) * 236;
  while (true) {
    await new Promise(r => setTimeout(r, 20));
    const real = view.querySelectorAll('.card.product').length;
    const holes = view.querySelectorAll('.card.placeholder').length;
    if (real > 0 && holes === 0) return performance.now() - t0;
    if (performance.now() - t0 > 120000) return null;
  }
}"""


def _store(root: Path, size: int) -> Path:
    from vismerch.catalog.replicate import replicate_products
    from vismerch.catalog.store import Store
    from vismerch.cli import main
    from vismerch.testing.catalog import small_catalog

    template = root / "template"
    if not template.exists():
        catalog = small_catalog(root / "catalog", n=40, seed=7)
        assert main(["ingest", str(catalog.manifest_path), "--store", str(template), "--workers", "1",
                     "--json"]) == 0
    import shutil

    path = root / f"store-{size}"
    shutil.copytree(template, path)
    with Store.open(path) as store:
        replicate_products(store, size)
    return path


def _serve(path: Path) -> tuple[subprocess.Popen, str, str]:
    from vismerch.catalog import access
    from vismerch.catalog.store import Store

    with Store.open(path) as store:
        key = access.create_key(store, "viewer")[0]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "VISMERCH_SERVE_RATE_LIMIT": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "vismerch.cli", "serve", str(path), "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{base}/api/v1/health", timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    return proc, base, key


def measure(browser, path: Path, size: int) -> dict:
    proc, base, key = _serve(path)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900}, base_url=base)
        t0 = time.perf_counter()
        page.goto("/ui/")
        page.fill("#api-key", key)
        page.click("#signin button[type=submit]")
        page.wait_for_selector("#catalog-grid .card.product", timeout=60_000)
        first = time.perf_counter() - t0
        total = int(page.inner_text("#catalog-status").split()[0].replace(",", ""))
        thumbs = []
        page.on("request", lambda req: thumbs.append(req.url) if req.url.endswith("/thumbnail") else None)
        scroll = page.evaluate(SCROLL)
        during = len(thumbs)
        page.evaluate("() => { document.querySelector('#catalog-grid .vgrid').scrollTop = 0; }")
        jump = page.evaluate(JUMP, min(5000, total - 10))
        page.close()
        return {"products": total, "first_cards_s": round(first, 3),
                "frame_ms": {k: round(scroll[k], 2) for k in ("p50", "p95", "max")},
                "dom_cards_max": scroll["dom_cards_max"], "thumbnail_requests_while_scrolling": during,
                "deep_jump_ms": round(jump, 1) if jump is not None else None, "size": size}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS, headless=True)
        for size in sizes:
            rows.append(measure(browser, _store(Path(tmp), size), size))
        browser.close()
    base = rows[0]
    for row in rows:
        row["frame_p95_vs_smallest"] = round(row["frame_ms"]["p95"] / max(base["frame_ms"]["p95"], 1e-9), 2)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'products':>9} {'first cards s':>13} {'frame p50/p95/max ms':>22} {'DOM cards':>9} "
          f"{'thumbs':>6} {'jump 5,000 ms':>13} {'p95 ratio':>9}")
    for r in rows:
        f = r["frame_ms"]
        frames = f"{f['p50']:.1f}/{f['p95']:.1f}/{f['max']:.1f}"
        jump = r["deep_jump_ms"] or float("nan")
        print(f"{r['products']:>9,} {r['first_cards_s']:>13.2f} {frames:>22} {r['dom_cards_max']:>9} "
              f"{r['thumbnail_requests_while_scrolling']:>6} {jump:>13.0f} "
              f"{r['frame_p95_vs_smallest']:>9.2f}")


if __name__ == "__main__":
    main()
