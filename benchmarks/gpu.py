"""GPU check for the neural path, one script, under 5 minutes on one H200.

1. agreement: the same random CLIP (saved, then loaded through vismerch's real loader)
   gives the same embeddings on the GPU as on the CPU: cosine >= 0.999 at fp32, >= 0.995
   at every low precision the guard accepts;
2. matmul: measured bf16 matrix-product peak (8192^3, mean of 10 after warm-up);
3. models: images/s, achieved TFLOP/s and model FLOP utilisation of ViT-B/16 and ViT-L/14
   image towers at 224 px (random weights, real architecture from transformers configs
   built in code), at bf16 and FP8 (torchao, per-row or per-tensor dynamic scales: ``fp8``
   and ``fp8-tensor``), eager and, for the ``--compiled`` rows, ``torch.compile``d; MFU
   under ``plan.workloads.FLOP_CONVENTION`` (2 x MACs over the datasheet dense peak of the
   precision run; ``matmul_fraction`` is the same FLOP/s over the measured matmul), and
   the text tower's texts/s;
4. jpeg_decode: batched nvJPEG decode (torchvision.io.decode_jpeg on CUDA) images/s;
5. scan: brute-force similarity scan (fp16 vectors @ queries) achieved GB/s;
6. colour: the offline colour backend on the device: agreement with the CPU (vector
   cosine, hash bits, palette) on drawn product shots, and images/s at the working size.

Writes one JSON file for the planner's calibration:
    {"device", "gpu", "date", "results": [{"model", "precision", "batch", "images_per_s",
     "mfu", "tflops"}, {"kernel": "matmul", ...}, {"kernel": "scan", ...},
     {"kernel": "jpeg_decode", ...}, {"kernel": "colour", ...}], "agreement": [...],
     "skipped": [...]}

    python benchmarks/gpu.py --device cuda --out gpu.json            # on the GPU machine
    python benchmarks/gpu.py --device cpu --tiny --out /tmp/gpu.json  # CI dry-run, seconds

FP8 needs torchao (or Transformer Engine); without it the FP8 rows record why they were
skipped and the guard's step-down, instead of failing the run.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
try:
    import vismerch  # noqa: F401
except ImportError:  # run from a checkout without installing (the GPU machine)
    sys.path.insert(0, str(HERE.parent / "src"))

GPU_SIZES = {"matmul": 8192, "scan_rows": 4_000_000, "scan_dim": 768, "jpegs": 512, "batch": 256,
             "colour": 1024}
TINY_SIZES = {"matmul": 384, "scan_rows": 20_000, "scan_dim": 64, "jpegs": 16, "batch": 8,
              "colour": 16}


class Clock:
    """Wall time of a callable, synchronised on CUDA; mean of ``iters`` after ``warmup``."""

    def __init__(self, device: torch.device):
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def mean(self, fn, warmup: int = 3, iters: int = 10, max_s: float = 20.0) -> float:
        for _ in range(warmup):
            fn()
        self.sync()
        times = []
        start = time.perf_counter()
        for _ in range(iters):
            t = time.perf_counter()
            fn()
            self.sync()
            times.append(time.perf_counter() - t)
            if time.perf_counter() - start > max_s:
                break
        return float(np.mean(times))


def matmul_peak(device: torch.device, n: int, clock: Clock) -> dict[str, Any]:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    seconds = clock.mean(lambda: a @ b)
    return {
        "kernel": "matmul",
        "precision": "bf16" if dtype == torch.bfloat16 else "fp32",
        "n": n,
        "tflops": round(2 * n**3 / seconds / 1e12, 3),
    }


def scan_bandwidth(device: torch.device, rows: int, dim: int, clock: Clock) -> dict[str, Any]:
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    db = torch.randn(rows, dim, device=device, dtype=dtype)
    db = torch.nn.functional.normalize(db, dim=1)
    queries = torch.nn.functional.normalize(torch.randn(16, dim, device=device, dtype=dtype), dim=1)

    def scan():
        return torch.topk(db @ queries.T, k=10, dim=0)

    seconds = clock.mean(scan)
    nbytes = db.numel() * db.element_size()
    return {
        "kernel": "scan",
        "rows": rows,
        "dim": dim,
        "dtype": str(dtype).replace("torch.", ""),
        "queries": 16,
        "gb_per_s": round(nbytes / seconds / 1e9, 2),
    }


def make_jpegs(n: int, size: int = 512) -> list[bytes]:
    from PIL import Image

    from vismerch.features.neural import calibration_images

    out = []
    for img in calibration_images(min(n, 32), size, seed=11):
        buf = io.BytesIO()
        Image.fromarray(img.numpy()).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return [out[i % len(out)] for i in range(n)]


def jpeg_decode(device: torch.device, n: int, clock: Clock) -> dict[str, Any]:
    from vismerch.imaging.gpu_decode import gpu_jpeg_decoder

    datas = make_jpegs(n)
    decoder = gpu_jpeg_decoder(device)
    if decoder is not None:
        seconds = clock.mean(lambda: decoder(datas), warmup=2, iters=5)
        backend = "nvjpeg"
    else:
        from vismerch.imaging.decode import decode_image

        def cpu():
            for d in datas:
                decode_image(d, working_size=256, thumb_size=None)

        seconds = clock.mean(cpu, warmup=1, iters=3)
        backend = "pil-1-thread"
    return {
        "kernel": "jpeg_decode",
        "backend": backend,
        "size": "512x512",
        "images_per_s": round(n / seconds, 1),
    }


def colour_backend(device: torch.device, n: int, clock: Clock) -> dict[str, Any]:
    """The colour backend on ``device`` against the CPU on the same drawn product shots."""
    from vismerch.features.colour import ColourBackend
    from vismerch.imaging.decode import decode_image
    from vismerch.sample import generate_catalog

    with tempfile.TemporaryDirectory(prefix="vismerch-gpu-colour-") as tmp:
        generate_catalog(Path(tmp), n=min(n, 64), seed=3, clean_only=True)
        paths = sorted((Path(tmp) / "images").rglob("*.jpg"))
        shots = np.stack([decode_image(p.read_bytes(), thumb_size=None).pixels for p in paths])
    batch = np.concatenate([shots] * -(-n // len(shots)))[:n]
    cpu = ColourBackend("cpu").encode_images(shots)
    dev = ColourBackend(device).encode_images(torch.from_numpy(shots).to(device))
    cosine = np.sum(cpu.vectors * dev.vectors, axis=1)
    bits = np.unpackbits((cpu.columns["phash"] ^ dev.columns["phash"]).view(np.uint8)).sum()
    backend = ColourBackend(device)
    on_device = torch.from_numpy(batch).to(device)
    seconds = clock.mean(lambda: backend.encode_images(on_device), warmup=1, iters=3)
    return {
        "kernel": "colour",
        "images": n,
        "working_size": int(shots.shape[1]),
        "images_per_s": round(n / seconds, 1),
        "agreement_min_cosine": round(float(cosine.min()), 5),
        "hash_bits_differing_per_image": round(float(bits) / len(shots), 3),
        "palette_max_abs_lab": round(float(np.abs(cpu.columns["palette_lab"]
                                                  - dev.columns["palette_lab"]).max()), 3),
    }


def save_model(arch: str, root: Path) -> Path:
    from vismerch.testing.models import save_random_clip

    return save_random_clip(root / arch, arch, seed=0)


def agreement(folder: Path, device: torch.device, precisions: list[str], n: int) -> list[dict[str, Any]]:
    """CPU fp32 reference vs the device at fp32 and each low precision."""
    from vismerch.features.neural import build_backend, calibration_images

    size = 224 if "tiny" not in folder.name else 32
    images = calibration_images(n, size, seed=5)
    reference = build_backend("clip", model=str(folder), device="cpu", precision="fp32").encode_images(images)
    out = []
    for precision in ["fp32", *precisions]:
        backend = build_backend("clip", model=str(folder), device=str(device), precision=precision)
        vectors = backend.encode_images(images).vectors
        cosine = float(np.mean(np.sum(vectors * reference.vectors, axis=1)))
        need = 0.999 if backend.precision == "fp32" else 0.995
        out.append(
            {
                "model": folder.name,
                "requested": precision,
                "precision": backend.precision,
                "guard": backend.precision_report,
                "cosine_vs_cpu_fp32": round(cosine, 6),
                "threshold": need,
                "passed": cosine >= need,
            }
        )
    return out


def datasheet_peak(info: Any, precision: str) -> float | None:
    """The card's dense datasheet peak (FLOP/s) at ``precision`` from the planner's catalog."""
    from vismerch.plan.hardware import Catalog
    from vismerch.plan.roofline import PEAK_KEY

    catalog = Catalog.load()
    if info.gpu is None or info.gpu not in catalog.names():
        return None
    gpu = catalog.get(info.gpu)
    key = PEAK_KEY.get(precision, precision)
    return gpu.peak_flops(key) if gpu.supports(key) else None


def model_throughput(
    folder: Path,
    arch: str,
    device: torch.device,
    precision: str,
    batch: int,
    peak: float | None,
    clock: Clock,
    compile: bool,
) -> dict[str, Any]:
    """``precision``: bf16, fp8 (torchao per-row), fp8-tensor (per-tensor scales), ..."""
    from vismerch.accel.device import device_info
    from vismerch.accel.precision import fp8_path, running
    from vismerch.features.neural import build_backend, vit_flops
    from vismerch.plan.workloads import model_flops_utilisation
    from vismerch.testing.models import CLIP_ARCHS

    base, _, variant = precision.partition("-")
    paths = {"fp8": fp8_path(variant)} if base == "fp8" and variant else None
    backend = build_backend("clip", model=str(folder), device=str(device), precision=base,
                            compile=compile, precision_paths=paths)
    a = CLIP_ARCHS[arch]
    flops = vit_flops(a["image_size"], a["patch"], a["hidden"], a["intermediate"], a["layers"],
                      projection=a["projection"])
    sheet = datasheet_peak(device_info(device), backend.precision)
    row: dict[str, Any] = {
        "model": arch,
        "requested": precision,
        "precision": backend.precision,
        "library": backend.prepared.library,
        "compiled": compile,
        "batch": batch,
        "guard": backend.precision_report,
        "gflops_per_image": round(flops / 1e9, 3),
        "why_not": "; ".join(f"{s.precision}: {s.reason}" for s in backend.precision_choice.steps
                             if not s.accepted),
    }
    h, w = backend.preprocess.output_size
    pixels = torch.randn(batch, 3, h, w, device=device).to(backend.prepared.input_dtype)
    uint8 = torch.randint(0, 256, (batch, 256, 256, 3), dtype=torch.uint8, device=device)

    def forward():
        with running(backend.prepared):
            return backend._image_forward(pixels)

    seconds = clock.mean(forward, warmup=3, iters=10)
    ips = batch / seconds
    row["images_per_s"] = round(ips, 1)
    row["tflops"] = round(flops * ips / 1e12, 3)
    row["mfu"] = round(model_flops_utilisation(flops, ips, sheet), 4) if sheet else None
    row["matmul_fraction"] = round(flops * ips / (peak * 1e12), 4) if peak else None
    if not compile or backend.precision == "bf16":  # a compiled text tower costs a compile per row
        texts = [f"a {('red', 'navy', 'olive')[i % 3]} cotton shirt number {i}" for i in range(batch)]
        row["texts_per_s"] = round(batch / clock.mean(lambda: backend.encode_texts(texts, batch), 1, 3), 1)
    # end to end on the device: uint8 256 px -> resize/crop/normalise -> forward -> L2 norm
    row["images_per_s_with_preprocess"] = round(batch / clock.mean(lambda: backend._encode(uint8), 2, 5), 1)
    return row


class _Steps:
    """Runs the session's sections in turn: each within the time budget, a failing one
    recorded in ``skipped`` without losing the others, the report saved after each."""

    def __init__(self, args: argparse.Namespace, report: dict[str, Any], started: float):
        self.args, self.report, self.started = args, report, started

    def __call__(self, what: str, fn):
        skipped = self.report["skipped"]
        if time.perf_counter() - self.started > self.args.budget_s:
            skipped.append({"what": what, "why": f"over the {self.args.budget_s:.0f}s budget"})
            return None
        t = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:  # one failing section must not lose the others
            skipped.append({"what": what, "why": f"{type(exc).__name__}: {exc}"})
            print(f"[{what}] failed: {exc}", file=sys.stderr)
            return None
        shown = json.dumps(out, default=str)[:300]
        print(f"[{what}] {time.perf_counter() - t:.1f}s: {shown}", file=sys.stderr)
        save(self.report, self.args.out)  # what is done so far survives a session's time limit
        return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from vismerch.accel.device import device_info

    started = time.perf_counter()
    device = torch.device(args.device)
    info = device_info(device)
    sizes = TINY_SIZES if args.tiny else GPU_SIZES
    if device.type == "cpu" and not args.tiny:
        print("warning: full-size models on CPU take long; use --tiny for a dry-run", file=sys.stderr)
    clock = Clock(device)
    report: dict[str, Any] = {
        "device": info.name, "gpu": info.gpu, "date": date.today().isoformat(),
        "torch": torch.__version__, "capability": info.sm, "results": [], "agreement": [],
        "skipped": [],
    }
    step = _Steps(args, report, started)
    matmul = step("matmul", lambda: matmul_peak(device, sizes["matmul"], clock))
    peak = matmul["tflops"] if matmul else None
    report["results"].extend([matmul] if matmul else [])
    _models(args, device, sizes, (peak, clock), step)
    for name, fn in (("jpeg_decode", lambda: jpeg_decode(device, sizes["jpegs"], clock)),
                     ("scan", lambda: scan_bandwidth(device, sizes["scan_rows"], sizes["scan_dim"], clock)),
                     ("colour", lambda: colour_backend(device, sizes["colour"], clock))):
        row = step(name, fn)
        if row:
            report["results"].append(row)
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["checks"] = checks(report)
    return report


def _models(args: argparse.Namespace, device: torch.device, sizes: dict[str, Any],
            timing: tuple[float | None, Clock], step: _Steps) -> None:
    """Each model at each precision (and the compiled ones asked for), after the agreement
    of the first model's precisions with a CPU fp32 reference; rows into the report."""
    peak, clock = timing
    report = step.report
    archs = ["tiny"] if args.tiny else args.models.split(",")
    precisions = args.precisions.split(",")
    compiled = [c for c in (args.compiled or "").split(",") if c]
    if args.tiny:
        compiled = [f"tiny:{c.partition(':')[2]}" for c in compiled]
    with tempfile.TemporaryDirectory(prefix="vismerch-gpu-bench-") as tmp:
        folders = {arch: step(f"save {arch}", lambda a=arch: save_model(a, Path(tmp))) for arch in archs}
        first = folders.get(archs[0])
        if first is not None:
            bases = list(dict.fromkeys(p.partition("-")[0] for p in precisions))  # fp8-tensor: fp8
            agree = step("agreement", lambda: agreement(first, device, bases, 16 if not args.tiny else 4))
            report["agreement"] = agree or []
        for arch in (a for a in archs if folders.get(a) is not None):
            runs = [(p, False) for p in precisions] + [
                (p, True) for a, _, p in (c.partition(":") for c in compiled) if a == arch]
            for precision, comp in runs:
                label = f"{arch} {precision}{' compiled' if comp else ''}"
                row = step(label, lambda a=arch, p=precision, c=comp: model_throughput(
                    folders[a], a, device, p, args.batch or sizes["batch"], peak, clock, c))
                if row is None:
                    continue
                if row["precision"] != precision.partition("-")[0]:  # one row per precision run
                    report["skipped"].append({"what": label, "why": row["why_not"] or row["guard"],
                                              "row": row})
                    continue
                report["results"].append(row)
            if device.type == "cuda":
                torch.cuda.empty_cache()


