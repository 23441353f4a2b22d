"""VectorIndex: exact and HNSW neighbours, filters that still return k, persistence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vismerch.errors import StoreError, UsageError
from vismerch.indexes import vector as index_mod
from vismerch.indexes.vector import VectorIndex


def _data(n: int = 400, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, dim))
    x = centres[rng.integers(0, 8, n)] + 0.4 * rng.standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), [f"p{i:04d}" for i in range(n)]


def _brute(x: np.ndarray, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[list[int]]:
    scores = q @ x.T
    if allowed is not None:
        scores[:, ~allowed] = -np.inf
    return [list(np.argsort(-row, kind="stable")[:k]) for row in scores]


def test_exact_index_returns_true_neighbours():
    x, ids = _data()
    idx = VectorIndex.build(x, ids, exact_max=1000)
    assert idx.kind == "exact" and len(idx) == 400 and idx.dim == 16
    got = idx.search(x[:20], 5)
    want = _brute(x, x[:20], 5)
    for row, truth in zip(got, want, strict=True):
        assert [i for i, _ in row] == [ids[t] for t in truth]
        scores = [s for _, s in row]
        assert scores == sorted(scores, reverse=True)
    assert got[0][0] == ("p0000", pytest.approx(1.0, abs=1e-5))


def test_hnsw_index_finds_the_neighbours():
    x, ids = _data()
    idx = VectorIndex.build(x, ids, exact_max=10)
    assert idx.kind == "hnsw"
    got = idx.search(x[:50], 10)
    want = _brute(x, x[:50], 10)
    recall = np.mean([len({i for i, _ in g} & {ids[t] for t in w}) / 10
                      for g, w in zip(got, want, strict=True)])
    assert recall >= 0.95
    assert all(len(g) == 10 and g[0][0] == ids[q] for q, g in enumerate(got))


def test_vectors_are_normalised_on_build():
    x, ids = _data(n=20)
    idx = VectorIndex.build(3.0 * x, ids)
    (best,) = idx.search(7.0 * x[3], 1)
    assert best[0] == ("p0003", pytest.approx(1.0, abs=1e-5))


@pytest.mark.parametrize("exact_max", [1000, 10])
def test_mask_filter_returns_only_allowed_and_k_of_them(exact_max):
    x, ids = _data()
    idx = VectorIndex.build(x, ids, exact_max=exact_max)
    allowed = np.zeros(len(ids), bool)
    allowed[::7] = True
    got = idx.search(x[:30], 6, allowed=allowed)
    want = _brute(x, x[:30], 6, allowed)
    for row, truth in zip(got, want, strict=True):
        assert len(row) == 6
        assert all(allowed[ids.index(i)] for i, _ in row)
        assert [i for i, _ in row] == [ids[t] for t in truth]


def test_hnsw_selector_path_fills_short_queries(monkeypatch):
    # force the graph-with-selector path even for a small allowed set; whatever the graph
    # misses must be filled exactly so that k allowed results always come back
    monkeypatch.setattr(index_mod, "SUBSET_EXACT_MAX", 0)
    x, ids = _data(n=600)
    idx = VectorIndex.build(x, ids, exact_max=10)
    allowed = np.zeros(len(ids), bool)
    allowed[[5, 77, 301, 450, 599]] = True  # 5 of 600: far too selective for the graph alone
    got = idx.search(x[:40], 5, allowed=allowed)
    for row in got:
        assert sorted(i for i, _ in row) == ["p0005", "p0077", "p0301", "p0450", "p0599"]


def test_id_set_filter_and_k_larger_than_allowed():
    x, ids = _data(n=100)
    idx = VectorIndex.build(x, ids)
    got = idx.search(x[0], 10, allowed={"p0003", "p0010", "nope"})
    assert sorted(i for i, _ in got[0]) == ["p0003", "p0010"]
    assert idx.search(x[0], 5, allowed=set()) == [[]]
    as_list = [i in (4, 8) for i in range(100)]  # a plain list of bools is a mask too
    assert sorted(i for i, _ in idx.search(x[0], 5, allowed=as_list)[0]) == ["p0004", "p0008"]


def test_save_load_round_trip(tmp_path):
    x, ids = _data()
    for exact_max in (1000, 10):
        idx = VectorIndex.build(x, ids, exact_max=exact_max, meta={"fingerprint": "colour-v1"})
        path = idx.save(tmp_path / "index", "colour")
        assert path.name == "colour.faiss"
        assert sorted(p.name for p in path.parent.iterdir()) == ["colour.faiss", "colour.ids.json"]
        back = VectorIndex.load(tmp_path / "index", "colour")
        assert back.kind == idx.kind and back.ids == ids and back.meta == {"fingerprint": "colour-v1"}
        assert back.search(x[:5], 4) == idx.search(x[:5], 4)


def test_load_refuses_missing_or_inconsistent(tmp_path):
    with pytest.raises(StoreError):
        VectorIndex.load(tmp_path, "colour")
    x, ids = _data(n=30)
    VectorIndex.build(x, ids).save(tmp_path, "colour")
    doc = json.loads((tmp_path / "colour.ids.json").read_text())
    doc["ids"], doc["count"] = doc["ids"][:-1], 29
    (tmp_path / "colour.ids.json").write_text(json.dumps(doc))
    with pytest.raises(StoreError, match="disagree"):
        VectorIndex.load(tmp_path, "colour")


def test_empty_and_bad_inputs():
    empty = VectorIndex.build(np.zeros((0, 8), np.float32), [])
    assert len(empty) == 0 and empty.search(np.ones(8), 3) == [[]]
    x, ids = _data(n=10)
    with pytest.raises(UsageError):
        VectorIndex.build(x, ids[:-1])
    with pytest.raises(UsageError):
        VectorIndex.build(x, ["same"] * 10)
    idx = VectorIndex.build(x, ids)
    with pytest.raises(UsageError):
        idx.search(np.ones(5), 3)
    with pytest.raises(UsageError):
        idx.position("missing")
    assert idx.search(x[:2], 0) == [[], []]


@pytest.mark.gpu
def test_gpu_exact_search_matches_cpu():
    faiss = pytest.importorskip("faiss")
    if not hasattr(faiss, "get_num_gpus") or faiss.get_num_gpus() == 0:
        pytest.skip("faiss has no GPU support here")
    x, ids = _data()
    cpu = VectorIndex.build(x, ids)
    gpu = VectorIndex.build(x, ids, device="cuda")
    assert gpu._gpu is not None  # the GPU copy was made, so the comparison below tests it
    assert [[i for i, _ in r] for r in gpu.search(x[:10], 5)] == \
        [[i for i, _ in r] for r in cpu.search(x[:10], 5)]
