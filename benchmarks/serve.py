"""Benchmark: how fast does `vismerch serve` answer the storefront and colour search, next to
the same server answering a constant JSON of the same size (the floor)?

Question (issue 9): on a 10,000-product store, with N = 1, 8, 32 concurrent loopback clients,
is the storefront endpoint's throughput >= 0.5x the floor's, with p99 < 20 ms at 32 clients?
And (issue 27) does serving the visitors of a running experiment (`?visitor=`, 1,000 distinct
visitors, a two-version experiment on the same collection) stay within 10% of the plain
storefront's throughput and CPU per request (`ratios.experiment_x_storefront`)?

What runs: a 10,000-product store is built once under benchmarks/out/ (tiny generated
images, ingested by the real pipeline; reused when present), one category is arranged and
its arrangement published (so the storefront has a grid). The server is the one `vismerch
serve` runs (Workspace.open, create_app with 40 threads, serve.server.run: uvicorn on
127.0.0.1, warning log, no access log, one compute thread per request), started in a
subprocess; the benchmark adds one route to that app,
`GET /bench/floor`, a constant JSON body of the storefront page's byte size, so the floor
goes through the same uvicorn, FastAPI routing and middleware but does no auth, no store
read and no rendering. Clients are separate processes (threads with keep-alive
http.client connections, spread over up to 4 processes) so the client side's GIL does not
cap the server. Each (endpoint, N) runs for a bounded time and request count; ratios are
taken within one run. The API key's rate limit is set out of reach (1e9/s) rather than
off, so its bookkeeping is still paid.

    PYTHONPATH=src .venv/bin/python benchmarks/serve.py [--products 10000] [--seconds 3]
        [--clients 1,8,32] [--json benchmarks/results/serve.json]

`--mode search` (issue 28) measures each search kind instead: see benchmarks/search_bench.py.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "serve"
CATEGORIES = ("tops", "dresses", "shoes", "bags", "hats", "coats", "skirts", "scarves", "belts", "socks")
COLOURS = {"red": (200, 30, 40), "navy": (20, 30, 90), "green": (40, 140, 60),
           "yellow": (230, 200, 40), "black": (25, 25, 25), "white": (235, 235, 235),
           "pink": (230, 130, 170), "brown": (120, 75, 40), "orange": (240, 130, 30),
           "purple": (110, 50, 140), "grey": (130, 130, 130), "teal": (20, 130, 130)}
PAGE = "columns=4&offset=0&limit=48"


# ------------------------------------------------------------------------------ store
def _image(rng: np.random.Generator, rgb: tuple[int, int, int], size: int = 96) -> np.ndarray:
    """A product-ish tile: a textured ellipse of one colour on studio white."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    cy, cx = rng.uniform(0.4, 0.6, 2) * size
    ry, rx = rng.uniform(0.22, 0.42, 2) * size
    mask = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
    texture = np.kron(rng.uniform(0.8, 1.15, (6, 6)), np.ones((size // 6 + 1, size // 6 + 1)))[:size, :size]
    colour = np.clip(np.array(rgb, np.float32) + rng.normal(0, 10, 3), 0, 255)
    img = np.full((size, size, 3), 248, np.float32)
    img[mask] = np.clip(colour[None, :] * texture[mask][:, None], 0, 255)
    return img.astype(np.uint8)


def build_store(n: int, workers: int) -> tuple[Path, str]:
    """(store path, published collection), built under benchmarks/out/serve or reused."""
    from PIL import Image

    from vismerch.pipeline.ingest import ingest
    from vismerch.service import versions
    from vismerch.service.workspace import Workspace

    store_path = OUT / f"store-{n}"
    collection = "tops"
    if (store_path / "store.sqlite").exists():
        with Workspace.open(store_path) as ws:
            count = ws.store.db.execute("SELECT COUNT(*) FROM products WHERE status = 'ok'").fetchone()[0]
            if count >= n * 0.99 and versions.published_version(ws, collection) is not None:
                print(f"reusing {store_path} ({count} products)", flush=True)
                return store_path, collection
    images = OUT / f"catalog-{n}"
    images.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    names = list(COLOURS)
    manifest = images / "manifest.csv"
    t = time.perf_counter()
    with manifest.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "image", "title", "category", "price", "stock", "sales"])
        for i in range(n):
            colour = names[int(rng.integers(len(names)))]
            category = CATEGORIES[i % len(CATEGORIES)] if i % 5 else "tops"  # tops: ~2,800
            rel = f"img/{i // 1000:02d}/p{i:05d}.png"
            path = images / rel
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(_image(rng, COLOURS[colour])).save(path, compress_level=1)
            w.writerow([f"p{i:05d}", rel, f"{colour} {category[:-1]} {i}", category,
                        f"{rng.uniform(5, 200):.2f}", int(rng.integers(0, 50)), int(rng.integers(0, 500))])
    print(f"generated {n} images in {time.perf_counter() - t:.1f}s", flush=True)
    summary = ingest(manifest, store_path, workers=workers, progress=True)
    print(f"ingested {summary.ingested} in {summary.seconds:.1f}s", flush=True)
    with Workspace.open(store_path) as ws:
        t = time.perf_counter()
        name = f"bench-{int(time.time())}"
        versions.save_draft(ws, collection, name, columns=4)  # arranged as `vismerch arrange`
        versions.publish(ws, collection, name)  # writes the storefront's precomputed grid
        print(f"arranged and published {collection!r} in {time.perf_counter() - t:.1f}s", flush=True)
    return store_path, collection


def start_experiment(store_path: Path, collection: str) -> int:
    """A running experiment on ``collection``: its published version against a second one."""
    from vismerch.service import experiments, versions
    from vismerch.service.models_experiments import ExperimentIn
    from vismerch.service.workspace import Workspace

    with Workspace.open(store_path) as ws:
        running = [e for e in experiments.list_experiments(ws, collection) if e.status == "running"]
        if running:
            return running[0].id
        live = versions.published_version(ws, collection).name
        names = {v.name for v in versions.list_versions(ws, collection).versions}
        if "bench-b" not in names:
            versions.save_draft(ws, collection, "bench-b", mode="flow")
        spec = ExperimentIn(collection=collection, variants=[live, "bench-b"])
        return experiments.create_experiment(ws, spec).id


# ------------------------------------------------------------------------------ server
def serve(store: str, port: int, floor_bytes: int, raw: bool = False) -> None:
    """What `vismerch serve STORE` runs, plus the benchmark's floor route (and with ``raw``
    the search mode's raw index routes)."""
    from fastapi import Response

    from vismerch.serve.app import create_app
    from vismerch.serve.server import run
    from vismerch.service.workspace import Workspace

    workspace = Workspace.open(store)
    app = create_app(workspace, workspace.settings, threads=40)
    prefix, suffix = b'{"floor":"', b'"}'
    body = prefix + b"x" * max(0, floor_bytes - len(prefix) - len(suffix)) + suffix

    def floor() -> Response:  # sync, like the storefront route: same thread-pool hop
        return Response(body, media_type="application/json")

    app.add_api_route("/bench/floor", floor, methods=["GET"], include_in_schema=False)
    if raw:
        from search_bench import add_raw_routes

        add_raw_routes(app, workspace)
    try:
        run(app, host="127.0.0.1", port=port)
    finally:
        workspace.close()


def _free_port() -> int:
    from vismerch.testing.server import free_port

    return free_port()


def _wait_up(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    from vismerch.testing.server import wait_up

    try:
        wait_up(port, proc, timeout)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


# ------------------------------------------------------------------------------ clients
def _client_proc(port: int, path: str, headers: dict, threads: int, seconds: float, max_requests: int,
                 sync: tuple[mp.Queue, mp.Event, mp.Queue]) -> None:
    """``threads`` keep-alive clients; each connects, reports ready, waits for ``go``, then
    sends requests back to back for ``seconds`` (at most ``max_requests`` each). ``sync``:
    the ready queue, the start event, the results queue."""
    import threading

    ready, go, out = sync
    lat: list[list[float]] = [[] for _ in range(threads)]
    errors = [0] * threads
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(threads)]
    for conn in conns:
        conn.connect()
    ready.put(threads)
    go.wait()
    started = time.perf_counter()

    def worker(k: int) -> None:
        conn, mine = conns[k], lat[k]
        end = started + seconds
        while time.perf_counter() < end and len(mine) < max_requests:
            t0 = time.perf_counter()
            # "{n}": 1,000 visitors, each client thread walking through them; a list: its URLs in turn
            if isinstance(path, list):
                url = path[(k * 7919 + len(mine)) % len(path)]
            else:
                url = path.replace("{n}", str((k * 7919 + len(mine)) % 1000)) if "{n}" in path else path
            conn.request("GET", url, headers=headers)
            resp = conn.getresponse()
            resp.read()
            mine.append(time.perf_counter() - t0)
            if resp.status != 200:
                errors[k] += 1
        conn.close()

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(([x for xs in lat for x in xs], sum(errors), time.perf_counter() - started))


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of process ``pid`` (all its threads) from /proc; 0 elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(port: int, path: str, headers: dict, clients: int, seconds: float,
            max_requests: int = 50_000, server_pid: int | None = None) -> dict:
    """Throughput and latency of ``clients`` concurrent keep-alive clients (up to 4 processes),
    and the server's CPU time per request (less sensitive to other load than wall time)."""
    ctx = mp.get_context("spawn")
    procs_n = min(clients, 4)
    per = [clients // procs_n + (1 if k < clients % procs_n else 0) for k in range(procs_n)]
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_client_proc, args=(port, path, headers, n, seconds,
                                                     max(1, max_requests // clients), (ready, go, out)))
             for n in per]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    cpu0 = _cpu_seconds(server_pid)
    go.set()
    lats: list[float] = []
    errors, wall = 0, 1e-9
    for _ in procs:
        got, err, elapsed = out.get(timeout=seconds + 120)
        lats += got
        errors += err
        wall = max(wall, elapsed)
    cpu = _cpu_seconds(server_pid) - cpu0
    for p in procs:
        p.join()
    q = np.percentile(np.array(lats) * 1000, [50, 99]) if lats else [float("nan")] * 2
    return {"clients": clients, "requests": len(lats), "errors": errors, "seconds": round(wall, 2),
            "rps": round(len(lats) / wall, 1),
            "p50_ms": round(float(q[0]), 2), "p99_ms": round(float(q[1]), 2),
            "mean_ms": round(statistics.fmean(lats) * 1000, 2) if lats else None,
            "server_cpu_us_per_request": round(cpu / len(lats) * 1e6, 1) if lats and cpu else None}


def _ratio(a: float | None, b: float | None) -> float | None:
    """a / b: the floor's CPU per request over the endpoint's (its throughput ratio on an
    otherwise idle server-bound host)."""
    return round(a / b, 3) if a and b else None


def _median_row(rows: list[dict]) -> dict:
    """The round with the median throughput (its latencies with it), plus every round's rps."""
    ordered = sorted(rows, key=lambda r: r["rps"])
    cpu = sorted(r["server_cpu_us_per_request"] or 0.0 for r in rows)
    return {**ordered[len(ordered) // 2], "rounds_rps": [r["rps"] for r in rows],
            "server_cpu_us_per_request": cpu[len(cpu) // 2] or None,
            "errors": sum(r["errors"] for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--products", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=3.0, help="per endpoint and client count")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is kept")
    ap.add_argument("--ingest-workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="write the raw results here")
    ap.add_argument("--mode", choices=("storefront", "search"), default="storefront",
                    help="search: p50/p99 of each search kind per catalog size (search_bench.py)")
    ap.add_argument("--sizes", default="10000,1000000", help="search mode: catalog sizes")
    args = ap.parse_args()
    if args.mode == "search":
        from search_bench import run_search

        return run_search(args)
    clients = [int(c) for c in args.clients.split(",")]

    from vismerch.catalog import access
    from vismerch.catalog.store import Store

    store_path, collection = build_store(args.products, args.ingest_workers)
    experiment = start_experiment(store_path, collection)
    store = Store.open(store_path)
    try:
        storefront_key = access.create_key(store, "storefront", name="bench")[0]
        viewer_key = access.create_key(store, "viewer", name="bench")[0]
    finally:
        store.close()
    env = {**os.environ, "VISMERCH_SERVE_RATE_LIMIT": "1e9", "VISMERCH_SERVE_RATE_BURST": "1000000"}
    port = _free_port()
    sf_path = f"/api/v1/storefront/collections/{collection}?{PAGE}"
    search_path = "/api/v1/search/colour?colour=navy&k=24"

    # the floor's size: the storefront page as this server answers it (probed on a first server)
    probe = subprocess.Popen([sys.executable, __file__, "_serve", str(store_path), str(port), "16"], env=env)
    try:
        _wait_up(port, probe)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("GET", sf_path, headers={"Authorization": f"Bearer {storefront_key}"})
        resp = conn.getresponse()
        page = resp.read()
        assert resp.status == 200, page[:300]
        conn.request("GET", search_path, headers={"Authorization": f"Bearer {viewer_key}"})
        resp = conn.getresponse()
        search_bytes = len(resp.read())
        assert resp.status == 200
    finally:
        probe.terminate()
        probe.wait()
    server = subprocess.Popen(
        [sys.executable, __file__, "_serve", str(store_path), str(port), str(len(page))], env=env)
    results: dict = {"endpoints": {}}
    try:
        _wait_up(port, server)
        targets = {
            "floor": ("/bench/floor", {}),
            "storefront": (sf_path, {"Authorization": f"Bearer {storefront_key}"}),
            # the same page for 1,000 visitors of a running two-version experiment
            "storefront_experiment": (sf_path + "&visitor=shopper-{n}",
                                      {"Authorization": f"Bearer {storefront_key}"}),
            "search_colour": (search_path, {"Authorization": f"Bearer {viewer_key}"}),
        }
        for path, headers in targets.values():  # warm caches, connections and the thread pool
            conn = http.client.HTTPConnection("127.0.0.1", port)
            for _ in range(20):
                conn.request("GET", path, headers=headers)
                conn.getresponse().read()
            conn.close()
        for n in clients:
            rounds: dict[str, list[dict]] = {name: [] for name in targets}
            for _ in range(args.rounds):  # endpoints alternate, so load drift hits all alike
                for name, (path, headers) in targets.items():
                    rounds[name].append(measure(port, path, headers, n, args.seconds,
                                                server_pid=server.pid))
            for name, rows in rounds.items():
                row = _median_row(rows)
                results["endpoints"].setdefault(name, []).append(row)
                print(f"{name:14s} N={n:3d}  {row['rps']:>8} req/s  p50 {row['p50_ms']:6.2f} ms  "
                      f"p99 {row['p99_ms']:6.2f} ms  server CPU {row['server_cpu_us_per_request']} us/req  "
                      f"errors {row['errors']}", flush=True)
    finally:
        server.terminate()
        server.wait()
    ratios = {}
    for name in ("storefront", "storefront_experiment", "search_colour"):
        pairs = zip(results["endpoints"][name], results["endpoints"]["floor"], strict=True)
        ratios[name] = [{"clients": a["clients"], "x_floor": round(a["rps"] / f["rps"], 3),
                         "cpu_x_floor": _ratio(f["server_cpu_us_per_request"],
                                               a["server_cpu_us_per_request"])}
                        for a, f in pairs]
    sf32 = next((r for r in results["endpoints"]["storefront"] if r["clients"] == max(clients)), None)
    # issue 27: serving visitors of an experiment within 10% of the plain storefront
    ratios["experiment_x_storefront"] = [
        {"clients": e["clients"], "rps": round(e["rps"] / s["rps"], 3),
         "cpu": _ratio(s["server_cpu_us_per_request"], e["server_cpu_us_per_request"])}
        for e, s in zip(results["endpoints"]["storefront_experiment"], results["endpoints"]["storefront"],
                        strict=True)]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    results.update({
        "schema": "vismerch.bench/1", "benchmark": "serve",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": commit,
        "products": args.products, "collection": collection, "seconds_per_run": args.seconds,
        "experiment": experiment,
        "rounds": args.rounds,
        "page_bytes": len(page), "floor_bytes": len(page), "search_bytes": search_bytes,
        "cpus": os.cpu_count(), "ratios": ratios,
        "target": {"storefront_x_floor_min": 0.5, "p99_ms_max_at_32": 20.0,
                   "met": bool(sf32 and all(r["x_floor"] >= 0.5 for r in ratios["storefront"])
                               and sf32["p99_ms"] < 20.0)},
        "note": "shared 2-core machine (other engineers' tests ran at the same time); "
                "rely on same-run ratios, not absolute figures",
    })
    print(json.dumps({"ratios": ratios, "target": results["target"]}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "_serve":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), raw=len(sys.argv) == 6)
    else:
        main()
