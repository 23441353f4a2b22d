"""Calibration: replace the default efficiency factors with measured ones.

Reads the JSON that ``benchmarks/gpu.py`` writes (schema ``vismerch.bench/1``)::

    {"schema": "vismerch.bench/1", "device": "NVIDIA H200", "gpu": "h200",
     "date": "2026-05-01", "results": [
       {"model": "vit-b-16", "precision": "bf16", "images_per_s": 9100, "batch_size": 256},
       {"kernel": "matmul", "precision": "bf16", "tflops": 720},
       {"kernel": "scan", "gb_per_s": 4100},
       {"kernel": "allreduce", "gpus": 8, "busbw_gb_per_s": 360},
       {"kernel": "decode", "images_per_s_per_core": 180},
       {"kernel": "dp_scaling", "workers": 2, "efficiency": 0.93}]}

It is tolerant: a list of such documents, ``runs`` instead of ``results``, ``bfloat16`` for
``bf16``, ``img_per_s``/``throughput`` for ``images_per_s`` all work; entries it cannot use are
listed in ``notes`` rather than failing the plan. ``images_per_s`` must be GPU-only
(pre-decoded tensors); decode speed is its own entry.

What each entry changes, per GPU and precision (best measurement wins, since a
benchmark sweeps batch sizes and a plan runs at the best one):
- model throughput -> the exact model's images/s is used directly, and an efficiency for
  other models: compute_eff = FLOPs / (peak x measured time) when compute limits it,
  else memory_eff = bytes / (bandwidth x measured time);
- matmul TFLOPS -> compute_eff (an upper bound for whole models) where no model was measured;
- scan/copy GB/s -> memory_eff; all-reduce bus bandwidth -> comm_eff; decode -> decode_per_core;
- data-parallel scaling of an ingest run (benchmarks/ray_ingest.py) -> dp_serial_fraction, the
  Amdahl share that gives the measured efficiency at the largest worker count measured;
- a streaming ingest run (benchmarks/gpu_ingest.py, ``{"kernel": "ingest", "startup_s",
  "steady_img_s", "ceiling_img_s", "decode_img_s", "encoder_img_s", "images", "model",
  "precision", optional "overhead_s"}``) -> an ``IngestFigures``: start-up seconds, the
  run's fixed time beyond images / steady rate (start-up plus the pipeline filling), the
  decode and encoder rates
  measured alone, and the pipeline's share of the slower of them that the whole run
  sustained. An embed plan on that card then predicts that fixed time + images / (share x
  the slower rate) instead of the roofline (``predict_ingest_seconds``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vismerch.errors import UsageError
from vismerch.plan.assumptions import Assumptions
from vismerch.plan.hardware import Catalog
from vismerch.plan.parallel import WEIGHT_BYTES, activation_bytes, ring_link, serial_from_efficiency
from vismerch.plan.roofline import PEAK_KEY, Efficiency
from vismerch.plan.workloads import PRESETS, ViTConfig, get_model

SCHEMA = "vismerch.bench/1"
_PRECISION = {
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "bf16", "float16": "bf16", "half": "bf16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "tf32",
    "fp8": "fp8", "float8": "fp8", "e4m3": "fp8", "float8_e4m3fn": "fp8",
    "fp4": "fp4", "nvfp4": "fp4", "mxfp4": "fp4",
}
_MEMORY_KERNELS = {"scan", "copy", "triad", "stream", "memcpy", "bandwidth", "hbm"}
_MATMUL_KERNELS = {"matmul", "gemm", "mm"}
_COMM_KERNELS = {"allreduce", "all_reduce", "all-reduce", "nccl"}
_DECODE_KERNELS = {"decode", "jpeg_decode", "jpeg"}
_SCALING_KERNELS = {"dp_scaling", "scaling", "ray_ingest"}
_INGEST_KERNELS = {"ingest", "stream_ingest"}


@dataclass(frozen=True)
class IngestFigures:
    """One measured streaming ingest: what a plan on the same card predicts from."""

    startup_s: float
    steady_img_s: float
    decode_img_s: float
    encoder_img_s: float
    images: int
    source: str
    # what the run took beyond images / steady rate (start-up and the pipeline filling);
    # the start-up alone where a record lacks it
    overhead_s: float | None = None

    @property
    def ceiling_img_s(self) -> float:
        return min(self.decode_img_s, self.encoder_img_s)

    @property
    def pipeline_eff(self) -> float:
        """The share of the slower component's rate the whole pipeline sustained (over 1
        when the parts alone were measured under more load than the run: kept as measured,
        so that share x ceiling is the run's own steady rate)."""
        return self.steady_img_s / self.ceiling_img_s


