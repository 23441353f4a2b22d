"""Benchmark: how fast do shopper events go in, and how fast are a collection's analytics?

Questions (issue 26), each beside a floor measured in the same run:
1. GA4 import: rows/s of `vismerch events import STORE FILE --format ga4` on a GA4 BigQuery
   export (JSON lines, the export's other fields present). Target >= 100k rows/s on 2 cores.
   Floor: DuckDB reading the same file's needed columns and counting the rows (parsing
   alone); peer: Python's json.loads line by line (what a hand-written importer would pay).
2. POST /api/v1/events: accepted events/s with 8 loopback clients sending batches of 100
   (keep-alive, in 4 client processes) to `vismerch serve`'s own app in a subprocess.
   Target >= 20k events/s. Floor: the same clients posting the same bodies to a route on
   the same app that reads the body and answers a constant (no auth, checks or disk).
3. Analytics of one collection over 10M events in the log (20 collections, 3 published
   versions each): `collection_analytics` (funnel, per version/day, click model, pins).
   Target < 2 s. Floor: DuckDB counting one collection's rows in the same Parquet files.

    PYTHONPATH=src .venv/bin/python benchmarks/events.py [--ga4-rows 300000] [--seconds 5]
        [--events 10000000] [--json benchmarks/results/events.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "events"


def build_store() -> tuple[Path, list[str]]:
    """A 200-product store ingested by the real pipeline (reused when present)."""
    from vismerch.cli import main as cli
    from vismerch.service.workspace import Workspace
    from vismerch.testing.catalog import small_catalog

    path = OUT / "store"
    if not (path / "store.sqlite").exists():
        catalog = small_catalog(OUT / "catalog", n=200, seed=11)
        assert cli(["ingest", str(catalog.manifest_path), "--store", str(path), "--json"]) == 0
    with Workspace.open(path) as ws:
        ids = [p.id for p in ws.store.products()]
    return path, ids


def fresh_copy(path: Path, name: str) -> Path:
    import shutil

    target = OUT / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(path, target, ignore=shutil.ignore_patterns("events"))
    return target


def _canonical(n: int, ids: list[str], seed: int = 0):
    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    kinds = rng.choice(["impression", "click", "add_to_cart", "purchase"], n, p=[0.85, 0.1, 0.03, 0.02])
    for i in range(n):
        kind = str(kinds[i])
        ago = timedelta(seconds=int(rng.integers(1, 20 * 86400)))
        yield {"event_id": f"b{i}", "type": kind, "ts": now - ago,
               "visitor": f"v{int(rng.integers(0, 50_000))}", "collection": "all", "version_id": None,
               "position": int(rng.integers(1, 100)), "columns": 4,
               "product_id": ids[int(rng.integers(0, len(ids)))], "quantity": 1,
               "revenue": 30.0 if kind == "purchase" else None, "currency": "EUR"}


# ------------------------------------------------------------------------------ 1. GA4 import
def bench_import(store: Path, ids: list[str], rows: int) -> dict:
    from vismerch.service import events
    from vismerch.service.workspace import Workspace
    from vismerch.testing.exports import write_ga4

    path = OUT / f"ga4-{rows}.jsonl"
    if not path.exists():
        write_ga4(_canonical(int(rows / 1.1), ids), path, page_views_every=10)
    with open(path, "rb") as fh:
        lines = sum(1 for _ in fh)
    size = path.stat().st_size
    target = fresh_copy(store, "import-store")
    with Workspace.open(target) as ws:
        t = time.perf_counter()
        report = events.import_events(ws, path, "ga4")
        ours = time.perf_counter() - t
        t = time.perf_counter()
        again = events.import_events(ws, path, "ga4")
        reimport = time.perf_counter() - t
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    t = time.perf_counter()
    con.execute(f"""SELECT COUNT(*), COUNT(items) FROM read_json('{path}', format = 'newline_delimited',
        columns = {{'event_name': 'VARCHAR', 'event_timestamp': 'VARCHAR', 'user_pseudo_id': 'VARCHAR',
                    'items': 'STRUCT(item_id VARCHAR, item_list_id VARCHAR, item_list_index VARCHAR)[]'}},
        ignore_errors = true)""").fetchone()
    floor = time.perf_counter() - t
    t = time.perf_counter()
    with open(path, "rb") as fh:
        for line in fh:
            json.loads(line)
    peer = time.perf_counter() - t
    return {"lines": lines, "bytes": size, "seconds": round(ours, 3), "rows_per_s": round(lines / ours),
            "reimport_seconds": round(reimport, 3), "reimport_added": again.added,
            "added": report.added, "refused": report.refused, "skipped": report.skipped,
            "floor_duckdb_parse_s": round(floor, 3), "floor_rows_per_s": round(lines / floor),
            "peer_json_loads_s": round(peer, 3), "peer_rows_per_s": round(lines / peer),
            "x_floor": round(floor / ours, 3), "x_peer": round(peer / ours, 2),
            "target_rows_per_s": 100_000, "met": lines / ours >= 100_000}


# ------------------------------------------------------------------------------ 2. POST /events
def serve(store: str, port: int) -> None:
    from fastapi import Response

    from vismerch.serve.app import create_app
    from vismerch.serve.server import run
    from vismerch.service.workspace import Workspace

    workspace = Workspace.open(store)
    app = create_app(workspace, workspace.settings, threads=40)

    async def floor(request):  # a plain Starlette endpoint: reads the body, answers a constant
        await request.body()
        return Response(b'{"accepted":100,"duplicates":0,"refused":[]}', media_type="application/json")

    app.add_route("/bench/floor", floor, methods=["POST"])
    try:
        run(app, host="127.0.0.1", port=port)
    finally:
        workspace.close()


def _poster(port: int, path: str, key: str, ids: list[str], tag: str, threads: int, seconds: float,
            sync: tuple[mp.Queue, mp.Event, mp.Queue]) -> None:
    ready, go, out = sync  # report ready, wait for the start, send the counts back
    import threading

    now = datetime.now(UTC).isoformat()

    def bodies(k: int) -> list[bytes]:
        return [json.dumps({"events": [
            {"event_id": f"{tag}-{k}-{j}-{i}", "type": "impression" if i % 10 else "click", "ts": now,
             "visitor": f"v{j}", "collection": "all", "version_id": 1, "position": i + 1, "columns": 4,
             "product_id": ids[(i * 7 + j) % len(ids)]} for i in range(100)]}).encode() for j in range(400)]

    prepared = [bodies(k) for k in range(threads)]
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=60) for _ in range(threads)]
    for c in conns:
        c.connect()
    counts = [[0, 0, 0] for _ in range(threads)]  # requests, accepted, errors
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    ready.put(threads)
    go.wait()
    started = time.perf_counter()

    def worker(k: int) -> None:
        for body in prepared[k]:
            if time.perf_counter() > started + seconds:
                break
            conns[k].request("POST", path, body=body, headers=headers)
            resp = conns[k].getresponse()
            data = resp.read()
            counts[k][0] += 1
            if resp.status != 200:
                counts[k][2] += 1
            else:
                counts[k][1] += json.loads(data)["accepted"]

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(([sum(c[i] for c in counts) for i in range(3)], time.perf_counter() - started))


def _post_round(port: int, path: str, key: str, ids: list[str], tag: str, clients: int,
                seconds: float) -> dict:
    ctx = mp.get_context("spawn")
    procs_n = min(clients, 4)
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_poster, args=(port, path, key, ids, f"{tag}{p}", clients // procs_n, seconds,
                                               (ready, go, out))) for p in range(procs_n)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    go.set()
    requests = accepted = errors = 0
    wall = 1e-9
    for _ in procs:
        (r, a, e), elapsed = out.get(timeout=seconds + 300)
        requests, accepted, errors, wall = requests + r, accepted + a, errors + e, max(wall, elapsed)
    for p in procs:
        p.join()
    return {"requests": requests, "errors": errors, "seconds": round(wall, 2),
            "events_per_s": round(requests * 100 / wall), "accepted": accepted}


def bench_post(store: Path, ids: list[str], seconds: float, clients: int = 8) -> dict:
    from vismerch.catalog import access
    from vismerch.service.workspace import Workspace

    target = fresh_copy(store, "post-store")
    with Workspace.open(target) as ws:
        key = access.create_key(ws.store, "storefront")[0]
    from vismerch.testing.server import free_port, wait_up

    port = free_port()
    env = {**os.environ, "VISMERCH_SERVE_RATE_LIMIT": "1000000000", "VISMERCH_SERVE_RATE_BURST": "1000000000"}
    server = subprocess.Popen([sys.executable, __file__, "_serve", str(target), str(port)], env=env)
    try:
        wait_up(port, server, timeout=120)
        rounds = {"floor": [], "events": []}
        for r in range(3):
            for name, path in (("floor", "/bench/floor"), ("events", "/api/v1/events")):
                cpu = _cpu_seconds(server.pid)
                row = _post_round(port, path, key, ids, f"{name[0]}{r}-", clients, seconds)
                spent = _cpu_seconds(server.pid) - cpu
                row["server_cpu_us_per_event"] = round(spent / max(1, row["requests"] * 100) * 1e6, 2)
                rounds[name].append(row)
    finally:
        server.terminate()
        server.wait(timeout=30)
    with Workspace.open(target) as ws:
        from vismerch.service.events import event_log

        stored = event_log(ws).counts()["events"]
    best = {k: sorted(v, key=lambda x: x["events_per_s"])[1] for k, v in rounds.items()}  # the median round
    accepted = sum(r["accepted"] for r in rounds["events"])
    return {"clients": clients, "batch": 100, "rounds": rounds, "median": best,
            "x_floor": round(best["events"]["events_per_s"] / best["floor"]["events_per_s"], 3),
            "accepted_total": accepted, "stored_total": stored, "nothing_lost": stored == accepted,
            "target_events_per_s": 20_000, "met": best["events"]["events_per_s"] >= 20_000}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------ 3. analytics
def build_log(store: Path, ids: list[str], n: int) -> Path:
    """``n`` events over 20 collections with 3 versions each, written as Parquet segments."""
    from vismerch.events.log import EventLog, _conform

    target = OUT / f"log-{n}"
    if (target / "events" / "log.sqlite").exists():
        return target
    target = fresh_copy(store, f"log-{n}")
    log = EventLog(target)
    rng = np.random.default_rng(5)
    start = datetime.now(UTC) - timedelta(days=28)
    chunk = 2_000_000
    for k in range(0, n, chunk):
        m = min(chunk, n - k)
        coll = rng.integers(0, 20, m)
        version = rng.integers(0, 3, m)
        position = np.minimum(rng.geometric(0.03, m), len(ids))
        perms = np.stack([np.stack([rng.permutation(len(ids)) for _ in range(3)]) for _ in range(20)])
        product = perms[coll, version, position - 1]
        kind = np.where(rng.random(m) < 0.9, "impression", np.where(rng.random(m) < 0.8, "click",
                        np.where(rng.random(m) < 0.6, "add_to_cart", "purchase")))
        ts = (int(start.timestamp() * 1e6) + rng.integers(0, 28 * 86400 * 10**6, m)).astype("int64")
        table = _conform(pa.table({
            "event_id": pa.array([f"x{k + i}" for i in range(m)]), "type": kind,
            "ts": pa.array(ts).cast(pa.timestamp("us", tz="UTC")),
            "visitor": pa.array([f"{v:032x}" for v in rng.integers(0, 2**62, m)]),
            "collection": np.char.add("c", coll.astype(str)), "version_id": version + 1,
            "position": position.astype("int32"), "columns": np.full(m, 4, "int16"),
            "product_id": np.asarray(ids, dtype=object)[product],
            "quantity": np.ones(m, "int32"), "revenue": np.where(kind == "purchase", 30.0, np.nan)}), "bench")
        with log._write() as con:
            log._write_segments(con, table, "bench")
    return target


def bench_analytics(store: Path, ids: list[str], n: int) -> dict:
    import duckdb

    from vismerch.service import events
    from vismerch.service.workspace import Workspace

    target = build_log(store, ids, n)
    out = {"events": n}
    with Workspace.open(target) as ws:
        log = events.event_log(ws)
        files, _ = log.snapshot()
        times, times_products = [], []
        for _ in range(3):
            t = time.perf_counter()
            result = events.collection_analytics(ws, "c3")
            times.append(time.perf_counter() - t)
            t = time.perf_counter()
            events.collection_analytics(ws, "c3", products=True)
            times_products.append(time.perf_counter() - t)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    listed = ", ".join(f"'{f}'" for f in files)
    floors = []
    for _ in range(3):
        t = time.perf_counter()
        con.execute(f"SELECT COUNT(*), COUNT(DISTINCT visitor) FROM read_parquet([{listed}]) "
                    "WHERE collection = 'c3'").fetchone()
        floors.append(time.perf_counter() - t)
    ours, floor = float(np.median(times)), float(np.median(floors))
    out.update({"collection_events": result["totals"]["impressions"] + result["totals"]["clicks"],
                "seconds": round(ours, 3),
                "seconds_with_products": round(float(np.median(times_products)), 3),
                "floor_duckdb_count_s": round(floor, 3), "x_floor": round(floor / ours, 3),
                "target_s": 2.0, "met": ours < 2.0})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ga4-rows", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--only", default="import,post,analytics")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    store, ids = build_store()
    results = {"schema": "vismerch.bench/1", "benchmark": "events", "date": datetime.now(UTC).isoformat(),
               "machine": f"{os.cpu_count()} cores", "commit": _commit()}
    only = set(args.only.split(","))
    if "import" in only:
        results["ga4_import"] = bench_import(store, ids, args.ga4_rows)
        print(json.dumps(results["ga4_import"]), flush=True)
    if "post" in only:
        results["post_events"] = bench_post(store, ids, args.seconds)
        print(json.dumps(results["post_events"]["median"]), results["post_events"]["x_floor"], flush=True)
    if "analytics" in only:
        results["analytics"] = bench_analytics(store, ids, args.events)
        print(json.dumps(results["analytics"]), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=HERE).stdout.strip()
    except OSError:
        return "unknown"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        main()
