"""Parallelism: data parallel (ring all-reduce), tensor parallel, pipeline bubble, advice.

Formulas and their sources:
- ring all-reduce of S bytes over n ranks at per-direction bandwidth B:
  t = 2(n-1)/n * S / B (nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n);
- pipeline bubble with p stages, m micro-batches, v virtual stages per GPU:
  bubble / total = (p-1) / (v*m + p-1) (Narayanan et al., SC'21, arXiv 2104.04473);
- tensor parallel (Megatron): two all-reduces of the layer activations per layer forward,
  two more backward, on the critical path (not overlapped).

Data parallel is modelled at a fixed global batch (strong scaling): that is what a fixed
dataset, a fixed batch-size hyper-parameter and a deadline impose, and it is the regime
in which "data parallel turns communication-bound past N GPUs" has a meaning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vismerch.plan.assumptions import Assumptions
from vismerch.plan.hardware import GPU
from vismerch.plan.roofline import Efficiency, roofline
from vismerch.plan.workloads import ViTConfig

OPTIMIZER_BYTES_PER_PARAM = 16  # bf16 weights + bf16 grads + fp32 master + Adam m, v (ZeRO paper)
WEIGHT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5625}


def activation_bytes(precision: str, a: Assumptions) -> float:
    """Bytes per activation element: fp32/tf32 runs keep 4, lower precisions ``a.act_bytes``."""
    return 4.0 if precision in ("fp32", "tf32") else a.act_bytes


def ring_allreduce_s(nbytes: float, n: int, link_bytes_per_s: float, comm_eff: float = 1.0) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` over ``n`` ranks."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / (link_bytes_per_s * comm_eff)


def ring_link(gpu: GPU, n: int) -> tuple[float, str]:
    """Per-direction bandwidth of the slowest hop of an n-GPU ring, and its name; the same
    rule for data- and tensor-parallel groups. An NVLink domain may span servers (NVL72
    racks), so it is checked before the server boundary."""
    if gpu.nvlink_gb_s > 0 and n <= gpu.nvlink_domain:
        return gpu.nvlink_bytes_per_s_each_way, "NVLink"
    if n <= gpu.gpus_per_node:
        return gpu.pcie_gb_s * 1e9 / 2, "PCIe"
    return gpu.scaleout_bytes_per_s, "network"


def amdahl_efficiency(n: float, serial: float) -> float:
    """Scaling efficiency speedup(n)/n with a serial share ``serial`` (Amdahl, 1967):
    speedup = 1 / (serial + (1 - serial) / n)."""
    return 1.0 / (n * serial + 1.0 - serial)


def serial_from_efficiency(n: int, efficiency: float) -> float:
    """The Amdahl serial share that gives ``efficiency`` at ``n`` workers (n >= 2)."""
    return max(0.0, (1.0 / efficiency - 1.0) / (n - 1))


def pipeline_bubble(p: int, m: int, v: int = 1) -> float:
    """Idle fraction of a pipeline step: (p-1) / (v*m + p-1)."""
    if p < 1 or m < 1 or v < 1:
        raise ValueError("p, m and v must be at least 1")
    return (p - 1) / (v * m + p - 1)


def bubble_m_range(p: int, low: float, high: float, v: int = 1) -> tuple[int, int] | None:
    """Micro-batch counts m for which the bubble lies within [low, high] (None if none)."""
    if p < 2:
        return None
    m_min = math.ceil((p - 1) * (1 - high) / (high * v) - 1e-9)
    m_max = math.floor((p - 1) * (1 - low) / (low * v) + 1e-9)
    m_min = max(m_min, 1)
    return (m_min, m_max) if m_min <= m_max else None


@dataclass(frozen=True)
class DPStep:
    n: int
    gpu_s: float  # forward + backward + optimiser on one GPU's share
    comm_s: float  # gradient all-reduce
    exposed_s: float  # the part not hidden under backward
    decode_s: float
    step_s: float
    link: str
    roofline_bound: str

    @property
    def bound(self) -> str:
        if self.decode_s > self.gpu_s + self.exposed_s:
            return "decode"
        if self.comm_s >= self.gpu_s:
            return "communication"
        return self.roofline_bound


def decode_rate(a: Assumptions) -> float:
    """Images/s one GPU's share of CPU cores can decode (inf when decode is not modelled)."""
    rate = a.decode_per_core * a.cpu_cores_per_gpu
    return rate if rate > 0 else math.inf


def dp_step(
    model: ViTConfig, gpu: GPU, precision: str, eff: Efficiency, a: Assumptions, n: int,
    global_batch: float | None = None, fsdp: bool = False,
) -> DPStep:
    """One optimiser step of data-parallel fine-tuning on ``n`` GPUs."""
    batch = (global_batch or a.global_batch) / n
    params = model.params()
    flops = 3 * model.forward_flops() * batch  # forward + backward (2x)
    act_bytes = activation_bytes(precision, a)
    traffic = 3 * model.activation_traffic(act_bytes) * batch
    traffic += params * (2 * WEIGHT_BYTES[precision] + 2 * OPTIMIZER_BYTES_PER_PARAM)
    timing = roofline(flops, traffic, gpu, precision, eff)
    link_bw, link = ring_link(gpu, n)
    grad_bytes = params * 2 * (1.5 if fsdp else 1.0)  # FSDP: all-gather x2 + reduce-scatter
    comm = ring_allreduce_s(grad_bytes, n, link_bw, eff.comm)
    exposed = max(0.0, comm - a.overlap * timing.seconds * 2 / 3)
    decode = batch / decode_rate(a)
    step = max(timing.seconds + exposed, decode)
    return DPStep(n, timing.seconds, comm, exposed, decode, step, link, timing.bound)


