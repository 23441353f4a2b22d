"""A/B experiments, over ``service.experiments``:

    vismerch experiments create STORE --collection C --variants V1,V2 [--split 50,50] [--metric M] [--json]
    vismerch experiments list|results|stop|promote STORE [ID] ...

Writes are audited with the OS user in the same transaction (``cli.main``), as API writes are
with their key.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.output import JsonOpt, StoreArg
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import say as _say
from vismerch.cli.output import table as _table

experiments_app = typer.Typer(help="A/B tests of a collection's versions: create, list, results, stop, "
                                   "promote.", no_args_is_help=True)
IdArg = Annotated[int, typer.Argument(help="Experiment id (see `vismerch experiments list`).")]


def _workspace(store: Path):
    from vismerch.cli.context import open_workspace

    return open_workspace(store, {})


def _actor() -> str:
    return f"os:{getpass.getuser()}"


def _split(text: str | None) -> list[float] | None:
    from vismerch.errors import InvalidInput

    if not text:
        return None
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidInput("split", f"--split takes percentages like 50,50, got {text!r}") from None


@experiments_app.command("create")
def create(store: StoreArg,
           collection: Annotated[str, typer.Option("--collection", "-c", help="Collection id.")],
           variants: Annotated[str, typer.Option(help="Version names, control first: V1,V2[,V3].")],
           split: Annotated[str | None, typer.Option(help="Percent per variant, e.g. 50,50.")] = None,
           metric: Annotated[str, typer.Option(
               help="revenue_per_visitor | conversion_per_visitor | ctr")] = "revenue_per_visitor",
           guardrails: Annotated[str | None, typer.Option(help="Metrics that must not get worse.")] = None,
           holdout: Annotated[float, typer.Option(help="Share kept on the live version.")] = 0.0,
           min_lift: Annotated[float, typer.Option(help="Relative lift to detect (0.05 = +5%).")] = 0.05,
           ends_at: Annotated[str | None, typer.Option(help="RFC 3339 end (default: until stopped).")] = None,
           json_out: JsonOpt = False) -> None:
    """Start an experiment; prints its id and the sample it needs."""
    from vismerch.service import experiments
    from vismerch.service._util import validated
    from vismerch.service.models_experiments import ExperimentIn

    with _workspace(store) as ws:
        spec = validated(ExperimentIn, {
            "collection": collection, "variants": [v.strip() for v in variants.split(",") if v.strip()],
            "split": _split(split), "metric": metric,
            "guardrails": [g.strip() for g in (guardrails or "").split(",") if g.strip()],
            "holdout": holdout, "min_lift": min_lift, "ends_at": ends_at})
        exp = experiments.create_experiment(ws, spec, by=_actor())
    if json_out:
        _print_json(exp.model_dump())
        return
    plan = exp.plan or {}
    names = ", ".join(_safe(v.name) for v in exp.variants)
    _say(f"experiment {exp.id} running on {_safe(collection)}: {names}")
    if plan:
        days = f"~{plan['days']} days at recent traffic" if plan.get("days") else "traffic unknown"
        _say(f"needs about {max(plan['per_variant']):,} visitors per variant ({days}) to detect "
             f"{exp.min_lift:+.0%} on {exp.metric}")
    else:
        _say("no recent traffic to size it from: results stay 'not yet conclusive' (no sample plan)")


@experiments_app.command("list")
def list_cmd(store: StoreArg, collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
             json_out: JsonOpt = False) -> None:
    """Experiments, oldest first."""
    from vismerch.service import experiments

    with _workspace(store) as ws:
        rows = experiments.list_experiments(ws, collection)
    if json_out:
        _print_json([r.model_dump() for r in rows])
        return
    _table("experiments", ["id", "collection", "variants", "metric", "status", "started", "winner"],
           [[r.id, _safe(r.collection), ", ".join(_safe(v.name) for v in r.variants), r.metric, r.status,
             r.starts_at, _safe(r.winner or "")] for r in rows])


@experiments_app.command("results")
def results_cmd(store: StoreArg, experiment_id: IdArg, json_out: JsonOpt = False) -> None:
    """The primary metric per variant, lifts with intervals, p-values, SRM and status."""
    from vismerch.service import experiments

    with _workspace(store) as ws:
        out = experiments.experiment_results(ws, experiment_id, timeline=json_out)
    if json_out:
        _print_json(out)
        return
    _say(f"status: {out['status']} ({_safe(out['reason'])})"
         + (f", winner {_safe(out['winner'])}" if out.get("winner") else ""))
    if out["srm"]["flagged"]:
        _say("warning: sample ratio mismatch: the assignment counts do not fit the split; "
             "do not trust these results")
    primary = out["primary"]
    comps = {c["variant"]: c for c in primary["comparisons"]}
    _table(f"{primary['metric']} by variant", ["variant", "visitors", "value", "lift vs control",
                                               "95% CI", "p (adjusted)"],
           [[_safe(v["variant"]), f"{v['n']:,}", "" if v["value"] is None else f"{v['value']:.4g}",
             _pct(comps.get(v["variant"], {}).get("relative_lift")),
             _ci(comps.get(v["variant"], {}).get("relative_ci")),
             "" if comps.get(v["variant"], {}).get("p_adjusted") is None
             else f"{comps[v['variant']]['p_adjusted']:.3g}"] for v in primary["variants"]])


def _pct(x) -> str:
    return "" if x is None else f"{x:+.1%}"


def _ci(ci) -> str:
    return "" if not ci or None in ci else f"{ci[0]:+.1%} .. {ci[1]:+.1%}"


@experiments_app.command("stop")
def stop_cmd(store: StoreArg, experiment_id: IdArg, json_out: JsonOpt = False) -> None:
    """End without a winner: every visitor sees the live version again."""
    from vismerch.service import experiments

    with _workspace(store) as ws:
        exp = experiments.stop_experiment(ws, experiment_id, by=_actor())
    _print_json(exp.model_dump()) if json_out else _say(f"experiment {exp.id} stopped")


@experiments_app.command("promote")
def promote_cmd(store: StoreArg, experiment_id: IdArg,
                variant: Annotated[str | None, typer.Option(
                    help="Publish this one (default: the winner).")] = None,
                json_out: JsonOpt = False) -> None:
    """Publish the winning variant's version and end the experiment."""
    from vismerch.service import experiments

    with _workspace(store) as ws:
        exp = experiments.promote_experiment(ws, experiment_id, variant, by=_actor())
    _print_json(exp.model_dump()) if json_out else _say(
        f"experiment {exp.id}: {_safe(exp.winner)} published on {_safe(exp.collection)}")


def register(app: typer.Typer) -> None:
    app.add_typer(experiments_app, name="experiments")
