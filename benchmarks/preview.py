"""Benchmark: the explained arrangement preview (``service.arrangements.preview``, what
``POST /api/v1/collections/{id}/preview`` answers) on a 10,000-product collection.

Question: does a page of the preview for widths 2, 3, 4, 5 come back in about the time
the arrangement itself takes (benchmarks/arrange.py: < 0.5 s at 10,000), and are the
feature shards read once per ingest rather than once per request? Measured in the same
run: the first request (reads the shards), later pages (from the workspace cache), and
the same arrangement through ``arrange_collection`` without the cache (reads the shards
every time), with a pin and a boost in force.

The store is synthetic (benchmarks/arrange.py's look-alike styles, 64-d vectors as the
``colour`` backend, no images): products, one shard, every product in one category.

    .venv/bin/python benchmarks/preview.py [--n 10000] [--pages 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as benchmarks/arrange.py
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arrange import generate_catalog  # noqa: E402
from vismerch.arrange.layout import arrange_collection  # noqa: E402
from vismerch.catalog.shards import record_shard, write_shard  # noqa: E402
from vismerch.catalog.store import Store  # noqa: E402
from vismerch.config import load_settings  # noqa: E402
from vismerch.merch.collections import refresh_collections  # noqa: E402
from vismerch.service import arrangements, rules  # noqa: E402
from vismerch.service.workspace import Workspace  # noqa: E402

WIDTHS = [2, 3, 4, 5]


def build_store(path: Path, n: int) -> None:
    cat = generate_catalog(n)
    store = Store.open(path, create=True)
    shas = [f"sha-{pid}" for pid in cat["ids"]]
    rel = write_shard(store.path, "colour", "part-bench", shas, cat["vectors"], {})
    with store.transaction() as con:
        for i, (pid, sha) in enumerate(zip(cat["ids"], shas, strict=True)):
            con.execute(
                "INSERT INTO products (id, image_path, sha256, status, title, category, brand,"
                " price, stock, sales, created_at, attributes) VALUES (?,?,?,'ok',?,?,?,?,?,?,?,'{}')",
                (pid, f"/nowhere/{pid}.jpg", sha, f"product {i}", "all", cat["brand"][i],
                 10.0 + i % 90, float(i % 17), float(cat["scores"][i] * 1000), "2026-01-01"))
            con.execute("INSERT INTO images (sha256, width, height, bytes, format) VALUES "
                        "(?, 800, 800, 1000, 'jpeg')", (sha,))
        record_shard(con, "colour", "bench", "colour", rel, shas)
    refresh_collections(store)
    store.close()


CPU = {"s": 0.0}  # CPU seconds of the last _timed call (the figure on a loaded machine)


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    CPU["s"] = time.process_time() - c0
    return out, time.perf_counter() - t0


def measure(n: int, pages: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        _, build_s = _timed(lambda: build_store(path, n))
        ws = Workspace.open(path, load_settings())
        reads = {"n": 0}
        original = Store.load_features

        def counting(self, *args, **kwargs):
            reads["n"] += 1
            return original(self, *args, **kwargs)

        Store.load_features = counting
        try:
            rules.add_rule(ws, "pin", collection="all", product="P000777", position=3,
                           oos_policy="keep")
            rules.add_rule(ws, "boost", collection="all", where="price < 20", factor=10)
            first, cold_s = _timed(lambda: arrangements.preview(ws, "all", columns=WIDTHS, limit=48))
            cold_cpu = CPU["s"]
            assert first.slots[2].id == "P000777" and first.slots[2].pinned
            warm, warm_cpu = [], []
            for k in range(pages):
                page, s = _timed(lambda k=k: arrangements.preview(
                    ws, "all", columns=WIDTHS, offset=(k * 97 * 48) % n, limit=48))
                warm.append(s)
                warm_cpu.append(CPU["s"])
            cached_reads = reads["n"]
            uncached, uncached_cpu = [], []
            for _ in range(2):
                _, s = _timed(lambda: arrange_collection(ws.store, "all", columns=WIDTHS, log=False))
                uncached.append(s)
                uncached_cpu.append(CPU["s"])
            total_reads = reads["n"]
        finally:
            Store.load_features = original
            ws.close()
    return {"n": n, "widths": WIDTHS, "build_s": round(build_s, 2),
            "preview_first_s": round(cold_s, 3), "preview_first_cpu_s": round(cold_cpu, 3),
            "preview_next_pages_median_s": round(statistics.median(warm), 3),
            "preview_next_pages_median_cpu_s": round(statistics.median(warm_cpu), 3),
            "arrange_without_cache_median_s": round(statistics.median(uncached), 3),
            "arrange_without_cache_median_cpu_s": round(statistics.median(uncached_cpu), 3),
            "shard_reads_for_previews": cached_reads, "previews": 1 + pages,
            "shard_reads_without_cache": total_reads - cached_reads, "arranges_without_cache": 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = measure(args.n, args.pages)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for key, value in out.items():
        print(f"{key:32s} {value}")


if __name__ == "__main__":
    main()