def predict_ingest_seconds(figures: IngestFigures, images: float, decode_img_s: float | None = None,
                           encoder_img_s: float | None = None) -> float:
    """Seconds to ingest ``images`` on the measured setup: start-up, then the measured
    pipeline share of the slower of decode and encoder (either rate replaceable, e.g. the
    planner's own decode rate for other core counts)."""
    ceiling = min(decode_img_s or figures.decode_img_s, encoder_img_s or figures.encoder_img_s)
    fixed = figures.overhead_s if figures.overhead_s is not None else figures.startup_s
    return fixed + images / (figures.pipeline_eff * ceiling)


def _first(entry: dict, *keys: str) -> float | None:
    for key in keys:
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


@dataclass
class Calibration:
    compute: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)
    kernel_compute: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)
    memory: dict[str, tuple[float, str]] = field(default_factory=dict)
    model_memory: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)
    comm: dict[str, tuple[float, str]] = field(default_factory=dict)
    throughput: dict[tuple[str, str, str], tuple[float, str]] = field(default_factory=dict)
    decode_per_core: float | None = None
    # (serial fraction, workers it was measured at, source) from a scaling run
    dp_serial: tuple[float, int, str] | None = None
    # (gpu key or "cpu", model, precision) -> the largest measured streaming ingest
    ingest: dict[tuple[str, str, str], IngestFigures] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def ingest_figures(self, gpu: str, model: str, precision: str) -> IngestFigures | None:
        return self.ingest.get((gpu, model, PEAK_KEY.get(precision, precision)))

    def efficiency(self, gpu: str, precision: str, a: Assumptions) -> Efficiency:
        key = (gpu, PEAK_KEY.get(precision, precision))
        used: list[str] = []
        compute = self.compute.get(key) or self.kernel_compute.get(key)
        memory = self.memory.get(gpu) or self.model_memory.get(key)
        comm = self.comm.get(gpu)
        for item in (compute, memory, comm):
            if item:
                used.append(item[1])
        return Efficiency(
            compute=compute[0] if compute else a.compute_eff(key[1]),
            memory=memory[0] if memory else a.memory_eff,
            comm=comm[0] if comm else a.comm_eff,
            source="calibrated: " + "; ".join(dict.fromkeys(used)) if used else "default",
        )

    def measured_images_per_s(self, gpu: str, model: str, precision: str) -> float | None:
        hit = self.throughput.get((gpu, model, PEAK_KEY.get(precision, precision)))
        return hit[0] if hit else None

    def describe(self) -> dict[str, Any]:
        rows = [{"gpu": g, "precision": p, "compute_eff": round(v, 3), "from": s}
                for (g, p), (v, s) in sorted(self.compute.items())]
        rows += [{"gpu": g, "precision": p, "compute_eff": round(v, 3), "from": s}
                 for (g, p), (v, s) in sorted(self.kernel_compute.items())
                 if (g, p) not in self.compute]
        rows += [{"gpu": g, "memory_eff": round(v, 3), "from": s}
                 for g, (v, s) in sorted(self.memory.items())]
        rows += [{"gpu": g, "precision": p, "memory_eff": round(v, 3), "from": s}
                 for (g, p), (v, s) in sorted(self.model_memory.items())]
        rows += [{"gpu": g, "comm_eff": round(v, 3), "from": s} for g, (v, s) in sorted(self.comm.items())]
        out: dict[str, Any] = {"factors": rows, "notes": list(self.notes)}
        if self.decode_per_core:
            out["decode_per_core"] = self.decode_per_core
        for (gpu, model, prec), fig in sorted(self.ingest.items()):
            out.setdefault("ingest", []).append({
                "gpu": gpu, "model": model, "precision": prec, "startup_s": fig.startup_s,
                "steady_img_s": fig.steady_img_s, "ceiling_img_s": fig.ceiling_img_s,
                "pipeline_eff": round(fig.pipeline_eff, 3), "from": fig.source})
        if self.dp_serial:
            out["dp_serial_fraction"] = {"value": round(self.dp_serial[0], 4),
                                         "workers": self.dp_serial[1], "from": self.dp_serial[2]}
        return out


