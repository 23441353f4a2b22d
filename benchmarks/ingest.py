"""Ingest throughput against its floor and a common peer, same run, same worker count.

(a) floor: Pillow ``Image.open(path)`` + ``draft("RGB", working size)`` + ``load()``,
    nothing else (no resize to the exact working size, no colour management);
(b) vismerch: full ingest into a fresh store (hash, decode, thumbnails, colour backend,
    shards, SQLite commits, audit, index, duplicates); "marginal" leaves out the driver's
    derive step after the tasks (index, duplicates: not per-image work);
(c) peer: ``imagehash.phash(Image.open(path))`` + ``fast_colorthief.get_dominant_color(path,
    10)``, each given the file path, as users call them (each decodes the file itself).
Each is warmed up on the same ``workers x 8`` images before its clock starts (processes
started, imports and first calls done): the figures are steady-state throughput.
With ``--baseline-src DIR`` (a ``src`` folder of an older commit, e.g. from ``git archive``)
the same ingest also runs on that code in the same run, for a same-run speed-up.
Then the scale run (benchmarks/scale.py): duplicates and index build over 1,000,000
synthetic hashes/vectors.

    python benchmarks/ingest.py [--n 2000] [--workers 2] [--thumb-format webp|jpeg]
                                [--baseline-src DIR] [--scale-n 1000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _init(threads: int = 1) -> None:
    import torch

    torch.set_num_threads(threads)


def _decode_only(paths: list[str], working_size: int) -> tuple[int, float]:
    """The pure floor: open, draft to about the working size, load. Nothing else.
    Returns (images, this process's CPU seconds)."""
    from PIL import Image

    cpu = time.process_time()
    for path in paths:
        with Image.open(path) as im:
            im.draft("RGB", (working_size, working_size))
            im.load()
    return len(paths), time.process_time() - cpu


def _peer(paths: list[str]) -> tuple[int, float]:
    """phash and fast-colorthief as users call them: each given the file path."""
    import fast_colorthief
    import imagehash
    from PIL import Image

    cpu = time.process_time()
    for path in paths:
        with Image.open(path) as im:
            imagehash.phash(im)
        fast_colorthief.get_dominant_color(path, 10)
    return len(paths), time.process_time() - cpu


def _chunks(items: list[str], n: int) -> list[list[str]]:
    size = max(1, len(items) // (n * 4))
    return [items[i:i + size] for i in range(0, len(items), size)]


def _timed_pool(pool: ProcessPoolExecutor, fn, paths: list[str], workers: int, *args
                ) -> tuple[float, float]:
    """(wall seconds, worker CPU seconds summed) of ``fn`` over ``paths`` on the pool."""
    start = time.perf_counter()
    futures = [pool.submit(fn, chunk, *args) for chunk in _chunks(paths, workers)]
    results = [f.result() for f in futures]
    assert sum(n for n, _ in results) == len(paths)
    return time.perf_counter() - start, sum(cpu for _, cpu in results)


def micro_costs(paths: list[str], working_size: int, n: int = 256) -> dict:
    """Single-thread costs behind the phase table, on ``n`` of the images (ms per image):
    the last resize step (Pillow's bilinear vs vismerch's torch kernel), each colour-backend
    stage, and one 256 px thumbnail encoded as WebP and as JPEG (time and bytes)."""
    import io

    import numpy as np
    from PIL import Image

    from vismerch.catalog.store import THUMB_FORMATS
    from vismerch.features.colour import ColourBackend
    from vismerch.imaging.decode import decode_image, resize_array
    from vismerch.pipeline.runner import encode_thumb
    from vismerch.pipeline.worker import init_worker

    init_worker(1)  # what a worker runs with: one torch thread, malloc keeping freed memory
    datas = [Path(p).read_bytes() for p in paths[:n]]
    drafts = []
    for data in datas:
        im = Image.open(io.BytesIO(data))
        im.draft("RGB", (working_size, working_size))
        im.load()
        drafts.append(im)
    size = (working_size, working_size)

    def per_image(fn, items) -> float:
        start = time.thread_time()
        for item in items:
            fn(item)
        return round((time.thread_time() - start) / len(items) * 1e3, 3)

    out: dict = {"images": len(datas)}
    out["resize_pillow_bilinear_ms"] = per_image(
        lambda im: np.asarray(im.resize(size, Image.Resampling.BILINEAR)), drafts)
    out["resize_vismerch_ms"] = per_image(lambda im: resize_array(np.asarray(im), size), drafts)
    pixels = np.stack([decode_image(d, working_size=working_size, thumb_size=None).pixels
                       for d in datas])
    profile: dict[str, float] = {}
    backend = ColourBackend("cpu")
    for start in range(0, len(pixels), 64):
        backend.encode_images(pixels[start:start + 64], profile=profile)
    out["colour_stages_ms"] = {k: round(v / len(pixels) * 1e3, 3) for k, v in profile.items()}
    out["cpumath_ms"] = cpumath_costs()
    out["decode_vismerch_ms"] = per_image(
        lambda d: decode_image(d, working_size=working_size, thumb_size=None), datas)
    for fmt in THUMB_FORMATS:  # as ingest encodes them: from the working-size array
        sizes: list[int] = []

        def encode(arr, fmt=fmt, sizes=sizes):
            sizes.append(len(encode_thumb(arr, fmt)))

        out[f"thumb_{fmt}_ms"] = per_image(encode, list(pixels))
        out[f"thumb_{fmt}_bytes"] = int(np.mean(sizes))
        # what a browser pays to show it: Pillow's decode of the file, one thread
        blobs = [encode_thumb(arr, fmt) for arr in pixels[:64]]
        out[f"thumb_{fmt}_decode_ms"] = per_image(lambda b: Image.open(io.BytesIO(b)).load(), blobs)
    return out


def cpumath_costs(repeat: int = 20) -> dict[str, dict[str, float]]:
    """The colour backend's hot arithmetic, ms per call on one thread: torch's own
    operation and ``features.cpumath``'s (numpy), on random data of the backend's shapes."""
    import torch

    from vismerch.features import cpumath

    grid = torch.rand(64, 64, 64, 3)
    cases = {
        "luma, chunk of 8 at 256 px": (torch.matmul, cpumath.matmul,
                                       (torch.rand(8, 256, 256, 3), torch.rand(3))),
        "Lab matrix, batch of 64 at 64x64": (torch.matmul, cpumath.matmul,
                                             (grid, torch.rand(3, 3))),
        "k-means distances, 64 x 1024": (torch.matmul, cpumath.matmul,
                                         (torch.rand(64, 1024, 3), torch.rand(64, 3, 5))),
        "signature resampling, chunk of 8": (torch.matmul, cpumath.matmul,
                                             (torch.rand(8, 1, 32, 128), torch.rand(8, 3, 128, 128))),
        "sRGB gamma, batch of 64 at 64x64": (torch.pow, cpumath.power, (grid, 2.4)),
        "cube root, batch of 64 at 64x64": (lambda t: t.pow(1.0 / 3.0), cpumath.cbrt, (grid,)),
    }
    out = {}
    for name, (ours_torch, ours_numpy, args) in cases.items():
        row = {}
        for label, fn in (("torch", ours_torch), ("numpy", ours_numpy)):
            fn(*args)
            start = time.thread_time()
            for _ in range(repeat):
                fn(*args)
            row[label] = round((time.thread_time() - start) / repeat * 1e3, 3)
        out[name] = row
    return out


def _linked_folder(folder: Path, paths: list[str]) -> Path:
    """A folder of hard links to ``paths`` (made once)."""
    if not folder.exists():
        folder.mkdir(parents=True)
        for path in paths:
            os.link(path, folder / Path(path).name)
    return folder


def make_catalog(root: Path, n: int, size: int) -> Path:
    from vismerch.sample import generate_catalog

    marker = root / f".complete-{n}-{size}"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        if size == 800:
            generate_catalog(root, n=n, seed=7, clean_only=True)
        else:  # the same clean JPEG catalog at another size
            generate_catalog(root, n=n, seed=7, corrupt=False, flawed=False, duplicates=False,
                             wrong_listed=False, size_range=(size, size), formats={"jpeg": 1.0})
        marker.write_text("ok")
    return root


_INGEST_CHILD = """
import json, shutil, sys, time
from pathlib import Path
from vismerch.config import load_settings
from vismerch.pipeline.distributors.local import LocalDistributor
from vismerch.pipeline.ingest import ingest
folder, store, workers, fmt, warm = (sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                     sys.argv[5])
shutil.rmtree(store, ignore_errors=True)
settings = load_settings()
if fmt:  # else the code's own default (a baseline keeps its own)
    settings = settings.replace(thumb_format=fmt)
distributor = LocalDistributor(workers=workers)
distributor.warm_up()
try:
    # warmed up as the floor and the peer are: the same workers x 8 images, one task of 8
    # per worker, into a scratch store (imports, first calls, page cache), then the clock
    scratch = store.with_name(store.name + "-warm")
    shutil.rmtree(scratch, ignore_errors=True)
    ingest(warm, scratch, settings=settings.replace(task_size=8), workers=workers,
           distributor=distributor, progress=False)
    shutil.rmtree(scratch, ignore_errors=True)
    start = time.perf_counter()
    summary = ingest(folder, store, settings=settings, workers=workers, distributor=distributor,
                     progress=False)
    seconds = time.perf_counter() - start
finally:
    distributor.close()
print("RESULT" + json.dumps({"seconds": seconds, "phases": summary.phases,
                             "ingested": summary.ingested, "thumb_format": settings.thumb_format}))
"""


_WORKER_CPU_CHILD = """
import json, shutil, sys, tempfile, time
from pathlib import Path
try:  # the environment a distributor gives the workers it spawns (code that has one)
    from vismerch.pipeline.worker_setup import worker_environment
    worker_environment()
except ImportError:
    pass
from vismerch.config import load_settings
from vismerch.pipeline.tasks import BackendSpec, IngestSpec, Task, TaskItem
from vismerch.pipeline.worker import init_worker, run_task
init_worker(1)  # as the pool's initialiser sets up every worker (threads, malloc)
fmt, paths = sys.argv[1], [Path(p) for p in sys.argv[2:]]
settings = load_settings()
if fmt:
    settings = settings.replace(thumb_format=fmt)
store = Path(tempfile.mkdtemp())
spec = IngestSpec(str(store), (BackendSpec("colour"),), tuple(sorted(settings.as_dict().items())),
                  "cpu", 1)
def task(i, ps):
    return Task(i, [TaskItem(p.name, str(p), p.stat().st_size, p.stat().st_mtime) for p in ps])
best, phases = float("inf"), {}
for r in range(4):  # the first warms up (imports, lattices, page cache)
    shutil.rmtree(store, ignore_errors=True)
    for sub in ("features/colour", "thumbs"):
        (store / sub).mkdir(parents=True)
    cpu = time.process_time()
    result = run_task(task(r, paths), spec)
    per = (time.process_time() - cpu) / len(paths)
    if r and per < best:
        best, phases = per, {k: v / len(paths) for k, v in result.timings.items()}
shutil.rmtree(store, ignore_errors=True)
print("RESULT", best, json.dumps(phases))
"""


def _worker_cpu(src: Path, paths: list[str], thumb_format: str) -> tuple[float, dict]:
    """CPU seconds per image of one worker's per-image path (``run_task``) with the code in
    ``src``: robust to a busy machine, unlike wall time; and that round's seconds per image
    by phase (``run_task``'s own timings: wall time in the one process)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", _WORKER_CPU_CHILD, thumb_format, *paths],
                          env=env, capture_output=True, text=True, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT")), None)
    if done.returncode or line is None:
        raise SystemExit(f"worker CPU with {src} failed:\n{done.stderr[-3000:]}")
    _, best, phases = line.split(maxsplit=2)
    return float(best), json.loads(phases)


def _timed_ingest(src: Path, folder: Path, store: Path, workers: int, thumb_format: str,
                  warm: Path) -> dict:
    """One full ingest of ``folder`` into a fresh store by the code in ``src`` (a child
    process with PYTHONPATH=src, so an older commit's code can run in the same benchmark),
    after a warm-up ingest of the images in ``warm`` into a scratch store."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", _INGEST_CHILD, str(folder), str(store),
                           str(workers), thumb_format, str(warm)], env=env, capture_output=True,
                          text=True, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT")), None)
    if done.returncode or line is None:
        raise SystemExit(f"ingest with {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT"):])


