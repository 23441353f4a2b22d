"""Ray ingest with 1 and 2 workers on this machine: scaling efficiency for the planner.

The same folder of generated 800x800 JPEGs is ingested into a fresh store by a local Ray
runtime with ``num_cpus`` = 1, then 2 (each after a warm-up ingest, so worker start-up and
imports are not timed), and by the local process pool at the same worker counts for a
same-run comparison. The JSON (``vismerch.bench/1``) holds a ``dp_scaling`` record that
``vismerch plan --calibrate`` reads as the Amdahl serial share of a data-parallel run, and
the planner's embed plan for 50M images by 24h before and after that calibration.

    python benchmarks/ray_ingest.py [--n 300] [--task-size 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _folder(out_dir: Path, n: int) -> Path:
    """A folder of n clean 800x800 JPEGs (hard links into benchmarks/ingest.py's catalog)."""
    from ingest import make_catalog

    catalog = make_catalog(out_dir / f"catalog-{n}", n, 800)
    folder = out_dir / f"ray-jpegs-{n}"
    if not folder.exists():
        folder.mkdir(parents=True)
        for path in sorted((catalog / "images").rglob("*.jpg")):
            os.link(path, folder / path.name)
    return folder


def _timed_ingest(folder: Path, store: Path, settings, distributor) -> tuple[float, int]:
    from vismerch.pipeline.ingest import ingest

    shutil.rmtree(store, ignore_errors=True)
    start = time.perf_counter()
    summary = ingest(folder, store, settings=settings, distributor=distributor, progress=False)
    return time.perf_counter() - start, summary.ingested


def _warm_folder(folder: Path, out_dir: Path, count: int) -> Path:
    warm = out_dir / "ray-warm"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir(parents=True)
    for path in sorted(folder.iterdir())[:count]:
        os.link(path, warm / path.name)
    return warm


def run(n: int, task_size: int, out_dir: Path) -> dict:
    import ray

    from vismerch.config import load_settings
    from vismerch.pipeline.distributors.local import LocalDistributor
    from vismerch.pipeline.distributors.ray_cluster import RayDistributor

    settings = load_settings().replace(task_size=task_size)
    folder = _folder(out_dir, n)
    images = len(list(folder.iterdir()))
    store = out_dir / "ray-bench-store"
    rates: dict[str, dict[int, float]] = {"ray": {}, "local": {}}
    for workers in (1, 2):
        warm = _warm_folder(folder, out_dir, 2 * workers * task_size)
        ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                 logging_level="warning")
        try:
            distributor = RayDistributor(workers=workers)
            _timed_ingest(warm, store, settings, distributor)  # workers start, import, cache
            seconds, done = _timed_ingest(folder, store, settings, distributor)
        finally:
            ray.shutdown()
        rates["ray"][workers] = done / seconds
        local = LocalDistributor(workers=workers)
        try:
            local.warm_up()
            _timed_ingest(warm, store, settings, local)
            seconds, done = _timed_ingest(folder, store, settings, local)
        finally:
            local.close()
        rates["local"][workers] = done / seconds
        print(f"{workers} worker(s): ray {rates['ray'][workers]:.1f} images/s, "
              f"local pool {rates['local'][workers]:.1f} images/s")
    shutil.rmtree(store, ignore_errors=True)
    eff = {k: r[2] / (2 * r[1]) for k, r in rates.items()}
    result = {
        "schema": "vismerch.bench/1",
        "date": date.today().isoformat(),
        "images": images, "size": 800, "task_size": task_size, "cpu": os.cpu_count(),
        "images_per_s": {k: {str(w): round(v, 1) for w, v in r.items()} for k, r in rates.items()},
        "scaling_efficiency": {k: round(v, 3) for k, v in eff.items()},
        "ray_vs_local": {str(w): round(rates["ray"][w] / rates["local"][w], 3) for w in (1, 2)},
        "results": [{
            "kernel": "dp_scaling", "workers": 2, "distributor": "ray",
            "efficiency": round(eff["ray"], 3),
            "images_per_s": round(rates["ray"][2], 1),
            "baseline_images_per_s": round(rates["ray"][1], 1),
            "note": f"{images} 800x800 JPEGs, colour backend, local Ray runtime, "
                    f"{os.cpu_count()} cores shared with the driver",
        }],
    }
    result["planner"] = _planner_check(result)
    print(f"scaling efficiency at 2 workers: ray {eff['ray']:.3f}, local pool {eff['local']:.3f}")
    print(f"planner before calibration: 2-worker efficiency "
          f"{result['planner']['predicted_efficiency_2']:.3f} (linear)")
    for key in ("uncalibrated", "calibrated"):
        plan = result["planner"][key]
        print(f"  embed 50M by 24h, {key}: {plan['gpus']} x {plan['gpu']}, {plan['hours']} h")
    return result


def _planner_check(result: dict) -> dict:
    """What the planner predicts for 2 workers, and its embed plan before/after calibration."""
    import tempfile

    from vismerch.plan import parallel
    from vismerch.plan.assumptions import Assumptions
    from vismerch.plan.calibrate import load_calibration
    from vismerch.plan.hardware import Catalog
    from vismerch.plan.planner import make_plan

    a, catalog = Assumptions({}), Catalog.load()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(result, fh)
    try:
        cal = load_calibration([fh.name], catalog, a)
    finally:
        os.unlink(fh.name)
    kw = dict(images="50M", deadline="24h", gpus=["h100"], assumptions=a, catalog=catalog)
    out = {"predicted_efficiency_2": parallel.amdahl_efficiency(2, a.dp_serial_fraction),
           "dp_serial_fraction": round(cal.dp_serial[0], 4)}
    for key, calibration in (("uncalibrated", None), ("calibrated", cal)):
        best = make_plan(calibration=calibration, **kw).options[0]
        out[key] = {"gpu": best.gpu, "gpus": best.gpus, "hours": round(best.hours, 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--task-size", type=int, default=16)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = run(args.n, args.task_size, args.out)
    path = args.json or args.out / "ray_ingest.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
