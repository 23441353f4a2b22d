"""Position-corrected product performance from aggregated grid impressions and clicks.

A position-based click model (PBM: click = examined x attracted; Chuklin, Markov & de Rijke,
*Click Models for Web Search*, ch. 3) fitted by EM on counts per (product, position,
columns) cell. Examination is a row effect x a column effect per grid width when the
width is known, one value per position when it is not; the scale is fixed by position 1
(pooled over widths) = 1, so a product's attractiveness is its click rate at position 1.
Products are identified by appearing at different positions (published versions differ).
Sparse products are shrunk toward an empirical-Bayes Beta prior of their category.

    counts = CellCounts.build(product_idx, position, columns, impressions, clicks)
    fit = fit_click_model(counts, category)          # category: one int per product
    fit.products.attractiveness_corrected, fit.products.ci_low, fit.slots.expected_ctr
    fit.pin_verdict(product, 1).text                 # "performs below position 1's ..."
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import optimize, stats

from vismerch.events._shrink import BetaPrior, beta_posterior, category_priors

__all__ = [
    "BetaPrior", "CellCounts", "ClickModelFit", "PinVerdict", "ProductEstimates",
    "SlotEstimates", "TrendEstimates", "BusinessEstimates", "fit_click_model", "trend",
    "business_metrics",
]

_EPS = 1e-9
ROW_SMOOTHING = 5.0  # prior precision of log(row r+1 / row r): sd ~0.45, data outweigh it


@dataclass(frozen=True)
class CellCounts:
    """Impressions and clicks per (product, position, columns) cell; ``columns`` 0 = unknown."""

    product_idx: np.ndarray
    position: np.ndarray
    columns: np.ndarray
    impressions: np.ndarray
    clicks: np.ndarray

    @classmethod
    def build(cls, product_idx, position, columns, impressions, clicks) -> CellCounts:
        """Validate and sum duplicate cells (rows may be per version or per event)."""
        p = np.asarray(product_idx, np.int64)
        pos = np.asarray(position, np.int64)
        cols = np.nan_to_num(np.asarray(columns, np.float64)).astype(np.int64)
        n = np.asarray(impressions, np.float64)
        k = np.asarray(clicks, np.float64)
        if not (p.shape == pos.shape == cols.shape == n.shape == k.shape) or p.ndim != 1:
            raise ValueError("product_idx, position, columns, impressions, clicks: 1-d, same length")
        if p.size and (p.min() < 0 or pos.min() < 1 or cols.min() < 0 or n.min() < 0 or k.min() < 0):
            raise ValueError("negative product index/columns/counts or position < 1")
        keys = np.stack([p, pos, cols], 1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.ravel()
        n_sum = np.bincount(inv, n, len(uniq))
        # a click without its impression (lost beacon) still means the slot was seen
        k_sum = np.bincount(inv, k, len(uniq))
        keep = n_sum > 0
        return cls(uniq[keep, 0], uniq[keep, 1], uniq[keep, 2], np.maximum(n_sum, k_sum)[keep],
                   k_sum[keep])


@dataclass(frozen=True)
class ProductEstimates:
    """One entry per product index. ``attractiveness_corrected`` is the posterior mean click
    probability given examination (= at position 1); ``ci_low``/``ci_high`` its credible
    interval; ``prior_weight`` the share the category prior has in it; ``shrunk`` when that
    share is >= 0.2; cold-start products (no impressions) sit at their category prior."""

    attractiveness_corrected: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    raw_ctr: np.ndarray  # NaN without impressions
    impressions: np.ndarray
    clicks: np.ndarray
    effective_impressions: np.ndarray  # sum of impressions x examination
    prior_weight: np.ndarray
    shrunk: np.ndarray
    category: np.ndarray

    def record(self, i: int) -> dict:
        """Product ``i`` as plain JSON-ready values."""
        raw = float(self.raw_ctr[i])
        return {
            "attractiveness_corrected": float(self.attractiveness_corrected[i]),
            "ci_low": float(self.ci_low[i]), "ci_high": float(self.ci_high[i]),
            "raw_ctr": None if np.isnan(raw) else raw,
            "impressions": int(self.impressions[i]), "clicks": int(self.clicks[i]),
            "effective_impressions": float(self.effective_impressions[i]),
            "prior_weight": float(self.prior_weight[i]), "shrunk": bool(self.shrunk[i]),
        }


@dataclass(frozen=True)
class SlotEstimates:
    """One entry per observed (columns, position). ``examination`` is relative to position 1;
    ``expected_ctr`` = examination x the collection's mean attractiveness (what an average
    product gets there), beside ``observed_ctr``."""

    columns: np.ndarray
    position: np.ndarray
    row: np.ndarray  # 0-based; -1 when columns unknown
    col: np.ndarray
    examination: np.ndarray
    impressions: np.ndarray
    clicks: np.ndarray
    observed_ctr: np.ndarray
    expected_ctr: np.ndarray

    def by_position(self) -> dict[str, np.ndarray]:
        """Slots pooled over grid widths, impression-weighted, one entry per position."""
        pos, inv = np.unique(self.position, return_inverse=True)
        n = np.bincount(inv, self.impressions)
        k = np.bincount(inv, self.clicks)
        exam = np.bincount(inv, self.impressions * self.examination) / n
        exp = np.bincount(inv, self.impressions * self.expected_ctr) / n
        return {"position": pos, "examination": exam, "impressions": n, "clicks": k,
                "observed_ctr": k / n, "expected_ctr": exp}


@dataclass(frozen=True)
class PinVerdict:
    """A pinned product at its slot against what an average product gets there.
    ``code``: ``below`` | ``above`` | ``as_expected`` | ``too_little_data``; ``ratio``
    observed/expected clicks with its interval."""

    code: str
    text: str
    position: int
    impressions: int
    clicks: int
    expected_clicks: float
    ratio: float
    ci_low: float
    ci_high: float


@dataclass
class ClickModelFit:
    """The fitted model: per-product and per-slot estimates, category priors, examination."""

    products: ProductEstimates
    slots: SlotEstimates
    priors: list[BetaPrior]
    mean_attractiveness: float
    iterations: int
    converged: bool
    level: float
    _slot_index: dict[tuple[int, int], int] = field(repr=False, default_factory=dict)
    _counts: CellCounts | None = field(repr=False, default=None)

    def examination(self, columns, position) -> np.ndarray:
        """Examination for (columns, position) pairs; unseen widths fall back to the pooled
        position, unseen positions to the deepest observed one."""
        cols = np.atleast_1d(np.asarray(columns, np.int64))
        pos = np.atleast_1d(np.asarray(position, np.int64))
        cols, pos = np.broadcast_arrays(cols, pos)
        pooled = self.slots.by_position()
        out = np.empty(cols.shape, np.float64)
        for j, (c, p) in enumerate(zip(cols.tolist(), pos.tolist(), strict=True)):
            s = self._slot_index.get((c, p))
            if s is not None:
                out[j] = self.slots.examination[s]
            else:
                i = min(np.searchsorted(pooled["position"], p), len(pooled["position"]) - 1)
                out[j] = pooled["examination"][i] if len(pooled["position"]) else 1.0
        return out

    def pin_verdict(self, product: int, position: int, min_expected_clicks: float = 5.0) -> PinVerdict:
        """Does ``product`` earn its slot? Its clicks at ``position`` (all widths) against an
        average product's there, with an exact Poisson interval on the ratio."""
        c = self._counts
        m = (c.product_idx == product) & (c.position == position)
        n, k = float(c.impressions[m].sum()), float(c.clicks[m].sum())
        exam = self.examination(c.columns[m], c.position[m]) if m.any() else np.zeros(0)
        expected = float(self.mean_attractiveness * (c.impressions[m] * exam).sum())
        if expected < min_expected_clicks:
            return PinVerdict("too_little_data", f"too little data at position {position} to judge "
                              f"({int(n)} impressions)", position, int(n), int(k), expected,
                              float("nan"), float("nan"), float("nan"))
        a = (1 - self.level) / 2
        lo = stats.gamma.ppf(a, k) / expected if k > 0 else 0.0
        hi = stats.gamma.ppf(1 - a, k + 1) / expected
        if hi < 1:
            code, text = "below", f"performs below position {position}'s usual rate: unpin advised"
        elif lo > 1:
            code, text = "above", f"performs above position {position}'s usual rate: the pin earns its slot"
        else:
            code, text = "as_expected", f"performs at position {position}'s usual rate"
        return PinVerdict(code, text, position, int(n), int(k), expected, k / expected,
                          float(lo), float(hi))


