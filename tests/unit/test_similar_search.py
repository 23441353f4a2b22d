"""More like this, filters, colour search and reciprocal rank fusion."""

from __future__ import annotations

import numpy as np
import pytest

from vismerch.errors import UsageError
from vismerch.features.colourspace import hex_to_lab
from vismerch.indexes.vector import VectorIndex
from vismerch.merch.search import Palettes, colour_scores, reciprocal_rank_fusion, search_by_colour
from vismerch.merch.similar import category_mask, in_stock_mask, similar_items


def _vectors(n: int = 60, dim: int = 12, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), \
        [f"p{i:03d}" for i in range(n)]


def _truth(x: np.ndarray, q: int, allowed: np.ndarray, k: int) -> list[int]:
    scores = x @ x[q]
    scores[~allowed] = -np.inf
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k] if np.isfinite(scores[i])]


def test_similar_items_with_vectors_and_index_agree():
    x, ids = _vectors()
    allowed = np.ones(len(ids), bool)
    allowed[3] = False
    want = [ids[i] for i in _truth(x, 3, allowed, 5)]
    from_vectors = similar_items(x, ids, "p003", 5)
    from_index = similar_items(VectorIndex.build(x, ids), None, "p003", 5)
    assert [i for i, _ in from_vectors] == want
    assert [i for i, _ in from_index] == want
    assert [s for _, s in from_vectors] == pytest.approx([s for _, s in from_index], abs=1e-5)


def test_similar_items_filters():
    x, ids = _vectors()
    categories = ["dress" if i % 3 else "Shoes " for i in range(len(ids))]
    stock = [None if i % 5 == 0 else i % 2 for i in range(len(ids))]
    mask = category_mask(categories, "shoes") & in_stock_mask(stock)
    got = similar_items(x, ids, "p003", 4, allowed_mask=mask, exclude_ids=["p009"])
    allowed = mask.copy()
    allowed[[3, 9]] = False
    assert [i for i, _ in got] == [ids[i] for i in _truth(x, 3, allowed, 4)]
    assert all(int(i[1:]) % 3 == 0 and int(i[1:]) != 9 for i, _ in got)
    # k larger than what the filter allows: all the allowed ones, no padding
    tiny = np.zeros(len(ids), bool)
    tiny[[10, 20]] = True
    assert sorted(i for i, _ in similar_items(x, ids, "p003", 10, allowed_mask=tiny)) == \
        ["p010", "p020"]
    # self stays out unless asked for
    assert similar_items(x, ids, "p003", 1, exclude_self=False)[0][0] == "p003"


def test_similar_items_index_with_caller_order():
    x, ids = _vectors()
    index = VectorIndex.build(x, ids, exact_max=10)  # HNSW
    order = list(reversed(ids))
    mask = np.array([int(i[1:]) % 2 == 0 for i in order])  # aligned with the caller's order
    got = similar_items(index, order, "p004", 6, allowed_mask=mask)
    assert len(got) == 6 and all(int(i[1:]) % 2 == 0 and i != "p004" for i, _ in got)


def test_masks_and_unknown_query():
    assert category_mask(["A", None, "a"], None).all()
    assert category_mask(["A", None, " a"], "a").tolist() == [True, False, True]
    assert in_stock_mask([0, 3, None, float("nan")]).tolist() == [False, True, True, True]
    assert in_stock_mask([0, 3, None], unknown=False).tolist() == [False, True, False]
    x, ids = _vectors(n=5)
    with pytest.raises(UsageError):
        similar_items(x, ids, "nope", 3)
    assert similar_items(x[:1], ids[:1], "p000", 3) == []


NAVY, RED, ROYAL, WHITE = (hex_to_lab(c) for c in ("#1f2a44", "#c8102e", "#4169e1", "#ffffff"))


def _palettes():
    ids = ["red-dress", "navy-dress", "navy-trim", "royal-shirt", "empty"]
    lab = np.zeros((5, 5, 3), np.float32)
    w = np.zeros((5, 5), np.float32)
    lab[0, :2], w[0, :2] = [RED, WHITE], [0.9, 0.1]
    lab[1, :2], w[1, :2] = [NAVY, WHITE], [0.85, 0.15]
    lab[2, :2], w[2, :2] = [RED, NAVY], [0.8, 0.2]
    lab[3, :1], w[3, :1] = [ROYAL], [1.0]
    lab[4] = np.nan  # no palette at all
    return ids, lab, w


def test_colour_search_ranks_navy_above_red():
    ids, lab, w = _palettes()
    got = search_by_colour(Palettes(ids, lab, w), NAVY, k=5)
    # royal blue is 28 CIEDE2000 units from navy: a different colour, below min_score
    assert [i for i, _ in got] == ["navy-dress", "navy-trim"]
    assert got[0][1] == pytest.approx(0.85, abs=0.01) and got[1][1] == pytest.approx(0.2, abs=0.01)
    red = search_by_colour(Palettes(ids, lab, w), RED, k=2)
    assert [i for i, _ in red] == ["red-dress", "navy-trim"]
    scores = colour_scores(lab, w, NAVY)
    assert scores[1] > scores[2] > scores[3] > scores[0] and scores[4] == 0.0


def test_colour_search_filter_and_empty():
    ids, lab, w = _palettes()
    mask = np.array([True, False, True, True, True])
    assert search_by_colour(Palettes(ids, lab, w), NAVY, k=1, allowed_mask=mask)[0][0] == "navy-trim"
    assert search_by_colour(Palettes([], np.zeros((0, 5, 3)), np.zeros((0, 5))), NAVY, k=3) == []
    with pytest.raises(UsageError):
        search_by_colour(Palettes(ids, lab[:, :, :2], w), NAVY, k=3)


def test_reciprocal_rank_fusion_by_hand():
    text = [("a", 9.0), ("b", 5.0), ("c", 1.0)]
    colour = [("b", 0.9), ("c", 0.8), ("d", 0.1)]
    fused = reciprocal_rank_fusion([text, colour], k=60)
    expected = {"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 63 + 1 / 62, "d": 1 / 63}
    assert [i for i, _ in fused] == ["b", "c", "a", "d"]
    assert dict(fused) == pytest.approx(expected)
    weighted = dict(reciprocal_rank_fusion([text, colour], k=60, weights=[2.0, 1.0]))
    assert weighted["a"] == pytest.approx(2 / 61)
    assert weighted["b"] == pytest.approx(2 / 62 + 1 / 61)
    assert reciprocal_rank_fusion([]) == [] and reciprocal_rank_fusion([[], []]) == []
    # a repeated id counts once, at its best rank; the next item keeps its place
    assert dict(reciprocal_rank_fusion([[("x", 1), ("x", 1), ("y", 1)]], k=0)) == \
        pytest.approx({"x": 1.0, "y": 0.5})
    with pytest.raises(UsageError):
        reciprocal_rank_fusion([text], weights=[1.0, 2.0])
