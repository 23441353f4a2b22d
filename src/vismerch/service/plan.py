"""Plan a workload (embed, search, fine-tune) on candidate GPUs: the JSON ``vismerch plan --json``
prints, from a typed request. Each field is checked on its own first, so a bad value is an
InvalidInput naming that field (the planner's own errors only name CLI flags)."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vismerch.errors import InvalidInput, UsageError

MAX_COUNT = 1e15  # images, vectors, queries: beyond any catalog, still finite in every formula
MAX_DEADLINE_S = 10 * 365 * 86400.0
MAX_MODEL_SIZE = 1_000_000  # width, depth, patch, resolution, mlp_dim of a vit: spec
Count = str | float


class PlanRequest(BaseModel):
    """What to plan. Counts take numbers or "50M"-style text; deadline "24h"-style text or hours."""

    model_config = ConfigDict(extra="forbid")
    workload: Literal["embed", "search", "finetune"] = "embed"
    model: str = Field("vit-b-16", min_length=1, max_length=300,
                       description="Preset (vit-b-16, vit-l-14, ...) or "
                                   "vit:width=..,depth=..,patch=..,resolution=..")
    images: Count | None = Field(None, description="Images to embed or train on (embed, finetune)")
    epochs: float = Field(1.0, gt=0, le=1000, description="Fine-tune epochs")
    vectors: Count | None = Field(None, description="Search: vectors in the index")
    dim: int = Field(768, ge=1, le=65536, description="Search: vector dimension")
    queries: Count | None = Field(None, description="Search: queries to answer")
    deadline: str | float | None = Field(None, description="Finish within, e.g. 24h (a number is hours)")
    gpus: list[str] | str | None = Field(None, description="GPU names (a list or a comma list); default all")
    precision: str = Field("auto", max_length=10, description="auto, fp32, tf32, bf16, fp8 or fp4")
    whole_nodes: bool = False
    set: dict[str, str | float] | None = Field(
        None, max_length=64,
        description="Assumptions or GPU fields: {utilisation: 0.8, h100.rent_usd_per_h: 2.1}")


class PlanResult(BaseModel):
    """The plan as ``vismerch plan --json`` prints it (options ranked cheapest rented first)."""

    model_config = ConfigDict(extra="allow")
    workload: dict[str, Any]
    options: list[dict[str, Any]]
    assumptions: dict[str, Any]
    sensitivity: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    notes: list[str]
    plots: list[str] = Field(default_factory=list)


def _field(name: str, check: Any, *args: Any) -> Any:
    """``check(*args)`` with any UsageError re-raised as InvalidInput naming ``name``."""
    try:
        return check(*args)
    except UsageError as exc:
        message = exc.message if exc.message.startswith(f"{name}:") else f"{name}: {exc.message}"
        raise InvalidInput(name, message, hint=exc.hint) from None


def _count(req: PlanRequest, name: str) -> float | None:
    from vismerch.plan.units import parse_count

    value = getattr(req, name)
    if value is None:
        return None
    if isinstance(value, str) and len(value) > 40:
        raise InvalidInput(name, f"{name}: too long to be a count")
    n = _field(name, parse_count, value, name)
    if n > MAX_COUNT:
        raise InvalidInput(name, f"{name}: at most {MAX_COUNT:.0e}, got {value!r}")
    return n


def _overrides(req: PlanRequest, catalog: Any) -> tuple[Any, Any]:
    """(Assumptions, catalog) with ``set`` applied, each entry checked alone."""
    from vismerch.plan.assumptions import Assumptions

    plain: dict[str, str] = {}
    per_gpu: dict[str, dict[str, str]] = {}
    for key, value in (req.set or {}).items():
        name = f"set.{key}"
        text = str(value).strip()
        if not key.strip() or not text or len(key) > 100 or len(text) > 100:
            raise InvalidInput(name, f"{name}: expected a name and a value")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(name, f"{name}: must be a finite number")
        if "." in key:
            gpu, _, field = key.partition(".")
            _field(name, catalog.with_fields, {gpu.lower(): {field: text}})
            per_gpu.setdefault(gpu.lower(), {})[field] = text
        else:
            _field(name, Assumptions, {key: text})
            plain[key] = text
    assumptions = Assumptions(plain)
    return assumptions, catalog.with_fields(per_gpu) if per_gpu else catalog


def _checked_shape(req: PlanRequest) -> dict[str, Any]:
    """The request's counts, each one its workload needs present, and a model in range."""
    from vismerch.plan.workloads import get_model

    counts = {name: _count(req, name) for name in ("images", "vectors", "queries")}
    if req.workload == "search":
        for name in ("vectors", "queries"):
            if counts[name] is None:
                raise InvalidInput(name, f"{name}: the search workload needs it", hint="e.g. 100M")
    elif counts["images"] is None:
        raise InvalidInput("images", f"images: the {req.workload} workload needs it", hint="e.g. 50M")
    if req.workload != "search":
        config = _field("model", get_model, req.model)
        sizes = {k: v for k, v in vars(config).items() if isinstance(v, int) and not isinstance(v, bool)}
        if any(v > MAX_MODEL_SIZE for v in sizes.values()):
            raise InvalidInput("model", f"model: sizes above {MAX_MODEL_SIZE:,} are not a ViT this plans")
    return counts


def _checked_deadline(deadline: Any) -> Any:
    from vismerch.plan.units import parse_duration

    if deadline is not None:
        if isinstance(deadline, str) and len(deadline) > 40:
            raise InvalidInput("deadline", "deadline: too long to be a duration")
        if _field("deadline", parse_duration, deadline) > MAX_DEADLINE_S:
            raise InvalidInput("deadline", "deadline: at most ten years")
    return deadline


def make_plan(req: PlanRequest) -> dict[str, Any]:
    """The plan JSON for ``req`` (the same object ``vismerch plan --json`` prints)."""
    from vismerch.plan import planner
    from vismerch.plan.hardware import PRECISIONS, Catalog
    catalog = Catalog.load()
    assumptions, catalog = _overrides(req, catalog)
    counts = _checked_shape(req)
    deadline = _checked_deadline(req.deadline)
    precision = req.precision.strip().lower()
    if precision not in ("auto", *PRECISIONS, "fp16", "int8"):
        raise InvalidInput("precision", f"precision: unknown {req.precision!r}",
                           hint="auto, fp32, tf32, bf16, fp8 or fp4")
    gpus = req.gpus.split(",") if isinstance(req.gpus, str) else req.gpus
    gpus = [g.strip() for g in gpus or [] if g.strip()] or None
    for g in gpus or []:
        _field("gpus", catalog.resolve, g)
    try:
        result = planner.make_plan(
            req.workload, model=req.model, images=counts["images"], epochs=req.epochs,
            vectors=counts["vectors"], dim=req.dim, queries=counts["queries"], deadline=deadline,
            gpus=gpus, precision=precision, assumptions=assumptions, catalog=catalog,
            whole_nodes=req.whole_nodes)
        out = result.to_dict()
        out["plots"] = []
        json.dumps(out, allow_nan=False)  # the JSON a client gets must be JSON
    except UsageError as exc:  # a combination no single field check caught
        field = "set" if req.set else "workload"
        raise InvalidInput(field, f"{field}: {exc.message}", hint=exc.hint) from None
    except (ArithmeticError, ValueError):
        field = "set" if req.set else "workload"
        raise InvalidInput(field, f"{field}: these values give figures that are not finite numbers",
                           hint="use values in a realistic range") from None
    return out
