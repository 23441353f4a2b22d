"""Is the ingest pipeline the bottleneck? CPU: full ingest with a neural backend against
the model's forward pass alone, same images, same batch size, same cores.

(a) forward only: images decoded beforehand (not timed), then ``backend.encode_images``
    (the model's own preprocessing + forward + normalise) over batches of ``--batch``,
    data-parallel over ``--workers`` one-thread processes like the pipeline's workers;
(b) pipeline: ``vismerch.ingest(folder, backends=["clip"])`` into a fresh store, wall
    clock: read, hash, decode, thumbnails, the colour backend, the clip backend, shards,
    SQLite commits and the derived steps (index, duplicates). Its worker processes are
    warmed first by a one-task-per-worker ingest into a scratch store (process start,
    imports and model load happen once per worker for the whole run; that fixed cost is
    reported apart as ``warmup_ingest_s``).

overhead = (b) / (a) - 1; target <= 15 %. The model is a random-initialised CLIP of a real
architecture (``--arch``, default ViT-S/16 at 224 px) saved and loaded like real weights.

    python benchmarks/pipeline_overhead.py [--n 256] [--batch 32] [--workers 2] [--arch vit-s-16]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
try:
    import vismerch  # noqa: F401
except ImportError:
    sys.path.insert(0, str(HERE.parent / "src"))


def decoded(paths: list[Path], working_size: int) -> np.ndarray:
    from vismerch.imaging.decode import decode_image

    return np.stack(
        [decode_image(p.read_bytes(), working_size=working_size, thumb_size=None).pixels for p in paths]
    )


def _forward_worker(folder: str, pixels_path: str, start: int, stop: int, batch: int, barrier) -> float:
    from vismerch.features.neural import build_backend

    torch.set_num_threads(1)
    pixels = np.load(pixels_path)[start:stop]
    backend = build_backend("clip", model=folder, precision="fp32")
    backend.encode_images(torch.from_numpy(pixels[:batch]))  # warm-up
    barrier.wait()  # every worker starts timing together
    t = time.perf_counter()
    for i in range(0, len(pixels), batch):
        backend.encode_images(torch.from_numpy(pixels[i : i + batch]))
    return time.perf_counter() - t


def forward_only(folder: Path, pixels: np.ndarray, batch: int, workers: int, tmp: Path) -> float:
    """Wall seconds to encode ``pixels`` data-parallel over ``workers`` one-thread processes:
    the same layout of cores the pipeline uses, so neither side gains from threading."""
    path = tmp / "pixels.npy"
    np.save(path, pixels)
    per = -(-len(pixels) // workers)
    per = -(-per // batch) * batch  # whole batches per worker, as the pipeline's tasks
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        barrier = manager.Barrier(workers)
        futures = [
            pool.submit(_forward_worker, str(folder), str(path), i * per, (i + 1) * per, batch, barrier)
            for i in range(workers)
        ]
        return max(f.result() for f in futures)


def task_size_for(n: int, batch: int, workers: int) -> int:
    """Images per pipeline task: enough tasks that every worker stays busy to the end."""
    return max(batch, -(-n // (workers * 4)))


def pipeline(
    folder: Path, images: Path, warm: Path, root: Path, batch: int, workers: int, n: int
) -> tuple[float, float, dict]:
    """Wall seconds of the warm-up ingest (cold workers) and of the measured one (warm)."""
    from vismerch.config import load_settings
    from vismerch.pipeline.distributors.local import LocalDistributor
    from vismerch.pipeline.ingest import ingest

    task_size = task_size_for(n, batch, workers)
    settings = load_settings().replace(batch_size=batch, task_size=task_size)
    distributor = LocalDistributor(workers=workers)
    options = {"clip": {"model": str(folder), "precision": "fp32"}}

    def run(source: Path, store: Path):
        start = time.perf_counter()
        summary = ingest(
            source,
            store,
            backends=["clip"],
            backend_options=options,
            settings=settings,
            workers=workers,
            distributor=distributor,
            progress=False,
        )
        return time.perf_counter() - start, summary

    try:
        # one task per worker first: each worker imports transformers and loads the model
        # once for its life (a fixed start-up cost, not a per-image one)
        cold, _ = run(warm, root / "warm-store")
        seconds, summary = run(images, root / "store")
    finally:
        distributor.close()
    assert summary.ingested == n, summary
    return cold, seconds, summary.phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="images")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--arch", default="vit-s-16", help="tiny | vit-s-16 | vit-b-16 | vit-l-14")
    parser.add_argument("--json", default=None, help="also write the result here")
    args = parser.parse_args(argv)

    from vismerch.config import load_settings
    from vismerch.sample import generate_catalog
    from vismerch.testing.models import save_random_clip

    working_size = load_settings().working_size
    with tempfile.TemporaryDirectory(prefix="vismerch-overhead-") as tmp:
        root = Path(tmp)
        catalog = generate_catalog(root / "catalog", n=args.n, seed=11, clean_only=True)
        images = root / "jpegs"
        images.mkdir()
        paths = []
        for path in sorted(p for p in catalog.images_dir.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg")):
            os.link(path, images / path.name)
            paths.append(images / path.name)
        model = save_random_clip(root / "model", args.arch)
        pixels = decoded(paths, working_size)
        warm = root / "warm"
        warm.mkdir()
        # one task per worker for the warm-up ingest
        for path in paths[: task_size_for(len(paths), args.batch, args.workers) * args.workers]:
            os.link(path, warm / path.name)
        fwd_before = forward_only(model, pixels, args.batch, args.workers, root)
        cold, pipe, phases = pipeline(model, images, warm, root, args.batch, args.workers, len(paths))
        fwd_after = forward_only(model, pixels, args.batch, args.workers, root)
        fwd = (fwd_before + fwd_after) / 2
    encode_wall = phases.get("encode:clip", 0.0) / args.workers

    result = {
        "date": date.today().isoformat(),
        "cpu_cores": os.cpu_count(),
        "workers": args.workers,
        "arch": args.arch,
        "images": len(paths),
        "batch": args.batch,
        "forward_only_s": round(fwd, 2),
        "forward_only_runs_s": [round(fwd_before, 2), round(fwd_after, 2)],
        "pipeline_s": round(pipe, 2),
        "warmup_ingest_s": round(cold, 2),
        "forward_only_images_per_s": round(len(paths) / fwd, 2),
        "pipeline_images_per_s": round(len(paths) / pipe, 2),
        "overhead": round(pipe / fwd - 1, 4),
        "overhead_in_run": round(pipe / encode_wall - 1, 4) if encode_wall else None,
        "target": 0.15,
        "phases_worker_seconds": phases,
    }
    result["passed"] = result["overhead"] <= result["target"]
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
