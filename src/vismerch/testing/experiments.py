"""Simulated A/B tests with known truth, for the experiment statistics (vectorised numpy:
hundreds of experiments of tens of thousands of visitors take seconds).

Visitors come from one of two sources, the same for every variant:

- a pool of the shopper simulator's visitors, resampled with replacement
  (``pool=visitor_pool(simulate_shoppers(...))``): its impressions, clicks and purchases
  follow the grid examination / click / funnel model of ``vismerch.sample.shoppers``;
- a parametric :class:`VisitorModel` (the default): most visitors buy nothing, a buyer places
  one or more orders of a log-normal price times a quantity (heavy-tailed revenue), and each
  visitor has their own click propensity (so impressions are not independent trials).

    pool = visitor_pool(simulate_shoppers(visitors=20_000, seed=1))
    data = simulate_experiment(40_000, lifts=(0.0, 0.05), source=pool, seed=7)
    data["B"].revenue.mean() / data["A"].revenue.mean()     # about 1.05

``lifts`` (control first, 0 for the control) is the true relative lift of each variant:
``lift_on="conversion"`` scales the share of buyers (revenue and conversion per visitor rise
by the lift), ``"order_value"`` each buyer's revenue, ``"ctr"`` each visitor's click
probability. ``assigned_split`` draws the assignment from another split than the planned one
(a broken assignment, for the sample-ratio-mismatch check).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vismerch.experiments.stats import VisitorData

LIFT_ON = ("conversion", "order_value", "ctr")


@dataclass(frozen=True)
class VisitorModel:
    """Per-visitor behaviour of the control."""

    conversion: float = 0.03  # P(at least one order)
    repeat_orders: float = 0.15  # a buyer's extra orders (Poisson mean)
    price_log_mean: float = 3.5  # log-normal item price (median about 33)
    price_log_sd: float = 0.9
    quantity_p: float = 0.7  # units per order: geometric, at most max_quantity
    max_quantity: int = 10
    impressions_mean: float = 40.0  # 1 + negative binomial
    impressions_shape: float = 1.5
    ctr: float = 0.06  # mean click propensity; a visitor's is Beta with this concentration
    ctr_concentration: float = 8.0


def visitor_pool(traffic) -> VisitorData:
    """Per-visitor totals of a :class:`~vismerch.sample.shoppers.ShopperTraffic`."""
    n = int(traffic.visitor.max()) + 1 if traffic.impressions else 0
    v = traffic.visitor
    revenue = traffic.purchase * traffic.quantity * traffic.truth.price[traffic.product]
    return VisitorData(np.bincount(v, minlength=n), np.bincount(v, traffic.click, n),
                       np.bincount(v, traffic.purchase, n), np.bincount(v, revenue, n))


def _clicks(rng, impressions: np.ndarray, rate: np.ndarray) -> np.ndarray:
    return rng.binomial(impressions.astype(np.int64), np.clip(rate, 0.0, 1.0)).astype(np.float64)


def _from_model(rng, m: VisitorModel, n: int, lift: float, lift_on: str) -> VisitorData:
    conv = m.conversion * (1 + lift if lift_on == "conversion" else 1)
    k = rng.binomial(n, min(conv, 1.0))  # buyers first: the order of visitors means nothing
    orders = np.zeros(n)
    orders[:k] = 1 + rng.poisson(m.repeat_orders, k)
    n_orders = int(orders[:k].sum())
    units = np.minimum(rng.geometric(m.quantity_p, n_orders), m.max_quantity)
    value = np.exp(rng.normal(m.price_log_mean, m.price_log_sd, n_orders)) * units
    revenue = np.zeros(n)
    revenue[:k] = np.bincount(np.repeat(np.arange(k), orders[:k].astype(np.int64)), value, k)
    if lift_on == "order_value":
        revenue *= 1 + lift
    imp = 1.0 + rng.negative_binomial(m.impressions_shape,
                                      m.impressions_shape / (m.impressions_shape + m.impressions_mean), n)
    a = m.ctr * m.ctr_concentration
    rate = rng.beta(a, m.ctr_concentration - a, n) * (1 + lift if lift_on == "ctr" else 1)
    clicks = np.maximum(_clicks(rng, imp, rate), np.minimum(orders, imp))  # buyers clicked
    return VisitorData(imp, clicks, orders, revenue)


def _from_pool(rng, pool: VisitorData, buyers: np.ndarray, others: np.ndarray, n: int,
               lift: float, lift_on: str) -> VisitorData:
    share = len(buyers) / pool.n * (1 + lift if lift_on == "conversion" else 1)
    k = rng.binomial(n, min(share, 1.0))
    idx = np.concatenate([buyers[rng.integers(0, len(buyers), k)],
                          others[rng.integers(0, len(others), n - k)]])
    imp, clicks, orders, revenue = (getattr(pool, c)[idx] for c in
                                    ("impressions", "clicks", "orders", "revenue"))
    if lift_on == "order_value":
        revenue = revenue * (1 + lift)
    if lift_on == "ctr":  # every variant redrawn alike, from the visitor's own rate
        rate = np.divide(clicks, imp, out=np.zeros(n), where=imp > 0) * (1 + lift)
        clicks = np.maximum(_clicks(rng, imp, rate), np.minimum(orders, imp))
    return VisitorData(imp, clicks, orders, revenue)


def simulate_experiment(n_visitors: int, split: Sequence[float] = (0.5, 0.5),
                        lifts: Sequence[float] | None = None, *, lift_on: str = "conversion",
                        names: Sequence[str] | None = None, assigned_split: Sequence[float] | None = None,
                        source: VisitorData | VisitorModel | None = None,
                        seed: int | np.random.Generator | None = 0) -> dict[str, VisitorData]:
    """One experiment: ``n_visitors`` assigned at random by ``assigned_split`` (default the
    planned ``split``), each variant's visitors drawn with its true lift from ``source`` (a
    pool of simulated shoppers, or a parametric model; default ``VisitorModel()``). Returns
    the visitors per variant, named ``names`` (default A, B, C, ...), control first."""
    if lift_on not in LIFT_ON:
        raise ValueError(f"lift_on {lift_on!r} not one of {LIFT_ON}")
    k = len(split)
    lifts = tuple(lifts) if lifts is not None else (0.0,) * k
    names = tuple(names) if names is not None else tuple(chr(ord("A") + i) for i in range(k))
    if not (len(lifts) == len(names) == k) or (assigned_split is not None and len(assigned_split) != k):
        raise ValueError("split, lifts, names and assigned_split must have one entry per variant")
    rng = np.random.default_rng(seed)  # a Generator passed in is used as it is
    w = np.asarray(assigned_split if assigned_split is not None else split, np.float64)
    counts = rng.multinomial(n_visitors, w / w.sum())
    if isinstance(source, VisitorData):
        pool = source
        bought = pool.orders > 0
        buyers, others = np.flatnonzero(bought), np.flatnonzero(~bought)
        return {nm: _from_pool(rng, pool, buyers, others, int(c), lift, lift_on)
                for nm, c, lift in zip(names, counts, lifts, strict=True)}
    model = source or VisitorModel()
    return {nm: _from_model(rng, model, int(c), lift, lift_on)
            for nm, c, lift in zip(names, counts, lifts, strict=True)}
