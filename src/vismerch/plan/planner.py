"""``make_plan``: for each candidate GPU, how many, how long, rented and owned cost, what bounds it.

The three workloads share one shape: a per-GPU rate from the roofline (or a measured
one), capped by CPU decode where images are decoded, then a GPU count that meets the
deadline, a parallelism strategy with its reason, and the cost either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vismerch.config import setting
from vismerch.errors import UsageError
from vismerch.plan import cost, parallel
from vismerch.plan.assumptions import Assumptions
from vismerch.plan.calibrate import Calibration, predict_ingest_seconds
from vismerch.plan.hardware import GPU, PRECISIONS, Catalog
from vismerch.plan.roofline import PEAK_KEY, Efficiency, roofline
from vismerch.plan.units import parse_count, parse_duration
from vismerch.plan.workloads import SearchShape, ViTConfig, get_model

WORKLOADS = ("embed", "search", "finetune")
# stored search vectors: element bytes <-> the precision they are scanned in
_VECTOR_PRECISION = {4.0: "fp32", 2.0: "fp16", 1.0: "int8"}
_VECTOR_BYTES = {p: b for b, p in _VECTOR_PRECISION.items()}
_MIN_COSINE = setting(None, "precision_min_cosine")  # what accel/precision.py checks
PRECISION_NOTES = {
    "fp8": "FP8: vismerch's precision guard keeps it only if embeddings stay at mean cosine "
           f">= {_MIN_COSINE} against fp32, else steps back to bf16.",
    "fp4": "FP4 (NVFP4): the largest accuracy risk; the precision guard steps back to FP8 "
           f"when mean cosine against fp32 falls below {_MIN_COSINE} — plan --precision fp8 as well.",
    "int8": "8-bit vectors (scalar quantisation) lose some recall; measure it on your catalog.",
}


@dataclass(frozen=True)
class Workload:
    kind: str
    units: float  # images (x epochs) or queries: what "per million" counts
    unit: str
    model: ViTConfig | None = None
    images: float = 0.0
    epochs: float = 1.0
    search: SearchShape | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "unit": self.unit, "units": self.units}
        if self.model is not None:
            out["model"] = self.model.describe()
        if self.kind != "search":
            out["images"] = self.images
        if self.kind == "finetune":
            out["epochs"] = self.epochs
        if self.search is not None:
            s = self.search
            out.update(vectors=s.vectors, dim=s.dim, queries=s.queries,
                       vector_bytes=s.vector_bytes, index_gb=round(s.index_bytes / 1e9, 2))
        return out


@dataclass
class Option:
    gpu: str
    gpus: int
    precision: str
    hours: float
    gpu_hours: float
    rent_usd: float
    own_usd: float
    bound: str
    strategy: str
    reason: str
    rate_per_gpu: float  # units/s one GPU sustains, all bounds included
    meets_deadline: bool
    efficiency: Efficiency
    capex_usd: float
    breakeven_utilisation: float | None
    breakeven_months: float | None
    units: float
    notes: list[str] = field(default_factory=list)
    min_gpus: int = 1
    gpu_rate: float = 0.0  # embed: images/s of the GPU alone (before the decode bound)

    def to_dict(self) -> dict[str, Any]:
        per_m = 1e6 / self.units
        return {
            "gpu": self.gpu, "gpus": self.gpus, "precision": self.precision,
            "hours": round(self.hours, 4), "gpu_hours": round(self.gpu_hours, 3),
            "rent_usd": round(self.rent_usd, 2), "own_usd": round(self.own_usd, 2),
            "rent_usd_per_million": round(self.rent_usd * per_m, 4),
            "own_usd_per_million": round(self.own_usd * per_m, 4),
            "bound": self.bound, "strategy": self.strategy, "reason": self.reason,
            "rate_per_gpu": round(self.rate_per_gpu, 2), "meets_deadline": self.meets_deadline,
            "efficiency": {"compute": round(self.efficiency.compute, 4),
                           "memory": round(self.efficiency.memory, 4),
                           "comm": round(self.efficiency.comm, 4), "source": self.efficiency.source},
            "own_capex_usd": round(self.capex_usd * self.gpus, 2),
            "breakeven_utilisation": _r(self.breakeven_utilisation, 3),
            "breakeven_months": _r(self.breakeven_months, 1), "notes": self.notes,
        }


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class Plan:
    workload: Workload
    options: list[Option]
    skipped: list[dict[str, str]]
    assumptions: Assumptions
    sensitivity: list[dict[str, Any]]
    notes: list[str]
    deadline_s: float | None
    calibration: Calibration | None = None
    catalog: Catalog | None = None

    def to_dict(self) -> dict[str, Any]:
        workload = self.workload.describe()
        workload["deadline_h"] = None if self.deadline_s is None else round(self.deadline_s / 3600, 4)
        out = {
            "workload": workload,
            "options": [o.to_dict() for o in self.options],
            "assumptions": self.assumptions.to_dict(),
            "sensitivity": self.sensitivity,
            "skipped": self.skipped,
            "notes": self.notes,
        }
        if self.calibration is not None:
            out["calibration"] = self.calibration.describe()
        return out


def resolve_precision(gpu: GPU, requested: str, workload: Workload) -> tuple[str | None, str]:
    """(precision, note) — precision None means this GPU cannot run the request."""
    req = requested.lower()
    if req not in ("auto", *PRECISIONS, "fp16", "int8"):
        raise UsageError(f"unknown precision {requested!r}",
                         hint="auto, fp32, tf32, bf16, fp8 or fp4")
    if workload.kind == "search":
        prec = _VECTOR_PRECISION.get(workload.search.vector_bytes, "fp16") if req == "auto" else (
            {"bf16": "fp16", "fp8": "int8", "tf32": "fp32"}.get(req, req))
        if prec == "fp4":
            return None, "4-bit vectors are not modelled"
        return prec, ""
    if workload.kind == "finetune":
        if req == "fp4":
            return None, "FP4 training is not modelled"
        prec = ("bf16" if gpu.supports("bf16") else "fp32") if req == "auto" else req
    else:
        prec = gpu.auto_precision() if req == "auto" else req
    prec = "bf16" if prec == "fp16" else prec
    if not gpu.supports(prec):
        return None, f"{gpu.key} has no {prec} tensor cores ({gpu.arch})"
    return prec, ""


def efficiency_for(gpu: GPU, precision: str, a: Assumptions, cal: Calibration | None) -> Efficiency:
    if cal is not None:
        return cal.efficiency(gpu.key, precision, a)
    return Efficiency(a.compute_eff(PEAK_KEY.get(precision, precision)), a.memory_eff, a.comm_eff)


def _gpus_for(seconds_on_one: float, deadline_s: float | None, step: int, a: Assumptions,
              gpu: GPU, whole_nodes: bool, serial: float = 0.0) -> tuple[int, bool]:
    """GPUs that meet the deadline when n of them take seconds_on_one * (serial + (1-serial)/n)."""
    cap = int(a.max_gpus)
    if deadline_s is None:
        n = step
    else:
        room = deadline_s / seconds_on_one - serial
        if room <= 0:  # the serial share alone outlasts the deadline
            return cap // step * step or step, False
        n = max(step, math.ceil((1 - serial) / room - 1e-9))
    n = math.ceil(n / step) * step
    if whole_nodes:
        n = math.ceil(n / gpu.gpus_per_node) * gpu.gpus_per_node
    return (n, True) if n <= cap else (cap // step * step or step, False)


def _measured_ingest(w: Workload, gpu: GPU, prec: str, cal: Calibration | None,
                     roofline_bound: str) -> tuple[float, float, str, str] | None:
    """(rate, seconds, bound, note) from a measured streaming ingest of this model on this
    card (start-up, then the measured share of the slower of decode and encoder), or None."""
    figures = cal.ingest_figures(gpu.key, w.model.name, prec) if cal else None
    if figures is None:
        return None
    bound = "decode" if figures.decode_img_s < figures.encoder_img_s else roofline_bound
    note = (f"measured ingest: start-up {figures.startup_s:.1f} s, then {figures.pipeline_eff:.0%} "
            f"of the slower of decode {figures.decode_img_s:,.0f} and encoder "
            f"{figures.encoder_img_s:,.0f} images/s ({figures.source})")
    return (figures.pipeline_eff * figures.ceiling_img_s, predict_ingest_seconds(figures, w.images),
            bound, note)


def _embed(w: Workload, gpu: GPU, prec: str, eff: Efficiency, a: Assumptions,
           cal: Calibration | None, deadline_s: float | None, whole_nodes: bool) -> Option | str:
    model = w.model
    t = parallel.inference_tp(model, gpu, prec, a)
    if t is None:
        return f"{model.name} does not fit one NVLink domain of {gpu.key} (TP+PP not modelled)"
    weights = model.params() * parallel.WEIGHT_BYTES[prec]
    budget = parallel.memory_budget(gpu, a)
    batch = int(a.embed_batch)
    while batch > 1 and weights / t + batch * model.inference_live_bytes(a.act_bytes) > budget:
        batch //= 2
    act = parallel.activation_bytes(prec, a)
    timing = roofline(model.forward_flops() * batch, model.activation_traffic(act) * batch + weights,
                      gpu, prec, eff)
    tp_eff = parallel.tensor_parallel_efficiency(model, gpu, prec, eff, a, t, batch)
    gpu_rate = batch / timing.seconds * tp_eff
    notes = [f"tensor parallel x{t} keeps {tp_eff:.0%} of the GPU time useful"] if t > 1 else []
    measured = cal.measured_images_per_s(gpu.key, model.name, prec) if cal and t == 1 else None
    if measured:
        gpu_rate = measured
        notes.append(f"measured {measured:,.0f} images/s for {model.name} used directly")
    decode = parallel.decode_rate(a)
    rate = min(gpu_rate, decode)
    bound = "decode" if decode < gpu_rate else ("communication" if tp_eff < 0.5 else timing.bound)
    if bound == "decode":
        notes.append(f"GPU alone could do {gpu_rate:,.0f} images/s; {a.cpu_cores_per_gpu:g} cores "
                     f"decode {decode:,.0f}: add cores, pre-resize images or decode on GPU")
    gpu_s = w.images / rate
    measured_run = _measured_ingest(w, gpu, prec, cal, timing.bound) if t == 1 else None
    if measured_run is not None:
        rate, gpu_s, bound, note = measured_run
        notes.append(note)
    serial = a.dp_serial_fraction
    n, ok = _gpus_for(gpu_s, deadline_s, t, a, gpu, whole_nodes, serial)
    strat = parallel.recommend(model, gpu, prec, n, a, training=False)
    dp_eff = parallel.amdahl_efficiency(n / t, serial)
    if serial > 0:
        notes.append(f"data-parallel efficiency {dp_eff:.0%} at {n // t} replicas "
                     f"(serial share {serial:.3f})")
    option = _option(gpu, prec, eff, a, w, _Sizing(n, gpu_s / (n * dp_eff), rate * dp_eff, bound, ok, t),
                     strat, notes)
    if isinstance(option, Option):
        option.gpu_rate = gpu_rate
    return option


def _finetune(w: Workload, gpu: GPU, prec: str, eff: Efficiency, a: Assumptions,
              deadline_s: float | None, whole_nodes: bool) -> Option | str:
    model = w.model
    states = model.params() * parallel.OPTIMIZER_BYTES_PER_PARAM
    room = parallel.memory_budget(gpu, a) - model.train_activation_bytes()
    if room <= 0:
        return f"one image's activations of {model.name} exceed {gpu.key} memory (TP not modelled)"
    fsdp = states > room
    min_n = max(1, math.ceil(states / room)) if fsdp else 1
    steps = math.ceil(w.images * w.epochs / a.global_batch)
    top = int(min(a.global_batch, a.max_gpus))
    if min_n > top:
        return f"{model.name} needs {min_n} GPUs to hold its states; global batch allows {top}"
    n = min_n
    ok = True
    if deadline_s is not None:  # smallest count that meets it, else the fastest (one pass)
        fastest_s = math.inf
        for c in range(min_n, top + 1):
            run_s = steps * parallel.dp_step(model, gpu, prec, eff, a, c, fsdp=fsdp).step_s
            if run_s <= deadline_s:
                n = c
                break
            if run_s < fastest_s:
                fastest_s, n = run_s, c
        else:
            ok = False
    if whole_nodes:
        n = min(top, math.ceil(n / gpu.gpus_per_node) * gpu.gpus_per_node)
    step = parallel.dp_step(model, gpu, prec, eff, a, n, fsdp=fsdp)
    hours_s = steps * step.step_s
    bound_at = parallel.comm_bound_gpus(model, gpu, prec, eff, a, fsdp=fsdp)
    strat = parallel.recommend(model, gpu, prec, n, a, training=True, comm_bound_at=bound_at)
    notes = [f"data parallel turns communication-bound at {bound_at} GPUs "
             f"(global batch {a.global_batch:g})" if bound_at else
             f"data parallel stays compute-bound up to {top} GPUs (global batch {a.global_batch:g})"]
    if not ok:
        notes.append("deadline not reachable: the fastest count is shown")
    rate = w.units / (hours_s * n)
    return _option(gpu, prec, eff, a, w, _Sizing(n, hours_s, rate, step.bound, ok, min_n), strat, notes)


def _search(w: Workload, gpu: GPU, prec: str, eff: Efficiency, a: Assumptions,
            deadline_s: float | None, whole_nodes: bool) -> Option | str:
    s = w.search
    if prec != _VECTOR_PRECISION.get(s.vector_bytes, prec):
        s = replace(s, vector_bytes=_VECTOR_BYTES[prec])
    shards = max(1, math.ceil(s.index_bytes / parallel.memory_budget(gpu, a)))
    flops, traffic = s.batch_flops_bytes(a.query_batch, s.vectors / shards)
    timing = roofline(flops, traffic, gpu, prec, eff)
    group_rate = a.query_batch / timing.seconds  # queries/s of one set of shards
    gpu_s = s.queries / group_rate * shards
    n, ok = _gpus_for(gpu_s, deadline_s, shards, a, gpu, whole_nodes)
    replicas = max(1, n // shards)
    name = f"shard x{shards}" + (f" + replicate x{replicas}" if replicas > 1 else "")
    reason = (f"the {s.index_bytes / 1e9:,.0f} GB index needs {shards} GPUs' memory; every query "
              "batch scans each shard, replicas split the queries" if shards > 1 else
              "the index fits one GPU; replicas split the queries, nothing is synchronised")
    strat = parallel.Strategy(name, dp=replicas, reason=reason)
    notes = [f"one pass over the vectors serves {a.query_batch:g} queries"]
    sizing = _Sizing(n, gpu_s / n, group_rate / shards, timing.bound, ok, shards)
    return _option(gpu, prec, eff, a, w, sizing, strat, notes)


@dataclass(frozen=True)
class _Sizing:
    """How many GPUs an option takes and what each of them does."""

    n: int
    hours_s: float  # wall seconds
    rate: float  # units per second per GPU
    bound: str
    ok: bool  # meets the deadline
    min_gpus: int


def _option(gpu: GPU, prec: str, eff: Efficiency, a: Assumptions, w: Workload, sizing: _Sizing,
            strat: parallel.Strategy, notes: list[str]) -> Option:
    n, hours = sizing.n, sizing.hours_s / 3600
    rent, own = cost.job_costs(hours * n, gpu, a)
    if prec in PRECISION_NOTES:
        notes = [*notes, PRECISION_NOTES[prec]]
    return Option(
        gpu=gpu.key, gpus=n, precision=prec, hours=hours, gpu_hours=hours * n, rent_usd=rent,
        own_usd=own, bound=sizing.bound, strategy=strat.name, reason=strat.reason,
        rate_per_gpu=sizing.rate, meets_deadline=sizing.ok, efficiency=eff,
        capex_usd=cost.ownership(gpu, a).capex_usd,
        breakeven_utilisation=cost.breakeven_utilisation(gpu, a),
        breakeven_months=cost.breakeven_months(gpu, a), units=w.units, notes=notes,
        min_gpus=sizing.min_gpus,
    )


UNVERIFIED = ("fp8", "fp4")  # formats auto plans only where a recorded measurement shows them faster


def _measured(cal: Calibration | None, gpu: GPU, w: Workload, prec: str) -> bool:
    return bool(cal and w.model and cal.measured_images_per_s(gpu.key, w.model.name, prec))


def _fastest_embed(w: Workload, gpu: GPU, first: Option, a: Assumptions, cal: Calibration | None,
                   deadline_s: float | None, whole_nodes: bool) -> Option:
    """``auto`` as ingest runs it: the lower tensor-core formats race the fastest one and the
    quickest wins. FP8 and FP4 take part only with a recorded measurement of this model on
    this card (``--calibrate``): their datasheet peaks are not what a model gets (torchao's
    per-row FP8 ran ViT-B/16 at 0.41x bf16 on an H200), so without one bf16 is planned."""
    verified = first.precision not in UNVERIFIED or _measured(cal, gpu, w, first.precision)
    candidates = [first] if verified else []
    dropped = [] if candidates else [first.precision]
    for prec in ("fp8", "bf16"):
        if not gpu.supports(prec) or PRECISIONS.index(prec) >= PRECISIONS.index(first.precision):
            continue  # only the formats below the one auto picked
        if prec in UNVERIFIED and not _measured(cal, gpu, w, prec):
            dropped.append(prec)
            continue
        other = evaluate(w, gpu, prec, a, cal, deadline_s, whole_nodes)
        if isinstance(other, Option):
            candidates.append(other)
    if not candidates:
        return first
    best = min(candidates, key=lambda o: (o.hours, o.gpus, -o.gpu_rate))
    if dropped:
        best.notes.append(f"auto: {', '.join(dropped)} unverified on {gpu.key} (no recorded "
                          f"measurement of {w.model.name} there; --calibrate with a benchmarks/gpu.py "
                          f"run to consider it): {best.precision} planned")
    elif best is not first:
        best.notes.append(f"auto: {best.precision} runs {best.gpu_rate:,.0f} images/s on the GPU, "
                          f"{first.precision} {first.gpu_rate:,.0f}: {best.precision} is used")
    return best


def evaluate(w: Workload, gpu: GPU, precision: str, a: Assumptions, cal: Calibration | None,
             deadline_s: float | None, whole_nodes: bool = False) -> Option | str:
    """One GPU option, or the reason it cannot run the workload."""
    eff = efficiency_for(gpu, precision, a, cal)
    if w.kind == "embed":
        return _embed(w, gpu, precision, eff, a, cal, deadline_s, whole_nodes)
    if w.kind == "finetune":
        return _finetune(w, gpu, precision, eff, a, deadline_s, whole_nodes)
    return _search(w, gpu, precision, eff, a, deadline_s, whole_nodes)


def build_workload(kind: str, *, model: str | ViTConfig | dict = "vit-b-16", images=None,
                   epochs: float = 1.0, vectors=None, dim: int = 768, queries=None,
                   a: Assumptions) -> Workload:
    if kind == "search":
        if vectors is None or queries is None:
            raise UsageError("--workload search needs --vectors and --queries",
                             hint="e.g. --vectors 100M --dim 768 --queries 10M")
        if int(dim) < 1:
            raise UsageError("--dim must be at least 1")
        q = parse_count(queries, "--queries")
        shape = SearchShape(parse_count(vectors, "--vectors"), int(dim), q, a.vector_bytes,
                            a.scan_fraction)
        return Workload("search", q, "queries", search=shape)
    if kind not in WORKLOADS:
        raise UsageError(f"unknown workload {kind!r}", hint="embed, search or finetune")
    if images is None:
        raise UsageError(f"--workload {kind} needs --images", hint="e.g. --images 50M")
    n_images = parse_count(images, "--images")
    if kind == "finetune":
        if not epochs or epochs <= 0:
            raise UsageError("--epochs must be more than zero")
        return Workload("finetune", n_images * epochs, "training images", get_model(model),
                        n_images, float(epochs))
    return Workload("embed", n_images, "images", get_model(model), n_images)


def make_plan(
    workload: str = "embed", *, deadline=None, gpus: Sequence[str] | None = None,
    precision: str = "auto", assumptions: Assumptions | Mapping[str, Any] | None = None,
    catalog: Catalog | None = None, calibration: Calibration | None = None,
    whole_nodes: bool = False, **shape: Any,
) -> Plan:
    """Plan a workload on each candidate GPU; options ranked cheapest rented first.

    ``shape``: the workload's size as ``build_workload`` takes it (``model``, ``images``,
    ``epochs``, ``vectors``, ``dim``, ``queries``); ``images``/``vectors``/``queries`` take
    numbers or "50M"-style strings; ``deadline`` takes seconds-as-"24h"-style strings or a
    number of hours.
    """
    a = assumptions if isinstance(assumptions, Assumptions) else Assumptions(assumptions)
    catalog = catalog or Catalog.load()
    notes: list[str] = []
    if calibration is not None:
        notes += calibration.notes
        a = _measured_assumptions(a, calibration)
    w = build_workload(workload, a=a, **shape)
    deadline_s = None if deadline in (None, "") else parse_duration(deadline)
    keys = [catalog.resolve(g) for g in (gpus or catalog.names())]
    options: list[Option] = []
    skipped: list[dict[str, str]] = []
    for key in dict.fromkeys(keys):
        gpu = catalog.get(key)
        prec, why = resolve_precision(gpu, precision, w)
        result = evaluate(w, gpu, prec, a, calibration, deadline_s, whole_nodes) if prec else why
        if prec and precision.lower() == "auto" and w.kind == "embed" and isinstance(result, Option):
            result = _fastest_embed(w, gpu, result, a, calibration, deadline_s, whole_nodes)
        if isinstance(result, str):
            skipped.append({"gpu": key, "reason": result})
        else:
            options.append(result)
    options.sort(key=lambda o: (not o.meets_deadline, o.rent_usd, o.hours))
    sens: list[dict[str, Any]] = []
    if options:
        best = options[0]

        def again(g: GPU, aa: Assumptions) -> tuple[float, int, float, float]:
            o = evaluate(w, g, best.precision, aa, calibration, deadline_s, whole_nodes)
            return (o.hours, o.gpus, o.rent_usd, o.own_usd) if isinstance(o, Option) else (
                0.0, 0, 0.0, 0.0)

        sens = cost.sensitivity(again, catalog.get(best.gpu), a)
        notes.append(f"sensitivity table is for the top option ({best.gpu} x{best.gpus})")
    if len(options) > 1 and all(o.bound == "decode" for o in options):
        notes.append("every option is decode-bound: the GPU choice hardly changes the time; "
                     "the cheapest GPU-hour wins")
    return Plan(w, options, skipped, a, sens, notes, deadline_s, calibration, catalog)


def _measured_assumptions(a: Assumptions, calibration: Calibration) -> Assumptions:
    """The calibration's measured decode rate and serial share, unless set by hand."""
    if calibration.decode_per_core and not a.is_overridden("decode_per_core"):
        a = a.replace(why="measured by the calibration benchmark",
                      decode_per_core=calibration.decode_per_core)
    if calibration.dp_serial and not a.is_overridden("dp_serial_fraction"):
        a = a.replace(why=f"measured: {calibration.dp_serial[2]}",
                      dp_serial_fraction=calibration.dp_serial[0])
    return a
