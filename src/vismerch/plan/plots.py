"""PNG plots for a plan: cost against monthly volume, and scaling efficiency against GPUs.

matplotlib is imported inside the functions (Agg backend, no display needed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vismerch.plan import cost, parallel
from vismerch.plan.planner import Plan, efficiency_for
from vismerch.plan.units import human_count

MAX_LINES = 5


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_cost_vs_volume(plan: Plan, path: str | Path) -> Path:
    """Rented (straight) and owned (steps: whole GPUs) USD per month against monthly volume."""
    plt = _pyplot()
    w = plan.workload
    top = w.units * 100
    for opt in plan.options[:MAX_LINES]:  # reach past each option's rent = own crossing
        gpu = plan.catalog.get(opt.gpu)
        own = cost.ownership(gpu, plan.assumptions)
        margin = cost.rent_usd_per_gpu_hour(gpu, plan.assumptions) - own.busy_usd_per_hour
        per_unit_h = opt.gpu_hours / w.units
        if margin > 0 and per_unit_h > 0:
            top = max(top, 10 * opt.min_gpus * own.fixed_usd_per_year / 12 / (per_unit_h * margin))
    volumes = np.logspace(np.log10(w.units) - 3, np.log10(min(top, w.units * 1e6)), 240)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, opt in enumerate(plan.options[:MAX_LINES]):
        gpu = plan.catalog.get(opt.gpu)
        per_unit = opt.gpu_hours * 3600 / w.units
        rows = [cost.monthly_costs(per_unit, v, gpu, plan.assumptions, opt.min_gpus) for v in volumes]
        colour = colours[i % len(colours)]
        ax.plot(volumes, [r[0] for r in rows], color=colour, label=f"{opt.gpu} {opt.precision} rented")
        ax.step(volumes, [r[1] for r in rows], where="post", color=colour, linestyle="--",
                label=f"{opt.gpu} owned (util. <= {plan.assumptions.utilisation:g})")
    ax.axvline(w.units, color="grey", linewidth=0.8)
    ax.annotate(" this job", xy=(w.units, 0.02), xycoords=("data", "axes fraction"),
                color="grey", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"{w.unit} per month")
    ax.set_ylabel("USD per month")
    ax.set_title(f"{_title(plan)}: rent vs own by monthly volume")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_scaling(plan: Plan, path: str | Path) -> Path:
    """Data-parallel scaling efficiency against GPU count, with the communication-bound point."""
    plt = _pyplot()
    # GPU side only: CPU decode runs beside the step and would hide the all-reduce cost
    a = plan.assumptions.replace(decode_per_core=0)
    w = plan.workload
    top = int(a.global_batch)
    counts = sorted({int(c) for c in np.geomspace(1, top, 40).round()})
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, opt in enumerate(plan.options[:MAX_LINES]):
        colour = colours[i % len(colours)]
        if w.kind != "finetune":
            ax.plot([1, top], [1, 1], color=colour, linewidth=2, alpha=0.6,
                    label=f"{opt.gpu} {w.kind}: independent replicas")
        if w.model is None:
            continue
        gpu = plan.catalog.get(opt.gpu)
        prec = opt.precision if w.kind == "finetune" else "bf16"
        eff = efficiency_for(gpu, prec, a, plan.calibration)
        curve = parallel.dp_scaling(w.model, gpu, prec, eff, a, counts)
        style = "-" if w.kind == "finetune" else ":"
        ax.plot([c for c, _ in curve], [e for _, e in curve], style, color=colour,
                label=f"{opt.gpu} fine-tune {w.model.name} (DDP, GPU side)")
        bound_at = parallel.comm_bound_gpus(w.model, gpu, prec, eff, a)
        if bound_at:
            eff_at = parallel.dp_scaling(w.model, gpu, prec, eff, a, [bound_at])[0][1]
            ax.plot([bound_at], [eff_at], "o", color=colour)
            ax.annotate(f"comm-bound at {bound_at}", (bound_at, eff_at), fontsize=7,
                        xytext=(6, -12 - 11 * i), textcoords="offset points", color=colour)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("scaling efficiency (step(1) / (N x step(N)))")
    ax.set_title(f"{_title(plan)}: global batch {a.global_batch:g}, fixed (strong scaling)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


def _title(plan: Plan) -> str:
    w = plan.workload
    what = w.model.name if w.model is not None else f"{human_count(w.search.vectors)} x {w.search.dim}"
    return f"{w.kind} {what}, {human_count(w.units)} {w.unit}"


def write_plots(plan: Plan, folder: str | Path) -> list[Path]:
    """Both plots into ``folder`` (created if missing); returns their paths."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    if not plan.options:
        return []
    return [plot_cost_vs_volume(plan, out / "cost_vs_volume.png"),
            plot_scaling(plan, out / "scaling.png")]
