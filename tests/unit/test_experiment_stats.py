"""Experiment statistics against simulated truth (vismerch.testing.experiments): false
positives, power at the planned sample, sample-ratio mismatch, delta-method variance, Holm."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vismerch.errors import InvalidInput
from vismerch.experiments.stats import (
    METRICS,
    SRM_P_THRESHOLD,
    ClickThroughRate,
    RevenuePerVisitor,
    VisitorData,
    get_metric,
    holm,
    plan_sample_size,
    results,
    srm_check,
)
from vismerch.sample.shoppers import simulate_shoppers
from vismerch.testing.experiments import VisitorModel, simulate_experiment, visitor_pool

GUARDS = ("conversion_per_visitor", "ctr")


@pytest.fixture(scope="module")
def pool() -> VisitorData:
    """20,000 visitors of the shopper simulator (grid examination, clicks, funnel)."""
    return visitor_pool(simulate_shoppers(200, visitors=20_000, seed=11))


def _significant(report: dict, block: str = "primary") -> list[bool]:
    blocks = [report["primary"]] if block == "primary" else report["guardrails"]
    return [c["significant"] for b in blocks for c in b["comparisons"]]


@pytest.mark.parametrize("source", ["shopper", "model"])
def test_aa_false_positive_rate(pool, source):
    """400 A/A experiments: each metric is significant at α = 0.05 in 2-8% of them."""
    rng = np.random.default_rng(2026)
    hits = np.zeros(3)
    for _ in range(400):
        data = simulate_experiment(20_000, source=pool if source == "shopper" else None, seed=rng)
        report = results(data, guardrails=GUARDS)
        hits += [_significant(report)[0], *_significant(report, "guardrails")]
    rate = hits / 400
    assert np.all((rate >= 0.02) & (rate <= 0.08)), dict(zip(["rpv", *GUARDS], rate, strict=True))


def test_power_at_planned_sample(pool):
    """A true +5% revenue per visitor is detected in >= 75% of experiments run at the sample
    planned for 80% power (and not in almost all of them: the plan is not wasteful)."""
    metric = get_metric("revenue_per_visitor")
    plan = plan_sample_size(*metric.baseline(pool), 0.05, visitors_per_day=5000)
    n = plan["per_variant"][0]
    assert plan["per_variant"] == [n, n] and plan["days"] == -(-2 * n // 5000)
    rng = np.random.default_rng(7)
    detected, concluded = 0, 0
    for _ in range(400):
        data = simulate_experiment(2 * n + 1000, lifts=(0.0, 0.05), source=pool, seed=rng)
        report = results(data, planned_per_variant=n)
        comp = report["primary"]["comparisons"][0]
        detected += comp["better"]
        concluded += report["status"] == "winner" and report["winner"] == "B"
    assert 0.75 <= detected / 400 <= 0.88, detected / 400
    assert concluded == detected  # every arm reached the plan, no SRM: the verdict follows the test


def test_sample_ratio_mismatch(pool):
    """A 48/52 split of 100k visitors is flagged in every seed, an honest 50/50 in < 5%."""
    broken = honest = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        bad = simulate_experiment(100_000, assigned_split=(0.48, 0.52), source=pool, seed=rng)
        good = simulate_experiment(100_000, source=pool, seed=rng)
        split = {"A": 50, "B": 50}
        broken += srm_check({k: d.n for k, d in bad.items()}, split)["flagged"]
        honest += srm_check({k: d.n for k, d in good.items()}, split)["flagged"]
    assert broken == 200 and honest <= 10, (broken, honest)
    report = results(bad, planned_per_variant=1000)
    assert report["status"] == "sample_ratio_mismatch" and report["winner"] is None
    assert report["srm"]["threshold"] == SRM_P_THRESHOLD == 0.001 and report["srm"]["p_value"] < 1e-6


def test_srm_counts_a_holdout_and_an_empty_bucket():
    ok = srm_check({"A": 4500, "B": 4480, "holdout": 1020}, {"A": 45, "B": 45, "holdout": 10})
    assert not ok["flagged"] and ok["df"] == 2 and ok["expected"]["holdout"] == pytest.approx(1000)
    assert srm_check({"A": 10, "B": 3}, {"A": 1, "B": 0})["flagged"]
    assert not srm_check({"A": 0, "B": 0}, {"A": 1, "B": 1})["flagged"]


@pytest.mark.parametrize("source", ["shopper", "model"])
def test_ctr_delta_method_matches_bootstrap(pool, source):
    """The delta-method variance of CTR is within 15% of a visitor bootstrap's, while the
    impression-level binomial variance understates it (impressions are not independent)."""
    data = simulate_experiment(6000, split=(1.0,), source=pool if source == "shopper" else None,
                               seed=3)["A"]
    est = ClickThroughRate().estimate(data)
    rng = np.random.default_rng(5)
    idx = rng.integers(0, data.n, (2000, data.n))
    boot = data.clicks[idx].sum(1) / data.impressions[idx].sum(1)
    assert est.variance == pytest.approx(boot.var(ddof=1), rel=0.15)
    naive = est.value * (1 - est.value) / data.impressions.sum()
    assert naive < 0.8 * est.variance


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, np.nan, 0.01]) == pytest.approx([0.5, np.nan, 0.02], nan_ok=True)
    p = np.random.default_rng(0).random(6)
    assert np.all(holm(p) >= p) and np.all(holm(p) <= np.minimum(1, 6 * p))


def test_holm_controls_family_wise_error_with_three_variants(pool):
    """A/A/A: two comparisons with the control; Holm keeps the family-wise error near α where
    the unadjusted p-values exceed it."""
    rng = np.random.default_rng(99)
    adjusted = raw = 0
    for _ in range(400):
        data = simulate_experiment(24_000, split=(1, 1, 1), source=pool, seed=rng)
        comps = results(data)["primary"]["comparisons"]
        assert len(comps) == 2 and all(c["p_adjusted"] >= c["p_value"] for c in comps)
        adjusted += any(c["significant"] for c in comps)
        raw += any(c["p_value"] < 0.05 for c in comps)
    assert results(data)["primary"]["correction"] == "holm"
    assert adjusted / 400 <= 0.08 and raw > adjusted, (adjusted, raw)


def test_not_yet_conclusive_until_the_planned_sample(pool):
    """A large true lift is significant early, but the fixed-horizon verdict waits."""
    data = simulate_experiment(40_000, lifts=(0.0, 0.3), source=pool, seed=1)
    early = results(data, planned_per_variant=30_000)
    assert early["status"] == "not_yet_conclusive" and early["winner"] is None
    assert early["primary"]["comparisons"][0]["significant"]
    assert 0.6 < early["sample"]["progress"] < 0.7 and not any(early["sample"]["reached"].values())
    done = results(data, planned_per_variant={"A": 19_000, "B": 19_000})
    assert done["status"] == "winner" and done["winner"] == "B" and done["sample"]["progress"] == 1.0
    assert results(data)["status"] == "not_yet_conclusive"  # no plan: never conclusive
    rel = done["primary"]["comparisons"][0]
    assert rel["relative_ci"][0] < 0.3 < rel["relative_ci"][1]  # the interval covers the truth


def test_guardrail_breach_blocks_the_winner():
    """More revenue per buyer but 15% fewer clicks: not promoted."""
    data = simulate_experiment(200_000, lifts=(0.0, 0.3), lift_on="order_value", seed=4)
    hurt = simulate_experiment(200_000, lifts=(0.0, -0.15), lift_on="ctr", seed=4)
    assert hurt["B"].n == data["B"].n  # same seed, same assignment
    data["B"] = VisitorData(hurt["B"].impressions, hurt["B"].clicks, data["B"].orders, data["B"].revenue)
    report = results(data, planned_per_variant=90_000, guardrails=GUARDS)
    ctr = report["guardrails"][1]["comparisons"][0]
    assert ctr["worse"] and ctr["relative_lift"] < -0.1
    assert report["primary"]["comparisons"][0]["better"]
    assert report["status"] == "no_difference" and "guardrail" in report["reason"]


def test_winsorisation_caps_at_the_pooled_quantile():
    """One bulk buyer barely moves the winsorised comparison; unwinsorised, it decides it."""
    data = simulate_experiment(20_000, seed=8)
    before = results(data)["primary"]["comparisons"][0]
    big = data["B"].revenue.copy()
    big[0] = 1e7
    data["B"] = VisitorData(data["B"].impressions, data["B"].clicks, data["B"].orders, big)
    block = results(data)["primary"]
    assert block["cap"] == pytest.approx(np.quantile(np.concatenate([data["A"].revenue, big]), 0.999))
    assert block["comparisons"][0]["relative_lift"] == pytest.approx(before["relative_lift"], abs=0.03)
    raw = results(data, primary=RevenuePerVisitor(quantile=1.0))["primary"]
    assert raw["cap"] == 1e7 and raw["comparisons"][0]["relative_lift"] > 100


def test_plan_sample_size_formula():
    z_a, z_b = 1.959964, 0.841621  # z_.975, z_.8
    # σ = 1, δ = 0.1: the textbook 2 (z_a + z_b)² σ² / δ² = 1569.8 when the treatment's σ stays
    # 1; here it grows to 1.1 with the mean
    n = (z_a * np.sqrt(2) + z_b * np.sqrt(1 + 1.1 ** 2)) ** 2 / 0.1 ** 2
    plan = plan_sample_size(1.0, 1.0, 0.1, visitors_per_day=1000)
    assert 1570 < plan["per_variant"][0] == plan["per_variant"][1] == int(np.ceil(n))
    assert plan["days"] == 4
    three = plan_sample_size(1.0, 1.0, 0.1, split=(1, 1, 1))
    assert three["alpha_per_comparison"] == 0.025 and three["per_variant"][0] > plan["per_variant"][0]
    uneven = plan_sample_size(1.0, 1.0, 0.1, split=[20, 80], visitors_per_day=1000, traffic_share=0.5)
    total = (z_a * np.sqrt(1 / 0.2 + 1 / 0.8) + z_b * np.sqrt(1 / 0.2 + 1.21 / 0.8)) ** 2 / 0.01
    assert uneven["per_variant"] == [int(np.ceil(total * 0.2)), int(np.ceil(total * 0.8))]
    assert uneven["days"] == -(-uneven["total"] // 500)
    for bad in ({"min_relative_lift": 0}, {"power": 1.0}, {"split": [1, 0]}):
        args = {"min_relative_lift": 0.05, **bad}
        lift = args.pop("min_relative_lift")
        with pytest.raises(InvalidInput) as err:
            plan_sample_size(1.0, 1.0, lift, **args)
        assert err.value.field == next(iter(bad))


def test_metrics_registry_and_json_ready_results():
    assert set(METRICS) == {"revenue_per_visitor", "conversion_per_visitor", "ctr"}
    assert {get_metric(m).kind for m in METRICS} == {"mean", "proportion", "ratio"}
    with pytest.raises(InvalidInput) as err:
        get_metric("bounce_rate")
    assert err.value.field == "metric"
    with pytest.raises(InvalidInput) as err:
        results(simulate_experiment(100), guardrails=["nope"])
    assert err.value.field == "guardrails"
    empty = {"A": VisitorData.empty(), "B": VisitorData.empty()}
    text = json.dumps(results(empty, guardrails=GUARDS, planned_per_variant=10), allow_nan=False)
    assert json.loads(text)["status"] == "not_yet_conclusive"
    conv = get_metric("conversion_per_visitor").estimate(simulate_experiment(50_000, seed=2)["A"])
    assert conv.value == pytest.approx(VisitorModel().conversion, abs=0.005)
