"""Automatic, verified inference precision: ``auto | fp32 | bf16 | fp16 | fp8 | fp4``.

``auto`` starts at the fastest format the hardware has (fp32 on CPU, bf16 on sm80+,
FP8 on sm89/sm90+, FP4 on sm100+). Every low-precision candidate then has to pass the
guard: on a calibration batch, the mean cosine between its embeddings and the fp32
reference must be at least ``min_cosine`` (0.995 by default). A candidate that is not
available here (no torchao, wrong GPU) or fails the guard is stepped down one level
(fp4 -> fp8 -> bf16 -> fp32, fp16 -> fp32) and the reason is logged and kept.

The precision *paths* (how a module is converted) live in ``PRECISION_PATHS`` and can be
replaced per call, so a test can inject a deliberately damaged path and watch the guard
reject it.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import torch
from torch import nn

from vismerch.accel.device import DeviceInfo
from vismerch.config import setting
from vismerch.errors import UsageError

log = logging.getLogger("vismerch.precision")

PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "fp8", "fp4")
STEP_DOWN: dict[str, str] = {"fp4": "fp8", "fp8": "bf16", "bf16": "fp32", "fp16": "fp32"}
DEFAULT_MIN_COSINE = setting(None, "precision_min_cosine")
GPU_HINT = "install vismerch[gpu] (torchao) or NVIDIA Transformer Engine"


class PrecisionUnavailable(Exception):
    """This precision cannot run here (hardware or library missing); the guard steps down."""


@dataclass
class PreparedModel:
    """A module converted to one precision, and how to call it."""

    module: nn.Module
    precision: str
    input_dtype: torch.dtype  # dtype of floating inputs (pixel values)
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    library: str = "torch"  # torch | torchao | transformer_engine


PrecisionPath = Callable[[nn.Module, DeviceInfo], PreparedModel]


def _cast(precision: str, dtype: torch.dtype) -> PrecisionPath:
    def path(module: nn.Module, info: DeviceInfo) -> PreparedModel:
        return PreparedModel(module.to(dtype=dtype), precision, dtype)

    return path


def _linear_filter(multiple: int) -> Callable[[nn.Module, str], bool]:
    # low-precision GEMMs need both dimensions divisible by the kernel's tile/block size;
    # exact type only: nn.MultiheadAttention's out_proj subclass is read as a raw weight
    def keep(module: nn.Module, fqn: str = "") -> bool:
        return (
            type(module) is nn.Linear
            and module.in_features % multiple == 0
            and module.out_features % multiple == 0
        )

    return keep


FP8_GRANULARITIES = ("row", "tensor")  # torchao's dynamic activation scales: per row or per tensor


def _fp8_torchao(module: nn.Module, granularity: str = "row") -> PreparedModel:
    from torchao.quantization import quantize_

    try:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor

        config = Float8DynamicActivationFloat8WeightConfig(
            granularity=PerRow() if granularity == "row" else PerTensor())
    except ImportError:  # torchao < 0.10 spelled it as a function
        from torchao.quantization import PerRow, PerTensor, float8_dynamic_activation_float8_weight

        config = float8_dynamic_activation_float8_weight(
            granularity=PerRow() if granularity == "row" else PerTensor())
    module = module.to(dtype=torch.bfloat16)
    quantize_(module, config, filter_fn=_linear_filter(16))
    return PreparedModel(module, "fp8", torch.bfloat16, library=f"torchao-{granularity}")


def _fp8_transformer_engine(module: nn.Module) -> PreparedModel:
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling, Format

    module = module.to(dtype=torch.bfloat16)
    keep = _linear_filter(16)

    def swap(parent: nn.Module) -> None:
        for name, child in parent.named_children():
            if keep(child):
                layer = te.Linear(
                    child.in_features,
                    child.out_features,
                    bias=child.bias is not None,
                    params_dtype=torch.bfloat16,
                    device=child.weight.device,
                )
                with torch.no_grad():
                    layer.weight.copy_(child.weight)
                    if child.bias is not None:
                        layer.bias.copy_(child.bias)
                setattr(parent, name, layer)
            else:
                swap(child)

    swap(module)
    recipe = DelayedScaling(fp8_format=Format.HYBRID)
    return PreparedModel(
        module,
        "fp8",
        torch.bfloat16,
        context=lambda: te.fp8_autocast(enabled=True, fp8_recipe=recipe),
        library="transformer_engine",
    )


def fp8_path(granularity: str = "row") -> PrecisionPath:
    """The FP8 conversion with torchao's dynamic scales per ``granularity`` (row: one scale
    per activation row and weight column; tensor: one per tensor, cheaper to compute),
    else Transformer Engine. Off sm89+ it raises PrecisionUnavailable with the reason."""
    if granularity not in FP8_GRANULARITIES:
        raise UsageError(f"fp8 granularity {granularity!r}: choose {' or '.join(FP8_GRANULARITIES)}")

    def path(module: nn.Module, info: DeviceInfo) -> PreparedModel:
        if not info.fp8:
            raise PrecisionUnavailable(f"fp8 needs a CUDA GPU of sm89 or later; {info.name} has none")
        try:
            return _fp8_torchao(module, granularity)
        except ImportError:
            pass
        try:
            return _fp8_transformer_engine(module)
        except ImportError as exc:
            raise PrecisionUnavailable(f"fp8 needs torchao or Transformer Engine: {GPU_HINT}") from exc

    return path


_fp8 = fp8_path("row")


def _fp4_config() -> Any:
    # torchao has renamed these configs between releases; take the first one present
    from torchao.prototype.mx_formats import inference_workflow as wf

    if hasattr(wf, "NVFP4DynamicActivationNVFP4WeightConfig"):
        return wf.NVFP4DynamicActivationNVFP4WeightConfig(use_dynamic_per_tensor_scale=True)
    if hasattr(wf, "NVFP4InferenceConfig"):
        return wf.NVFP4InferenceConfig(mm_config=wf.NVFP4MMConfig.DYNAMIC)
    fp4 = torch.float4_e2m1fn_x2
    if hasattr(wf, "MXDynamicActivationMXWeightConfig"):
        return wf.MXDynamicActivationMXWeightConfig(activation_dtype=fp4, weight_dtype=fp4)
    return wf.MXFPInferenceConfig(activation_dtype=fp4, weight_dtype=fp4)


def _fp4(module: nn.Module, info: DeviceInfo) -> PreparedModel:
    if not info.fp4:
        raise PrecisionUnavailable(
            f"fp4 needs a CUDA GPU of sm100 (Blackwell) or later; {info.name} has none"
        )
    try:
        from torchao.quantization import quantize_

        config = _fp4_config()
    except (ImportError, AttributeError) as exc:
        raise PrecisionUnavailable(f"fp4 needs torchao with mx_formats: {GPU_HINT}") from exc
    module = module.to(dtype=torch.bfloat16)
    quantize_(module, config, filter_fn=_linear_filter(32))
    return PreparedModel(module, "fp4", torch.bfloat16, library="torchao")


PRECISION_PATHS: dict[str, PrecisionPath] = {
    "fp32": _cast("fp32", torch.float32),
    "bf16": _cast("bf16", torch.bfloat16),
    "fp16": _cast("fp16", torch.float16),
    "fp8": _fp8,
    "fp4": _fp4,
}


def check_precision(precision: str) -> str:
    """Validate a ``--precision`` value."""
    value = (precision or "auto").lower()
    if value not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}", hint=f"choose one of: {', '.join(PRECISIONS)}")
    return value


def auto_precision(info: DeviceInfo) -> str:
    """The fastest format the hardware has (before library checks and the guard)."""
    if info.type != "cuda":
        return "fp32"
    if info.fp4:
        return "fp4"
    if info.fp8:
        return "fp8"
    if info.bf16:
        return "bf16"
    return "fp16" if info.fp16 else "fp32"


def ladder(start: str) -> list[str]:
    """``start`` and every level below it: fp4 -> fp8 -> bf16 -> fp32."""
    levels = [start]
    while levels[-1] in STEP_DOWN:
        levels.append(STEP_DOWN[levels[-1]])
    return levels


def mean_cosine(candidate: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean row-wise cosine similarity, computed in float32."""
    a = candidate.detach().float().flatten(1)
    b = reference.detach().float().flatten(1).to(a.device)
    return float(torch.nn.functional.cosine_similarity(a, b, dim=1, eps=1e-12).mean())