# --------------------------------------------------------------------------- examination layout
class _SlotLayout(NamedTuple):
    slots: np.ndarray  # (S, 2) unique (columns, position)
    cell_slot: np.ndarray  # per counted cell: its slot
    row: np.ndarray  # per slot: 0-based grid row (-1: width unknown)
    col: np.ndarray  # per slot: 0-based grid column (-1: width unknown)
    row_f: np.ndarray  # per slot: its row factor
    col_f: np.ndarray  # per slot: its column factor
    col_fixed: np.ndarray  # per column factor: held at 1
    row_keys: np.ndarray  # per row factor: (columns, row or position)
    n_col: int


def _slot_layout(counts: CellCounts) -> _SlotLayout:
    """Unique (columns, position) slots, each one row factor and one column factor.
    Known width: factors (c, row) and (c, col); unknown: (0, position) and a fixed 1."""
    keys = np.stack([counts.columns, counts.position], 1)
    slots, cell_slot = np.unique(keys, axis=0, return_inverse=True)
    cell_slot = cell_slot.ravel()
    c, p = slots[:, 0], slots[:, 1]
    known = c > 0
    row = np.where(known, (p - 1) // np.maximum(c, 1), -1)
    col = np.where(known, (p - 1) % np.maximum(c, 1), -1)
    row_key = np.stack([c, np.where(known, row, p)], 1)
    row_keys, row_f = np.unique(row_key, axis=0, return_inverse=True)
    col_key = np.stack([c, np.where(known, col, 0)], 1)
    col_keys, col_f = np.unique(col_key, axis=0, return_inverse=True)
    # column 0 of each width (and the unknown width's single column) anchors its width's scale
    col_fixed = (col_keys[:, 0] == 0) | (col_keys[:, 1] == 0)
    return _SlotLayout(slots, cell_slot, row.astype(np.int64), col.astype(np.int64), row_f.ravel(),
                       col_f.ravel(), col_fixed, row_keys, len(col_keys))


def _best_alpha(prod, n, k, tc, n_products: int, alpha: np.ndarray, steps: int = 8) -> np.ndarray:
    """Each product's maximum-likelihood attractiveness given the cells' examination ``tc``:
    safeguarded Newton on a concave 1-d likelihood, from ``alpha``."""
    K = np.bincount(prod, k, n_products)
    tmax = np.zeros(n_products)
    np.maximum.at(tmax, prod, tc)
    cap = 0.999 / np.maximum(tmax, _EPS)
    a = np.clip(alpha, 1e-6, cap)
    for _ in range(steps):
        d = 1.0 - a[prod] * tc
        g = K / a - np.bincount(prod, (n - k) * tc / d, n_products)
        h = -K / a**2 - np.bincount(prod, (n - k) * tc**2 / d**2, n_products)
        a = np.clip(a - g / np.minimum(h, -_EPS), a / 10, (a + cap) / 2)
    return np.where(K > 0, a, 0.0)


def _mle(counts: CellCounts, n_products: int, layout: _SlotLayout, max_iter: int, tol: float):
    """PBM maximum likelihood (clicks ~ Binomial(n, alpha x row x column)): attractiveness
    profiled out exactly per product, the examination factors by L-BFGS-B on log scale.
    (Textbook EM crawls here, and theta = 1 is absorbing for its updates.)"""
    prod, n, k = counts.product_idx, counts.impressions, counts.clicks
    slots, cell_slot, row_f, col_f, row_keys, n_col = (layout.slots, layout.cell_slot, layout.row_f,
                                                       layout.col_f, layout.row_keys, layout.n_col)
    n_row = len(row_keys)
    n_slot = np.bincount(cell_slot, n, len(row_f))
    # a weak random-walk prior between neighbouring rows of a width: deep, rarely seen rows
    # borrow from their neighbours (and the optimiser gets a well-conditioned problem)
    nb = np.flatnonzero(row_keys[1:, 0] == row_keys[:-1, 0])
    # the scale ridge (c alpha, theta / c) is removed by fixing the busiest position-1 row
    first = np.flatnonzero(slots[:, 1] == slots[:, 1].min())
    ref_row = row_f[first[np.argmax(n_slot[first])]]
    fixed = np.concatenate([np.arange(n_row) == ref_row, layout.col_fixed])
    bounds = [(0.0, 0.0) if f else (-12.0, np.log(2.0)) for f in fixed]
    cells_row, cells_col = row_f[cell_slot], col_f[cell_slot]
    state = {"alpha": np.bincount(prod, k, n_products) / np.maximum(np.bincount(prod, n, n_products), _EPS)}

    def loss(x):
        tc = np.exp(x[:n_row][cells_row] + x[n_row:][cells_col])
        alpha = state["alpha"] = _best_alpha(prod, n, k, tc, n_products, state["alpha"])
        p = np.clip(alpha[prod] * tc, 1e-300, 1 - 1e-12)
        g = k - (n - k) * p / (1 - p)  # d loglik / d log p, per cell (envelope theorem for alpha)
        diff = x[nb + 1] - x[nb]
        g_row = np.bincount(cells_row, g, n_row) - ROW_SMOOTHING * (
            np.bincount(nb, -diff, n_row) + np.bincount(nb + 1, diff, n_row))
        grad = np.concatenate([g_row, np.bincount(cells_col, g, n_col)])
        ll = k @ np.log(p) + (n - k) @ np.log1p(-p) - ROW_SMOOTHING / 2 * diff @ diff
        return -ll, -np.where(fixed, 0.0, grad)

    res = optimize.minimize(loss, np.zeros(n_row + n_col), jac=True, method="L-BFGS-B", bounds=bounds,
                            options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-5})
    theta = np.exp(res.x[:n_row][row_f] + res.x[n_row:][col_f])
    alpha = _best_alpha(prod, n, k, theta[cell_slot], n_products, state["alpha"], steps=20)
    var = _examination_share_var(prod, n, alpha[prod] * theta[cell_slot], cells_row, n_row + cells_col,
                                 n_products, np.flatnonzero(~fixed))
    return alpha, theta, var, int(res.nit), bool(res.success)


