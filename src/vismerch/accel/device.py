"""What hardware is here: device kind, name, compute capability and the number formats
its tensor cores run natively (bf16 on sm80+, FP8 on sm89/sm90+, FP4 on sm100+).

Everything is read from torch at call time; nothing is cached across processes, so a
worker that owns ``cuda:1`` sees its own card.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from vismerch.errors import UsageError

log = logging.getLogger("vismerch.device")

# lowercase keys the planner's hardware catalog uses, matched against torch's device name
_GPU_KEYS: tuple[tuple[str, str], ...] = (
    (r"\bgb200\b", "gb200"),
    (r"\bb200\b", "b200"),
    (r"\bb100\b", "b100"),
    (r"\bh200\b", "h200"),
    (r"\bh100\b", "h100"),
    (r"\bgh200\b", "gh200"),
    (r"\bh20\b", "h20"),
    (r"\bl40s\b", "l40s"),
    (r"\bl40\b", "l40"),
    (r"\bl4\b", "l4"),
    (r"\ba100\b", "a100"),
    (r"\ba10g?\b", "a10"),
    (r"\bv100\b", "v100"),
    (r"\bt4\b", "t4"),
    (r"rtx\s*pro\s*6000", "rtx-pro-6000"),
    (r"rtx\s*6000\s*ada", "rtx-6000-ada"),
    (r"rtx\s*5090", "rtx-5090"),
    (r"rtx\s*4090", "rtx-4090"),
    (r"rtx\s*3090", "rtx-3090"),
)


@dataclass(frozen=True)
class DeviceInfo:
    """A device and the precisions its hardware supports natively."""

    device: str  # canonical torch device string: "cpu", "cuda:0", "mps"
    type: str  # "cpu" | "cuda" | "mps" | ...
    name: str  # torch's name for it ("NVIDIA H200") or the CPU's
    capability: tuple[int, int] | None  # CUDA compute capability, None off CUDA
    total_memory: int | None  # bytes, CUDA only
    multiprocessors: int | None
    bf16: bool
    fp16: bool
    fp8: bool  # tensor-core FP8 (sm89 Ada, sm90 Hopper and later)
    fp4: bool  # tensor-core FP4 (sm100 Blackwell and later)

    @property
    def sm(self) -> int | None:
        """Capability as one number (8.9 -> 89, 9.0 -> 90), None off CUDA."""
        return None if self.capability is None else self.capability[0] * 10 + self.capability[1]

    @property
    def gpu(self) -> str | None:
        """The planner's lowercase catalog key for this card, or None."""
        return gpu_key(self.name) if self.type == "cuda" else None


def gpu_key(name: str) -> str | None:
    """Map a torch device name ("NVIDIA H200", "NVIDIA A100-SXM4-80GB") to a catalog key."""
    lowered = name.lower().replace("-", " ").replace("_", " ")
    for pattern, key in _GPU_KEYS:
        if re.search(pattern, lowered):
            return key
    return None


def resolve_device(device: str | torch.device | None = "cpu") -> torch.device:
    """A torch.device from a setting; ``auto`` means the first CUDA device if there is one."""
    if device is None or str(device) == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UsageError(f"unknown device {device!r}", hint="use cpu, cuda, cuda:N or auto") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(
                f"device {device} asked for, but torch sees no CUDA device",
                hint="use --device cpu, or install a CUDA build of torch (vismerch[gpu])",
            )
        index = 0 if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise UsageError(
                f"device {device} asked for, but only {torch.cuda.device_count()} CUDA device(s) exist"
            )
        dev = torch.device("cuda", index)
    return dev


def cuda_devices() -> list[str]:
    """All CUDA devices here (one ingest consumer per GPU), empty without CUDA."""
    if not torch.cuda.is_available():
        return []
    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"


def device_info(device: str | torch.device | None = "cpu") -> DeviceInfo:
    """Describe ``device``: name, capability and the precisions it runs natively."""
    dev = resolve_device(device)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        cap = (int(props.major), int(props.minor))
        sm = cap[0] * 10 + cap[1]
        return DeviceInfo(
            device=str(dev),
            type="cuda",
            name=str(props.name),
            capability=cap,
            total_memory=int(props.total_memory),
            multiprocessors=int(props.multi_processor_count),
            bf16=sm >= 80,
            fp16=sm >= 53,
            fp8=sm >= 89,
            fp4=sm >= 100,
        )
    # CPUs run bf16/fp16 in software or with AMX/AVX512-BF16; never chosen by ``auto``
    return DeviceInfo(
        device=str(dev),
        type=dev.type,
        name=_cpu_name() if dev.type == "cpu" else dev.type,
        capability=None,
        total_memory=None,
        multiprocessors=None,
        bf16=True,
        fp16=True,
        fp8=False,
        fp4=False,
    )


def auto_batch_size(
    run: Callable[[int], float],
    device: torch.device,
    start: int = 16,
    limit: int = 2048,
    min_gain: float = 1.05,
    memory_fraction: float = 0.85,
) -> int:
    """Double the batch while it fits and images/s still rise by at least ``min_gain``.

    ``run(n)`` returns seconds for one batch of ``n``. CUDA only (CPU returns ``start``).
    """
    if device.type != "cuda":
        return start
    best, best_rate, n = start, 0.0, start
    total = torch.cuda.get_device_properties(device).total_memory
    while n <= limit:
        torch.cuda.reset_peak_memory_stats(device)
        try:
            seconds = run(n)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            break
        rate = n / max(seconds, 1e-9)
        if best_rate and rate < best_rate * min_gain:
            break
        best, best_rate = n, rate
        if torch.cuda.max_memory_allocated(device) > memory_fraction * total / 2:
            break  # the next doubling would not fit with headroom
        n *= 2
    torch.cuda.empty_cache()
    log.info("auto batch size on %s: %d (%.0f images/s)", device, best, best_rate)
    return best
