"""End-to-end ingest on a GPU against the same ingest on the CPU, one script, a few minutes.

`benchmarks/gpu.py` measures kernels and models one at a time; this runs the real command,
`vismerch ingest`, over one generated catalog three ways and compares the stores:

1. ``cpu``: colour backend, local worker pool (the CI path);
2. ``cuda``: colour backend, ``--device cuda`` (the device distributor: CPU workers
   header-check JPEGs, the consumer decodes them with nvJPEG and runs the colour backend
   on the GPU);
3. ``cuda+clip``: as 2 plus a random-initialised CLIP of a real architecture (default
   ViT-B/16) saved and loaded through the real loader, ``--precision auto`` (the precision
   the guard settled on is read back from the store).

It reports images/s of each run (from ``ingest --json``) and how far the CUDA store agrees
with the CPU one: the same dominant colour name, the same quality flags, the same duplicate
groups, and the same refused files with the same reasons.

    python benchmarks/gpu_ingest.py --out gpu-ingest.json              # on the GPU machine
    python benchmarks/gpu_ingest.py --device cpu --n 40 --no-clip      # dry-run anywhere
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run([sys.executable, "-m", "vismerch.cli", *args], env=env,
                          capture_output=True, text=True, check=False)


def ingest(manifest: Path, store: Path, *extra: str) -> dict[str, Any]:
    started = time.perf_counter()
    proc = cli("ingest", str(manifest), "--store", str(store), "--json", *extra)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"ingest {' '.join(extra)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    summary = json.loads(proc.stdout)
    summary["wall_s"] = round(wall, 2)
    return summary


def read_store(store: Path) -> dict[str, Any]:
    """Dominant colour and flags per product, duplicate groups and refusals, from the CLI."""
    tags = json.loads(cli("tags", str(store), "--json").stdout)
    dupes = json.loads(cli("dupes", str(store), "--json").stdout)
    errors = json.loads(cli("errors", str(store), "--json").stdout)
    by_id = {}
    for row in tags:
        colours = [c for c in row.get("colours", []) if c.get("hex")]
        by_id[row["id"]] = {"colour": colours[0]["name"] if colours else None,
                            "flags": sorted(f["name"] for f in row.get("flags", []))}
    groups = sorted(sorted(g["members"]) for g in dupes)
    refused = sorted((e.get("product_id") or e.get("path"), e.get("reason")) for e in errors)
    return {"tags": by_id, "groups": groups, "refused": refused}


def agreement(ref: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    ids = sorted(set(ref["tags"]) & set(other["tags"]))
    same_colour = sum(ref["tags"][i]["colour"] == other["tags"][i]["colour"] for i in ids)
    same_flags = sum(ref["tags"][i]["flags"] == other["tags"][i]["flags"] for i in ids)
    ref_pairs = {(a, b) for g in ref["groups"] for a in g for b in g if a < b}
    other_pairs = {(a, b) for g in other["groups"] for a in g for b in g if a < b}
    return {
        "products": len(ids),
        "missing": len(set(ref["tags"]) ^ set(other["tags"])),
        "same_colour": round(same_colour / max(1, len(ids)), 4),
        "same_flags": round(same_flags / max(1, len(ids)), 4),
        "duplicate_pairs_ref": len(ref_pairs),
        "duplicate_pairs_shared": len(ref_pairs & other_pairs),
        "duplicate_pairs_other": len(other_pairs),
        "same_refusals": ref["refused"] == other["refused"],
    }


def precision_used(store: Path) -> list[str]:
    import sqlite3

    con = sqlite3.connect(f"file:{store / 'store.sqlite'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT DISTINCT fingerprint FROM shards").fetchall()
    except sqlite3.Error as exc:
        return [f"unreadable: {exc}"]
    finally:
        con.close()
    return sorted(r[0] for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n", type=int, default=1200, help="products in the generated catalog")
    parser.add_argument("--size", type=int, default=800, help="image side in pixels")
    parser.add_argument("--workers", type=int, default=0, help="CPU workers for every run (0 = one per core)")
    parser.add_argument("--arch", default="vit-b-16", help="CLIP architecture for the neural run")
    parser.add_argument("--no-clip", action="store_true", help="skip the neural run")
    parser.add_argument("--out", default=str(HERE / "results" / "gpu-ingest.json"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(SRC))
    from vismerch.sample import generate_catalog
    from vismerch.testing.models import save_random_clip

    report: dict[str, Any] = {"date": date.today().isoformat(), "n": args.n, "size": args.size,
                              "workers": args.workers or os.cpu_count(), "runs": {}, "agreement": {}}
    with tempfile.TemporaryDirectory(prefix="vismerch-gpu-ingest-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        catalog = generate_catalog(root / "catalog", n=args.n, seed=0, size_range=(args.size, args.size))
        report["generate_s"] = round(time.perf_counter() - t, 1)
        common = ("--workers", str(args.workers))
        runs = {"cpu": ("--device", "cpu"), args.device: ("--device", args.device)}
        stores = {}
        for name, extra in runs.items():
            stores[name] = root / f"store-{name.replace(':', '-')}"
            report["runs"][name] = ingest(catalog.manifest_path, stores[name], *common, *extra)
            print(f"[{name}] {json.dumps(report['runs'][name])[:400]}", file=sys.stderr)
        ref = read_store(stores["cpu"])
        report["agreement"][args.device] = agreement(ref, read_store(stores[args.device]))
        if not args.no_clip:
            folder = save_random_clip(root / "clip", arch=args.arch)
            name = f"{args.device}+clip"
            store = root / "store-clip"
            report["runs"][name] = ingest(catalog.manifest_path, store, *common, "--device", args.device,
                                          "--backend", "clip", "--model", str(folder), "--precision", "auto")
            report["fingerprints"] = precision_used(store)
            report["agreement"][name] = agreement(ref, read_store(store))
            print(f"[{name}] {json.dumps(report['runs'][name])[:400]}", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"agreement": report["agreement"],
                      "images_per_s": {k: v.get("images_per_s") for k, v in report["runs"].items()}},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
