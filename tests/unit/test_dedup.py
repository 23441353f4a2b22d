"""Duplicate search building blocks (dupes/): Hamming neighbours by multi-index hashing,
groups from pairs (union-find, representative, numbering), the incremental state's
decisions and how review decisions outlive recomputed groups."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from vismerch.dupes.groups import DupGroup, connected_components, group_pairs, split_apart
from vismerch.dupes.hashsearch import hamming_neighbours, plan_chunks, popcount
from vismerch.dupes.reviews import review_actions
from vismerch.dupes.state import changed_rows, dedup_key, kept_pairs


def _flip(h: int, bits) -> np.uint64:
    mask = 0
    for b in bits:
        mask |= 1 << int(b)
    return np.uint64(int(h) ^ mask)


def test_union_find_is_transitive():
    labels = connected_components(6, np.array([0, 4, 2]), np.array([1, 5, 1]))
    assert labels.tolist() == [0, 0, 0, 3, 4, 4]
    ids = [f"p{k}" for k in range(6)]
    groups = group_pairs(ids, np.array([0, 4, 2]), np.array([1, 5, 1]))
    assert [g.members for g in groups] == [["p0", "p1", "p2"], ["p4", "p5"]]


def test_a_pair_kept_apart_never_shares_a_group():
    """Original 0, its crop 1 and its colourway 2: the crop matched both (crops are not
    compared cell for cell), but 0 and 2 are apart: the weaker link, 1-2, goes."""
    i, j = np.array([0, 1, 3]), np.array([1, 2, 4])
    strength = np.array([0.99, 0.98, 0.97])
    keep = split_apart(5, i, j, strength, np.array([0]), np.array([2]))
    assert keep.tolist() == [True, False, True]
    # the strongest link first: with 1-2 the stronger, 0-1 goes instead
    keep = split_apart(5, i, j, np.array([0.98, 0.99, 0.97]), np.array([0]), np.array([2]))
    assert keep.tolist() == [False, True, True]
    # nothing apart inside a component: every edge stays
    assert split_apart(5, i, j, strength, np.array([0]), np.array([3])).all()
    assert split_apart(5, i, j, strength, np.zeros(0, np.int64), np.zeros(0, np.int64)).all()


def test_representative_order_and_numbering():
    ids = [f"p{k:04d}" for k in range(12)]
    i, j = np.array([3, 4, 5, 8]), np.array([4, 5, 6, 9])  # {3, 4, 5, 6} and {8, 9}
    penalty = np.zeros(12)
    resolution = np.full(12, 1000.0)
    penalty[[3, 4]] = 1  # p0005 and p0006 have fewer flags...
    resolution[6] = 2000  # ...and p0006 is larger
    resolution[9] = 5000
    groups = group_pairs(ids, i, j, quality_penalty=penalty, resolution=resolution)
    assert groups == [
        DupGroup(1, "p0006", ["p0006", "p0003", "p0004", "p0005"]),
        DupGroup(2, "p0009", ["p0009", "p0008"]),
    ]
    # all equal: smallest id wins; numbering follows the representative ids
    groups = group_pairs(ids, i, j)
    assert [(g.group, g.representative) for g in groups] == [(1, "p0003"), (2, "p0008")]
    assert group_pairs(ids, np.zeros(0, np.int64), np.zeros(0, np.int64)) == []


@pytest.mark.parametrize("radius", [0, 4, 10])
def test_multi_index_hashing_matches_brute_force(radius):
    rng = np.random.default_rng(radius)
    n = 1500
    h = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    for _ in range(400):  # plant pairs at every distance up to radius + 2, bits spread out
        a, b = rng.integers(n, size=2)
        h[b] = _flip(h[a], rng.choice(64, rng.integers(0, radius + 3), replace=False))
    dist = popcount(h[:, None] ^ h[None, :])
    iu = np.triu_indices(n, 1)
    hit = dist[iu] <= radius
    truth = set(zip(iu[0][hit].tolist(), iu[1][hit].tolist(), strict=True))
    for flat_max in (10**9, 10):  # exact flat index, then the chunked hash index
        a, b, d = hamming_neighbours(h, radius, max_neighbours=10**6, flat_max=flat_max)
        assert set(zip(a.tolist(), b.tolist(), strict=True)) == truth
        assert (d == dist[a, b]).all()


def test_chunk_plan_satisfies_pigeonhole():
    for n in (10**4, 10**6, 10**8):
        for radius in (0, 5, 10, 16):
            plan = plan_chunks(n, radius)
            assert sum(f + 1 for _, _, f in plan) > radius
            ends = [o + w for o, w, _ in plan]
            assert all(e <= o for e, (o, _, _) in zip(ends[:-1], plan[1:], strict=True)) and ends[-1] <= 64


def test_neighbour_cap_bounds_the_pairs():
    h = np.zeros(50, dtype=np.uint64)
    h[:] = np.arange(50, dtype=np.uint64)  # all within 6 bits of each other
    a, b, _ = hamming_neighbours(h, 10, max_neighbours=3)
    assert 0 < len(a) <= 50 * 3


def _state(ids, shas, a, b, key="k"):
    return SimpleNamespace(key=key, ids=ids, shas=shas,
                           pairs_by_id=lambda: ([ids[x] for x in a], [ids[y] for y in b]))


def test_incremental_state_searches_only_what_changed():
    ids = [f"p{k}" for k in range(6)]
    shas = [f"s{k}" for k in range(6)]
    last = _state(ids[:5], shas[:5], [0, 1], [1, 2])  # pairs p0-p1, p1-p2
    now = [*shas[:2], "changed", *shas[3:]]
    changed = changed_rows(last, "k", ids, now)
    assert changed.tolist() == [False, False, True, False, False, True]  # p2 changed, p5 new
    i, j, kept = kept_pairs(*last.pairs_by_id(), {pid: r for r, pid in enumerate(ids)}, changed)
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == [(0, 1)]  # p1-p2 is searched again
    assert kept.tolist() == [True, False]
    assert changed_rows(last, "other rules", ids, now) is None
    assert changed_rows(None, "k", ids, now) is None
    assert changed_rows(last, "k", ids, ["x"] * 6) is None  # most changed: search everything


def test_dedup_key_follows_the_dup_settings():
    settings = SimpleNamespace(as_dict=lambda: {"dup_layout": 0.965, "workers": 4})
    other = SimpleNamespace(as_dict=lambda: {"dup_layout": 0.97, "workers": 4})
    assert dedup_key(settings, []) != dedup_key(other, [])
    assert dedup_key(settings, ["clip"]) != dedup_key(settings, [])


def _decision(decision, keep=None, at="2026-01-01"):
    return {"decision": decision, "keep": keep, "at": at}


def test_review_decisions_outlive_recomputed_groups():
    groups = {1: ["a", "b"], 2: ["c", "d", "e"], 3: ["f", "g"]}
    decisions = {("a", "b"): _decision("distinct"),
                 ("c", "d"): _decision("keep", "d", "2026-01-01"),
                 ("d", "e"): _decision("keep", "e", "2026-01-02"),
                 ("f", "g"): _decision("keep", "x")}  # kept product no longer a member
    drop, keep = review_actions(groups, decisions)
    assert drop == [1]
    assert keep == {2: "e"}  # the newest decision wins
    # a group that gained an unreviewed member is not dropped by "distinct" on one pair
    assert review_actions({1: ["a", "b", "z"]}, decisions) == ([], {})
