"""``vismerch plan``: which GPU, how many, how long, rented vs owned. Thin: parse, plan, render."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from vismerch.errors import VismerchError

_HELP = (
    "Plan GPUs for a workload: GPUs needed, hours, rented and owned cost, and what bounds it "
    "(compute, memory, communication or CPU decode). Offline, from the catalog in "
    "vismerch/plan/hardware.toml and documented assumptions (--set name=value to change them)."
)


def register(app: typer.Typer) -> None:
    app.command("plan", help=_HELP)(plan)


def plan(
    workload: str = typer.Option("embed", "--workload", "-w", help="embed, search or finetune."),
    model: str = typer.Option("vit-b-16", "--model", "-m",
                              help="Preset (vit-b-16, vit-l-14, siglip-so400m, ...) or "
                                   "vit:width=..,depth=..,patch=..,resolution=.."),
    images: str = typer.Option(None, "--images", help="Images to embed or train on, e.g. 50M."),
    epochs: float = typer.Option(1.0, "--epochs", help="Fine-tune epochs."),
    vectors: str = typer.Option(None, "--vectors", help="Search: vectors in the index, e.g. 100M."),
    dim: int = typer.Option(768, "--dim", help="Search: vector dimension."),
    queries: str = typer.Option(None, "--queries", help="Search: queries to answer, e.g. 10M."),
    deadline: str = typer.Option(None, "--deadline", help="Finish within, e.g. 24h, 90m, 3d."),
    gpus: str = typer.Option(None, "--gpus", help="Comma list, e.g. h100,h200,b200 (default: all)."),
    precision: str = typer.Option(None, "--precision",
                                  help="auto (best the GPU runs: fp4 Blackwell, fp8 Hopper/Ada, "
                                       "bf16 Ampere), fp32, tf32, bf16, fp8, fp4 (setting: precision, "
                                       "default auto)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    plots: Path = typer.Option(None, "--plots", help="Write cost_vs_volume.png and scaling.png here."),
    calibrate: list[Path] = typer.Option(None, "--calibrate",
                                         help="Benchmark JSON (benchmarks/gpu.py) replacing "
                                              "default efficiencies; repeatable."),
    hardware: Path = typer.Option(None, "--hardware", help="Your TOML adding/overriding GPUs."),
    overrides: list[str] = typer.Option(None, "--set",
                                        help="Assumption or GPU field: utilisation=0.8, "
                                             "h100.rent_usd_per_h=2.1; repeatable."),
    whole_nodes: bool = typer.Option(False, "--whole-nodes",
                                     help="Round GPU counts up to whole servers."),
    claims: bool = typer.Option(False, "--claims",
                                help="Check vendor claims (FP8 6x, FP4 2-3x, +43% bandwidth, bubble, DP; the "
                                     "speed-ups stay unverified unless --calibrate records them) "
                                     "against the model instead of planning."),
    catalog_only: bool = typer.Option(False, "--catalog", help="Print the GPU catalog with sources."),
) -> None:
    with _reported():
        from vismerch.cli.context import command_settings
        from vismerch.plan.assumptions import Assumptions, parse_overrides
        from vismerch.plan.hardware import Catalog

        precision = command_settings({"precision": precision}).precision

        plain, per_gpu = parse_overrides(overrides)
        a = Assumptions(plain)
        catalog = Catalog.load(hardware)
        if per_gpu:
            catalog = catalog.with_fields(per_gpu)
        if catalog_only:
            _print_catalog(catalog, as_json)
        elif claims:
            from vismerch.plan.calibrate import load_calibration
            from vismerch.plan.claims import check_claims

            cal = load_calibration(calibrate, catalog, a) if calibrate else None
            _print_claims(check_claims(catalog, a, cal), as_json)
        else:
            gpu_list = [g for g in (gpus or "").split(",") if g.strip()] or None
            request = {"model": model, "images": images, "epochs": epochs, "vectors": vectors,
                       "dim": dim, "queries": queries, "deadline": deadline, "gpus": gpu_list,
                       "precision": precision, "whole_nodes": whole_nodes}
            _plan(workload.lower(), request, (as_json, plots), calibrate, (a, catalog))


@contextlib.contextmanager
def _reported() -> Iterator[None]:
    """A VismerchError as ``error:`` and ``hint:`` lines and its exit code."""
    try:
        yield
    except VismerchError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            typer.echo(f"  hint: {exc.hint}", err=True)
        # SystemExit, not typer.Exit: it keeps its code both under click's standalone mode
        # and through vismerch.cli.main (which runs click with standalone_mode=False)
        raise SystemExit(exc.exit_code) from None


def _plan(workload: str, request: dict[str, Any], output: tuple[bool, Path | None],
          calibrate: list[Path] | None, model: tuple[Any, Any]) -> None:
    """``make_plan(workload, **request)`` printed as JSON or tables (``output``: as_json,
    plots folder), with the assumptions and catalog of ``model`` and any calibration."""
    from vismerch.plan.calibrate import load_calibration
    from vismerch.plan.planner import make_plan

    (as_json, plots), (a, catalog) = output, model
    cal = load_calibration(calibrate, catalog, a) if calibrate else None
    result = make_plan(workload, assumptions=a, catalog=catalog, calibration=cal, **request)
    written = []
    if plots is not None:
        from vismerch.plan.plots import write_plots

        written = [str(p) for p in write_plots(result, plots)]
    if as_json:
        out = result.to_dict()
        out["plots"] = written
        typer.echo(json.dumps(out, indent=2))
        return
    from vismerch.plan.render import render_plan

    render_plan(result, written)


def _print_catalog(catalog, as_json: bool) -> None:
    from vismerch.plan.hardware import NUMERIC_FIELDS

    if as_json:
        # every field the planner reads, from the one list --set also uses
        rows = [{"gpu": g.key, "name": g.name, "arch": g.arch, "aliases": list(g.aliases),
                 "tflops": g.tflops, **{name: getattr(g, name) for name in NUMERIC_FIELDS},
                 "rent_range_usd_per_h": g.rent_range_usd_per_h, "source": g.source}
                for g in catalog]
        typer.echo(json.dumps(rows, indent=2))
        return
    from vismerch.plan.render import render_catalog

    render_catalog(catalog)


def _print_claims(rows: list[dict], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from vismerch.plan.render import render_claims

    render_claims(rows)
