"""Statistics of A/B tests of arrangements: pure numpy/scipy, no store and no I/O.

The unit is the **visitor**: every input is one row per assigned visitor (impressions,
clicks, orders, revenue summed over the experiment). Assignment is per visitor, and one
visitor's impressions are correlated (same taste, same budget), so treating impressions as
independent would understate every variance; ratio metrics such as CTR are therefore ratios
of visitor means with a delta-method variance.

The design is a **fixed-horizon** test: the sample is planned before the start
(:func:`plan_sample_size`) and :func:`results` reports ``not_yet_conclusive`` until every
variant has reached it. Intervals and p-values shown before that are for watching only:
deciding at the first look that crosses α inflates the false-positive rate.

    data = {"A": VisitorData(imp, clk, orders, revenue), "B": ...}
    plan = plan_sample_size(*get_metric("revenue_per_visitor").baseline(recent), 0.05,
                            visitors_per_day=8000)
    report = results(data, control="A", planned_per_variant=plan["per_variant"][0],
                     guardrails=["conversion_per_visitor"])
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, NamedTuple

import numpy as np
from scipy import stats

from vismerch.errors import InvalidInput

DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
SRM_P_THRESHOLD = 0.001  # a real split fails this by chance once in 1,000 checks
WINSOR_QUANTILE = 0.999
STATUSES = ("not_yet_conclusive", "winner", "no_difference", "sample_ratio_mismatch")


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class VisitorData:
    """One variant's visitors: equal-length arrays, one entry per assigned visitor."""

    impressions: np.ndarray
    clicks: np.ndarray
    orders: np.ndarray
    revenue: np.ndarray

    def __post_init__(self):
        cols = {k: np.asarray(getattr(self, k), np.float64).ravel()
                for k in ("impressions", "clicks", "orders", "revenue")}
        if len({len(v) for v in cols.values()}) != 1:
            raise InvalidInput("data", "visitor columns differ in length: "
                               + ", ".join(f"{k}={len(v)}" for k, v in cols.items()))
        for k, v in cols.items():
            object.__setattr__(self, k, v)

    @property
    def n(self) -> int:
        return len(self.revenue)

    @classmethod
    def empty(cls) -> VisitorData:
        z = np.zeros(0)
        return cls(z, z, z, z)

    @classmethod
    def concat(cls, parts: Sequence[VisitorData]) -> VisitorData:
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, k) for p in parts])
                     for k in ("impressions", "clicks", "orders", "revenue")))


class Estimate(NamedTuple):
    """A metric's value, the variance of that estimate (not of a visitor), and visitors."""

    value: float
    variance: float
    n: int


def _mean_estimate(x: np.ndarray) -> Estimate:
    n = len(x)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    return Estimate(float(x.mean()), float(x.var(ddof=1)) / n if n > 1 else math.nan, n)


# --------------------------------------------------------------------------- metrics
class Metric(ABC):
    """A per-visitor metric. Subclasses set ``name``, ``label``, ``kind`` (``mean``,
    ``proportion`` or ``ratio``) and implement :meth:`estimate`; register them with
    :func:`register`."""

    name: ClassVar[str]
    label: ClassVar[str]
    kind: ClassVar[str]
    higher_is_better: ClassVar[bool] = True

    def fit(self, datasets: Sequence[VisitorData]) -> Metric:
        """The metric fixed for one analysis of these variants (e.g. a winsorisation cap
        computed on their pooled data). Default: nothing to fix."""
        return self

    @abstractmethod
    def estimate(self, data: VisitorData) -> Estimate:
        """The metric's value on ``data``, the variance of that value, and visitors."""

    def baseline(self, data: VisitorData) -> tuple[float, float]:
        """(mean, per-visitor variance) from recent traffic, the inputs of the sample plan."""
        e = self.fit([data]).estimate(data)
        return e.value, e.variance * e.n

    def describe(self) -> dict:
        return {"metric": self.name, "label": self.label, "kind": self.kind,
                "higher_is_better": self.higher_is_better}


