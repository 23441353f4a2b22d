"""Streaming ingest on a device: start-up apart from the steady state, beside each part alone.

One catalog of distinct JPEGs (``--size`` px product shots, each copy its own bytes, plus the
refused files of ``vismerch.testing.write_bad_files``) goes through, in one process and run:

1. components alone, on the device: decode (nvJPEG batches on CUDA; the CPU decoder in a
   pool of ``--workers`` on CPU, and on CUDA too as the CPU workers' own rate), the neural
   encoder (CLIP of ``--arch``, random-initialised, saved and loaded through the real
   loading code, its batch from the short probe on CUDA, on decoded catalog images at the
   working size, preprocessing included) and the colour backend; ``encoder_img_s`` is the
   device's encode stage, both of them on every image (1 / (1/clip + 1/colour)), and
   ``ceiling_img_s`` the slower of decode and encoder;
2. ``vismerch ingest`` with ``--backend clip`` (the streaming distributor) twice: a probe of
   ``--probe-n`` images and the main run of ``--n``; each run's commit timeline gives
   ``startup_s`` (call to first committed task: CUDA context, worker start, model load,
   precision race, first task) and ``steady_img_s`` (images committed after the first task
   over the time since it), derive reported apart;
3. colour-only ingest on the device against the CPU worker pool, on ``--colour-n`` images,
   and whether the two stores agree (refusals, colour names);
4. the planner's prediction (``plan/calibrate.py``) of the main run from the probe run's
   figures alone, against what the main run measured.

The FLOP convention is ``plan.workloads.FLOP_CONVENTION``. Raw JSON (card, driver, torch,
``startup_s``, ``steady_img_s``, ``ceiling_img_s``, per-part rates) to ``--out``.

    python benchmarks/gpu_ingest.py --device cuda --n 20000 --out benchmarks/results/gpu-ingest-h100.json
    python benchmarks/gpu_ingest.py --device cpu --tiny          # dry-run, under a minute
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
from typing import Any

HERE = Path(__file__).resolve().parent
try:
    import vismerch  # noqa: F401
except ImportError:  # a checkout without an install (the GPU machine)
    sys.path.insert(0, str(HERE.parent / "src"))

FULL = {"n": 20000, "probe_n": 4000, "colour_n": 4000, "size": 512, "arch": "vit-b-16",
        "parts_n": 4096, "shots": 400}
TINY = {"n": 48, "probe_n": 16, "colour_n": 16, "size": 96, "arch": "tiny", "parts_n": 160, "shots": 8}


def make_catalog(root: Path, sizes: dict[str, Any], seed: int = 0) -> dict[str, Path]:
    """Folders ``main``, ``probe`` and ``colour`` of distinct JPEGs (bad files in main)."""
    from vismerch.sample import generate_catalog
    from vismerch.testing import write_bad_files
    from vismerch.testing.bench import resized_jpegs, write_copies

    base = generate_catalog(root / "base", n=min(sizes["shots"], sizes["n"]), seed=seed, clean_only=True,
                            size_range=(640, 640), workers=min(8, os.cpu_count() or 1))
    shots = resized_jpegs(sorted(base.images_dir.rglob("*.jpg")), sizes["size"])
    folders = {name: root / name for name in ("main", "probe", "colour")}
    write_copies(shots, folders["main"] / "good", sizes["n"])
    write_bad_files(folders["main"] / "bad")
    write_copies(shots, folders["probe"] / "good", sizes["probe_n"], start=10**6)
    write_copies(shots, folders["colour"] / "good", sizes["colour_n"], start=2 * 10**6)
    write_bad_files(folders["colour"] / "bad")
    return folders


def cuda_context_seconds(device: str) -> float | None:
    """Seconds to create the CUDA context (once per process, before anything else here)."""
    import torch

    if not device.startswith("cuda"):
        return None
    t = time.perf_counter()
    torch.zeros(1, device=device)
    torch.cuda.synchronize(device)
    return round(time.perf_counter() - t, 3)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def decode_rates(files: list[Path], device: str, working_size: int, workers: int) -> dict[str, Any]:
    """Decode alone: the CPU pool's rate, and nvJPEG's in batches where there is one."""
    from vismerch.imaging.gpu_decode import decode_jpegs_gpu, gpu_jpeg_decoder
    from vismerch.pipeline.worker_setup import init_worker
    from vismerch.testing.bench import chunks, decode_files

    out: dict[str, Any] = {}
    paths = [str(p) for p in files]
    if workers == 1:
        t = time.perf_counter()
        done = decode_files(paths, working_size)
    else:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=init_worker) as pool:  # one thread each, as ingest's
            list(pool.map(decode_files, chunks(paths[:2 * workers], 2 * workers),
                          [working_size] * 2 * workers))  # every worker started and warm
            t = time.perf_counter()
            done = sum(pool.map(decode_files, chunks(paths, 4 * workers), [working_size] * (4 * workers)))
    out["cpu_decode_img_s"] = round(done / (time.perf_counter() - t), 1)
    out["cpu_decode_workers"] = workers
    if gpu_jpeg_decoder(device) is not None:
        datas = [p.read_bytes() for p in files]
        decode_jpegs_gpu(datas[:64], device, working_size, checked=True)  # warm-up
        _sync(device)
        t = time.perf_counter()
        for start in range(0, len(datas), 256):
            decode_jpegs_gpu(datas[start:start + 256], device, working_size, checked=True)
        _sync(device)
        out["nvjpeg_img_s"] = round(len(datas) / (time.perf_counter() - t), 1)
    out["decode_img_s"] = out.get("nvjpeg_img_s", out["cpu_decode_img_s"])
    out["decoder"] = "nvjpeg" if "nvjpeg_img_s" in out else f"cpu x{workers}"
    return out


def pixels_of(files: list[Path], working_size: int, batch: int, device: str) -> Any:
    """A uint8 batch of ``batch`` decoded catalog images at the working size, on the device."""
    import numpy as np
    import torch

    from vismerch.imaging.decode import decode_image

    decoded = [decode_image(p.read_bytes(), working_size=working_size, thumb_size=None).pixels
               for p in files[:batch]]
    decoded = [decoded[i % len(decoded)] for i in range(batch)]
    return torch.from_numpy(np.stack(decoded)).to(device)


def backend_rate(backend: Any, device: str, images: Any, n: int) -> float:
    """Images/s of ``backend.encode_images`` on a uint8 batch already on the device, on a
    thread of its own as the streaming pipeline's encoder runs (torch's CPU thread count is
    per thread: the main thread's can differ, and on a loaded CPU that alone changed the
    colour backend's rate 3x)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_rate, backend, device, images, n).result()