def _examination_share_var(prod, n, p, cell_row, cell_col, n_products: int, free: np.ndarray) -> np.ndarray:
    """Variance of each log attractiveness that comes from the estimated examination factors
    (their scale included): expected information, Schur complement over the products."""
    w = n * p / np.maximum(1 - p, _EPS)  # Bernoulli information in log p, per cell
    n_t = len(free)
    pos = np.full(max(int(cell_col.max(initial=0)), int(cell_row.max(initial=0))) + 1, -1)
    pos[free] = np.arange(n_t)
    I_aa = np.bincount(prod, w, n_products)
    I_at = np.zeros((n_products, n_t))
    I_tt = np.zeros((n_t, n_t))
    for fa in (cell_row, cell_col):
        ia = pos[fa]
        m = ia >= 0
        np.add.at(I_at, (prod[m], ia[m]), w[m])
        for fb in (cell_row, cell_col):
            ib = pos[fb]
            mm = m & (ib >= 0)
            np.add.at(I_tt, (ia[mm], ib[mm]), w[mm])
    seen = I_aa > 0
    G = I_at[seen] / I_aa[seen, None]  # d log alpha_i / d t, alpha profiled out
    V = np.linalg.pinv(I_tt - I_at[seen].T @ G, hermitian=True)
    out = np.zeros(n_products)
    out[seen] = ((G @ V) * G).sum(1)
    return out


