"""Every planning assumption in one table: name, default, unit and *why* that default.

Nothing in the planner is a hidden constant: efficiencies, decode speed, prices of
power and money all live here, are printed with every plan (``assumptions`` in the
JSON) and can be overridden (``--set name=value`` or ``make_plan(assumptions={...})``).
Benchmark calibration (``--calibrate``) replaces the efficiency rows per GPU and precision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vismerch.errors import UsageError


@dataclass(frozen=True)
class Assumption:
    name: str
    default: float
    unit: str
    why: str


ASSUMPTIONS: tuple[Assumption, ...] = (
    # --- efficiency: achieved / peak (replaced per GPU+precision by --calibrate) ---
    Assumption("compute_eff_fp32", 0.6, "of peak",
               "FP32 runs on CUDA cores; large SGEMMs reach 80-90% of peak, whole models less."),
    Assumption("compute_eff_tf32", 0.5, "of peak", "As bf16: same tensor cores, same kernels."),
    Assumption("compute_eff_bf16", 0.5, "of peak",
               "Megatron-LM reached 52% of peak on 3,072 A100s (SC'21, arXiv 2104.04473); "
               "large-batch ViT GEMMs are similar, and softmax/LayerNorm/GELU time is not in FLOPs."),
    Assumption("compute_eff_fp8", 0.4, "of peak",
               "FP8 GEMMs reach a smaller share of a doubled peak and scaling/cast kernels add "
               "work: a 2x peak is seldom 2x end to end."),
    Assumption("compute_eff_fp4", 0.3, "of peak",
               "NVFP4 kernels are the newest and pay block-scale overhead; calibrate before trusting."),
    Assumption("memory_eff", 0.8, "of peak",
               "Streaming kernels (copy, triad) reach roughly 80-90% of HBM peak."),
    Assumption("comm_eff", 0.8, "of link",
               "NCCL all-reduce bus bandwidth reaches about 80% of the per-direction link rate on "
               "large messages (nccl-tests busbw)."),
    Assumption("overlap", 0.8, "of backward",
               "Share of the backward pass under which gradient all-reduce hides (DDP buckets "
               "overlap backward; the last bucket cannot)."),
    # --- input pipeline: ANCHORS §2 says decode, not the GPU, is the usual bound ---
    Assumption("decode_per_core", 150.0, "images/s/core",
               "Estimate: Pillow JPEG decode + resize of a 0.5-1 MP product photo with "
               "draft-mode downscale takes ~6-7 ms per core. Calibrate it (a 'decode' result); "
               "set 0 when images arrive decoded or GPU decode (nvJPEG/DALI) keeps up."),
    Assumption("cpu_cores_per_gpu", 12.0, "cores",
               "DGX H100/B200 nodes have 112 cores for 8 GPUs (14 each); keep ~2 per GPU for "
               "the feeder process and the OS."),
    Assumption("dp_serial_fraction", 0.0, "of one worker's time",
               "Data-parallel ingest/embedding keeps one driver that plans and commits every "
               "result: Amdahl's serial share, efficiency(n) = 1 / (n*s + 1 - s). 0 is linear "
               "scaling; calibrate it from benchmarks/ray_ingest.py (a 'dp_scaling' result)."),
    # --- workload shape ---
    Assumption("embed_batch", 256.0, "images", "Inference batch per GPU (reduced if it does not fit)."),
    Assumption("global_batch", 1024.0, "images",
               "Fine-tune images per optimiser step, fixed as GPUs are added (strong scaling)."),
    Assumption("query_batch", 1024.0, "queries",
               "Queries searched together; one pass over the vectors serves the whole batch."),
    Assumption("vector_bytes", 2.0, "bytes", "Stored vector element: float16, as in the store."),
    Assumption("scan_fraction", 1.0, "of vectors",
               "1 = exact search; an IVF index scans about nprobe/nlist of the vectors."),
    Assumption("usable_memory", 0.9, "of GPU memory",
               "Leave 10% for the CUDA context, allocator fragmentation and workspaces."),
    Assumption("act_bytes", 2.0, "bytes",
               "Activations stay bf16 between kernels even with FP8/FP4 matmuls (Transformer "
               "Engine keeps bf16 copies); fp32/tf32 runs use 4."),
    # --- owning: ANCHORS §3 (TCO ranges, secondary sources) ---
    Assumption("electricity_usd_per_kwh", 0.10, "USD/kWh", "Industrial power $0.06-0.12/kWh."),
    Assumption("pue", 1.3, "ratio",
               "Efficient colocation runs 1.2-1.4; industry survey averages are nearer 1.5."),
    Assumption("host_power_factor", 1.5, "x GPU TDP",
               "Whole-server draw per GPU: an 8xH100 node peaks at 10.2 kW for 5.6 kW of GPUs "
               "(1.8x); the average is lower."),
    Assumption("idle_power_fraction", 0.3, "of busy power",
               "Estimate: an idle server (fans, CPUs, idle GPUs) still draws about a third."),
    Assumption("server_overhead", 0.45, "x GPU price",
               "Server, CPUs, memory, NICs and switch ports: an 8xH100 node costs ~$300-350k "
               "against 8 x $25-30k of GPUs."),
    Assumption("years", 3.0, "years", "Amortisation period (the 36-month horizon of TCO studies)."),
    Assumption("residual_fraction", 0.25, "of capex", "Resale value after it: 25-35% at 36 months."),
    Assumption("ops_fraction", 0.10, "of capex per year",
               "Support contracts, spares, admin time and rack space; a judgement, override it."),
    Assumption("utilisation", 0.6, "of hours",
               "Owned GPU-hours doing useful work: between the ~50-60% rent/own crossover and "
               "the 70% example of TCO studies."),
    Assumption("rent_multiplier", 1.0, "x list price",
               "Cloud bills run 30-50% above the GPU sticker (egress, storage); set 1.3-1.5 to "
               "include that."),
    Assumption("max_gpus", 4096.0, "GPUs", "Largest fleet the deadline search will consider."),
)

_BY_NAME = {a.name: a for a in ASSUMPTIONS}
_FRACTIONS = {"overlap", "utilisation", "usable_memory", "scan_fraction"}
_SHARES = {"residual_fraction", "idle_power_fraction", "dp_serial_fraction"}  # may be zero
_POSITIVE = {"years", "embed_batch", "global_batch", "query_batch", "vector_bytes", "max_gpus",
             "pue", "host_power_factor", "act_bytes", "rent_multiplier"}


class Assumptions:
    """Resolved assumptions: attribute access, overrides validated against the table."""

    def __init__(self, overrides: Mapping[str, Any] | None = None):
        self._values = {a.name: a.default for a in ASSUMPTIONS}
        self._overridden: set[str] = set()
        self._why: dict[str, str] = {}
        for key, value in (overrides or {}).items():
            self._set(key, value)

    def _set(self, key: str, value: Any) -> None:
        if key not in _BY_NAME:
            raise UsageError(
                f"unknown planning assumption {key!r}",
                hint="known: " + ", ".join(sorted(_BY_NAME)),
            )
        try:
            number = float(value)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"assumption {key}: {value!r} is not a number") from exc
        if number < 0 or not math.isfinite(number):
            raise UsageError(f"assumption {key}: must be zero or more, got {value!r}")
        if key in _POSITIVE and number == 0:
            raise UsageError(f"assumption {key}: must be more than zero")
        fraction = key.endswith("_eff") or key.startswith("compute_eff") or key in _FRACTIONS
        if fraction and not 0 < number <= 1:
            raise UsageError(f"assumption {key}: must be in (0, 1], got {value!r}")
        if key in _SHARES and number > 1:
            raise UsageError(f"assumption {key}: must be in [0, 1], got {value!r}")
        self._values[key] = number
        self._overridden.add(key)

    def __getattr__(self, name: str) -> float:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def is_overridden(self, name: str) -> bool:
        return name in self._overridden

    def compute_eff(self, precision: str) -> float:
        return self._values[f"compute_eff_{precision}"]

    def replace(self, why: str | None = None, **overrides: Any) -> Assumptions:
        """A copy with ``overrides``; ``why`` records where they came from (else "the user")."""
        merged = {k: self._values[k] for k in self._overridden}
        merged.update(overrides)
        out = Assumptions(merged)
        out._why = dict(self._why)
        for key in overrides:
            out._why.pop(key, None)
            if why:
                out._why[key] = why
        return out

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {
            a.name: {
                "value": self._values[a.name],
                "unit": a.unit,
                "why": self._why.get(a.name)
                or ("overridden by the user" if a.name in self._overridden else a.why),
            }
            for a in ASSUMPTIONS
        }


def parse_overrides(pairs: list[str] | None) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Split ``--set`` pairs into global assumptions and per-GPU catalog fields.

    ``utilisation=0.8`` -> assumptions; ``h100.rent_usd_per_h=2.1`` -> catalog override.
    """
    plain: dict[str, str] = {}
    per_gpu: dict[str, dict[str, str]] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise UsageError(
                f"--set {pair!r}: expected name=value",
                hint="e.g. --set utilisation=0.8 or --set h100.rent_usd_per_h=2.1",
            )
        if "." in key:
            gpu, _, field = key.partition(".")
            per_gpu.setdefault(gpu.lower(), {})[field] = value
        else:
            plain[key] = value
    return plain, per_gpu