def fp8_verdict(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model: the fastest FP8 row (any scales, eager or compiled) over the fastest bf16
    row, and whether it pays (> 1.0)."""
    out: dict[str, Any] = {}
    models = {r["model"] for r in results if "model" in r}
    for model in sorted(models):
        def best(prec: str, m: str = model) -> dict[str, Any] | None:
            rows = [r for r in results if r.get("model") == m and r.get("precision") == prec]
            return max(rows, key=lambda r: r["images_per_s"]) if rows else None

        b16, f8 = best("bf16"), best("fp8")
        if b16 and f8:
            ratio = f8["images_per_s"] / b16["images_per_s"]
            out[model] = {"fp8_over_bf16": round(ratio, 3), "pays": ratio > 1.0,
                          "fp8_row": f"{f8['requested']}{' compiled' if f8['compiled'] else ''}",
                          "bf16_row": f"{b16['requested']}{' compiled' if b16['compiled'] else ''}"}
    return out


def save(report: dict[str, Any], out: str) -> None:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")


def checks(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's acceptance figures, computed from the results (None when not measured)."""
    rows = {(r.get("model"), r.get("precision")): r for r in report["results"] if "model" in r}
    b16 = rows.get(("vit-b-16", "bf16"))
    f8 = rows.get(("vit-b-16", "fp8"))
    colour = next((r for r in report["results"] if r.get("kernel") == "colour"), None)
    return {
        "fp8_verdict": fp8_verdict(report["results"]),
        "agreement_passed": all(a["passed"] for a in report["agreement"]) if report["agreement"] else None,
        "vit_b16_bf16_mfu": b16["mfu"] if b16 else None,
        "vit_b16_bf16_mfu_ge_0_5": (b16["mfu"] >= 0.5) if b16 and b16["mfu"] else None,
        "fp8_speedup_over_bf16": round(f8["images_per_s"] / b16["images_per_s"], 3) if b16 and f8 else None,
        "colour_agrees_with_cpu": (colour["agreement_min_cosine"] >= 0.999) if colour else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny models and sizes: a CPU dry-run in seconds")
    parser.add_argument("--models", default="vit-b-16,vit-l-14")
    parser.add_argument("--precisions", default="bf16,fp8,fp8-tensor")
    parser.add_argument(
        "--batch", type=int, default=None, help="images per forward (default 256 GPU, 8 tiny)"
    )
    parser.add_argument("--compiled", default="",
                        help="rows to run again torch.compiled, e.g. vit-b-16:bf16,vit-l-14:fp8")
    parser.add_argument("--compile-backend", default="inductor",
                        help="torch.compile backend of the compiled rows (eager: trace only, CPU dry-runs)")
    parser.add_argument("--budget-s", type=float, default=270.0, help="skip remaining sections after this")
    parser.add_argument("--out", default=str(HERE / "results" / "gpu.json"))
    args = parser.parse_args(argv)
    if args.tiny and args.device == "cpu":
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    from vismerch.features import neural

    neural.COMPILE_BACKEND = args.compile_backend
    report = run(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["checks"], indent=2))
    print(f"wrote {out} in {report['seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