METRICS: dict[str, type[Metric]] = {}


def register(cls: type[Metric]) -> type[Metric]:
    """Class decorator: make a metric selectable by its ``name``."""
    METRICS[cls.name] = cls
    return cls


def get_metric(metric: str | Metric, field: str = "metric") -> Metric:
    """The registered metric of that name (an instance passes through); unknown names raise
    :class:`InvalidInput` naming ``field``."""
    if isinstance(metric, Metric):
        return metric
    if metric not in METRICS:
        raise InvalidInput(field, f"unknown metric {metric!r}", hint=f"one of: {', '.join(METRICS)}")
    return METRICS[metric]()


@register
@dataclass(frozen=True)
class RevenuePerVisitor(Metric):
    """Mean revenue per visitor, each visitor's revenue capped at the ``quantile`` of the pooled
    data: one bulk buyer would otherwise dominate the variance and the verdict."""

    name: ClassVar[str] = "revenue_per_visitor"
    label: ClassVar[str] = "Revenue per visitor"
    kind: ClassVar[str] = "mean"
    quantile: float = WINSOR_QUANTILE
    cap: float | None = None

    def fit(self, datasets: Sequence[VisitorData]) -> RevenuePerVisitor:
        # pooled over variants so that every variant is capped at the same amount
        pooled = np.concatenate([d.revenue for d in datasets]) if datasets else np.zeros(0)
        cap = float(np.quantile(pooled, self.quantile)) if len(pooled) else None
        return replace(self, cap=cap)

    def estimate(self, data: VisitorData) -> Estimate:
        m = self if self.cap is not None else self.fit([data])
        x = data.revenue if m.cap is None else np.minimum(data.revenue, m.cap)
        return _mean_estimate(x)


@register
class ConversionPerVisitor(Metric):
    """Share of visitors with at least one order."""

    name: ClassVar[str] = "conversion_per_visitor"
    label: ClassVar[str] = "Conversion per visitor"
    kind: ClassVar[str] = "proportion"

    def estimate(self, data: VisitorData) -> Estimate:
        return _mean_estimate((data.orders > 0).astype(np.float64))


@register
class ClickThroughRate(Metric):
    """Clicks / impressions summed over visitors, a ratio of two visitor means; its variance
    by the delta method over visitors (impressions are not independent trials)."""

    name: ClassVar[str] = "ctr"
    label: ClassVar[str] = "Click-through rate"
    kind: ClassVar[str] = "ratio"

    def estimate(self, data: VisitorData) -> Estimate:
        n, mi = data.n, float(data.impressions.mean()) if data.n else 0.0
        if n == 0 or mi == 0:
            return Estimate(math.nan, math.nan, n)
        r = float(data.clicks.mean()) / mi
        if n < 2:
            return Estimate(r, math.nan, n)
        # delta method: Var(C̄/Ī) ≈ Var(C - r·I) / (n Ī²), the linearised visitor contribution
        lin = (data.clicks - r * data.impressions) / mi
        return Estimate(r, float(lin.var(ddof=1)) / n, n)


# --------------------------------------------------------------------------- comparisons
def welch_df(control: Estimate, treatment: Estimate) -> float:
    """Welch–Satterthwaite degrees of freedom of the difference of two estimates."""
    vc, vt = control.variance, treatment.variance
    den = (vc * vc / (control.n - 1) if control.n > 1 else math.inf) + \
          (vt * vt / (treatment.n - 1) if treatment.n > 1 else math.inf)
    return (vc + vt) ** 2 / den if den > 0 else math.inf