def _keep_best(table: dict, key, value: float, source: str) -> None:
    """Keep the best measurement; an efficiency above 1 means a wrong peak, so cap it."""
    value = min(value, 1.0)
    if key not in table or value > table[key][0]:
        table[key] = (value, source)


def load_calibration(
    paths: list[str | Path], catalog: Catalog, a: Assumptions | None = None,
) -> Calibration:
    """Read one or more benchmark JSON files into a :class:`Calibration`."""
    a = a or Assumptions()
    cal = Calibration()
    decode: list[float] = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise UsageError(f"cannot read calibration file {path}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise UsageError(f"calibration file {path} is not JSON: {exc}",
                             hint="pass the JSON written by benchmarks/gpu.py") from exc
        docs = data if isinstance(data, list) else [data]
        for doc in docs:
            if not isinstance(doc, dict):
                cal.notes.append(f"{path}: skipped a non-object document")
                continue
            _read_doc(doc, str(path), catalog, a, cal, decode)
    if decode:
        cal.decode_per_core = max(decode)
    if not (cal.compute or cal.kernel_compute or cal.memory or cal.comm or decode or cal.dp_serial
            or cal.ingest):
        cal.notes.append("no usable measurements found; defaults kept")
    return cal


def _read_doc(doc: dict, path: str, catalog: Catalog, a: Assumptions, cal: Calibration,
              decode: list[float]) -> None:
    if doc.get("schema") not in (None, SCHEMA):
        cal.notes.append(f"{path}: schema {doc.get('schema')!r} (expected {SCHEMA}); read anyway")
    doc_gpu = _gpu_key(doc, catalog)
    device = str(doc.get("device", ""))
    if doc_gpu and "pcie" in device.lower() and catalog.get(doc_gpu).nvlink_domain > 1:
        cal.notes.append(f"{path}: {device!r} is a PCIe part but {doc_gpu} is the SXM entry; "
                         "efficiencies will read low (add a PCIe entry with --hardware)")
    entries = doc.get("results", doc.get("runs", []))
    if not isinstance(entries, list):
        cal.notes.append(f"{path}: 'results' is not a list; skipped")
        return
    stamp = f"{Path(path).name}" + (f" {doc['date']}" if doc.get("date") else "")
    reading = _Reading(catalog, a, cal, decode, stamp, doc_gpu, doc.get("device") or doc.get("gpu"))
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            cal.notes.append(f"{path}: result {i} is not an object; skipped")
            continue
        why = _read_result(entry, reading)
        if why:
            cal.notes.append(f"{path}: result {i}: {why}")


@dataclass(frozen=True)
class _Reading:
    """Where one document's results are read into, and what the document says of them."""

    catalog: Catalog
    a: Assumptions
    cal: Calibration
    decode: list[float]
    stamp: str
    gpu: str | None  # the document's GPU in the catalog
    device: Any  # what the document calls its device


