"""Base ranking: a weighted blend of normalised business signals, ties by id."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from vismerch.arrange.scoring import parse_weights, raw_signals, score_products, sort_by_score
from vismerch.errors import UsageError


@dataclass
class P:
    id: str
    price: float | None = None
    sales: float | None = None
    stock: float | None = None
    created_at: str | None = None
    attributes: dict = field(default_factory=dict)


def test_signals_are_normalised_and_missing_ones_drop_out():
    products = [P("a", 10, 100, 5, "2024-01-01"), P("b", 50, 10, 0, "2024-04-01"),
                P("c", None, None, None, None)]
    sig = raw_signals(products)
    assert set(sig) == {"sales", "revenue", "newness", "stock"}  # no margin or cost attribute
    for values in sig.values():
        assert values.min() >= 0 and values.max() <= 1
    assert sig["sales"][0] == 1.0 and sig["sales"][2] == 0.0
    assert sig["revenue"][0] > sig["revenue"][1]  # 1000 vs 500
    assert sig["newness"][1] == 1.0 and 0.0 < sig["newness"][0] < 0.5  # 91 days, half-life 90
    assert sig["stock"].tolist() == [1.0, 0.0, 0.0]
    scores = score_products(products, "sales=1,newness=1,margin=5")
    assert set(scores.weights) == {"sales", "newness"}  # margin absent: renormalised
    assert scores.weights["sales"] == pytest.approx(0.5)


def test_margin_from_attribute_or_cost():
    with_margin = [P("a", 10, 1, attributes={"Margin": "0.5"}), P("b", 10, 1, attributes={"margin": 0.1})]
    assert raw_signals(with_margin)["margin"].tolist() == [1.0, 0.0]
    with_cost = [P("a", 10, 1, attributes={"cost": 2}), P("b", 10, 1, attributes={"cost": 9})]
    assert raw_signals(with_cost)["margin"].tolist() == [1.0, 0.0]


def test_weights_change_the_order_and_ties_break_by_id():
    products = [P("new", 10, 1, 5, "2025-01-01"), P("best", 10, 100, 5, "2023-01-01")]
    by_sales = score_products(products, {"sales": 1})
    by_new = score_products(products, {"newness": 1})
    assert [products[i].id for i in by_sales.order()] == ["best", "new"]
    assert [products[i].id for i in by_new.order()] == ["new", "best"]
    assert "led by sales 1.00" in by_sales.explain(1)
    assert sort_by_score(np.array([1.0, 1.0, 2.0]), ["z", "a", "m"]).tolist() == [2, 1, 0]


@pytest.mark.parametrize("text, words", [
    ("sales", "NAME=VALUE"), ("luck=1", "unknown score signal"), ("sales=x", "not a number"),
    ("sales=-1", "≥ 0"), ("sales=0", "positive"),
])
def test_bad_weights(text, words):
    with pytest.raises(UsageError) as info:
        parse_weights(text)
    assert words in info.value.message


def test_behaviour_signals_rank_what_shoppers_click_and_drop_out_without_events():
    products = [P("a", 10, 100), P("b", 10, 100), P("c", 10, 100)]
    behaviour = {"ctr": {"a": 0.02, "b": 0.09, "c": 0.05}, "trending": {"a": 3.0, "b": 1.0, "c": 0.5}}
    by_ctr = score_products(products, "ctr=1", behaviour=behaviour)
    assert [products[i].id for i in by_ctr.order()] == ["b", "c", "a"]
    by_trend = score_products(products, "trending=1", behaviour=behaviour)
    assert [products[i].id for i in by_trend.order()] == ["a", "b", "c"]
    blended = score_products(products, "sales=0.5,ctr=0.5", behaviour=behaviour)
    assert blended.weights == {"sales": 0.5, "ctr": 0.5}
    # no events yet: the behaviour weight drops out and the catalog signals decide alone
    cold = score_products(products, "sales=0.5,ctr=0.5", behaviour=None)
    assert cold.weights == {"sales": 1.0}
    with pytest.raises(UsageError, match="unknown score signal"):
        parse_weights("clicks=1")