def compare(control: Estimate, treatment: Estimate, alpha: float = DEFAULT_ALPHA) -> dict:
    """Treatment against control: absolute and relative lift with (1 - α) intervals and the
    two-sided Welch p-value. The relative lift's interval uses the delta method for the ratio
    of two independent means; both use the Welch–Satterthwaite t quantile."""
    c, t = control, treatment
    diff, var = t.value - c.value, t.variance + c.variance
    df = welch_df(c, t)
    se = math.sqrt(var) if var >= 0 else math.nan
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
    else:
        p = float(2 * stats.t.sf(abs(diff / se), df)) if math.isfinite(se) else math.nan
    q = float(stats.t.ppf(1 - alpha / 2, df)) if df > 0 else math.nan
    rel = rel_se = math.nan
    if c.value != 0 and math.isfinite(c.value):
        rel = t.value / c.value - 1
        rel_se = math.sqrt(t.variance / c.value ** 2 + t.value ** 2 * c.variance / c.value ** 4)
    return {"absolute_lift": diff, "absolute_ci": [diff - q * se, diff + q * se],
            "relative_lift": rel, "relative_ci": [rel - q * rel_se, rel + q * rel_se],
            "p_value": p, "df": df}


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (step-down; NaN stays NaN and does not count)."""
    p = np.asarray(pvalues, np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    out[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    return out


def srm_check(counts: Mapping[str, int], split: Mapping[str, float],
              threshold: float = SRM_P_THRESHOLD) -> dict:
    """Sample-ratio mismatch: chi-square goodness of fit of the assignment counts against the
    planned split (any weights; normalised). ``flagged`` when p < ``threshold`` (0.001): the
    assignment or the logging is broken and the comparison cannot be trusted."""
    names = list(counts)
    obs = np.array([counts[k] for k in names], np.float64)
    w = np.array([split[k] for k in names], np.float64)
    w = w / w.sum()
    total = obs.sum()
    expected = total * w
    if total == 0:
        chi2, p = 0.0, 1.0
    elif np.any((expected == 0) & (obs > 0)):
        chi2, p = math.inf, 0.0  # visitors in a variant planned to get none
    else:
        keep = expected > 0
        chi2, p = (float(x) for x in stats.chisquare(obs[keep], expected[keep]))
    return {"observed": dict(zip(names, obs.astype(int).tolist(), strict=True)),
            "expected": dict(zip(names, expected.tolist(), strict=True)),
            "chi2": _num(chi2), "df": len(names) - 1, "p_value": p, "threshold": threshold,
            "flagged": bool(p < threshold)}


# --------------------------------------------------------------------------- planning
def _normalised_split(split: Sequence[float] | None, n_variants: int) -> np.ndarray:
    w = np.full(n_variants, 1.0) if split is None else np.asarray(split, np.float64)
    if len(w) != n_variants or np.any(w <= 0) or not np.all(np.isfinite(w)):
        raise InvalidInput("split", f"split {list(w)} must be {n_variants} positive weights")
    return w / w.sum()


def plan_sample_size(baseline_mean: float, baseline_variance: float, min_relative_lift: float, *,
                     alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                     split: Sequence[float] = (1.0, 1.0),
                     visitors_per_day: float | None = None, traffic_share: float = 1.0) -> dict:
    """Visitors each variant needs for a two-sided Welch test at ``alpha`` to detect a relative
    lift of ``min_relative_lift`` with probability ``power``, and the days that takes.

    ``baseline_variance`` is per visitor (:meth:`Metric.baseline`). ``split`` lists the
    weights, control first (default two equal variants). With k > 2
    variants α is divided by the k - 1 comparisons (Bonferroni; the Holm correction used in
    :func:`results` rejects at least as often, so the plan stays valid). Normal
    approximation, with δ = lift × mean, w_c the control's weight and w_t the smallest
    treatment's: the total is N = (z₁₋α/2 √(σ²/w_c + σ²/w_t) + z_power √(σ²/w_c + σ_t²/w_t))² / δ²
    and variant i gets N·wᵢ. Under the alternative the treatment's standard deviation is
    taken to grow with its mean, σ_t = σ (1 + lift) (a multiplicative lift; conservative when
    the lift is in conversion, where the variance grows about as the mean).
    ``visitors_per_day`` is the collection's traffic, ``traffic_share`` the part of it in
    the experiment (less than 1 with a holdout)."""
    k = len(split)
    if k < 2:
        raise InvalidInput("variants", "an experiment needs at least two variants")
    w = _normalised_split(split, k)
    checks = {"baseline_mean": baseline_mean > 0 and math.isfinite(baseline_mean),
              "baseline_variance": baseline_variance >= 0 and math.isfinite(baseline_variance),
              "min_relative_lift": min_relative_lift > 0, "alpha": 0 < alpha < 1,
              "power": 0 < power < 1, "traffic_share": 0 < traffic_share <= 1}
    for field, ok in checks.items():
        if not ok:
            raise InvalidInput(field, f"{field} out of range for a sample plan")
    alpha_each = alpha / (k - 1)
    wc, wt, var = w[0], w[1:].min(), baseline_variance
    sd_null = math.sqrt(var / wc + var / wt)
    sd_alt = math.sqrt(var / wc + var * (1 + min_relative_lift) ** 2 / wt)
    z = stats.norm.ppf(1 - alpha_each / 2) * sd_null + stats.norm.ppf(power) * sd_alt
    total = float(z / (min_relative_lift * baseline_mean)) ** 2
    per_variant = [math.ceil(total * x) for x in w]
    days = None
    if visitors_per_day:
        days = math.ceil(sum(per_variant) / (visitors_per_day * traffic_share))
    return {"per_variant": per_variant, "total": sum(per_variant), "days": days,
            "visitors_per_day": visitors_per_day, "traffic_share": traffic_share,
            "split": w.tolist(), "alpha": alpha, "alpha_per_comparison": alpha_each, "power": power,
            "min_relative_lift": min_relative_lift, "baseline_mean": baseline_mean,
            "baseline_variance": baseline_variance}


# --------------------------------------------------------------------------- results
def _num(x):
    """JSON-ready: floats, lists of floats; NaN and infinities become None."""
    if isinstance(x, list):
        return [_num(v) for v in x]
    return float(x) if x is not None and math.isfinite(x) else None


def _metric_block(metric: Metric, data: Mapping[str, VisitorData], control: str, alpha: float,
                  correct: bool) -> dict:
    """One metric for every variant and every treatment-vs-control comparison."""
    fitted = metric.fit(list(data.values()))
    est = {k: fitted.estimate(d) for k, d in data.items()}
    variants = []
    for k, e in est.items():
        q = float(stats.t.ppf(1 - alpha / 2, e.n - 1)) if e.n > 1 else math.nan
        half = q * math.sqrt(e.variance) if math.isfinite(e.variance) else math.nan
        variants.append({"variant": k, "n": e.n, "value": _num(e.value),
                         "ci": _num([e.value - half, e.value + half])})
    comps = [{"variant": k, "control": control, **compare(est[control], e, alpha)}
             for k, e in est.items() if k != control]
    adjusted = holm([c["p_value"] for c in comps]) if correct else [c["p_value"] for c in comps]
    sign = 1 if metric.higher_is_better else -1
    for c, pa in zip(comps, adjusted, strict=True):
        c["p_adjusted"] = pa
        c["significant"] = bool(pa < alpha)
        c["better"] = c["significant"] and sign * c["absolute_lift"] > 0
        c["worse"] = c["significant"] and sign * c["absolute_lift"] < 0
        for key in ("absolute_lift", "absolute_ci", "relative_lift", "relative_ci", "p_value",
                    "df", "p_adjusted"):
            c[key] = _num(c[key])
    extra = {"cap": _num(fitted.cap)} if isinstance(fitted, RevenuePerVisitor) else {}
    return {**metric.describe(), **extra, "variants": variants, "comparisons": comps,
            "correction": "holm" if correct and len(comps) > 1 else "none"}


def _decide(primary: dict, guardrails: list[dict]) -> tuple[str, str | None, str]:
    """Status, winner and reason once the planned sample is reached (SRM already checked)."""
    harmed = {c["variant"] for g in guardrails for c in g["comparisons"] if c["worse"]}
    comps = primary["comparisons"]
    better = [c for c in comps if c["better"] and c["variant"] not in harmed]
    if better:
        best = max(better, key=lambda c: c["relative_lift"] or 0.0)
        return "winner", best["variant"], f"{best['variant']} beats the control on {primary['metric']}"
    if comps and all(c["worse"] for c in comps):
        return "winner", comps[0]["control"], "every treatment is worse than the control"
    if any(c["better"] for c in comps):
        return "no_difference", None, "the better variants breach a guardrail: " + ", ".join(sorted(harmed))
    return "no_difference", None, "no variant differs significantly from the control"


def results(data: Mapping[str, VisitorData], *, control: str | None = None,
            split: Mapping[str, float] | None = None, primary: str | Metric = "revenue_per_visitor",
            guardrails: Sequence[str | Metric] = (),
            planned_per_variant: Mapping[str, int] | int | None = None,
            assigned: Mapping[str, int] | None = None, alpha: float = DEFAULT_ALPHA) -> dict:
    """The experiment's verdict as a JSON-ready dict (fixed-horizon design).

    ``data``: visitors per variant (control first unless ``control`` names it); ``split``:
    planned weights per variant (default equal); ``assigned``: assignment counts for the SRM
    check when they differ from the visitors in ``data`` (default: ``data``'s sizes; add a
    holdout bucket to both ``assigned`` and ``split`` to check it too). The primary metric's
    p-values are Holm-adjusted over the treatments (α family-wise); guardrails are not
    adjusted (a missed harm costs more than a false alarm) and flag a treatment when it is
    significantly worse. ``status`` is ``sample_ratio_mismatch`` when the split is broken,
    else ``not_yet_conclusive`` until every variant has ``planned_per_variant`` visitors
    (always, without a plan), then ``winner`` (``winner`` names the variant; the control
    when every treatment is worse) or ``no_difference``."""
    names = list(data)
    control = control if control is not None else names[0]
    if control not in data:
        raise InvalidInput("control", f"control {control!r} is not one of the variants {names}")
    if len(names) < 2:
        raise InvalidInput("variants", "an experiment needs at least two variants")
    split = split if split is not None else {k: 1.0 for k in names}
    if set(split) != set(names):
        raise InvalidInput("split", f"split names {sorted(split)} differ from the variants {sorted(names)}")
    counts = dict(assigned) if assigned is not None else {k: d.n for k, d in data.items()}
    srm = srm_check(counts, {k: split.get(k, 0.0) for k in counts})
    main = _metric_block(get_metric(primary, "metric"), data, control, alpha, correct=True)
    guards = [_metric_block(get_metric(g, "guardrails"), data, control, alpha, correct=False)
              for g in guardrails]
    planned = planned_per_variant
    if isinstance(planned, int):
        planned = {k: planned for k in names}
    reached = {k: planned is not None and data[k].n >= planned.get(k, 0) for k in names}
    progress = min((data[k].n / planned[k] if planned.get(k) else 1.0) for k in names) if planned else 0.0
    if srm["flagged"]:
        status, winner, reason = "sample_ratio_mismatch", None, "assignment counts do not fit the split"
    elif not all(reached.values()):
        status, winner, reason = "not_yet_conclusive", None, (
            "no sample plan" if planned is None else f"{min(progress, 1.0):.0%} of the planned sample")
    else:
        status, winner, reason = _decide(main, guards)
    return {"status": status, "winner": winner, "reason": reason, "design": "fixed_horizon",
            "alpha": alpha, "control": control, "primary": main, "guardrails": guards, "srm": srm,
            "sample": {"planned_per_variant": planned, "reached": reached,
                       "progress": _num(min(progress, 1.0))}}
