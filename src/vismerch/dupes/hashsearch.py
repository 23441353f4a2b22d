"""Near neighbours of 64-bit hashes within a Hamming radius, without comparing all pairs.

Exact ``IndexBinaryFlat`` range search up to ``flat_max`` distinct hashes; above that
multi-index hashing: the 64 bits are cut into chunks with per-chunk flip budgets ``f_c``
such that ``sum(f_c + 1) > radius``, so any pair within the radius matches some chunk up
to ``f_c`` flips (pigeonhole); each chunk is a FAISS ``IndexBinaryHash`` over the rotated
codes, searched with ``nflip = f_c``. The result is exact, in memory O(N * max_neighbours).
The duplicate search (dupes/candidates.py) takes its box-hash candidates from here.
"""

from __future__ import annotations

import math
from typing import Any

import faiss
import numpy as np

FLAT_MAX = 32_768  # distinct hashes searched exactly (all pairs) below this
_RESULT_BUDGET = 2_000_000  # range-search results held at once


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` by one sort: numpy 2's np.unique hashes, which is ~20x slower on
    the 10^7-10^8 int64 pair keys of a million-image catalog."""
    s = np.sort(np.asarray(x).reshape(-1))
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def popcount(x: np.ndarray) -> np.ndarray:
    """Set bits per uint64 element."""
    return np.bitwise_count(x).astype(np.int16)


def _rotate_right(h: np.ndarray, bits: int) -> np.ndarray:
    if bits % 64 == 0:
        return h
    return (h >> np.uint64(bits)) | (h << np.uint64(64 - bits))


def _codes(h: np.ndarray) -> np.ndarray:
    """uint64 (n,) -> uint8 (n, 8) little-endian, so FAISS reads bit k of the integer first."""
    return np.ascontiguousarray(h.astype("<u8")).view(np.uint8).reshape(-1, 8)


def plan_chunks(n: int, radius: int) -> list[tuple[int, int, int]]:
    """Multi-index hashing plan: [(bit offset, width, flips)] with sum(flips + 1) > radius.

    Chooses the chunk count by a cost model fitted on FAISS ``IndexBinaryHash``: each probed
    bucket costs ~0.2 us, each candidate compared ~0.6 ns, each chunk ~1.5 us per query.
    """
    units = radius + 1
    best: tuple[float, list[tuple[int, int, int]]] | None = None
    for m in range(2, 17):  # chunk widths must stay below 64 bits
        widths = [64 // m + (1 if c < 64 % m else 0) for c in range(m)]
        flips = [units // m - 1 + (1 if c < units % m else 0) for c in range(m)]
        cost, offset, plan = 0.0, 0, []
        for width, f in zip(widths, flips, strict=True):
            if f >= 0:  # f = -1: more chunks than needed, this one is not searched
                probes = sum(math.comb(width, t) for t in range(f + 1))
                cost += 1.5 + 0.2 * probes + 0.6e-3 * probes * n / 2.0**width
                plan.append((offset, width, f))
            offset += width
        if best is None or cost < best[0]:
            best = (cost, plan)
    assert best is not None
    return best[1]


def _range_pairs(index: Any, codes: np.ndarray, radius: int, k: int, batch: int,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directed (query, neighbour, distance) within radius, self excluded, k nearest per query."""
    qs, ns, ds = [], [], []
    for start in range(0, len(codes), batch):
        lims, dist, nbr = index.range_search(codes[start:start + batch], radius + 1)
        q = np.repeat(np.arange(start, start + len(lims) - 1), np.diff(lims).astype(np.int64))
        keep = nbr != q
        q, nbr, dist = q[keep], nbr[keep].astype(np.int64), dist[keep].astype(np.int16)
        q, nbr, dist = _keep_nearest(q, nbr, dist, k)
        qs.append(q)
        ns.append(nbr)
        ds.append(dist)
    return np.concatenate(qs), np.concatenate(ns), np.concatenate(ds)


def _keep_nearest(q: np.ndarray, nbr: np.ndarray, dist: np.ndarray, k: int,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query, the k smallest distances (ties by neighbour position); sorted by query."""
    if q.size == 0:
        return q, nbr, dist
    order = np.lexsort((nbr, dist, q))
    q, nbr, dist = q[order], nbr[order], dist[order]
    first = np.r_[0, np.flatnonzero(q[1:] != q[:-1]) + 1]
    rank = np.arange(q.size) - np.repeat(first, np.diff(np.r_[first, q.size]))
    keep = rank < k
    return q[keep], nbr[keep], dist[keep]


def hamming_neighbours(hashes: np.ndarray, radius: int, *, max_neighbours: int = 32,
                       flat_max: int = FLAT_MAX) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(a, b, distance)`` with a < b of positions whose hashes differ in <= radius bits.

    Each position keeps its ``max_neighbours`` nearest (so all pairs are found whenever no
    hash has more neighbours than that within the radius). Exact: no pair is missed by
    approximation.
    """
    h = np.asarray(hashes).astype(np.uint64, copy=False).reshape(-1)
    n = h.size
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int16))
    if n < 2 or radius < 0:
        return empty
    radius = min(int(radius), 64)
    if n <= flat_max or radius >= 32:
        indexes = [(faiss.IndexBinaryFlat(64), h)]
    else:
        indexes = []
        for offset, width, flips in plan_chunks(n, radius):
            idx = faiss.IndexBinaryHash(64, width)
            idx.nflip = flips
            indexes.append((idx, _rotate_right(h, offset)))
    parts = []
    batch = None
    for idx, rotated in indexes:
        codes = _codes(rotated)
        idx.add(codes)
        if batch is None:  # size query batches so one batch's results stay within budget
            sample = codes[:: max(1, n // 256)][:256]
            lims, _, _ = idx.range_search(sample, radius + 1)
            per_query = max(1.0, lims[-1] / len(sample))
            batch = int(np.clip(_RESULT_BUDGET / per_query, 256, 65_536))
        parts.append(_range_pairs(idx, codes, radius, max_neighbours, batch))
        idx.reset()
    q, nbr, dist = (np.concatenate(p) for p in zip(*parts, strict=True))
    # the same pair may come from several chunks: dedupe, then keep k nearest per query
    key, first = np.unique(q * n + nbr, return_index=True)
    q, nbr, dist = _keep_nearest(key // n, key % n, dist[first], max_neighbours)
    a, b = np.minimum(q, nbr), np.maximum(q, nbr)
    key, first = np.unique(a * n + b, return_index=True)
    return key // n, key % n, dist[first]


def hamming_nearest(hashes: np.ndarray, radius: int, k: int = 32, *, flat_max: int = FLAT_MAX,
                    batch: int = 16_384) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`hamming_neighbours` for catalogs where hashes crowd (many images within the
    radius of each other, many repeated): pairs ``(a, b, distance)``, a < b, each position
    with its ``k`` nearest within ``radius``. Up to ``flat_max`` hashes it is
    :func:`hamming_neighbours` itself; above, ties at the k-th distance may resolve to other
    positions of that distance (the ranking is by distance, then distinct hash, then position).

    Why: a range search returns every hash within the radius (hundreds each when a catalog
    holds many look-alikes) only for all but k to be dropped. Here each distinct hash asks
    each multi-index chunk for its k + 1 nearest distinct hashes (FAISS keeps a heap of k):
    any hash among the k + 1 nearest overall matches some chunk within its flips and is
    among that chunk's k + 1 nearest, so the union holds them all. A distinct hash's
    members then take the first k + 1 images of that list (by distance, then position).
    """
    h = np.asarray(hashes).astype(np.uint64, copy=False).reshape(-1)
    n = h.size
    if n <= flat_max or radius >= 32:
        return hamming_neighbours(h, radius, max_neighbours=k, flat_max=flat_max)
    uniq, inv = np.unique(h, return_inverse=True)
    u = uniq.size
    order = np.argsort(inv, kind="stable")  # members of each distinct hash, by position
    sizes = np.bincount(inv, minlength=u)
    starts = np.cumsum(sizes) - sizes
    kk = min(k + 1, u)
    nearest, near_d = _nearest_distinct(uniq, radius, kk, batch)
    # the first k + 1 images of each distinct hash's list: whole groups until the last
    valid = nearest >= 0
    count = np.where(valid, sizes[nearest.clip(0)], 0)
    before = np.cumsum(count, axis=1) - count
    take = np.clip(kk - before, 0, count)
    owner = np.repeat(np.arange(u), take.sum(axis=1))
    t = take.reshape(-1)
    first = np.repeat(starts[nearest.clip(0).reshape(-1)], t)
    offset = np.arange(t.sum()) - np.repeat(np.cumsum(t) - t, t)
    listed = order[first + offset]
    dist_l = np.repeat(near_d.reshape(-1), t)
    list_len = np.bincount(owner, minlength=u)
    list_start = np.cumsum(list_len) - list_len
    # every member x of a distinct hash against its list, itself left out, k at most
    x_pos, y_at = _ragged_cross(starts, sizes, list_start, list_len)
    x = order[x_pos]
    y, d = listed[y_at], dist_l[y_at]
    keep = x != y
    x, y, d = x[keep], y[keep], d[keep]
    group_first = np.r_[0, np.flatnonzero(x[1:] != x[:-1]) + 1]
    rank = np.arange(x.size) - np.repeat(group_first, np.diff(np.r_[group_first, x.size]))
    keep = rank < k
    a, b = np.minimum(x[keep], y[keep]), np.maximum(x[keep], y[keep])
    key, first_at = np.unique(a * n + b, return_index=True)
    return key // n, key % n, d[keep][first_at].astype(np.int16)


def _nearest_distinct(uniq: np.ndarray, radius: int, kk: int, batch: int,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(U, kk) positions into ``uniq`` of each distinct hash's ``kk`` nearest within the
    radius (-1 past the last) and their distances: the union over the multi-index
    chunks' own kk nearest, duplicates from several chunks dropped."""
    u = uniq.size
    indexes = []
    for offset, width, flips in plan_chunks(u, radius):
        idx = faiss.IndexBinaryHash(64, width)
        idx.nflip = flips
        codes = _codes(_rotate_right(uniq, offset))
        idx.add(codes)
        indexes.append((idx, codes))
    nearest = np.empty((u, kk), np.int64)
    near_d = np.empty((u, kk), np.int64)
    big = np.int64(65 * u)
    for s in range(0, u, batch):
        keys = []
        for idx, codes in indexes:
            dist, rows = idx.search(codes[s:s + batch], kk)
            dist, rows = dist.astype(np.int64), rows.astype(np.int64)
            keys.append(np.where((rows >= 0) & (dist <= radius), dist * u + rows, big))
        key = np.sort(np.concatenate(keys, axis=1), axis=1)
        key[:, 1:][key[:, 1:] == key[:, :-1]] = big  # the same hash from several chunks
        key = np.sort(key, axis=1)[:, :kk]
        nearest[s:s + len(key)] = np.where(key < big, key % u, -1)
        near_d[s:s + len(key)] = key // u
    return nearest, near_d


def _ragged_cross(starts_a: np.ndarray, sizes_a: np.ndarray, starts_b: np.ndarray,
                  sizes_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (x, y) with x in [starts_a, +sizes_a) and y in [starts_b, +sizes_b), per pair."""
    counts = sizes_a * sizes_b
    total = int(counts.sum())
    rep = np.repeat(np.arange(counts.size), counts)
    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return starts_a[rep] + offset // sizes_b[rep], starts_b[rep] + offset % sizes_b[rep]