def _read_result(entry: dict, r: _Reading) -> str | None:
    """One result into the calibration; why it was skipped, or None."""
    kernel = str(entry.get("kernel", "")).lower()
    if kernel == "colour" or entry.get("backend") == "nvjpeg":
        # benchmarks/gpu.py's colour-backend and nvJPEG rows: the planner models neither
        # (the colour backend costs ~0.03 ms/image on a GPU; decode is modelled on CPU cores)
        return f"{kernel} on the GPU is not a planner input; skipped"
    if kernel in _DECODE_KERNELS:  # CPU work: no GPU needed
        return _read_decode(entry, r.decode)
    if kernel in _INGEST_KERNELS:  # a whole run; "cpu" where it ran on no catalogued GPU
        return _read_ingest(entry, _gpu_key(entry, r.catalog) or r.gpu or "cpu", r.stamp, r.cal)
    if kernel in _SCALING_KERNELS:  # CPU workers: no GPU needed
        return _read_scaling(entry, r.stamp, r.cal)
    gpu_key = _gpu_key(entry, r.catalog) or r.gpu
    if gpu_key is None:
        return f"GPU {r.device!r} not in the catalog; skipped (add it with --hardware)"
    return _read_entry(entry, gpu_key, r.stamp, r.catalog, r.a, r.cal)


def _read_decode(entry: dict, decode: list[float]) -> str | None:
    """A CPU JPEG decode rate (benchmarks/ingest.py writes one); why it was skipped, or None."""
    per_core = _first(entry, "images_per_s_per_core")
    if per_core is None and _first(entry, "images_per_s") and _first(entry, "cores"):
        per_core = _first(entry, "images_per_s") / _first(entry, "cores")
    if not per_core:
        return "decode without images_per_s_per_core"
    decode.append(per_core)
    return None


def _read_scaling(entry: dict, stamp: str, cal: Calibration) -> str | None:
    """A measured data-parallel scaling efficiency; the largest worker count wins (it says the
    most about the serial share). Returns why it was skipped, or None."""
    workers = entry.get("workers")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 2:
        return "dp_scaling needs workers >= 2"
    eff = _first(entry, "efficiency")
    if eff is None and _first(entry, "images_per_s") and _first(entry, "baseline_images_per_s"):
        eff = entry["images_per_s"] / (workers * entry["baseline_images_per_s"])
    if not eff:
        return "dp_scaling without efficiency (or images_per_s and baseline_images_per_s)"
    serial = serial_from_efficiency(workers, min(eff, 1.0))
    if cal.dp_serial is None or workers > cal.dp_serial[1]:
        cal.dp_serial = (serial, workers, f"{workers} workers at {eff:.0%} efficiency, {stamp}")
    return None


def _read_ingest(entry: dict, gpu: str, stamp: str, cal: Calibration) -> str | None:
    """A streaming ingest run; the one over the most images wins (its steady state is the
    longest). Returns why it was skipped, or None."""
    values = {k: _first(entry, k) for k in ("startup_s", "steady_img_s", "decode_img_s",
                                             "encoder_img_s", "images")}
    missing = sorted(k for k, v in values.items() if v is None)
    if missing:
        return f"ingest without {', '.join(missing)}"
    model = str(entry.get("model") or "colour").strip().lower()
    precision = _PRECISION.get(str(entry.get("precision", "")).lower(), "fp32")
    figures = IngestFigures(values["startup_s"], values["steady_img_s"], values["decode_img_s"],
                            values["encoder_img_s"], int(values["images"]),
                            f"ingest of {int(values['images'])} images, {stamp}",
                            _first(entry, "overhead_s"))
    key = (gpu, model, precision)
    if key not in cal.ingest or figures.images > cal.ingest[key].images:
        cal.ingest[key] = figures
    return None


def _gpu_key(entry: dict, catalog: Catalog) -> str | None:
    for field_name in ("gpu", "device"):
        value = entry.get(field_name)
        if isinstance(value, str) and value.strip():
            key = catalog.resolve(value, missing_ok=True) or catalog.match_device(value)
            if key:
                return key
    return None


