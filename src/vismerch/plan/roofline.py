"""Roofline: time = max(FLOPs / (peak x compute_eff), bytes / (bandwidth x memory_eff)).

The efficiency factors come from :mod:`vismerch.plan.assumptions` (documented defaults)
or from :mod:`vismerch.plan.calibrate` (measured on the GPU by ``benchmarks/``).
"""

from __future__ import annotations

from dataclasses import dataclass

from vismerch.plan.hardware import GPU

# matmul precision whose tensor-core peak a storage/compute precision uses
PEAK_KEY = {"fp16": "bf16", "int8": "bf16"}


@dataclass(frozen=True)
class Efficiency:
    compute: float
    memory: float
    comm: float
    source: str = "default"


@dataclass(frozen=True)
class Timing:
    seconds: float
    compute_s: float
    memory_s: float

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def roofline(flops: float, traffic: float, gpu: GPU, precision: str, eff: Efficiency) -> Timing:
    """Time for ``flops`` of work moving ``traffic`` bytes through HBM on one GPU."""
    peak = gpu.peak_flops(PEAK_KEY.get(precision, precision))
    compute_s = flops / (peak * eff.compute)
    memory_s = traffic / (gpu.mem_bytes_per_s * eff.memory)
    return Timing(max(compute_s, memory_s), compute_s, memory_s)

