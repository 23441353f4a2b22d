"""The shopper simulator: deterministic, canonical events, truth that matches its events."""

from __future__ import annotations

from datetime import UTC

import numpy as np
import pytest

from vismerch.sample.shoppers import EVENT_COLUMNS, EVENT_TYPES, simulate_shoppers


def test_deterministic_and_big_enough():
    a, b = simulate_shoppers(seed=11), simulate_shoppers(seed=11)
    assert a.impressions == b.impressions >= 200_000
    assert np.array_equal(a.click, b.click) and np.array_equal(a.truth.attractiveness, b.truth.attractiveness)
    assert not np.array_equal(a.truth.attractiveness, simulate_shoppers(seed=12).truth.attractiveness)
    assert [v.version_id for v in a.truth.versions] == [1, 2, 3]
    assert all(v.start < v.end for v in a.truth.versions)


def test_events_follow_the_canonical_schema():
    traffic = simulate_shoppers(60, visitors=200, seed=3)
    events = list(traffic.events())
    assert all(tuple(e) == EVENT_COLUMNS for e in events)
    assert len({e["event_id"] for e in events}) == len(events)
    assert {e["type"] for e in events} == set(EVENT_TYPES)
    assert all(e["ts"].tzinfo is UTC for e in events)
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    buys = [e for e in events if e["type"] == "purchase"]
    price = dict(zip(traffic.truth.product_ids, traffic.truth.price, strict=True))
    for e in buys:
        assert e["currency"] == "EUR" and e["quantity"] >= 1
        assert e["revenue"] == pytest.approx(price[e["product_id"]] * e["quantity"])
    imps = [e for e in events if e["type"] == "impression"]
    assert all(e["quantity"] is None and e["revenue"] is None for e in imps)
    table = traffic.to_table()
    assert table.column_names == list(EVENT_COLUMNS) and table.num_rows == len(events)
    assert table.column("event_id").to_pylist() == [e["event_id"] for e in events]
    assert table.column("revenue").null_count == len(events) - len(buys)


def test_impressions_only_for_rows_scrolled_into_view():
    t = simulate_shoppers(200, visitors=2000, seed=4)
    for v in np.unique(t.visitor)[:200]:
        m = t.visitor == v
        cols, pos = int(t.columns[m][0]), np.sort(t.position[m])
        assert np.array_equal(pos, np.arange(1, len(pos) + 1))  # a prefix of the grid
        assert len(pos) % cols == 0 or len(pos) == 200  # whole rows


def test_click_rates_follow_the_truth():
    t = simulate_shoppers(200, visitors=4000, seed=5, examination="step")
    exam = np.zeros(t.impressions)
    for c in np.unique(t.columns):
        exam[t.columns == c] = t.truth.examination(int(c), t.position[t.columns == c])
    expected = exam * t.truth.attractiveness[t.product]
    assert t.click.sum() == pytest.approx(expected.sum(), rel=0.03)
    top = t.position <= t.columns
    assert t.click[top].mean() > t.click[t.position > 5 * t.columns].mean()
    assert np.all(t.add_to_cart <= t.click) and np.all(t.purchase <= t.add_to_cart)


def test_cascade_clicks_less_and_unknown_widths():
    pbm = simulate_shoppers(seed=6)
    cascade = simulate_shoppers(seed=6, behaviour="cascade", examination="geometric")
    assert cascade.click.sum() < 0.8 * pbm.click.sum()
    unknown = simulate_shoppers(100, visitors=300, seed=6, columns_known=0.0)
    assert np.all(unknown.columns == 0)
    assert all(e["columns"] is None for e in unknown.events())
    with pytest.raises(ValueError):
        simulate_shoppers(behaviour="random")
