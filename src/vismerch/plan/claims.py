"""Vendor and folklore claims turned into numbers for a stated case, with where they hold.

Each check returns the peak-to-peak figure the claim is built on, what the planner's
model says a real workload sees, and a verdict in words. ``vismerch plan --claims``
prints them; the tests pin the arithmetic.
"""

from __future__ import annotations

from typing import Any

from vismerch.plan import parallel
from vismerch.plan.assumptions import Assumptions
from vismerch.plan.calibrate import Calibration
from vismerch.plan.hardware import Catalog
from vismerch.plan.planner import Option, efficiency_for, make_plan
from vismerch.plan.workloads import PRESETS


def _rate(catalog: Catalog, a: Assumptions, gpu: str, precision: str, **kw: Any) -> Option:
    plan = make_plan(gpus=[gpu], precision=precision, catalog=catalog, assumptions=a, **kw)
    return plan.options[0]


def measured_ratio(cal: Calibration | None, low: str, high: str) -> dict[str, Any] | None:
    """The recorded images/s of ``low`` over ``high`` precision, same GPU and model, from a
    calibration (benchmarks/gpu.py JSON); None when nothing recorded pairs them."""
    if cal is None:
        return None
    found = {}
    for (gpu, model, prec), (rate, source) in cal.throughput.items():
        if prec == low and (gpu, model, high) in cal.throughput:
            found[f"{gpu} {model}"] = (round(rate / cal.throughput[(gpu, model, high)][0], 3), source)
    return found or None


def _status(measured: dict[str, Any] | None, low: str, high: str) -> tuple[str, str]:
    """("measured" | "unverified", words): a claimed speed-up stands as unverified until a
    recorded measurement on a card exists (``plan --claims --calibrate FILE``)."""
    if not measured:
        return "unverified", (f"Unverified: no recorded measurement of {low} against {high} is "
                              "given (plan --claims --calibrate benchmarks/results/gpu-*.json).")
    said = "; ".join(f"{k}: {v[0]:.2f}x ({v[1]})" for k, v in measured.items())
    return "measured", f"Measured {low} / {high} images/s: {said}."


def fp8_vs_ampere(catalog: Catalog, a: Assumptions, cal: Calibration | None = None) -> dict[str, Any]:
    h100, a100 = catalog.get("h100"), catalog.get("a100")
    gpu_only = a.replace(decode_per_core=0)
    ratios = {}
    for model in ("vit-b-16", "vit-l-14"):
        fast = _rate(catalog, gpu_only, "h100", "fp8", model=model, images=1e6)
        slow = _rate(catalog, gpu_only, "a100", "bf16", model=model, images=1e6)
        ratios[model] = (fast.rate_per_gpu / slow.rate_per_gpu, fast.bound, slow.bound)
    e2e = _rate(catalog, a, "h100", "fp8", images=1e6).rate_per_gpu / _rate(
        catalog, a, "a100", "bf16", images=1e6).rate_per_gpu
    peak = h100.tflops["fp8"] / a100.tflops["bf16"]
    measured = measured_ratio(cal, "fp8", "bf16")
    status, said = _status(measured, "fp8", "bf16")
    return {
        "claim": "H100 with FP8 is ~6x faster than Ampere (A100)",
        "status": status,
        "measured_fp8_over_bf16": {k: v[0] for k, v in (measured or {}).items()},
        "peak_ratio": round(peak, 2),
        "same_precision_peak_ratio": round(h100.tflops["bf16"] / a100.tflops["bf16"], 2),
        "bandwidth_ratio": round(h100.hbm_tb_s / a100.hbm_tb_s, 2),
        "modelled": {f"{m} embed, GPU only": f"{r:.2f}x (H100 {b1}-bound, A100 {b2}-bound)"
                     for m, (r, b1, b2) in ratios.items()}
        | {"vit-b-16 embed with CPU decode": f"{e2e:.2f}x"},
        "verdict": f"{said} Peak-to-peak FP8 vs BF16 is {peak:.2f}x; it holds only for compute-bound "
                   "GEMMs with equal efficiency. Same precision is "
                   f"{h100.tflops['bf16'] / a100.tflops['bf16']:.2f}x, a bandwidth-bound kernel "
                   f"sees {h100.hbm_tb_s / a100.hbm_tb_s:.2f}x, and a decode-bound pipeline 1x.",
    }


def fp4_vs_fp8(catalog: Catalog, a: Assumptions, cal: Calibration | None = None) -> dict[str, Any]:
    """Blackwell's FP4 against its own FP8 and BF16: datasheet ratios, and a measured one
    only where a calibration records it."""
    peaks = {key: (catalog.get(key).tflops.get("fp4", 0) / catalog.get(key).tflops["fp8"],
                   catalog.get(key).tflops.get("fp4", 0) / catalog.get(key).tflops["bf16"])
             for key in ("b200", "b300") if key in catalog.names()}
    measured = measured_ratio(cal, "fp4", "fp8") or measured_ratio(cal, "fp4", "bf16")
    status, said = _status(measured, "fp4", "fp8 or bf16")
    return {
        "claim": "FP4 is 2-3x faster than FP8 on Blackwell",
        "status": status,
        "peak_ratio": {k: f"{v[0]:.2f}x FP8, {v[1]:.2f}x BF16" for k, v in peaks.items()},
        "measured_fp4_over_higher": {k: v[0] for k, v in (measured or {}).items()},
        "verdict": f"{said} The datasheet ratios are peak-to-peak; block-scale kernels, "
                   "activation casts and the accuracy guard decide what a model gets, and FP8 "
                   "on Hopper already ran slower than bf16 in eager torchao.",
    }