@dataclass(frozen=True)
class _Bench:
    """What every round of ``run`` times: the images, their warm-up share, the pipelines."""

    images: list[str]
    warm_images: list[str]
    folder: Path
    warm: Path
    runs: dict[str, Path]
    workers: int
    thumb_format: str
    out_dir: Path
    working_size: int


def _round(bench: _Bench, timed: dict[str, dict]) -> tuple[dict, dict, dict]:
    """One interleaved round: the floor and the peer in a warm pool, then each pipeline's
    ingest (its best time kept in ``timed``) and worker CPU. (seconds, CPU seconds, the
    workers' phases by pipeline)."""
    one: dict[str, float] = {}
    cpu_one: dict[str, float] = {}
    worker_phases: dict[str, dict] = {}
    workers = bench.workers
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init) as pool:
        list(pool.map(_init, [1] * workers))  # warm: imports done before timing
        _timed_pool(pool, _decode_only, bench.warm_images, workers, bench.working_size)
        one["floor"], cpu_one["floor"] = _timed_pool(pool, _decode_only, bench.images, workers,
                                                     bench.working_size)
        _timed_pool(pool, _peer, bench.warm_images, workers)
        one["peer"], cpu_one["peer"] = _timed_pool(pool, _peer, bench.images, workers)
    for label, src in bench.runs.items():
        t = _timed_ingest(src, bench.folder, bench.out_dir / f"bench-store-{label}", workers,
                          bench.thumb_format, bench.warm)
        one[label] = t["seconds"]
        one[f"{label}_marginal"] = t["seconds"] - t["phases"].get("derive", 0.0)
        if label not in timed or t["seconds"] < timed[label]["seconds"]:
            timed[label] = t
    for label, src in bench.runs.items():
        cpu_one[f"{label}_worker"], worker_phases[label] = _worker_cpu(
            src, bench.images[:256], bench.thumb_format)
    return one, cpu_one, worker_phases


