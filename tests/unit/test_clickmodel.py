"""Position-corrected attractiveness recovers simulated truth (vismerch.sample.shoppers)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from vismerch.events.clickmodel import CellCounts, business_metrics, fit_click_model, trend
from vismerch.sample.shoppers import simulate_shoppers


def _fit(traffic, **kw):
    c = traffic.cells()
    counts = CellCounts.build(c["product_idx"], c["position"], c["columns"], c["impressions"], c["clicks"])
    return fit_click_model(counts, traffic.truth.category, **kw), c


@pytest.mark.parametrize(("seed", "examination"), [(1, "geometric"), (2, "power"), (3, "step"),
                                                   (4, "geometric")])
def test_recovers_truth_better_than_raw_ctr(seed, examination):
    traffic = simulate_shoppers(200, visitors=4000, seed=seed, examination=examination)
    assert traffic.impressions >= 200_000 and len(traffic.truth.versions) >= 3
    fit, _ = _fit(traffic)
    truth, p = traffic.truth.attractiveness, fit.products
    corrected = stats.spearmanr(p.attractiveness_corrected, truth).statistic
    raw = stats.spearmanr(p.raw_ctr, truth).statistic
    assert corrected >= 0.9
    assert corrected - raw >= 0.01  # raw CTR is measurably worse, not a tie
    covered = np.mean((p.ci_low <= truth) & (truth <= p.ci_high))
    assert covered >= 0.9


def test_examination_decreases_with_row_as_simulated():
    traffic = simulate_shoppers(200, visitors=4000, seed=5, examination="geometric")
    fit, _ = _fit(traffic)
    s = fit.slots
    first_col = (s.columns == 4) & (s.col == 0) & (s.row < 12)
    est = s.examination[first_col][np.argsort(s.row[first_col])]
    true = traffic.truth.examination(4, 4 * np.arange(len(est)) + 1)
    assert est[0] == pytest.approx(1.0, abs=0.05)
    assert stats.spearmanr(est, np.arange(len(est))).statistic <= -0.9
    assert np.max(np.abs(est - true)) < 0.12
    # observed CTR of the top row is inflated by examination, the expected rate says so too
    assert s.expected_ctr[first_col][0] > s.expected_ctr[first_col][-1]


def test_unknown_grid_width_falls_back_to_positions():
    traffic = simulate_shoppers(200, visitors=4000, seed=6, columns_known=0.0)
    fit, _ = _fit(traffic)
    assert set(fit.slots.columns.tolist()) == {0}
    corrected = fit.products.attractiveness_corrected
    assert stats.spearmanr(corrected, traffic.truth.attractiveness).statistic >= 0.88


@pytest.mark.parametrize("seed", [7, 8])
def test_weak_pinned_product_is_below_its_slot(seed):
    base = simulate_shoppers(200, visitors=10, seed=seed)
    weak = int(np.argmin(base.truth.attractiveness))
    strong = int(np.argmax(base.truth.attractiveness))
    traffic = simulate_shoppers(200, visitors=4000, seed=seed, pins={weak: 1, strong: 2})
    fit, _ = _fit(traffic)
    verdict = fit.pin_verdict(weak, 1)
    assert verdict.code == "below" and verdict.ci_high < 1
    assert verdict.text == "performs below position 1's usual rate: unpin advised"
    assert fit.pin_verdict(strong, 2).code == "above"
    assert fit.pin_verdict(weak, 150).code == "too_little_data"


def test_cold_start_gets_prior_and_sparse_products_are_pulled_to_category():
    traffic = simulate_shoppers(200, visitors=4000, seed=9)
    c = traffic.cells()
    cold = int(np.flatnonzero(traffic.truth.category == 0)[0])
    sparse = int(np.flatnonzero(traffic.truth.category == 1)[0])
    keep = c["product_idx"] != cold
    # the sparse product keeps one cell's worth of data
    sparse_cells = np.flatnonzero(c["product_idx"] == sparse)
    keep[sparse_cells[1:]] = False
    counts = CellCounts.build(c["product_idx"][keep], c["position"][keep], c["columns"][keep],
                              c["impressions"][keep], c["clicks"][keep])
    fit = fit_click_model(counts, traffic.truth.category)
    p, prior = fit.products, fit.priors
    assert p.impressions[cold] == 0 and np.isnan(p.raw_ctr[cold])
    assert p.attractiveness_corrected[cold] == pytest.approx(prior[0].mean)
    assert p.ci_low[cold] < prior[0].mean < p.ci_high[cold]
    mle = p.clicks[sparse] / p.effective_impressions[sparse]
    est = p.attractiveness_corrected[sparse]
    assert p.shrunk[sparse] and p.prior_weight[sparse] > p.prior_weight[np.argmax(p.impressions)]
    assert min(mle, prior[1].mean) - 1e-9 <= est <= max(mle, prior[1].mean) + 1e-9


def test_cells_aggregate_and_validate():
    counts = CellCounts.build([0, 0, 1], [1, 1, 2], [4, 4, None], [10, 5, 3], [1, 0, 4])
    assert counts.impressions.tolist() == [15, 4] and counts.columns.tolist() == [4, 0]
    with pytest.raises(ValueError):
        CellCounts.build([0], [0], [4], [1], [0])


def test_trend_and_business_metrics():
    traffic = simulate_shoppers(200, visitors=4000, seed=10)
    fit, c = _fit(traffic)
    last = c["version_id"] == 3
    recent = CellCounts.build(c["product_idx"][last], c["position"][last], c["columns"][last],
                              c["impressions"][last], c["clicks"][last])
    tr = trend(fit, recent)
    assert np.all(tr.ci_low <= tr.ratio) and np.all(tr.ratio <= tr.ci_high)
    assert abs(np.median(tr.ratio) - 1) < 0.1  # nothing trends in a stationary simulation
    n = len(traffic.truth.category)
    per = {k: np.bincount(c["product_idx"], c[k], n) for k in ("add_to_cart", "purchases", "revenue")}
    biz = business_metrics(fit, per["add_to_cart"], per["purchases"], per["revenue"])
    t = traffic.truth
    true_conv = t.attractiveness * t.add_to_cart * t.purchase
    assert stats.spearmanr(biz.conversion, true_conv).statistic > 0.5
    assert np.all(biz.conversion <= biz.add_to_cart_rate + 1e-9) or np.mean(
        biz.conversion <= biz.add_to_cart_rate) > 0.95
    assert np.all(biz.revenue_per_impression >= 0)
