"""Rent versus own, per GPU-hour, per job and per month; break-even; sensitivity.

Owning one GPU for a year costs
    capex * (1 - residual) / years          amortisation (capex = GPU price x (1 + server_overhead))
  + capex * ops_fraction                    support, spares, admin, space
  + power * 8760 h * (idle + (1 - idle) * u) * $/kWh      power = TDP x host factor x PUE
and delivers 8760 * u useful GPU-hours at utilisation u (ANCHORS.md §3, ai-infrastructure.net).
Renting costs price x rent_multiplier per GPU-hour used. Every input is an assumption
(see :mod:`vismerch.plan.assumptions`) or a catalog price, and all are overridable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from vismerch.plan.assumptions import Assumptions
from vismerch.plan.hardware import GPU

HOURS_PER_YEAR = 8760.0
HOURS_PER_MONTH = HOURS_PER_YEAR / 12


@dataclass(frozen=True)
class Ownership:
    capex_usd: float  # per GPU, with its share of the server
    fixed_usd_per_year: float  # amortisation + operations + idle power
    busy_usd_per_hour: float  # extra power while working

    def usd_per_gpu_hour(self, utilisation: float) -> float:
        """Cost of one *useful* GPU-hour when the GPU works ``utilisation`` of the time."""
        return self.fixed_usd_per_year / (HOURS_PER_YEAR * utilisation) + self.busy_usd_per_hour


def _power_kw(gpu: GPU, a: Assumptions) -> float:
    """Wall power of one busy GPU with its share of the server and cooling."""
    return gpu.tdp_w * a.host_power_factor * a.pue / 1000


def ownership(gpu: GPU, a: Assumptions) -> Ownership:
    capex = gpu.purchase_usd * (1 + a.server_overhead)
    power_kw = _power_kw(gpu, a)
    idle_energy = power_kw * a.idle_power_fraction * HOURS_PER_YEAR * a.electricity_usd_per_kwh
    fixed = capex * (1 - a.residual_fraction) / a.years + capex * a.ops_fraction + idle_energy
    busy = power_kw * (1 - a.idle_power_fraction) * a.electricity_usd_per_kwh
    return Ownership(capex, fixed, busy)


def rent_usd_per_gpu_hour(gpu: GPU, a: Assumptions) -> float:
    return gpu.rent_usd_per_h * a.rent_multiplier


def breakeven_utilisation(gpu: GPU, a: Assumptions) -> float | None:
    """Utilisation at which an owned GPU-hour costs the rented one (>1: never; None: never
    even at zero fixed cost, because power alone costs more than the rent)."""
    own = ownership(gpu, a)
    margin = rent_usd_per_gpu_hour(gpu, a) - own.busy_usd_per_hour
    if margin <= 0:
        return None
    return own.fixed_usd_per_year / (HOURS_PER_YEAR * margin)


def breakeven_months(gpu: GPU, a: Assumptions) -> float | None:
    """Months until the rent saved at ``a.utilisation`` pays back the capex (None: never)."""
    own = ownership(gpu, a)
    busy_hours = HOURS_PER_MONTH * a.utilisation
    running = own.capex_usd * a.ops_fraction / 12 + own.busy_usd_per_hour * busy_hours
    running += _power_kw(gpu, a) * a.idle_power_fraction * HOURS_PER_MONTH * a.electricity_usd_per_kwh
    saving = rent_usd_per_gpu_hour(gpu, a) * busy_hours - running
    return own.capex_usd / saving if saving > 0 else None


def job_costs(gpu_hours: float, gpu: GPU, a: Assumptions) -> tuple[float, float]:
    """(rented USD, owned USD at ``a.utilisation``) for a job of ``gpu_hours``."""
    return (gpu_hours * rent_usd_per_gpu_hour(gpu, a),
            gpu_hours * ownership(gpu, a).usd_per_gpu_hour(a.utilisation))


def monthly_costs(
    gpu_seconds_per_unit: float, units_per_month: float, gpu: GPU, a: Assumptions,
    min_gpus: int = 1,
) -> tuple[float, float, int]:
    """(rent USD/month, own USD/month, owned fleet) for a steady monthly volume.

    The owned fleet is sized so its busy share stays at or below ``a.utilisation``;
    owning is therefore a step function of volume, renting a straight line.
    """
    gpu_hours = gpu_seconds_per_unit * units_per_month / 3600
    rent = gpu_hours * rent_usd_per_gpu_hour(gpu, a)
    own = ownership(gpu, a)
    fleet = max(min_gpus, math.ceil(gpu_hours / (HOURS_PER_MONTH * a.utilisation) - 1e-9))
    return rent, fleet * own.fixed_usd_per_year / 12 + gpu_hours * own.busy_usd_per_hour, fleet


# (label, what changes, values): "a.<name>" is an assumption, "gpu.<field>" a catalog figure,
# "x:<name>" multiplies an assumption, "range:low|high" the catalog rent range.
SENSITIVITY: tuple[tuple[str, str, tuple], ...] = (
    ("rent price (catalog range)", "range", ("low", "high")),
    ("rent multiplier (egress, storage)", "a.rent_multiplier", (1.4,)),
    ("utilisation of owned GPUs", "a.utilisation", (0.3, 0.9)),
    ("electricity USD/kWh", "a.electricity_usd_per_kwh", (0.06, 0.20)),
    ("purchase price", "x:purchase_usd", (0.8, 1.2)),
    ("amortisation years", "a.years", (5.0,)),
    ("operations share of capex/yr", "a.ops_fraction", (0.05, 0.20)),
    ("compute efficiency", "x:compute_eff", (0.5, 1.5)),
    ("decode images/s per core", "x:decode_per_core", (0.5, 2.0)),
)


def sensitivity(
    evaluate: Callable[[GPU, Assumptions], tuple[float, int, float, float]], gpu: GPU,
    a: Assumptions,
) -> list[dict]:
    """Re-evaluate one option under each variation; ``evaluate`` returns
    (wall hours, GPUs, rent, own) — the GPU count may change to keep the deadline."""
    rows = [_row("baseline", "", *evaluate(gpu, a))]
    for label, what, values in SENSITIVITY:
        for value in values:
            g, aa, shown = gpu, a, value
            if what == "range":
                if gpu.rent_range_usd_per_h is None:
                    continue
                shown = gpu.rent_range_usd_per_h[0 if value == "low" else 1]
                g = replace(gpu, rent_usd_per_h=shown)
            elif what.startswith("a."):
                aa = a.replace(**{what[2:]: value})
            elif what == "x:purchase_usd":
                g = replace(gpu, purchase_usd=gpu.purchase_usd * value)
                shown = f"x{value:g}"
            elif what == "x:compute_eff":
                aa = a.replace(**{f"compute_eff_{p}": min(1.0, a.compute_eff(p) * value)
                                  for p in ("fp32", "tf32", "bf16", "fp8", "fp4")})
                shown = f"x{value:g}"
            elif what == "x:decode_per_core":
                if a.decode_per_core == 0:
                    continue
                aa = a.replace(decode_per_core=a.decode_per_core * value)
                shown = f"x{value:g}"
            rows.append(_row(label, shown, *evaluate(g, aa)))
    return rows


def _row(label: str, value, hours: float, gpus: int, rent: float, own: float) -> dict:
    return {
        "assumption": label, "value": value, "gpus": gpus, "hours": round(hours, 3),
        "rent_usd": round(rent, 2), "own_usd": round(own, 2),
        "cheaper": "rent" if rent <= own else "own",
    }
