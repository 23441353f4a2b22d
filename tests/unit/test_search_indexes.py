"""Search indexes answer as a full scan would: the palette index against scoring every
palette, the IVF index against exact inner products, on made-up catalogs."""

from __future__ import annotations

import numpy as np
import pytest

from vismerch.indexes.palette import PaletteIndex
from vismerch.indexes.vector import Tuning, VectorIndex
from vismerch.merch.search import Palettes, search_by_colour


def made_up_palettes(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(n, 5, 3) Lab palettes around 40 colour families, some slots empty, weights summing to 1."""
    rng = np.random.default_rng(seed)
    families = np.stack([rng.uniform(15, 90, 40), rng.uniform(-60, 60, 40), rng.uniform(-60, 60, 40)], -1)
    lab = families[rng.integers(0, 40, (n, 5))] + rng.normal(0, 5, (n, 5, 3))
    weight = rng.dirichlet(np.ones(5), n)
    weight[rng.random((n, 5)) < 0.3] = 0.0
    weight[:, 0] += 1e-3  # every palette keeps a colour
    weight /= weight.sum(1, keepdims=True)
    lab[weight == 0] = np.nan  # padded slots, as the colour backend writes them
    return lab.astype(np.float32), weight.astype(np.float32)


QUERIES = ([32.0, 12.0, -45.0], [55.0, 0.0, 0.0], [60.0, 55.0, 40.0], [85.0, -20.0, 70.0], [5.0, 0.0, 0.0])


@pytest.mark.parametrize("k, min_score", [(10, 1e-3), (60, 1e-3), (5000, 0.1)])
def test_palette_index_matches_scoring_every_palette(k, min_score):
    lab, weight = made_up_palettes(3000)
    ids = [f"p{i:05d}" for i in range(len(lab))]
    index = PaletteIndex.build(np.arange(len(lab)), lab, weight)
    for query in QUERIES:
        rows, scores = index.search(np.array(query), k, sigma=10.0, min_score=min_score)
        full = search_by_colour(Palettes(ids, lab, weight), np.array(query), k, min_score=min_score)
        assert [ids[r] for r in rows] == [pid for pid, _ in full], query
        np.testing.assert_allclose(scores, [s for _, s in full], atol=1e-6)


def test_palette_index_looks_at_a_fraction_of_the_palettes():
    lab, weight = made_up_palettes(3000)
    index = PaletteIndex.build(np.arange(len(lab)), lab, weight)
    near = index.candidates(np.array(QUERIES[0]), 6.0)
    assert 0 < near.size < len(lab) // 5


def test_palette_index_filter_and_row_names():
    lab, weight = made_up_palettes(2000, seed=1)
    rows = np.arange(len(lab)) * 2 + 1  # the caller's rows need not be 0..n-1
    index = PaletteIndex.build(rows, lab, weight)
    allowed = np.zeros(2 * len(lab) + 1, bool)
    allowed[rows[::3]] = True
    got, _ = index.search(np.array(QUERIES[1]), 20, allowed, sigma=10.0, min_score=1e-3)
    ids = [f"p{i:05d}" for i in range(len(lab))]
    full = search_by_colour(Palettes(ids, lab, weight), np.array(QUERIES[1]), 20,
                            allowed_mask=np.arange(len(lab)) % 3 == 0)
    assert got.tolist() == [rows[int(pid[1:])] for pid, _ in full]


def test_palette_index_round_trip(tmp_path):
    lab, weight = made_up_palettes(500)
    index = PaletteIndex.build(np.arange(len(lab)), lab, weight)
    index.save(tmp_path / "p.npz", "token-a")
    assert PaletteIndex.load(tmp_path / "p.npz", "token-b") is None  # another build's file
    loaded = PaletteIndex.load(tmp_path / "p.npz", "token-a")
    a = index.search(np.array(QUERIES[2]), 15, sigma=10.0, min_score=1e-3)
    b = loaded.search(np.array(QUERIES[2]), 15, sigma=10.0, min_score=1e-3)
    assert a[0].tolist() == b[0].tolist()


def clustered(n: int, dim: int = 48, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, dim))
    return (centres[rng.integers(0, 60, n)] + 0.6 * rng.standard_normal((n, dim))).astype(np.float32)


def test_ivf_index_recall_against_exact(tmp_path):
    x = clustered(8000)
    ids = [f"v{i}" for i in range(len(x))]
    ivf = VectorIndex.build(x, ids, exact_max=100, tuning=Tuning(large="ivf", nprobe=16))
    exact = VectorIndex.build(x, ids)
    assert ivf.kind == "ivf" and exact.kind == "exact"
    queries = clustered(50, seed=9)
    recall = np.mean([len({i for i, _ in a} & {i for i, _ in b}) / 10
                      for a, b in zip(ivf.search(queries, 10), exact.search(queries, 10), strict=True)])
    assert recall >= 0.9
    ivf.save(tmp_path, "v")
    loaded = VectorIndex.load(tmp_path, "v", nprobe=16)
    assert loaded.kind == "ivf" and loaded.search(queries[:3], 5) == ivf.search(queries[:3], 5)


def test_ivf_filtered_search_returns_only_allowed_and_k_of_them(monkeypatch):
    from vismerch.indexes import vector

    monkeypatch.setattr(vector, "SUBSET_EXACT_MAX", 0)  # every filter through FAISS's selector
    x = clustered(6000, seed=2)
    ids = [f"v{i}" for i in range(len(x))]
    ivf = VectorIndex.build(x, ids, exact_max=100, tuning=Tuning(large="ivf", nprobe=4))
    for every in (2, 997):  # a loose filter, and one that leaves the probed cells short
        mask = np.arange(len(x)) % every == 0
        hits = ivf.search(x[:4], 12, mask)
        assert all(len(h) == min(12, int(mask.sum())) for h in hits)
        assert all(int(pid[1:]) % every == 0 for h in hits for pid, _ in h)