def fit_click_model(counts: CellCounts, category, *, level: float = 0.95, max_iter: int = 300,
                    tol: float = 1e-8) -> ClickModelFit:
    """Fit the PBM and shrink each product toward its category's Beta prior.

    ``category``: one non-negative int per product (its length is the number of products;
    products without counts are cold starts)."""
    category = np.asarray(category, np.int64)
    n_products = len(category)
    if counts.product_idx.size and counts.product_idx.max() >= n_products:
        raise ValueError("product_idx beyond len(category)")
    layout = _slot_layout(counts)
    slots, cell_slot, row, col = layout.slots, layout.cell_slot, layout.row, layout.col
    if len(slots):
        alpha, theta, theta_var, iterations, converged = _mle(counts, n_products, layout, max_iter, tol)
    else:  # no traffic yet: every product is a cold start
        alpha, theta, theta_var, iterations, converged = np.zeros(n_products), np.zeros(0), \
            np.zeros(n_products), 0, True
    n_slot = np.bincount(cell_slot, counts.impressions, len(slots))
    k_slot = np.bincount(cell_slot, counts.clicks, len(slots))
    # one scale for all widths: examination at position 1 (pooled over widths) = 1
    first = slots[:, 1] == slots[:, 1].min(initial=1)
    scale = float((n_slot[first] * theta[first]).sum() / n_slot[first].sum()) if len(slots) else 1.0
    theta = theta / scale

    prod, n, k = counts.product_idx, counts.impressions, counts.clicks
    tc = theta[cell_slot]
    eff = np.bincount(prod, n * tc, n_products)
    clicks = np.bincount(prod, k, n_products)
    imps = np.bincount(prod, n, n_products)
    point = np.clip(alpha * scale, 0.0, 1.0)
    # clicks vary more than Binomial(eff, a) when examination < 1, and the examination is itself
    # estimated: the Beta posterior gets the count whose binomial variance matches both
    var_units = np.bincount(prod, n * tc * (1 - point[prod] * tc), n_products)
    binom_var = var_units / np.maximum(eff, _EPS) ** 2  # of k / eff, over a (1 - a)
    inv = (binom_var + theta_var * point) / np.maximum(1 - point, _EPS)
    n_eff = np.where(var_units > 0, 1.0 / np.maximum(inv, _EPS), 0.0)
    n_eff = np.where(point >= 1.0, eff, np.minimum(n_eff, eff))
    priors = category_priors(point * n_eff, n_eff, category)
    mean, lo, hi, weight = beta_posterior(point * n_eff, n_eff, category, priors, level)
    seen = imps > 0
    products = ProductEstimates(
        mean, lo, hi, np.where(seen, clicks / np.maximum(imps, _EPS), np.nan), imps, clicks, eff,
        weight, weight >= 0.2, category)
    mean_attr = float(mean[seen].mean()) if seen.any() else float(np.nan)
    slot_est = SlotEstimates(slots[:, 0], slots[:, 1], row, col, theta, n_slot, k_slot,
                             k_slot / np.maximum(n_slot, _EPS), theta * mean_attr)
    index = {(int(c), int(p)): i for i, (c, p) in enumerate(slots.tolist())}
    return ClickModelFit(products, slot_est, priors, mean_attr, iterations, converged, level,
                         index, counts)