def h200_bandwidth(catalog: Catalog, a: Assumptions) -> dict[str, Any]:
    h100, h200 = catalog.get("h100"), catalog.get("h200")
    ratio = h200.hbm_tb_s / h100.hbm_tb_s
    scan = a.replace(query_batch=1)  # one query per pass over the vectors: pure streaming
    kw = {"workload": "search", "vectors": 10e6, "dim": 768, "queries": 1e4}
    bw_bound = _rate(catalog, scan, "h200", "auto", **kw).rate_per_gpu / _rate(
        catalog, scan, "h100", "auto", **kw).rate_per_gpu
    gpu_only = a.replace(decode_per_core=0)
    vit = _rate(catalog, gpu_only, "h200", "bf16", images=1e6).rate_per_gpu / _rate(
        catalog, gpu_only, "h100", "bf16", images=1e6).rate_per_gpu
    big = {"workload": "search", "vectors": 100e6, "dim": 768, "queries": 1e6}
    shards = (_rate(catalog, a, "h100", "auto", **big).min_gpus,
              _rate(catalog, a, "h200", "auto", **big).min_gpus)
    return {
        "claim": "H200 has 43% more memory bandwidth than H100",
        "peak_ratio": round(ratio, 3),
        "modelled": {
            "bandwidth-bound scan (10M x 768 fp16, 1 query per pass)": f"{bw_bound:.2f}x",
            "vit-b-16 bf16 embed (compute-bound)": f"{vit:.2f}x",
            "GPUs to hold a 100M x 768 fp16 index": f"H100 {shards[0]}, H200 {shards[1]}",
        },
        "verdict": f"{h200.hbm_tb_s}/{h100.hbm_tb_s} = {ratio:.2f}x for bandwidth-bound kernels "
                   "(exact search, small batches); compute-bound encoders see 1.0x (same tensor "
                   "cores); the larger memory also cuts index shards.",
    }


def pipeline_bubble_claim(low: float = 0.15, high: float = 0.30) -> dict[str, Any]:
    ranges = {p: parallel.bubble_m_range(p, low, high) for p in (2, 4, 8, 16)}
    examples = [(p, m, parallel.pipeline_bubble(p, m)) for p, m in
                ((4, 8), (4, 16), (8, 16), (8, 32), (8, 64), (16, 32))]
    holds = "; ".join(f"p={p}: m={r[0]}-{r[1]}" if r else f"p={p}: never"
                      for p, r in ranges.items())
    return {
        "claim": f"the pipeline bubble costs {low:.0%}-{high:.0%}",
        "formula": "(p-1)/(m+p-1) of each step (GPipe/1F1B; interleaved: (p-1)/(v*m+p-1))",
        "modelled": {f"p={p}, m={m}": f"{b:.1%}" for p, m, b in examples},
        "holds_for": {f"p={p}": (f"m in {r[0]}..{r[1]}" if r else "no m") for p, r in ranges.items()},
        "verdict": f"holds only for {holds}; more micro-batches (m >= 4p gives < 20%) or "
                   "interleaving shrink it, fewer make it worse.",
    }


def dp_comm_bound(catalog: Catalog, a: Assumptions, gpu_key: str = "h100",
                  global_batch: float = 4096) -> dict[str, Any]:
    gpu = catalog.get(gpu_key)
    eff = efficiency_for(gpu, "bf16", a, None)
    gpu_only = a.replace(decode_per_core=0)
    found = {}
    for name in ("vit-b-16", "vit-l-14", "vit-g-14"):
        model = PRESETS[name]
        n = parallel.comm_bound_gpus(model, gpu, "bf16", eff, gpu_only, global_batch)
        found[name] = n
    return {
        "claim": "data parallelism turns communication-bound past 64 GPUs",
        "stated_case": f"bf16 fine-tune, global batch {global_batch:g} images, {gpu.key}: NVLink "
                       f"{gpu.nvlink_gb_s / 2:g} GB/s each way inside {gpu.nvlink_domain}, "
                       f"{gpu.scaleout_gb_s:g} GB/s per GPU across nodes, ring all-reduce of bf16 "
                       f"gradients at comm_eff {a.comm_eff:g}",
        "modelled": {f"{m} communication-bound at": (f"{n} GPUs" if n else f"> {global_batch:g}")
                     for m, n in found.items()},
        "verdict": "the count depends on model, batch and link, not a constant: compute per step "
                   "shrinks as 1/N at a fixed global batch while the all-reduce tends to "
                   "2 x gradient bytes / link bandwidth.",
    }


def check_claims(catalog: Catalog | None = None, a: Assumptions | None = None,
                 cal: Calibration | None = None) -> list[dict]:
    """Every claim; ``cal`` (benchmarks' JSON through ``load_calibration``) turns the
    low-precision speed-ups from unverified into measured."""
    catalog = catalog or Catalog.load()
    a = a or Assumptions()
    return [fp8_vs_ampere(catalog, a, cal), fp4_vs_fp8(catalog, a, cal), h200_bandwidth(catalog, a),
            pipeline_bubble_claim(), dp_comm_bound(catalog, a)]