@dataclass
class PrecisionStep:
    precision: str
    accepted: bool
    cosine: float | None = None
    reason: str = ""


T = TypeVar("T")


@dataclass
class PrecisionChoice(Generic[T]):
    """Outcome of the guard: the precision used, its candidate and every step tried."""

    requested: str
    precision: str
    candidate: T
    cosine: float | None
    min_cosine: float
    steps: list[PrecisionStep] = field(default_factory=list)

    def summary(self) -> str:
        parts = []
        for s in self.steps:
            cos = "" if s.cosine is None else f" cos={s.cosine:.5f}"
            parts.append(f"{s.precision}:{'ok' if s.accepted else 'no'}{cos}")
        return f"{self.requested} -> {self.precision} ({', '.join(parts)})"


@dataclass
class _Guard(Generic[T]):
    """One run of the guard: candidates built and compared with the fp32 reference, every
    step recorded (the choices share the list)."""

    requested: str
    prepare: Callable[[str], T]
    embed: Callable[[T], torch.Tensor]
    reference: torch.Tensor | None
    min_cosine: float
    level: int  # how loudly a precision that cannot run is reported
    steps: list[PrecisionStep] = field(default_factory=list)

    def fp32(self) -> PrecisionChoice[T]:
        candidate = self.prepare("fp32")
        self.steps.append(PrecisionStep("fp32", True, 1.0, "reference"))
        return PrecisionChoice(self.requested, "fp32", candidate, 1.0, self.min_cosine, self.steps)

    def check(self, precision: str) -> PrecisionChoice[T] | None:
        """The choice of ``precision`` when it runs here and passes the guard, else None."""
        try:
            candidate = self.prepare(precision)
        except PrecisionUnavailable as exc:
            self.steps.append(PrecisionStep(precision, False, None, str(exc)))
            log.log(self.level, "precision %s unavailable, stepping down: %s", precision, exc)
            return None
        if self.reference is None:
            self.reference = self.embed(self.prepare("fp32"))
        try:
            cosine = mean_cosine(self.embed(candidate), self.reference)
        except (RuntimeError, NotImplementedError, TypeError) as exc:  # kernel missing at run time
            reason = f"{precision} failed on the calibration batch: {exc}"
            self.steps.append(PrecisionStep(precision, False, None, reason))
            log.warning("precision %s, stepping down", reason)
            return None
        if cosine >= self.min_cosine and cosine == cosine:  # NaN never passes
            self.steps.append(PrecisionStep(precision, True, cosine, "passed the guard"))
            log.info("precision %s: mean cosine %.5f >= %.4f", precision, cosine, self.min_cosine)
            return PrecisionChoice(self.requested, precision, candidate, cosine, self.min_cosine,
                                   self.steps)
        reason = f"mean cosine {cosine:.5f} vs fp32 is below {self.min_cosine}"
        self.steps.append(PrecisionStep(precision, False, cosine, reason))
        log.warning("precision %s failed the guard (%s), stepping down", precision, reason)
        return None


