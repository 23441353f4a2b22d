"""A/B experiments of a collection's versions: create (with a sample-size plan from recent
traffic), list, results from the event log, stop, promote the winner.

Assignment happens at the storefront (``serve/routes/storefront.py`` with
``experiments/assign.py``); results recompute every visitor's variant from the hashed
visitor id in the log, so a client's label is checked, never trusted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from vismerch.catalog import experiments_store as xstore
from vismerch.catalog import versions_store as vstore
from vismerch.catalog.store import utc_timestamp
from vismerch.errors import Conflict, InvalidInput, NotFound
from vismerch.events import query as q
from vismerch.experiments import stats
from vismerch.experiments.assign import HOLDOUT, assign
from vismerch.service import events, versions
from vismerch.service._util import parse_time
from vismerch.service.models_experiments import Experiment, ExperimentIn
from vismerch.service.workspace import Workspace

PLAN_DAYS = 28  # recent traffic the sample-size plan is estimated from


def _model(row: dict[str, Any]) -> Experiment:
    return Experiment(**{k: v for k, v in row.items() if k in Experiment.model_fields})


def _stamp(text: str | None, field: str) -> str | None:
    ts = parse_time(text, field)
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def _variants(ws: Workspace, collection: str, names: Sequence[str], split: Sequence[float] | None
              ) -> list[dict[str, Any]]:
    if len(names) < 2 or len(set(names)) != len(names):
        raise InvalidInput("variants", "an experiment needs two or more different versions")
    weights = list(split) if split is not None else [100.0 / len(names)] * len(names)
    if len(weights) != len(names):
        raise InvalidInput("split", f"split has {len(weights)} shares for {len(names)} variants")
    if any(not math.isfinite(w) or w <= 0 for w in weights) or abs(sum(weights) - 100.0) > 1e-6:
        raise InvalidInput("split", f"split must be positive percentages summing to 100, got {list(weights)}")
    out = []
    for name, weight in zip(names, weights, strict=True):
        row = vstore.version_row(ws.store, collection, name)
        if row is None:
            elsewhere = vstore.collections_with_version(ws.store, name)
            where = f" (it is a version of {', '.join(elsewhere)})" if elsewhere else ""
            raise InvalidInput("variants", f"{name!r} is not a version of {collection}{where}",
                               hint=f"see: vismerch versions list STORE --collection {collection}")
        out.append({"name": name, "version_id": int(row["id"]), "weight": float(weight)})
    return out


def create_experiment(ws: Workspace, spec: ExperimentIn, *, by: str | None = None) -> Experiment:
    """Start an experiment on ``spec.collection`` (at most one runs per collection)."""
    collection, variants, metric, holdout, min_lift = (spec.collection, spec.variants, spec.metric,
                                                      spec.holdout, spec.min_lift)
    vstore.require_collection(ws.store, collection)
    chosen = _variants(ws, collection, variants, spec.split)
    _check_metric(metric, "metric")
    for g in spec.guardrails:
        _check_metric(g, "guardrails")
    if not 0 <= holdout < 0.5:
        raise InvalidInput("holdout", "holdout must be at least 0 and below 0.5")
    if not 0 < min_lift <= 1:
        raise InvalidInput("min_lift", "min_lift must be above 0 and at most 1 (0.05 = +5%)")
    start = _stamp(spec.starts_at, "starts_at") or utc_timestamp()
    end = _stamp(spec.ends_at, "ends_at")
    if end is not None and end <= start:
        raise InvalidInput("ends_at", "ends_at must be after starts_at")
    if xstore.running(ws.store, collection) is not None:
        raise Conflict(f"{collection} already has a running experiment",
                       hint="stop or promote it first: one experiment per collection at a time")
    events.visitor_salt(ws)  # made now, so the storefront only ever reads it
    plan = plan_experiment(ws, collection, metric=metric, min_lift=min_lift,
                           split=[v["weight"] for v in chosen], holdout=holdout)
    new_id = xstore.insert(ws.store, {
        "collection": collection, "name": spec.name or f"{collection}: {' vs '.join(variants)}",
        "variants": chosen, "holdout": float(holdout), "metric": metric, "guardrails": list(spec.guardrails),
        "min_lift": float(min_lift), "plan": plan, "starts_at": start, "ends_at": end, "created_by": by})
    if new_id is None:  # another writer started one meanwhile
        raise Conflict(f"{collection} already has a running experiment")
    return _model(xstore.get(ws.store, new_id))


def _check_metric(name: str, field: str) -> None:
    stats.get_metric(name, field)  # InvalidInput naming the field and the known metrics


def list_experiments(ws: Workspace, collection: str | None = None) -> list[Experiment]:
    return [_model(r) for r in xstore.select(ws.store, collection)]


def get_experiment(ws: Workspace, experiment_id: int) -> Experiment:
    row = xstore.get(ws.store, experiment_id)
    if row is None:
        raise NotFound("experiment", experiment_id)
    return _model(row)


def plan_experiment(ws: Workspace, collection: str, *, metric: str = "revenue_per_visitor",
                    min_lift: float = 0.05, split: Sequence[float] = (50.0, 50.0),
                    holdout: float = 0.0) -> dict[str, Any] | None:
    """Visitors per variant and days needed to detect ``min_lift``, from the collection's last
    28 days of traffic (None before it has any)."""
    _check_metric(metric, "metric")
    end = datetime.now(UTC)
    con = q.open_events(events.event_log(ws), collection, q.Period(end - timedelta(days=PLAN_DAYS), end))
    table = q.visitor_outcomes(con)
    if table.num_rows < 20:
        return None
    first = table.column("first_seen").to_pylist()
    days = max(1.0, (max(first) - min(first)).total_seconds() / 86400.0)
    data = _data(table)
    mean, variance = stats.get_metric(metric).baseline(data)
    if not mean > 0:
        return None  # e.g. no revenue yet: nothing to size a lift of
    return stats.plan_sample_size(mean, variance, min_lift, split=list(split),
                                  visitors_per_day=table.num_rows / days, traffic_share=1.0 - holdout)


def _data(table: Any, mask: np.ndarray | None = None) -> stats.VisitorData:
    cols = [table.column(k).to_numpy().astype(np.float64)
            for k in ("impressions", "clicks", "orders", "revenue")]
    return stats.VisitorData(*(c if mask is None else c[mask] for c in cols))


def _span(exp: dict[str, Any]) -> tuple[datetime, datetime | None]:
    return parse_time(exp["starts_at"], "starts_at"), parse_time(exp.get("ended_at"), "ended_at")


def _events_of(ws: Workspace, exp: dict[str, Any]) -> Any:
    """A DuckDB connection over the experiment's collection's events while it ran."""
    return q.open_events(events.event_log(ws), exp["collection"], q.Period(*_span(exp)))


def _groups(con: Any, exp: dict[str, Any], until: datetime | None = None,
            arms_of: dict[str, str] | None = None) -> tuple[dict[str, stats.VisitorData], dict[str, int]]:
    """Per variant, the visitor-level outcomes of the experiment's events in ``con`` (before
    ``until``), each visitor's variant recomputed from their hash (remembered in ``arms_of``);
    and data-quality counts."""
    table = q.visitor_outcomes(con, str(exp["id"]), until)
    visitors = table.column("visitor").to_pylist()
    labelled = table.column("labelled").to_pylist()
    arms_of = {} if arms_of is None else arms_of
    arms = []
    for v in visitors:
        if v not in arms_of:
            variant = assign(exp, v)
            arms_of[v] = HOLDOUT if variant is None else variant["name"]
        arms.append(arms_of[v])
    arms_arr = np.asarray(arms, dtype=object)
    groups = {name: _data(table, arms_arr == name) for name in [v["name"] for v in exp["variants"]]}
    quality = {"visitors": len(visitors), "holdout": int((arms_arr == HOLDOUT).sum()),
               "mislabelled": sum(1 for a, b in zip(arms, labelled, strict=True) if b is not None and a != b)}
    return groups, quality


def experiment_results(ws: Workspace, experiment_id: int, *, timeline: bool = True) -> dict[str, Any]:
    """The experiment's statistics now (and, with ``timeline``, the primary metric per variant
    at the end of each day so far, cumulative, with intervals)."""
    exp = xstore.get(ws.store, experiment_id)
    if exp is None:
        raise NotFound("experiment", experiment_id)
    con = _events_of(ws, exp)
    arms_of: dict[str, str] = {}
    groups, quality = _groups(con, exp, arms_of=arms_of)
    split = {v["name"]: v["weight"] * (1.0 - exp["holdout"]) for v in exp["variants"]}
    assigned = {name: d.n for name, d in groups.items()}
    if exp["holdout"]:  # the holdout's share is part of the split the SRM check tests
        split[HOLDOUT], assigned[HOLDOUT] = 100.0 * exp["holdout"], quality["holdout"]
    plan = exp["plan"] or {}
    planned = ({v["name"]: n for v, n in zip(exp["variants"], plan["per_variant"], strict=True)}
               if plan.get("per_variant") else None)
    out = stats.results(groups, split=split, primary=exp["metric"], guardrails=exp["guardrails"],
                        planned_per_variant=planned, assigned=assigned)
    out.update({"experiment": _model(exp).model_dump(), "data_quality": quality})
    if timeline:
        out["timeline"] = _timeline(con, exp, arms_of)
    return out


def _timeline(con: Any, exp: dict[str, Any], arms_of: dict[str, str]) -> list[dict[str, Any]]:
    start, ended = _span(exp)
    end = ended or datetime.now(UTC)
    days = min(60, max(1, math.ceil((end - start).total_seconds() / 86400.0)))
    out = []
    for d in range(1, days + 1):
        until = min(end, start + timedelta(days=d))
        groups, _ = _groups(con, exp, until, arms_of)
        out.append({"until": until.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "variants": _metric_by_variant(exp["metric"], groups)})
    return out


def _metric_by_variant(metric: str, groups: dict[str, stats.VisitorData]) -> list[dict[str, Any]]:
    """The metric of each variant with its 95% interval (normal approximation)."""
    fitted = stats.get_metric(metric).fit(list(groups.values()))
    out = []
    for name, data in groups.items():
        e = fitted.estimate(data)
        half = 1.96 * math.sqrt(e.variance) if math.isfinite(e.variance) else math.nan
        values = {"value": e.value, "ci_low": e.value - half, "ci_high": e.value + half}
        finite = {k: v if math.isfinite(v) else None for k, v in values.items()}
        out.append({"variant": name, "n": e.n, **finite})
    return out


def stop_experiment(ws: Workspace, experiment_id: int, *, by: str | None = None) -> Experiment:
    """End the experiment without a winner: every visitor sees the live version again."""
    exp = get_experiment(ws, experiment_id)
    if not xstore.end(ws.store, experiment_id, "stopped", by=by):
        raise Conflict(f"experiment {experiment_id} is {exp.status}, not running")
    return get_experiment(ws, experiment_id)


def promote_experiment(ws: Workspace, experiment_id: int, variant: str | None = None, *,
                       by: str | None = None) -> Experiment:
    """Publish the winning variant's version and end the experiment. ``variant``: the one to
    publish; default the results' winner (a Conflict while there is none)."""
    exp = get_experiment(ws, experiment_id)
    if exp.status != xstore.RUNNING:
        raise Conflict(f"experiment {experiment_id} is {exp.status}, not running")
    names = [v.name for v in exp.variants]
    if variant is None:
        variant = experiment_results(ws, experiment_id, timeline=False).get("winner")
        if variant is None:
            raise Conflict(f"experiment {experiment_id} has no winner yet",
                           hint="name the variant to promote anyway, or wait for the planned sample")
    if variant not in names:
        raise InvalidInput("variant", f"{variant!r} is not a variant of this experiment ({', '.join(names)})")
    if not xstore.end(ws.store, experiment_id, "promoted", by=by, winner=variant):
        raise Conflict(f"experiment {experiment_id} ended meanwhile")
    versions.publish(ws, exp.collection, variant)
    return get_experiment(ws, experiment_id)