def run(n: int, workers: int, scale_n: int, out_dir: Path, size: int = 800,
        thumb_format: str | None = None, baseline_src: Path | None = None, repeat: int = 2) -> dict:
    from vismerch.config import load_settings

    settings = load_settings()
    if thumb_format:
        settings = settings.replace(thumb_format=thumb_format)
    name = f"catalog-{n}" if size == 800 else f"catalog-{n}-{size}"
    catalog = make_catalog(out_dir / name, n, size)
    images = sorted(str(p) for p in (catalog / "images").rglob("*") if p.suffix.lower() in {".jpg", ".jpeg"})
    print(f"{len(images)} {size}x{size} JPEGs, {workers} worker(s), working size {settings.working_size}, "
          f"{settings.thumb_format} thumbnails")

    # ingest the folder of JPEGs (not the manifest) so all three read the same files
    folder = _linked_folder(out_dir / f"jpegs-{n}-{size}", images)
    # every pipeline is warmed up on the same images before its clock starts (worker
    # processes started, imports and first calls done, files in the page cache): the
    # figures are steady-state throughput, the same for all three
    warm_images = images[:workers * 8]
    warm = _linked_folder(out_dir / f"warm-{workers * 8}-{size}", warm_images)
    runs = {"ingest": HERE.parent / "src"}
    if baseline_src is not None:
        runs["baseline"] = Path(baseline_src).resolve()
    # every pipeline runs ``repeat`` times, interleaved, and keeps its best (shortest) time:
    # on a shared machine a burst of other work then slows one round, not one pipeline
    bench = _Bench(images, warm_images, folder, warm, runs, workers, thumb_format or "", out_dir,
                   settings.working_size)
    floor_s = peer_s = float("inf")
    cpu: dict[str, float] = {}
    best_phases: dict[str, dict] = {}  # per pipeline, the phases of its best worker-CPU round
    timed: dict[str, dict] = {}
    rounds: list[dict] = []
    for _ in range(repeat):
        one, cpu_one, worker_phases = _round(bench, timed)
        for k, v in cpu_one.items():  # CPU seconds per image; best round
            per = v / (len(images) if k in ("floor", "peer") else 1.0)
            if per < cpu.get(k, float("inf")) and k.endswith("_worker"):
                best_phases[k[:-len("_worker")]] = worker_phases[k[:-len("_worker")]]
            cpu[k] = min(cpu.get(k, float("inf")), per)
        floor_s, peer_s = min(floor_s, one["floor"]), min(peer_s, one["peer"])
        rounds.append({k: round(v, 3) for k, v in one.items()})
        print("round", len(rounds), rounds[-1], flush=True)
    ingest_s = timed["ingest"]["seconds"]
    summary_phases = timed["ingest"]["phases"]

    count = len(images)
    result = {
        "date": date.today().isoformat(),
        "images": count,
        "size": size,
        "workers": workers,
        "cpu": os.cpu_count(),
        "thumb_format": settings.thumb_format,
        "floor_images_per_s": round(count / floor_s, 1),
        "ingest_images_per_s": round(count / ingest_s, 1),
        "peer_images_per_s": round(count / peer_s, 1),
        "ingest_vs_floor": round(floor_s / ingest_s, 3),
        "ingest_vs_peer": round(peer_s / ingest_s, 2),
        "ingested": timed["ingest"]["ingested"],
        "phases_worker_seconds": summary_phases,
        "repeat": repeat,
        # CPU seconds per image (process_time: what the work costs, not what a busy machine
        # lets it have): the floor and peer in the pool, ingest's per-image worker path
        # (run_task: read, hash, decode, thumbnail, colour backend, shard, names) on 256
        # images in one process. Marginal throughput on W free cores = W / these.
        "cpu_ms_per_image": {k: round(v * 1e3, 3) for k, v in cpu.items()},
        # that measure's round split by run_task's own phase timings (ms per image)
        "worker_phase_ms": {label: {k: round(v * 1e3, 3) for k, v in ph.items()}
                            for label, ph in best_phases.items()},
        "cpu_ingest_vs_floor": round(cpu["floor"] / cpu["ingest_worker"], 3),
        "cpu_ingest_vs_peer": round(cpu["peer"] / cpu["ingest_worker"], 2),
        "rounds_seconds": rounds,
    }
    for label, t in timed.items():  # marginal: the per-image work, without derive
        marginal = t["seconds"] - t["phases"].get("derive", 0.0)
        result[f"{label}_marginal_images_per_s"] = round(count / marginal, 1)
    result["ingest_marginal_vs_floor"] = round(floor_s / (ingest_s - summary_phases.get("derive", 0.0)), 3)
    if "baseline_worker" in cpu:
        result["cpu_speedup_vs_baseline"] = round(cpu["baseline_worker"] / cpu["ingest_worker"], 2)
    if "baseline" in timed:
        result["baseline_images_per_s"] = round(count / timed["baseline"]["seconds"], 1)
        result["baseline_phases_worker_seconds"] = timed["baseline"]["phases"]
        result["marginal_speedup_vs_baseline"] = round(
            result["ingest_marginal_images_per_s"] / result["baseline_marginal_images_per_s"], 2)
    # the planner reads this record (vismerch plan --calibrate): CPU decode rate per core
    result["schema"] = "vismerch.bench/1"
    result["results"] = [{
        "kernel": "decode",
        "images_per_s_per_core": round(count / floor_s / workers, 1),
        "note": f"{size}x{size} JPEG to {settings.working_size}px with draft mode, {workers} workers",
    }]
    result["micro_one_thread"] = micro_costs(images, settings.working_size)
    _print_summary(result, summary_phases, runs.get("baseline"))
    if scale_n:
        from scale import run_scale

        print(f"\nscale run: {scale_n:,} hashes / vectors")
        result["scale"] = run_scale(scale_n)
    return result