def _faster(held: tuple[PrecisionChoice[T], float], other: tuple[PrecisionChoice[T], float],
            steps: list[PrecisionStep]) -> PrecisionChoice[T]:
    """Of two passing precisions with their calibration times, the faster (the slower's
    step says why it lost)."""
    faster, slower = (held, other) if held[1] <= other[1] else (other, held)
    loser = slower[0].precision
    why = (f"slower than {faster[0].precision} here ({slower[1] * 1e3:.1f} vs "
           f"{faster[1] * 1e3:.1f} ms per calibration batch)")
    steps.append(PrecisionStep(loser, False, slower[0].cosine, why))
    log.info("precision %s is slower than %s on this device, using %s", loser,
             faster[0].precision, faster[0].precision)
    return faster[0]


def choose_precision(
    requested: str,
    info: DeviceInfo,
    *,
    prepare: Callable[[str], T],
    embed: Callable[[T], torch.Tensor],
    reference: torch.Tensor | None = None,
    min_cosine: float = DEFAULT_MIN_COSINE,
    seconds: Callable[[T], float] | None = None,
) -> PrecisionChoice[T]:
    """Pick and verify a precision.

    ``prepare(precision)`` builds a candidate (raising ``PrecisionUnavailable`` if it
    cannot run here); ``embed(candidate)`` returns its calibration embeddings. The fp32
    candidate is the reference and is always accepted.

    With ``seconds(candidate)`` (the time of one calibration forward) ``auto`` also keeps
    a format only if it is faster than the next level down that passes: FP8 through
    torchao's dynamic per-row quantisation passed the guard on an H200 but ran ViT-B/16 at
    0.41x bf16's images/s (benchmarks/RESULTS.md), so "fastest the hardware has" must be
    measured, not assumed. An explicit ``--precision`` is never second-guessed for speed.
    """
    requested = check_precision(requested)
    start = auto_precision(info) if requested == "auto" else requested
    # an explicit request that fails is worth a warning; auto stepping down is routine
    level = logging.INFO if requested == "auto" else logging.WARNING
    guard = _Guard(requested, prepare, embed, reference, min_cosine, level)
    timed = seconds if requested == "auto" else None
    held: tuple[PrecisionChoice[T], float] | None = None  # passed, waiting for the level below
    for precision in ladder(start):
        if precision == "fp32":  # fp32 is never faster than a passing low precision
            return held[0] if held is not None else guard.fp32()
        choice = guard.check(precision)
        if choice is None:
            continue
        if timed is None:
            return choice
        if held is None and STEP_DOWN.get(precision, "fp32") == "fp32":
            return choice  # only fp32 below: nothing to race against
        took = timed(choice.candidate)
        if held is None:
            held = (choice, took)
            continue
        return _faster(held, (choice, took), guard.steps)
    raise AssertionError("unreachable: the ladder always ends at fp32")


def prepare_module(
    module: nn.Module,
    precision: str,
    info: DeviceInfo,
    paths: dict[str, PrecisionPath] | None = None,
    copy_module: bool = True,
) -> PreparedModel:
    """Convert (a copy of) ``module`` to ``precision`` through the path table."""
    table = {**PRECISION_PATHS, **(paths or {})}
    if precision not in table:
        raise PrecisionUnavailable(f"no path for precision {precision}")
    target = copy.deepcopy(module) if copy_module else module
    return table[precision](target, info)


@contextlib.contextmanager
def running(prepared: PreparedModel) -> Iterator[None]:
    """Inference mode plus the path's own context (e.g. Transformer Engine's fp8_autocast)."""
    with torch.inference_mode(), prepared.context():
        yield