def dp_scaling(
    model: ViTConfig, gpu: GPU, precision: str, eff: Efficiency, a: Assumptions,
    counts: list[int], global_batch: float | None = None,
) -> list[tuple[int, float]]:
    """(n, scaling efficiency) where efficiency = step(1) / (n * step(n))."""
    base = dp_step(model, gpu, precision, eff, a, 1, global_batch).step_s
    return [(n, base / (n * dp_step(model, gpu, precision, eff, a, n, global_batch).step_s))
            for n in counts]


def comm_bound_gpus(
    model: ViTConfig, gpu: GPU, precision: str, eff: Efficiency, a: Assumptions,
    global_batch: float | None = None, limit: int | None = None, fsdp: bool = False,
) -> int | None:
    """Smallest n at which the gradient all-reduce takes as long as the GPU work per step."""
    top = int(limit or (global_batch or a.global_batch))  # beyond that a GPU gets < 1 image
    for n in range(2, top + 1):
        step = dp_step(model, gpu, precision, eff, a, n, global_batch, fsdp=fsdp)
        if step.comm_s >= step.gpu_s:
            return n
    return None


def tensor_parallel_efficiency(
    model: ViTConfig, gpu: GPU, precision: str, eff: Efficiency, a: Assumptions, t: int,
    batch: float, training: bool = False,
) -> float:
    """Useful fraction of a TP group's time: per-GPU compute / (compute + all-reduces)."""
    if t <= 1:
        return 1.0
    act_bytes = activation_bytes(precision, a)
    flops = model.forward_flops() * batch * (3 if training else 1)
    traffic = model.activation_traffic(act_bytes) * batch * (3 if training else 1)
    compute = roofline(flops / t, traffic / t, gpu, precision, eff).seconds
    link, _ = ring_link(gpu, t)
    message = batch * model.tokens * model.width * act_bytes
    per_layer = (4 if training else 2) * ring_allreduce_s(message, t, link, eff.comm)
    comm = model.depth * per_layer
    return compute / (compute + comm)


@dataclass(frozen=True)
class Strategy:
    name: str  # e.g. "DP x16", "TP x2 + DP x4", "FSDP x8"
    dp: int
    tp: int = 1
    pp: int = 1
    reason: str = ""


def memory_budget(gpu: GPU, a: Assumptions) -> float:
    return gpu.memory_gb * 1e9 * a.usable_memory


def inference_tp(model: ViTConfig, gpu: GPU, precision: str, a: Assumptions) -> int | None:
    """Smallest TP degree (power of two, within the NVLink domain) that holds the weights
    plus one image's activations; None when even the whole domain cannot."""
    weights = model.params() * WEIGHT_BYTES[precision]
    live = model.inference_live_bytes(a.act_bytes)
    t = 1
    while t <= max(gpu.nvlink_domain, 1):
        if weights / t + live <= memory_budget(gpu, a):
            return t
        t *= 2
    return None


def recommend(
    model: ViTConfig, gpu: GPU, precision: str, n: int, a: Assumptions, training: bool,
    comm_bound_at: int | None = None,
) -> Strategy:
    """A strategy for ``n`` GPUs, with the reason in words."""
    budget = memory_budget(gpu, a)
    if not training:
        t = inference_tp(model, gpu, precision, a)
        if t == 1:
            return Strategy(f"DP x{n}", dp=n, reason="independent replicas: every GPU embeds its "
                            "own share of images, nothing is synchronised, scaling is linear")
        if t is not None:
            dp = max(1, n // t)
            return Strategy(f"TP x{t} + DP x{dp}", dp=dp, tp=t, reason=f"weights do not fit one "
                            f"{gpu.key}; split each layer over {t} GPUs inside one NVLink domain")
        return Strategy("TP + PP", dp=1, tp=gpu.nvlink_domain, pp=2, reason="model exceeds one "
                        "NVLink domain: tensor parallel inside, pipeline stages across nodes")
    states = model.params() * OPTIMIZER_BYTES_PER_PARAM
    one_image = model.train_activation_bytes()
    if states + one_image <= budget:
        reason = "model, gradients and Adam states fit one GPU: DDP with a ring all-reduce of " \
                 "bf16 gradients, overlapped with backward"
        if comm_bound_at and n >= comm_bound_at:
            reason += (f"; past {comm_bound_at} GPUs the all-reduce outlasts the compute — raise "
                       "the global batch or use hierarchical/in-network all-reduce")
        return Strategy(f"DP x{n}", dp=n, reason=reason)
    if states / n + one_image <= budget:
        return Strategy(f"FSDP x{n}", dp=n, reason="Adam states do not fit one GPU; shard them "
                        "(ZeRO-3/FSDP), 1.5x the gradient traffic of DDP")
    t = 2
    while t <= gpu.nvlink_domain and states / (t * max(1, n // t)) + one_image / t > budget:
        t *= 2
    if t <= gpu.nvlink_domain:
        return Strategy(f"TP x{t} + FSDP x{max(1, n // t)}", dp=max(1, n // t), tp=t,
                        reason="activations of one image exceed a GPU: tensor parallel inside "
                        "the NVLink domain, sharded data parallel across")
    return Strategy("TP + PP + DP", dp=1, tp=gpu.nvlink_domain, pp=2, reason="beyond one NVLink "
                    "domain: tensor parallel inside nodes, pipeline stages across (Megatron-LM)")