def _print_summary(result: dict, summary_phases: dict, baseline: Path | None) -> None:
    """The run's figures as a person reads them (the JSON holds them all)."""
    busy = sum(v for k, v in summary_phases.items() if k != "derive")
    print(f"\n{'pipeline':<28}{'images/s':>10}")
    print(f"{'(a) decode only (floor)':<28}{result['floor_images_per_s']:>10}")
    print(f"{'(b) vismerch full ingest':<28}{result['ingest_images_per_s']:>10}")
    print(f"{'(c) imagehash+colorthief':<28}{result['peer_images_per_s']:>10}")
    print(f"ingest / floor = {result['ingest_vs_floor']}   ingest / peer = {result['ingest_vs_peer']}x")
    print(f"marginal (no derive): {result['ingest_marginal_images_per_s']} img/s")
    print(f"one worker's ms per image by phase: {result['worker_phase_ms']}")
    print(f"CPU ms per image: {result['cpu_ms_per_image']}; ingest/floor "
          f"{result['cpu_ingest_vs_floor']}, ingest/peer {result['cpu_ingest_vs_peer']}x, "
          f"vs baseline {result.get('cpu_speedup_vs_baseline')}x")
    if baseline is not None:
        print(f"baseline ({baseline}): {result['baseline_images_per_s']} img/s, marginal "
              f"{result['baseline_marginal_images_per_s']}; "
              f"speed-up {result['marginal_speedup_vs_baseline']}x")
    print("\nwhere ingest time goes (worker-seconds; derive is in the driver):")
    for phase, seconds in sorted(summary_phases.items(), key=lambda kv: -kv[1]):
        share = f"{seconds / busy:6.1%}" if phase != "derive" and busy else "      "
        print(f"  {phase:<16}{seconds:8.2f}s {share}")
    print("\none thread, ms per image (micro_one_thread in the JSON):")
    for key, value in result["micro_one_thread"].items():
        print(f"  {key:<28}{value}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--size", type=int, default=800, help="image side in px (800 as the issue asks)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--thumb-format", choices=["webp", "jpeg"], default=None,
                        help="thumbnail format for the ingest (default: the thumb_format setting)")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="also ingest with the code in this src folder (same run)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="rounds (interleaved); each pipeline keeps its best time")
    parser.add_argument("--scale-n", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = run(args.n, args.workers, args.scale_n, args.out, args.size, args.thumb_format,
                 args.baseline_src, args.repeat)
    path = args.json or args.out / "ingest.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