def _rate(backend: Any, device: str, images: Any, n: int) -> float:
    batch = len(images)
    for _ in range(3):  # warm-up: compile where asked; TorchScript's profiling runs optimise on call 2
        backend.encode_images(images)
    _sync(device)
    t = time.perf_counter()
    done = 0
    while done < n:
        backend.encode_images(images)
        done += batch
    _sync(device)
    return done / (time.perf_counter() - t)


def encoder_rates(settings: Any, device: str, folder: Path, options: dict[str, Any],
                  files: list[Path], n: int) -> dict[str, Any]:
    """The encoder (its batch chosen by a short probe on CUDA) and the colour backend alone,
    on decoded catalog images already on the device."""
    from vismerch.features.base import create_backend

    clip = create_backend("clip", settings=settings, device=device, model=str(folder), **options)
    batch = int(clip.batch_size)
    colour = create_backend("colour", settings=settings, device=device)
    size = int(settings.working_size)
    colour_batch = max(batch, int(settings.batch_size))
    if device.startswith("cuda"):
        colour_batch = max(colour_batch, int(settings.gpu_task_size))
    images = pixels_of(files, size, max(batch, colour_batch), device)
    clip_rate = backend_rate(clip, device, images[:batch], n)
    colour_rate = backend_rate(colour, device, images[:colour_batch], n)
    return {
        # the device's encode stage runs both, one after the other, on every image
        "encoder_img_s": round(1 / (1 / clip_rate + 1 / colour_rate), 1),
        "clip_img_s": round(clip_rate, 1),
        "encoder_batch": batch,
        "precision": clip.precision,
        "precision_report": clip.precision_report,
        "compiled": list(getattr(clip, "compiled", [])),
        "colour_img_s": round(colour_rate, 1),
        "colour_batch": colour_batch,
    }


