"""A shopper simulator with known truth, for testing position-corrected analytics.

Products get a true attractiveness (Beta per category), a price and funnel rates; a few
published versions order them; visitors arrive over days, see the collection at a grid width,
scroll a random number of rows (impressions are logged for rows scrolled into view, as an
IntersectionObserver does), examine each seen slot with the grid examination model, click
when examined and attracted, then may add to cart and buy.

    traffic = simulate_shoppers(seed=3)                 # PBM behaviour, geometric rows
    traffic.truth.attractiveness, traffic.cells()        # truth, counts per cell
    traffic.to_table()  /  traffic.events()              # canonical events

``behaviour="cascade"`` is the misspecified generator: a shopper stops after a click with
probability ``stop_after_click`` (a dependent click model), and ``examination="fpattern"``
decays faster to the right on deeper rows (not row x column separable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

EVENT_COLUMNS = ("event_id", "type", "ts", "visitor", "collection", "version_id", "position",
                 "columns", "product_id", "quantity", "revenue", "currency")
EVENT_TYPES = ("impression", "click", "add_to_cart", "purchase")

Exam = Callable[[int, np.ndarray, np.ndarray], np.ndarray]


def _col_effect(columns: int, col: np.ndarray) -> np.ndarray:
    return 1.0 - 0.2 * col / max(columns - 1, 1)  # left column first (reading order)


EXAMINATION: dict[str, Exam] = {
    "geometric": lambda c, row, col: (0.35 + 0.65 * 0.85 ** row) * _col_effect(c, col),
    "power": lambda c, row, col: (1.0 + row) ** -0.45 * _col_effect(c, col),
    "step": lambda c, row, col: np.select([row < 2, row < 6], [1.0, 0.7], 0.45) * _col_effect(c, col),
    # not separable: the right-hand columns fade faster on deeper rows
    "fpattern": lambda c, row, col: (0.4 + 0.6 * 0.88 ** row)
    * np.maximum(0.97 - 0.03 * row, 0.5) ** col,
}
SCROLL_ON = {2: 0.96, 3: 0.94, 4: 0.93}  # chance to scroll one more row, by grid width


@dataclass(frozen=True)
class Version:
    """A published order, live on days [start, end)."""

    version_id: int
    start: date
    end: date
    order: tuple[str, ...]


@dataclass(frozen=True)
class ShopperTruth:
    """What the simulator knows and an estimator should recover. ``attractiveness`` is the
    click probability given examination; examination is 1 at position 1 for every width."""

    product_ids: tuple[str, ...]
    category: np.ndarray
    attractiveness: np.ndarray
    price: np.ndarray
    add_to_cart: np.ndarray  # P(add to cart | click)
    purchase: np.ndarray  # P(purchase | add to cart)
    versions: tuple[Version, ...]
    behaviour: str
    examination_model: str

    def examination(self, columns: int, position) -> np.ndarray:
        """Examination of a seen slot (given its row is in view) at 1-based ``position``."""
        p = np.asarray(position, np.int64) - 1
        return np.asarray(EXAMINATION[self.examination_model](columns, p // columns, p % columns),
                          np.float64)


@dataclass(frozen=True)
class ShopperTraffic:
    """Simulated impressions (one entry each) with their outcomes, and the truth."""

    truth: ShopperTruth
    collection: str
    currency: str
    seed: int
    visitor: np.ndarray
    ts_us: np.ndarray  # impression time, µs since the epoch (UTC)
    version_id: np.ndarray
    position: np.ndarray
    columns: np.ndarray  # 0 where the storefront did not report the width
    product: np.ndarray  # index into truth.product_ids
    click: np.ndarray
    add_to_cart: np.ndarray
    purchase: np.ndarray
    quantity: np.ndarray

    @property
    def impressions(self) -> int:
        return len(self.product)

    def cells(self) -> dict[str, np.ndarray]:
        """Counts per (product, version, position, columns): impressions, clicks,
        add_to_cart, purchases, revenue."""
        keys = np.stack([self.product, self.version_id, self.position, self.columns], 1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.ravel()
        revenue = self.purchase * self.quantity * self.truth.price[self.product]
        count = lambda w: np.bincount(inv, w, len(uniq))  # noqa: E731
        return {"product_idx": uniq[:, 0], "version_id": uniq[:, 1], "position": uniq[:, 2],
                "columns": uniq[:, 3], "impressions": count(None).astype(np.int64),
                "clicks": count(self.click).astype(np.int64),
                "add_to_cart": count(self.add_to_cart).astype(np.int64),
                "purchases": count(self.purchase).astype(np.int64), "revenue": count(revenue)}

    def _columns_of_events(self) -> dict[str, np.ndarray]:
        """Event columns as arrays, sorted by time (types in funnel order at equal times)."""
        parts = [np.arange(self.impressions)] + [np.flatnonzero(m) for m in
                                                 (self.click, self.add_to_cart, self.purchase)]
        src = np.concatenate(parts)
        kind = np.concatenate([np.full(len(p), t, np.int8) for t, p in enumerate(parts)])
        ts = self.ts_us[src] + np.array([0, 1, 30, 120], np.int64)[kind] * 1_000_000
        order = np.lexsort((kind, ts))
        src, kind, ts = src[order], kind[order], ts[order]
        buy = kind == 3
        qty = np.where(buy, self.quantity[src], np.where(kind == 2, 1, 0))
        return {"src": src, "kind": kind, "ts": ts, "qty": qty,
                "revenue": np.where(buy, self.truth.price[self.product[src]] * qty, np.nan)}

    def events(self) -> Iterator[dict]:
        """Events as dicts in the canonical schema, oldest first."""
        e = self._columns_of_events()
        ids = self.truth.product_ids
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        for j, (s, k, t) in enumerate(zip(e["src"].tolist(), e["kind"].tolist(), e["ts"].tolist(),
                                          strict=True)):
            cols = int(self.columns[s])
            yield {"event_id": f"sim{self.seed}-{j}", "type": EVENT_TYPES[k],
                   "ts": epoch + timedelta(microseconds=t), "visitor": f"v{self.seed}-{self.visitor[s]}",
                   "collection": self.collection, "version_id": int(self.version_id[s]),
                   "position": int(self.position[s]), "columns": cols or None,
                   "product_id": ids[self.product[s]], "quantity": int(e["qty"][j]) if k >= 2 else None,
                   "revenue": float(e["revenue"][j]) if k == 3 else None,
                   "currency": self.currency if k == 3 else None}

    def to_table(self):
        """The same events as a pyarrow Table (``ts`` timestamp[us, UTC])."""
        import pyarrow as pa

        e = self._columns_of_events()
        s, k = e["src"], e["kind"]
        n = len(s)
        cols = self.columns[s]
        return pa.table({
            "event_id": pa.array([f"sim{self.seed}-{j}" for j in range(n)], pa.string()),
            "type": pa.DictionaryArray.from_arrays(pa.array(k, pa.int8()),
                                                   pa.array(EVENT_TYPES)).cast(pa.string()),
            "ts": pa.array(e["ts"], pa.timestamp("us", tz="UTC")),
            "visitor": pa.array([f"v{self.seed}-{v}" for v in self.visitor[s].tolist()], pa.string()),
            "collection": pa.array([self.collection] * n, pa.string()),
            "version_id": pa.array(self.version_id[s], pa.int64()),
            "position": pa.array(self.position[s], pa.int64()),
            "columns": pa.array(cols, pa.int64(), mask=cols == 0),
            "product_id": pa.array(np.asarray(self.truth.product_ids, object)[self.product[s]], pa.string()),
            "quantity": pa.array(e["qty"], pa.int64(), mask=k < 2),
            "revenue": pa.array(e["revenue"], pa.float64(), mask=k != 3),
            "currency": pa.array([self.currency if x == 3 else None for x in k.tolist()], pa.string()),
        })


def _products(rng, n_products: int, n_categories: int, kappa: float):
    category = rng.integers(0, n_categories, n_products)
    cat_mean = rng.uniform(0.04, 0.2, n_categories)
    attractiveness = rng.beta(cat_mean[category] * kappa, (1 - cat_mean[category]) * kappa)
    price = np.round(np.exp(rng.normal(3.5, 0.6, n_products)), 2)
    p_atc, p_buy = rng.uniform(0.05, 0.3, n_products), rng.uniform(0.2, 0.6, n_products)
    return category, attractiveness, price, p_atc, p_buy


def _versions(rng, attractiveness, n_versions: int, days: int, start: date, pins, correlation: float):
    """Orders by a noisy score (merchandisers put likely sellers first), pins moved in place."""
    z = (attractiveness - attractiveness.mean()) / (attractiveness.std() + 1e-12)
    orders, bounds = [], np.linspace(0, days, n_versions + 1).round().astype(int)
    for _ in range(n_versions):
        order = [int(i) for i in np.argsort(-(correlation * z + rng.normal(size=len(z))))]
        for product, position in sorted((pins or {}).items(), key=lambda kv: kv[1]):
            order.remove(product)
            order.insert(position - 1, product)
        orders.append(np.array(order))
    return np.stack(orders), bounds


@dataclass(frozen=True)
class Scenario:
    """The simulated traffic's knobs (``simulate_shoppers``' keyword options).

    ``pins``: product index -> 1-based position in every version. ``columns_known``: share
    of visitors whose storefront reports the grid width. ``behaviour``: ``pbm`` or ``cascade``."""

    visitors: int = 4000
    days: int = 21
    n_versions: int = 3
    n_categories: int = 5
    seed: int = 0
    examination: str = "geometric"
    behaviour: str = "pbm"
    widths: dict[int, float] | None = None
    columns_known: float = 1.0
    pins: dict[int, int] | None = None
    stop_after_click: float = 0.6
    kappa: float = 25.0
    correlation: float = 0.5
    collection: str = "sim"
    currency: str = "EUR"
    start: date = date(2026, 11, 2)


def simulate_shoppers(n_products: int = 200, **options: Any) -> ShopperTraffic:
    """Simulate shoppers on one collection of ``n_products`` (deterministic for a seed);
    ``options`` are ``Scenario``'s fields."""
    sc = Scenario(**options)
    if sc.behaviour not in ("pbm", "cascade") or sc.examination not in EXAMINATION:
        raise ValueError(f"behaviour {sc.behaviour!r} / examination {sc.examination!r} unknown")
    rng = np.random.default_rng(sc.seed)
    category, attr, price, p_atc, p_buy = _products(rng, n_products, sc.n_categories, sc.kappa)
    orders, bounds = _versions(rng, attr, sc.n_versions, sc.days, sc.start, sc.pins, sc.correlation)
    ids = tuple(f"P{i:05d}" for i in range(n_products))
    versions = tuple(Version(v + 1, sc.start + timedelta(days=int(bounds[v])),
                             sc.start + timedelta(days=int(bounds[v + 1])), tuple(ids[i] for i in orders[v]))
                     for v in range(sc.n_versions))
    truth = ShopperTruth(ids, category, attr, price, p_atc, p_buy, versions, sc.behaviour, sc.examination)
    v = _visits(rng, sc, n_products, bounds)
    visitor = np.repeat(np.arange(sc.visitors), v.count)
    slot = np.arange(v.count.sum()) - np.repeat(np.cumsum(v.count) - v.count, v.count)
    cols = v.cols[visitor]
    row = slot // cols
    product = orders[v.version[visitor], slot]
    click = _clicks(rng, sc, v, visitor, slot, attr[product])
    atc = click & (rng.random(len(slot)) < p_atc[product])
    buy = atc & (rng.random(len(slot)) < p_buy[product])
    qty = np.where(buy, np.minimum(rng.geometric(0.7, len(slot)), 3), 0)
    reported = rng.random(sc.visitors) < sc.columns_known
    return ShopperTraffic(
        truth, sc.collection, sc.currency, sc.seed, visitor, v.ts[visitor] + row * 3_000_000,
        (v.version + 1)[visitor], slot + 1, np.where(reported[visitor], cols, 0), product,
        click, atc, buy, qty)


