"""Base ranking: a configurable weighted blend of normalised business signals.

Signals (each mapped to [0, 1] over the products being ranked, so weights are comparable):

- ``sales``    units sold, log-scaled then min-max (sales are heavy-tailed);
- ``revenue``  price × sales, log-scaled then min-max;
- ``margin``   a ``margin`` attribute (fraction or amount), or price − ``cost`` when a
               ``cost`` attribute exists; min-max;
- ``newness``  half-life decay of the age from ``created_at`` (age measured against the
               newest product in the set, so the same input always ranks the same);
- ``stock``    stock health: 0 when out of stock, rising to 1 as stock reaches the
               median in-stock level.

Behaviour signals, from the shopper event log (the service layer computes them and passes
them in; each is position-corrected and, for products with little or no traffic, shrunk to
its category's prior):

- ``ctr``                     position-corrected click-through (attractiveness), min-max;
- ``conversion``              orders per effective impression, min-max;
- ``revenue_per_impression``  revenue per effective impression, min-max;
- ``trending``                recent clicks against what the long-run rate predicts, as a
                              log ratio, min-max.

A signal that no product has (all missing) drops out and the remaining weights are
renormalised; a product missing one signal gets 0 for it. Ties break by product id.
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from vismerch.errors import UsageError

CATALOG_SIGNALS: tuple[str, ...] = ("sales", "revenue", "margin", "newness", "stock")
BEHAVIOUR_SIGNALS: tuple[str, ...] = ("ctr", "conversion", "revenue_per_impression", "trending")
SIGNALS: tuple[str, ...] = CATALOG_SIGNALS + BEHAVIOUR_SIGNALS
DEFAULT_WEIGHTS: dict[str, float] = {
    "sales": 0.35, "revenue": 0.35, "margin": 0.1, "newness": 0.1, "stock": 0.1,
}
NEWNESS_HALF_LIFE_DAYS = 90.0


@dataclass
class Scores:
    """Blended score per product plus each normalised signal (for explanations)."""

    ids: list[str]
    score: np.ndarray  # (n,) float64 in [0, 1]
    signals: dict[str, np.ndarray]  # name -> (n,) in [0, 1]
    weights: dict[str, float]  # weights actually used (renormalised, present signals only)

    def order(self) -> np.ndarray:
        """Indices sorted by score descending, ties by id ascending."""
        return sort_by_score(self.score, self.ids)

    def explain(self, i: int, top: int = 2) -> str:
        """The signals that contribute most to product i's score, e.g.
        ``led by sales 0.91, newness 0.80``."""
        parts = sorted(((w * self.signals[name][i], name) for name, w in self.weights.items()),
                       reverse=True)[:top]
        shown = [f"{name} {self.signals[name][i]:.2f}" for value, name in parts if value > 0]
        return "led by " + ", ".join(shown) if shown else "no business signals"


def parse_weights(text: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"sales=0.5,newness=0.5"`` (or a mapping) -> weights; unknown names are an error."""
    if text is None or text == "":
        return dict(DEFAULT_WEIGHTS)
    items: dict[str, Any]
    if isinstance(text, Mapping):
        items = dict(text)
    else:
        items = {}
        for part in str(text).split(","):
            if not part.strip():
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise UsageError(f"weight {part.strip()!r} needs NAME=VALUE",
                                 hint="e.g. --weights sales=0.5,newness=0.3,stock=0.2")
            items[name.strip()] = value.strip()
    weights: dict[str, float] = {}
    for name, value in items.items():
        if name not in SIGNALS:
            raise UsageError(f"unknown score signal {name!r}", hint="signals: " + ", ".join(SIGNALS))
        try:
            weights[name] = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"weight for {name} is not a number: {value!r}") from None
        if weights[name] < 0 or not math.isfinite(weights[name]):
            raise UsageError(f"weight for {name} must be a finite number ≥ 0, got {value!r}")
    if not any(weights.values()):
        raise UsageError("at least one score weight must be positive")
    return weights