def _read_entry(entry: dict, gpu_key: str, stamp: str, catalog: Catalog, a: Assumptions,
                cal: Calibration) -> str | None:
    """Fold one result into ``cal``; return why it was skipped, or None."""
    gpu = catalog.get(gpu_key)
    kernel = str(entry.get("kernel", "")).lower()
    raw_precision = str(entry.get("precision", entry.get("dtype", ""))).lower()
    precision = _PRECISION.get(raw_precision)
    if kernel in _MEMORY_KERNELS:
        gbps = _first(entry, "gb_per_s", "gbps", "bandwidth_gb_s")
        if not gbps:
            return "memory kernel without gb_per_s"
        _keep_best(cal.memory, gpu_key, gbps / (gpu.hbm_tb_s * 1000), f"{kernel} {stamp}")
        return None
    if kernel in _COMM_KERNELS:
        busbw = _first(entry, "busbw_gb_per_s", "busbw", "gb_per_s")
        if not busbw:
            return "all-reduce without busbw_gb_per_s"
        n = int(entry.get("gpus", gpu.gpus_per_node))
        link_gb_s = ring_link(gpu, n)[0] / 1e9  # the hop the model's all-reduce time uses
        _keep_best(cal.comm, gpu_key, busbw / link_gb_s, f"all-reduce {stamp}")
        return None
    if precision is None or not gpu.supports(precision):
        return f"precision {raw_precision or '(missing)'!r} not usable on {gpu_key}"
    if kernel in _MATMUL_KERNELS:
        tflops = _first(entry, "tflops")
        if not tflops:
            return "matmul without tflops"
        _keep_best(cal.kernel_compute, (gpu_key, precision), tflops / gpu.tflops[precision],
                   f"matmul {stamp}")
        return None
    if kernel:
        return f"unknown kernel {kernel!r}"
    return _read_model(entry, gpu_key, precision, stamp, catalog, a, cal)


def _read_model(entry: dict, gpu_key: str, precision: str, stamp: str, catalog: Catalog,
                a: Assumptions, cal: Calibration) -> str | None:
    name = str(entry.get("model", "")).strip().lower().replace("/", "-").replace("_", "-")
    if not name:
        return "neither a kernel nor a model"
    if entry.get("includes_decode"):
        return "images_per_s includes decode; give GPU-only throughput and a decode entry"
    model = _model(name, entry)
    if model is None:
        return f"model {name!r} is not a preset and has no width/depth/patch/resolution"
    rate = _first(entry, "images_per_s", "img_per_s", "throughput")
    source = f"{name} {stamp}"
    if rate is None:
        mfu = _first(entry, "mfu")
        if mfu is None:
            return "model result without images_per_s or mfu"
        _keep_best(cal.compute, (gpu_key, precision), mfu, source)
        return None
    gpu = catalog.get(gpu_key)
    batch = _first(entry, "batch_size", "batch") or a.embed_batch
    act_bytes = activation_bytes(precision, a)
    ideal_c = model.forward_flops() / gpu.peak_flops(precision)
    traffic = model.activation_traffic(act_bytes) + model.params() * WEIGHT_BYTES[precision] / batch
    ideal_m = traffic / gpu.mem_bytes_per_s
    measured = 1.0 / rate
    memory_eff = (cal.memory.get(gpu_key) or (a.memory_eff, ""))[0]
    if ideal_m / memory_eff < measured:  # compute (and overheads) limit it
        _keep_best(cal.compute, (gpu_key, precision), ideal_c / measured, source)
    else:
        _keep_best(cal.model_memory, (gpu_key, precision), ideal_m / measured, source)
    key = (gpu_key, name, precision)
    if key not in cal.throughput or rate > cal.throughput[key][0]:
        cal.throughput[key] = (rate, source)
    return None


def _model(name: str, entry: dict) -> ViTConfig | None:
    if name in PRESETS:
        return PRESETS[name]
    spec = {k: entry[k] for k in ("width", "depth", "patch", "resolution", "mlp_dim", "pool")
            if k in entry}
    if {"width", "depth", "patch", "resolution"} <= set(spec):
        return get_model(spec)
    return None
