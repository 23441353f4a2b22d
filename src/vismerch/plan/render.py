"""Rich tables for ``vismerch plan`` (plan, catalog, claims). Rendering only, no arithmetic."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from vismerch.plan.hardware import Catalog
from vismerch.plan.planner import Plan
from vismerch.plan.units import human_count, human_hours


def _console() -> Console:
    console = Console()
    # piped or captured output: keep the table readable instead of 80 columns
    return console if console.is_terminal else Console(width=132)


def _usd(value: float) -> str:
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


def render_plan(plan: Plan, plots: list[str] | None = None) -> None:
    con = _console()
    con.print(_heading(plan))
    con.print(_options_table(plan))
    if plan.options:
        top = plan.options[0]
        con.print(f"[bold]{top.gpu}[/]: {top.strategy} — {top.reason}.")
        for note in top.notes:
            con.print(f"  · {note}")
        if top.efficiency.source != "default":
            con.print(f"  · efficiency {top.efficiency.source}")
    for item in plan.skipped:
        con.print(f"[yellow]skipped {item['gpu']}[/]: {item['reason']}")
    for note in plan.notes:
        con.print(f"[dim]note:[/] {note}")
    if plan.sensitivity:
        sens = Table(title="sensitivity (top option)", header_style="bold")
        for col in ("assumption", "value", "GPUs", "wall h", "rented", "owned", "cheaper"):
            sens.add_column(col)
        for row in plan.sensitivity:
            sens.add_row(row["assumption"], str(row["value"]), str(row["gpus"]),
                         f"{row['hours']:.2f}",
                         _usd(row["rent_usd"]), _usd(row["own_usd"]), row["cheaper"])
        con.print(sens)
    a = plan.assumptions
    decode = (f"decode {a.decode_per_core:g} img/s/core x {a.cpu_cores_per_gpu:g} cores/GPU"
              if a.decode_per_core else "CPU decode not modelled")
    con.print(
        f"[dim]assumptions: utilisation {a.utilisation:g}, ${a.electricity_usd_per_kwh:g}/kWh x "
        f"PUE {a.pue:g}, capex over {a.years:g} y (+{a.server_overhead:.0%} server, "
        f"{a.ops_fraction:.0%}/y ops), {decode}[/]"
    )
    con.print("[dim]every assumption with its reason: --json; change any with --set name=value[/]")
    for path in plots or []:
        con.print(f"wrote {path}")


def _heading(plan: Plan) -> str:
    w = plan.workload
    head = f"[bold]{w.kind}[/] "
    if w.model is not None:
        m = w.model
        head += (f"{m.name} ({m.params() / 1e6:,.1f}M params, "
                 f"{m.forward_flops() / 1e9:,.1f} GFLOP/image) · ")
    else:
        s = w.search
        head += (f"{human_count(s.vectors)} x {s.dim} vectors ({s.index_bytes / 1e9:,.1f} GB) · ")
    head += f"{human_count(w.units)} {w.unit}"
    if plan.deadline_s:
        head += f" · deadline {human_hours(plan.deadline_s / 3600)}"
    return head


def _options_table(plan: Plan) -> Table:
    table = Table(show_lines=False, header_style="bold")
    for col, justify in (("#", "right"), ("GPU", "left"), ("GPUs", "right"), ("prec.", "left"),
                         ("wall time", "right"), ("GPU-h", "right"), ("rented", "right"),
                         ("owned", "right"), ("rent $/M", "right"), ("bound", "left"),
                         ("strategy", "left"), ("own pays at", "right")):
        table.add_column(col, justify=justify)
    for i, o in enumerate(plan.options, 1):
        d = o.to_dict()
        be = o.breakeven_utilisation
        table.add_row(
            str(i), o.gpu, str(o.gpus), o.precision,
            human_hours(o.hours) + ("" if o.meets_deadline else " [red](late)[/]"),
            f"{o.gpu_hours:,.1f}", _usd(o.rent_usd), _usd(o.own_usd),
            _usd(d["rent_usd_per_million"]), o.bound, o.strategy,
            "never" if be is None or be > 1 else f"{be:.0%} util.",
        )
    return table


def render_catalog(catalog: Catalog) -> None:
    con = _console()
    table = Table(header_style="bold")
    for col in ("GPU", "name", "bf16", "fp8", "fp4", "mem GB", "TB/s", "NVLink GB/s",
                "TDP W", "rent $/h", "buy $"):
        table.add_column(col)
    for g in catalog:
        table.add_row(g.key, g.name, *(f"{g.tflops[p]:g}" if p in g.tflops else "—"
                                       for p in ("bf16", "fp8", "fp4")),
                      f"{g.memory_gb:g}", f"{g.hbm_tb_s:g}", f"{g.nvlink_gb_s:g}",
                      f"{g.tdp_w:g}", f"{g.rent_usd_per_h:g}", f"{g.purchase_usd:,.0f}")
    con.print(table)
    con.print("[dim]dense TFLOPS; sources for every figure: vismerch plan --catalog --json[/]")


def render_claims(rows: list[dict]) -> None:
    con = _console()
    for row in rows:
        status = f" [yellow]({row['status']})[/]" if row.get("status") else ""
        con.print(f"[bold]{row['claim']}[/]{status}")
        for key in ("peak_ratio", "same_precision_peak_ratio", "bandwidth_ratio", "formula",
                    "stated_case"):
            if key in row:
                con.print(f"  {key.replace('_', ' ')}: {row[key]}")
        for label, value in row.get("modelled", {}).items():
            con.print(f"  {label}: {value}")
        con.print(f"  [green]verdict:[/] {row['verdict']}\n")