def _num(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out if math.isfinite(out) else math.nan


def _minmax(values: np.ndarray) -> np.ndarray:
    """Min-max to [0, 1]; NaN -> 0; a constant signal -> 1 where present (ties everyone)."""
    out = np.zeros(values.shape, np.float64)
    present = ~np.isnan(values)
    if not present.any():
        return out
    lo, hi = values[present].min(), values[present].max()
    out[present] = (values[present] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def _log_minmax(values: np.ndarray) -> np.ndarray:
    return _minmax(np.log1p(np.clip(values, 0, None)))


def _parse_date(value: Any) -> float:
    """ISO date/datetime -> days since the epoch (NaN if unreadable)."""
    if not value:
        return math.nan
    text = str(value).strip().replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        try:
            when = datetime.strptime(text[:10], "%Y-%m-%d")
        except ValueError:
            return math.nan
    # utctimetuple converts aware datetimes to UTC and takes naive ones as UTC
    return calendar.timegm(when.utctimetuple()) / 86400.0


def _attr(product: Any, name: str) -> Any:
    attrs = getattr(product, "attributes", None) or {}
    for key, value in attrs.items():
        if key.casefold() == name:
            return value
    return None


def raw_signals(products: Sequence[Any], half_life_days: float = NEWNESS_HALF_LIFE_DAYS
                ) -> dict[str, np.ndarray]:
    """Un-weighted signals in [0, 1]; a signal no product has is omitted."""
    n = len(products)
    price = np.array([_num(p.price) for p in products], np.float64)
    sales = np.array([_num(p.sales) for p in products], np.float64)
    stock = np.array([_num(p.stock) for p in products], np.float64)
    out: dict[str, np.ndarray] = {}
    if n == 0:
        return out
    if not np.isnan(sales).all():
        out["sales"] = _log_minmax(sales)
        revenue = price * sales
        if not np.isnan(revenue).all():
            out["revenue"] = _log_minmax(revenue)
    margin = np.array([_num(_attr(p, "margin")) for p in products], np.float64)
    if np.isnan(margin).all():
        cost = np.array([_num(_attr(p, "cost")) for p in products], np.float64)
        margin = price - cost
    if not np.isnan(margin).all():
        out["margin"] = _minmax(margin)
    days = np.array([_parse_date(p.created_at) for p in products], np.float64)
    if not np.isnan(days).all():
        age = np.nanmax(days) - days
        newness = np.power(0.5, age / max(half_life_days, 1e-9))
        out["newness"] = np.nan_to_num(newness, nan=0.0)
    if not np.isnan(stock).all():
        positive = stock[stock > 0]
        target = float(np.median(positive)) if positive.size else 1.0
        out["stock"] = np.clip(np.nan_to_num(stock, nan=0.0) / max(target, 1e-9), 0.0, 1.0)
    return out


def behaviour_signals(products: Sequence[Any], behaviour: Mapping[str, Mapping[str, float]] | None
                      ) -> dict[str, np.ndarray]:
    """``behaviour[signal][product id]`` -> signals in [0, 1]; a signal without values is omitted."""
    out: dict[str, np.ndarray] = {}
    for name in BEHAVIOUR_SIGNALS:
        values = (behaviour or {}).get(name)
        if not values:
            continue
        raw = np.array([_num(values.get(p.id)) for p in products], np.float64)
        if name == "trending":
            raw = np.log(np.clip(raw, 1e-6, None))
        if not np.isnan(raw).all():
            out[name] = _minmax(raw)
    return out


def wants_behaviour(weights: Mapping[str, float] | str | None) -> bool:
    """Do ``weights`` give a behaviour signal any weight (so its events must be read)?"""
    return any(parse_weights(weights).get(name, 0) > 0 for name in BEHAVIOUR_SIGNALS)


def score_products(products: Sequence[Any], weights: Mapping[str, float] | str | None = None,
                   half_life_days: float = NEWNESS_HALF_LIFE_DAYS,
                   behaviour: Mapping[str, Mapping[str, float]] | None = None) -> Scores:
    """Blend the signals of ``products`` (objects with the Product fields) into one score;
    ``behaviour``: the behaviour signals' values by product id (see the module docstring)."""
    wanted = parse_weights(weights)
    signals = raw_signals(products, half_life_days) | behaviour_signals(products, behaviour)
    used = {k: w for k, w in wanted.items() if k in signals and w > 0}
    total = sum(used.values())
    ids = [p.id for p in products]
    score = np.zeros(len(products), np.float64)
    if total > 0:
        used = {k: w / total for k, w in used.items()}
        for name, w in used.items():
            score += w * signals[name]
    return Scores(ids, score, {k: signals[k] for k in used}, used)


def sort_by_score(score: np.ndarray, ids: Sequence[str]) -> np.ndarray:
    """Indices by score descending, ties broken by id ascending (deterministic)."""
    id_rank = np.argsort(np.asarray(ids, dtype=object), kind="stable")
    tie = np.empty(len(ids), np.int64)
    tie[id_rank] = np.arange(len(ids))
    return np.lexsort((tie, -np.asarray(score, np.float64)))