@dataclass(frozen=True)
class _Visits:
    """Per visitor: arrival (µs), version index, grid width, slots seen."""

    ts: np.ndarray
    version: np.ndarray
    cols: np.ndarray
    count: np.ndarray


def _visits(rng: np.random.Generator, sc: Scenario, n_products: int, bounds: np.ndarray) -> _Visits:
    widths = sc.widths or {4: 0.6, 3: 0.15, 2: 0.25}
    day = rng.integers(0, sc.days, sc.visitors)
    t0 = int(datetime(sc.start.year, sc.start.month, sc.start.day, tzinfo=UTC).timestamp()) * 1_000_000
    v_ts = np.sort(t0 + day * 86_400_000_000 + rng.integers(0, 86_400_000_000, sc.visitors))
    day = (v_ts - t0) // 86_400_000_000
    v_version = np.searchsorted(bounds, day, side="right") - 1
    w_keys = np.array(sorted(widths))
    v_cols = rng.choice(w_keys, sc.visitors, p=np.array([widths[w] for w in w_keys]) / sum(widths.values()))
    rows_total = -(-n_products // v_cols)
    scroll = np.array([SCROLL_ON.get(int(c), 0.93) for c in v_cols])
    v_rows = np.minimum(rng.geometric(1 - scroll), rows_total)
    return _Visits(v_ts, v_version, v_cols, np.minimum(v_rows * v_cols, n_products))


def _clicks(rng: np.random.Generator, sc: Scenario, v: _Visits, visitor: np.ndarray, slot: np.ndarray,
            attractiveness: np.ndarray) -> np.ndarray:
    """Which seen slots are clicked: examined (by the grid model) and attracted."""
    cols = v.cols[visitor]
    row, col = slot // cols, slot % cols
    theta = np.empty(len(slot))
    for c in np.unique(v.cols):
        m = cols == c
        theta[m] = EXAMINATION[sc.examination](int(c), row[m], col[m])
    click = (rng.random(len(slot)) < theta) & (rng.random(len(slot)) < attractiveness)
    if sc.behaviour == "cascade":
        # each click ends the visit with probability stop_after_click: later slots unexamined
        allowed = rng.geometric(sc.stop_after_click, sc.visitors)
        before = np.cumsum(click) - click
        start_of = np.repeat(np.cumsum(v.count) - v.count, v.count)
        click &= (before - np.concatenate([[0], np.cumsum(click)])[start_of]) < allowed[visitor]
    return click