def tasks_of(settings: Any, n: int) -> Any:
    """About a dozen tasks per run (a steady state to measure), at most a GPU task each."""
    size = max(4, n // 12)
    return settings.replace(task_size=min(size, settings.gpu_task_size), gpu_task_size=size)


def timed_ingest(source: Path, store: Path, settings: Any, backends: list[str],
                 options: dict[str, Any], distributor: Any = None) -> dict[str, Any]:
    """One ``ingest`` with its commit timeline: start-up and steady state apart. Models a
    run before loaded in this process are dropped first, so start-up includes the load
    (as a fresh ``vismerch ingest`` has it); the CUDA context is measured apart."""
    from vismerch.pipeline import worker
    from vismerch.pipeline.ingest import ingest

    worker._BACKENDS.clear()
    marks: list[tuple[float, int]] = []
    started = time.perf_counter()
    summary = ingest(source, store, backends=backends, backend_options=options, settings=settings,
                     progress=False, distributor=distributor,
                     on_progress=lambda run, done, total: marks.append((time.perf_counter(), done)))
    wall = time.perf_counter() - started
    commits = [(t - started, done) for t, done in marks[1:]]  # marks[0] is the plan, before any task
    # steady state: after the first quarter of the tasks (the pipeline filling), to the last
    warm_t, warm_done = commits[max(1, len(commits) // 4)] if len(commits) > 2 else commits[0]
    last_t, last_done = commits[-1]
    steady = (last_done - warm_done) / (last_t - warm_t) if last_t > warm_t else None
    return {
        "images": summary.ingested, "refused": summary.failed_by_reason, "tasks": len(commits),
        "startup_s": round(commits[0][0], 3),
        "steady_img_s": round(steady, 1) if steady else None,
        # what the run took beyond images / steady rate: start-up plus the pipeline filling
        "overhead_s": round(last_t - last_done / steady, 3) if steady else None,
        "to_last_commit_s": round(last_t, 3),
        "derive_s": summary.phases.get("derive"), "wall_s": round(wall, 3),
        "images_per_s": summary.images_per_s, "phases": summary.phases,
    }


def stores_agree(one: Path, two: Path) -> dict[str, Any]:
    from vismerch.catalog.store import Store

    with Store.open(one) as a, Store.open(two) as b:
        ta, tb = {t["id"]: t for t in a.tags()}, {t["id"]: t for t in b.tags()}
        ea = sorted((e["product_id"], e["reason"]) for e in a.errors())
        eb = sorted((e["product_id"], e["reason"]) for e in b.errors())
    ids = sorted(set(ta) & set(tb))

    def first(tag: dict) -> str | None:
        return next((c["name"] for c in tag.get("colours", [])), None)

    same = sum(first(ta[i]) == first(tb[i]) for i in ids)
    return {"products": len(ids), "missing": len(set(ta) ^ set(tb)), "same_refusals": ea == eb,
            "same_colour": round(same / max(1, len(ids)), 4)}


def predict(probe: dict[str, Any], main: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """The planner's calibration read from the probe run alone, predicting the main run."""
    from vismerch.plan.calibrate import load_calibration, predict_ingest_seconds
    from vismerch.plan.hardware import Catalog

    path = tmp / "probe.json"
    path.write_text(json.dumps({"device": probe["device"], "results": [probe]}))
    cal = load_calibration([path], Catalog.load())
    (figures,) = cal.ingest.values()
    seconds = predict_ingest_seconds(figures, main["images"])
    return {"from": f"probe run of {probe['images']} images", "images": main["images"],
            "predicted_s": round(seconds, 2), "measured_s": main["to_last_commit_s"],
            "error": round(seconds / main["to_last_commit_s"] - 1, 4)}


def ingest_record(run: dict[str, Any], parts: dict[str, Any], info: Any, arch: str) -> dict[str, Any]:
    return {"kernel": "ingest", "device": info.name, "gpu": info.gpu, "model": arch,
            "precision": parts["precision"], "images": run["images"], "startup_s": run["startup_s"],
            "steady_img_s": run["steady_img_s"], "overhead_s": run["overhead_s"],
            "decode_img_s": parts["decode_img_s"],
            "encoder_img_s": parts["encoder_img_s"],
            "ceiling_img_s": min(parts["decode_img_s"], parts["encoder_img_s"]),
            "to_last_commit_s": run["to_last_commit_s"]}


def run(args: argparse.Namespace, sizes: dict[str, Any], tmp: Path) -> dict[str, Any]:
    from vismerch.accel.device import device_info
    from vismerch.config import load_settings
    from vismerch.plan.workloads import FLOP_CONVENTION
    from vismerch.testing.bench import gpu_stack
    from vismerch.testing.models import save_random_clip

    info = device_info(args.device)
    workers = args.workers or os.cpu_count() or 1
    settings = load_settings().replace(workers=workers, device=args.device, distributor="auto"
                                       if args.device.startswith("cuda") else "stream")
    started = time.perf_counter()
    context_s = cuda_context_seconds(args.device)
    folders = make_catalog(tmp / "catalog", sizes)
    report: dict[str, Any] = {"schema": "vismerch.bench/1", "date": date.today().isoformat(),
                              "device": info.name, "gpu": info.gpu, **gpu_stack(), "workers": workers,
                              "sizes": sizes, "flop_convention": FLOP_CONVENTION,
                              "cuda_context_s": context_s,
                              "generate_s": round(time.perf_counter() - started, 1)}
    model = save_random_clip(tmp / "clip", arch=sizes["arch"])
    neural = {"precision": args.precision, "compile": args.compile or None}
    options = {"clip": {"model": str(model), **neural}}
    files = sorted((folders["main"] / "good").glob("*.jpg"))[: sizes["parts_n"]]
    parts = decode_rates(files, args.device, settings.working_size, workers)
    parts.update(encoder_rates(settings, args.device, model, neural, files, sizes["parts_n"]))
    parts["ceiling_img_s"] = min(parts["decode_img_s"], parts["encoder_img_s"])
    report["parts"] = parts
    print(f"[parts] {json.dumps(parts)}", file=sys.stderr)
    runs = report["runs"] = {}
    for name, folder, n in (("probe", folders["probe"], sizes["probe_n"]),
                            ("main", folders["main"], sizes["n"])):
        runs[name] = timed_ingest(folder, tmp / f"store-{name}", tasks_of(settings, n), ["clip"], options)
        print(f"[{name}] {json.dumps(runs[name])[:300]}", file=sys.stderr)
    colour = tasks_of(settings, sizes["colour_n"])
    runs["colour_device"] = timed_ingest(folders["colour"], tmp / "store-colour-device", colour, [], {})
    runs["colour_cpu_workers"] = timed_ingest(folders["colour"], tmp / "store-colour-cpu",
                                              colour.replace(device="cpu", distributor="local"), [], {})
    report["agreement"] = stores_agree(tmp / "store-colour-cpu", tmp / "store-colour-device")
    records = [ingest_record(runs[n], parts, info, sizes["arch"]) for n in ("probe", "main")]
    report["results"] = records
    report["prediction"] = predict(records[0], records[1], tmp)
    main = records[1]
    report.update(startup_s=main["startup_s"], steady_img_s=main["steady_img_s"],
                  ceiling_img_s=main["ceiling_img_s"])
    report["checks"] = checks(report)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def checks(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's acceptance figures, from this run."""
    runs, steady = report["runs"], report["steady_img_s"]
    colour_gpu, colour_cpu = runs["colour_device"]["steady_img_s"], runs["colour_cpu_workers"]["steady_img_s"]
    return {
        "steady_over_ceiling": round(steady / report["ceiling_img_s"], 3) if steady else None,
        "steady_ge_half_ceiling": bool(steady and steady >= 0.5 * report["ceiling_img_s"]),
        "colour_device_over_cpu_workers": round(colour_gpu / colour_cpu, 3)
        if colour_gpu and colour_cpu else None,
        "prediction_within_15pct": abs(report["prediction"]["error"]) <= 0.15,
        "same_refusals": report["agreement"]["same_refusals"],
    }


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny CLIP and catalog: a CPU dry-run")
    for name in ("n", "probe_n", "colour_n", "size", "parts_n"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None)
    parser.add_argument("--arch", default=None, help="CLIP architecture (testing.models.CLIP_ARCHS)")
    parser.add_argument("--workers", type=int, default=None,
                        help="CPU decode workers (0 = one per core; --tiny: 1)")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--compile", action="store_true", help="torch.compile the encoder towers")
    parser.add_argument("--out", default=str(HERE / "results" / "gpu-ingest.json"))
    args = parser.parse_args(argv)
    sizes = dict(TINY if args.tiny else FULL)
    sizes.update({k: v for k, v in vars(args).items() if k in sizes and v is not None})
    if args.workers is None:
        args.workers = 1 if args.tiny else 0
    if args.tiny and args.device == "cpu":
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    with tempfile.TemporaryDirectory(prefix="vismerch-gpu-ingest-") as tmp:
        report = run(args, sizes, Path(tmp))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"startup_s": report["startup_s"], "steady_img_s": report["steady_img_s"],
                      "ceiling_img_s": report["ceiling_img_s"], "checks": report["checks"],
                      "prediction": report["prediction"]}, indent=2))
    print(f"wrote {out} in {report['seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