# --------------------------------------------------------------------------- trend and business
@dataclass(frozen=True)
class TrendEstimates:
    """Recent against long-run: ``ratio`` = recent clicks / clicks the long-run corrected rate
    predicts at the recent slots, shrunk toward 1 (Gamma prior worth ``prior_clicks``)."""

    ratio: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    recent_clicks: np.ndarray
    expected_clicks: np.ndarray


def trend(fit: ClickModelFit, recent: CellCounts, prior_clicks: float = 10.0) -> TrendEstimates:
    """Per product trend of ``recent`` counts against ``fit`` (the long run, e.g. 28 days)."""
    n_products = len(fit.products.category)
    exam = _examination_cells(fit, recent)
    expected = fit.products.attractiveness_corrected * np.bincount(
        recent.product_idx, recent.impressions * exam, n_products)
    k = np.bincount(recent.product_idx, recent.clicks, n_products)
    shape, rate = prior_clicks + k, prior_clicks + expected
    a = (1 - fit.level) / 2
    return TrendEstimates(shape / rate, stats.gamma.ppf(a, shape) / rate,
                          stats.gamma.ppf(1 - a, shape) / rate, k, expected)


def _examination_cells(fit: ClickModelFit, counts: CellCounts) -> np.ndarray:
    keys = np.stack([counts.columns, counts.position], 1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    exam = fit.examination(uniq[:, 0], uniq[:, 1]) if len(uniq) else np.zeros(0)
    return exam[inv.ravel()]


@dataclass(frozen=True)
class BusinessEstimates:
    """Per product, per effective (examination-weighted) impression, each shrunk toward its
    category: add-to-cart and purchase rates (posterior means and intervals) and revenue."""

    add_to_cart_rate: np.ndarray
    add_to_cart_ci: tuple[np.ndarray, np.ndarray]
    conversion: np.ndarray
    conversion_ci: tuple[np.ndarray, np.ndarray]
    revenue_per_impression: np.ndarray


def business_metrics(fit: ClickModelFit, add_to_cart, purchases, revenue) -> BusinessEstimates:
    """Position-corrected add-to-cart, conversion and revenue per effective impression, given
    per-product totals over the same period as ``fit``."""
    eff = fit.products.effective_impressions
    cat = fit.products.category
    atc = np.minimum(np.asarray(add_to_cart, np.float64), eff)
    buy = np.minimum(np.asarray(purchases, np.float64), eff)
    rev = np.asarray(revenue, np.float64)
    atc_pri = category_priors(atc, eff, cat)
    atc_m, atc_lo, atc_hi, _ = beta_posterior(atc, eff, cat, atc_pri, fit.level)
    buy_pri = category_priors(buy, eff, cat)
    buy_m, buy_lo, buy_hi, _ = beta_posterior(buy, eff, cat, buy_pri, fit.level)
    # revenue = conversion x order value: shrink it as much as conversion, toward the category's
    n_cat = int(cat.max()) + 1 if cat.size else 0
    cat_rate = np.bincount(cat, rev, n_cat) / np.maximum(np.bincount(cat, eff, n_cat), _EPS)
    prior_n = np.array([p.a + p.b for p in buy_pri])[cat]
    rpi = (rev + prior_n * cat_rate[cat]) / (eff + prior_n)
    return BusinessEstimates(atc_m, (atc_lo, atc_hi), buy_m, (buy_lo, buy_hi), rpi)
