"""Near-duplicate groups from 64-bit perceptual hashes, confirmed by feature-vector cosine.

A pair of images is a duplicate under either rule (thresholds are settings):

* **same shot** — Hamming(phash) <= ``max_hamming`` (10 of 64) and cosine >= ``min_cosine``
  (0.92). Planted re-encodes, resizes and format changes move the phash 0 bits at the
  median and up to 10 (``benchmarks/dedup_evidence.py``); the cosine gate rejects the chance
  collisions that any large catalog has (one million random hashes hold about 5,000 pairs
  within 10 bits: C(10^6, 2) * P(Binomial(64, 1/2) <= 10)).
* **crop / reframe** — Hamming <= ``crop_hamming`` (16) and cosine >= ``crop_cosine`` (0.97).
  A crop moves the phash by several bits (0-10, median 4, for the 4-6 % crops of
  ``benchmarks/dedup_evidence.py``; more for larger crops), so it can land beyond
  ``max_hamming``; it is still caught when the content vectors are nearly identical.
  Candidates for this rule come from the vector index (each item's ``crop_neighbours``
  nearest), not from the hashes: a hash search at radius 16 costs several times the
  radius-10 one.

Both rules also need the **structure** check when 32x32 luma signatures are given
(``structure``, from the colour backend): their zero-mean normalised correlation, as they
are or with either one centre-zoomed by up to 1/0.8 (``ZOOMS``: a crop is the photo
magnified), must be >= ``min_structure`` (0.975). The hash and the colour vector summarise
an image too coarsely to tell one photo from another product of the same colour and
silhouette (954 of the 23,917 look-alike pairs that ``benchmarks/dedup_evidence.py``
measures pass both gates).
``benchmarks/dedup_evidence.py`` measures all three signals on generated catalogs with
planted copies (figures in ``benchmarks/RESULTS.md``). Over 8 catalogs: re-encoded,
resized and re-formatted copies correlate 0.974-1.0 and 4-6 % crops 0.937-1.0 (median
0.992; 66 of 91 crops passed the earlier check without the zoom search, 84 pass now);
look-alike products that pass the hash and cosine gates correlate at median 0.88 and 8 of
954 reach 0.975 (9 passed the earlier check). What the zoom search cannot tell apart: the
same product shot larger in the frame looks like a crop at 32x32 (that pair must already
have passed the hash and cosine gates).

Hash candidates are found without comparing all pairs: exact ``IndexBinaryFlat`` range
search up to ``flat_max`` distinct hashes, above that multi-index hashing — the 64 bits are
cut into chunks with per-chunk flip budgets ``f_c`` such that ``sum(f_c + 1) > radius``, so
any pair within the radius matches some chunk up to ``f_c`` flips (pigeonhole); each chunk
is a FAISS ``IndexBinaryHash`` over the rotated codes, searched with ``nflip = f_c``. The
result is exact, in memory O(N * max_neighbours).

Groups are connected components (transitive: a~b and b~c put a, b, c together). The
representative has the fewest quality flags (lowest ``quality_penalty``), then the largest
``resolution``, then the smallest id. Groups are numbered from 1 in order of representative
id; members list the representative first, then the others by id.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np

from vismerch.errors import UsageError

FLAT_MAX = 32_768  # distinct hashes searched exactly (all pairs) below this
_RESULT_BUDGET = 2_000_000  # range-search results held at once
_GROUP_ALL_PAIRS = 64  # identical-hash groups up to this size compare every pair
_PAIR_CHUNK = 65_536  # candidate pairs per cosine batch
_QUERY_BATCH = 65_536  # vector queries per batch
_SIGNATURE_PAIRS = 1_024  # pairs per structure-correlation chunk (its arrays stay in cache)


@dataclass(frozen=True)
class DupGroup:
    group: int
    representative: str
    members: list[str]


@dataclass(frozen=True)
class DupPairs:
    """Confirmed duplicate pairs (positions into the input, i < j) with their evidence."""

    i: np.ndarray
    j: np.ndarray
    hamming: np.ndarray
    cosine: np.ndarray


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` by one sort: numpy 2's np.unique hashes, which is ~20x slower on
    the 10^7-10^8 int64 pair keys of a million-image catalog."""
    s = np.sort(np.asarray(x).reshape(-1))
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


# -- hash neighbours ----------------------------------------------------------------------
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


# -- candidate expansion and confirmation -------------------------------------------------
def _ragged_cross(starts_a: np.ndarray, sizes_a: np.ndarray, starts_b: np.ndarray,
                  sizes_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (x, y) with x in [starts_a, +sizes_a) and y in [starts_b, +sizes_b), per pair."""
    counts = sizes_a * sizes_b
    total = int(counts.sum())
    rep = np.repeat(np.arange(counts.size), counts)
    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return starts_a[rep] + offset // sizes_b[rep], starts_b[rep] + offset % sizes_b[rep]


def _dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products of two (P, d) arrays."""
    return np.einsum("ij,ij->i", a, b)


def _cosines(vectors: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    out = np.empty(i.size, np.float32)
    for s in range(0, i.size, _PAIR_CHUNK):
        out[s:s + _PAIR_CHUNK] = _dots(vectors[i[s:s + _PAIR_CHUNK]], vectors[j[s:s + _PAIR_CHUNK]])
    return out


def _hash_candidates(h: np.ndarray, vectors: np.ndarray | None, radius: int, k: int,
                     min_cosine: float, flat_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Item pairs (i, j) whose hashes are within radius (distinct hashes via the hash index,
    identical hashes grouped first so a repeated image costs one query)."""
    uniq, inv = np.unique(h, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    sizes = np.bincount(inv, minlength=uniq.size)
    starts = np.cumsum(sizes) - sizes
    ua, ub, _ = hamming_neighbours(uniq, radius, max_neighbours=k, flat_max=flat_max)
    pairs_i, pairs_j = [], []
    # across distinct hashes: every member of one against every member of the other
    x, y = _ragged_cross(starts[ua], sizes[ua], starts[ub], sizes[ub])
    pairs_i.append(order[x])
    pairs_j.append(order[y])
    # within one hash: all pairs for small groups, vector neighbours for large ones
    small = np.flatnonzero((sizes >= 2) & (sizes <= _GROUP_ALL_PAIRS))
    x, y = _ragged_cross(starts[small], sizes[small], starts[small], sizes[small])
    keep = x < y
    pairs_i.append(order[x[keep]])
    pairs_j.append(order[y[keep]])
    for u in np.flatnonzero(sizes > _GROUP_ALL_PAIRS):
        members = order[starts[u]:starts[u] + sizes[u]]
        if vectors is None:  # no vectors to choose by: chain the members
            pairs_i.append(members[:-1])
            pairs_j.append(members[1:])
            continue
        a, b, _ = _vector_pairs(vectors[members], k, min_cosine, None, None)
        pairs_i.append(members[a])
        pairs_j.append(members[b])
    return np.concatenate(pairs_i).astype(np.int64), np.concatenate(pairs_j).astype(np.int64)


def _vector_pairs(vectors: np.ndarray, k: int, min_cosine: float, index: Any,
                  rows_to_items: np.ndarray | None, exact_max: int = 50_000,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, cosine), i < j, among each item's k nearest vectors with cosine >= min_cosine."""
    from vismerch.indexes.vector import VectorIndex, search_all

    if index is None:
        index = VectorIndex.build(vectors, [str(p) for p in range(len(vectors))],
                                  exact_max=exact_max)
        rows_to_items = None
    q, r, c = search_all(index, vectors, k + 1, _QUERY_BATCH)
    keep = (r >= 0) & (c >= min_cosine)
    q, r, c = q[keep], r[keep], c[keep]
    if rows_to_items is not None:
        r = rows_to_items[r]
    keep = (r >= 0) & (r != q)
    i, j, c = np.minimum(q[keep], r[keep]), np.maximum(q[keep], r[keep]), c[keep]
    key, first = np.unique(i * len(vectors) + j, return_index=True)
    return key // len(vectors), key % len(vectors), c[first]


def _index_rows_to_items(index: Any, ids: list[str]) -> np.ndarray | None:
    if list(index.ids) == ids:
        return None
    where = {v: p for p, v in enumerate(ids)}
    return np.array([where.get(v, -1) for v in index.ids], dtype=np.int64)


# Centre zooms tried when two signatures do not line up as they are: a crop of the same
# photo is the original magnified about (roughly) its centre, by up to 1/0.8 (a fifth of
# each side cut). Isotropic only: per-axis zooms would give look-alikes of another
# silhouette more ways to line up.
ZOOMS = (0.97, 0.94, 0.91, 0.88, 0.85, 0.82, 0.80)


@functools.lru_cache(maxsize=16)
def _zoom_taps(size: int, zoom: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower sample index and weight of the upper one, for a bilinear centre zoom."""
    centre = (size - 1) / 2
    at = centre + (np.arange(size) - centre) * zoom
    low = np.floor(at).astype(np.int64).clip(0, size - 2)
    return low, (at - low).astype(np.float32)


def _zoom_in(sig: np.ndarray, zoom: float) -> np.ndarray:
    """(P, S, S) signatures magnified by 1/zoom about their centres: bilinear, one axis at a
    time (two gathered lines blended per output line)."""
    low, w = _zoom_taps(sig.shape[-1], zoom)
    rows = sig[:, low] * (1 - w)[None, :, None] + sig[:, low + 1] * w[None, :, None]
    return rows[:, :, low] * (1 - w) + rows[:, :, low + 1] * w


def _unit(sig: np.ndarray) -> np.ndarray:
    """(P, S, S) -> (P, S*S) zero-mean, unit-norm rows: their dot product is the NCC."""
    flat = sig.reshape(len(sig), -1)
    flat = flat - flat.mean(axis=1, keepdims=True)
    return flat / np.maximum(np.linalg.norm(flat, axis=1, keepdims=True), 1e-6)


def structure_correlation(structure: np.ndarray, i: np.ndarray, j: np.ndarray,
                          zooms: tuple[float, ...] = ZOOMS,
                          good_enough: float = 1.0) -> np.ndarray:
    """Zero-mean normalised correlation of the (N, S, S) signatures of pairs (i, j): the best
    of the signatures as they are and of either one centre-zoomed by each of ``zooms`` (so
    a crop of a photo still lines up with the photo). Pairs already at ``good_enough`` as
    they are skip the zooms. Each signature is normalised, and zoomed, once per chunk of
    pairs, however many pairs it is in."""
    out = np.empty(i.size, np.float32)
    for s in range(0, i.size, _SIGNATURE_PAIRS):
        pi, pj = i[s:s + _SIGNATURE_PAIRS], j[s:s + _SIGNATURE_PAIRS]
        items, inverse = np.unique(np.concatenate([pi, pj]), return_inverse=True)
        a, b = inverse[:pi.size], inverse[pi.size:]
        sig = structure[items].astype(np.float32)
        plain = _unit(sig)
        best = _dots(plain[a], plain[b])
        todo = np.flatnonzero(best < good_enough)
        if todo.size and zooms:
            a, b = a[todo], b[todo]
            used = unique_sorted(np.concatenate([a, b]))
            zoomed = np.zeros_like(plain)
            for zoom in zooms:
                zoomed[used] = _unit(_zoom_in(sig[used], zoom))
                best[todo] = np.maximum(best[todo], np.maximum(_dots(zoomed[a], plain[b]),
                                                               _dots(plain[a], zoomed[b])))
        out[s:s + _SIGNATURE_PAIRS] = best
    return out


def passes_gates(hamming: np.ndarray, cosine: np.ndarray, max_hamming: int, min_cosine: float,
                 crop_hamming: int, crop_cosine: float) -> np.ndarray:
    """The two rules before the structure check: same shot (near hash, similar vector) or
    crop (hash further off, near-identical vector)."""
    return ((hamming <= max_hamming) & (cosine >= min_cosine)) | (
        (hamming <= crop_hamming) & (cosine >= crop_cosine))


def duplicate_pairs(ids: list[str], hashes: np.ndarray, vectors: np.ndarray | None, *,
                    structure: np.ndarray | None = None, min_structure: float = 0.975,
                    max_hamming: int = 10, min_cosine: float = 0.92, crop_hamming: int = 16,
                    crop_cosine: float = 0.97, max_neighbours: int = 32,
                    crop_neighbours: int = 8, index: Any = None,
                    exact_max: int = 50_000, flat_max: int = FLAT_MAX,
                    timings: dict[str, float] | None = None) -> DupPairs:
    """Confirmed duplicate pairs under the two rules in the module docstring.

    ``vectors`` (N, d) L2-normalised; None checks hashes only (no cosine gate, no crop
    rule). ``index`` is an optional prebuilt :class:`~vismerch.indexes.vector.VectorIndex`
    over (a superset of) these ids for the crop rule; without it one is built here. The
    crop rule runs when ``crop_hamming > max_hamming``. ``timings``, when given, receives
    seconds per step (hash_candidates, vector_candidates, confirm).
    """
    h = np.asarray(hashes).astype(np.uint64, copy=False).reshape(-1)
    n = len(ids)
    if h.size != n or (vectors is not None and len(vectors) != n):
        raise UsageError(f"dedup inputs disagree: {n} ids, {h.size} hashes, "
                         f"{None if vectors is None else len(vectors)} vectors")
    vec = None if vectors is None else np.ascontiguousarray(vectors, dtype=np.float32)
    timings = {} if timings is None else timings
    start = time.perf_counter()
    i, j = _hash_candidates(h, vec, max_hamming, max_neighbours, min_cosine, flat_max)
    timings["hash_candidates"] = time.perf_counter() - start
    if vec is not None and crop_hamming > max_hamming and n >= 2:
        start = time.perf_counter()
        rows = None if index is None else _index_rows_to_items(index, list(ids))
        vi, vj, _ = _vector_pairs(vec, crop_neighbours, crop_cosine, index, rows, exact_max)
        i, j = np.concatenate([i, vi]), np.concatenate([j, vj])
        timings["vector_candidates"] = time.perf_counter() - start
    start = time.perf_counter()
    if i.size:
        key = unique_sorted(np.minimum(i, j) * n + np.maximum(i, j))
        i, j = key // n, key % n
    dist = popcount(h[i] ^ h[j])
    cos = np.ones(i.size, np.float32) if vec is None else _cosines(vec, i, j)
    if vec is None:
        ok = dist <= max_hamming
    else:
        ok = passes_gates(dist, cos, max_hamming, min_cosine, crop_hamming, crop_cosine)
    if structure is not None and i.size:
        if len(structure) != n:
            raise UsageError(f"dedup inputs disagree: {n} ids, {len(structure)} structure signatures")
        check = np.flatnonzero(ok)
        ok[check] = structure_correlation(np.asarray(structure), i[check], j[check],
                                          good_enough=min_structure) >= min_structure
    timings["confirm"] = time.perf_counter() - start
    return DupPairs(i[ok], j[ok], dist[ok], cos[ok])


# -- grouping -----------------------------------------------------------------------------
def connected_components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Component label (the smallest member position) of each of n nodes, edges (i, j).

    Vectorised union-find: hook each edge's larger root under the smaller, then compress
    paths fully; repeat until no edge joins two roots.
    """
    parent = np.arange(n)
    i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
    while i.size:
        ri, rj = parent[i], parent[j]
        differ = ri != rj
        i, j, ri, rj = i[differ], j[differ], ri[differ], rj[differ]
        if not i.size:
            break
        np.minimum.at(parent, np.maximum(ri, rj), np.minimum(ri, rj))
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
    return parent


def group_pairs(ids: list[str], pairs: DupPairs, *, quality_penalty: Any = None,
                resolution: Any = None) -> list[DupGroup]:
    """Duplicate groups (>= 2 members) from confirmed pairs; see the module docstring."""
    n = len(ids)
    if pairs.i.size == 0:
        return []
    labels = connected_components(n, pairs.i, pairs.j)
    nodes = unique_sorted(np.concatenate([pairs.i, pairs.j]))
    penalty = np.zeros(n) if quality_penalty is None else np.asarray(quality_penalty, float)
    res = np.zeros(n) if resolution is None else np.asarray(resolution, float)
    penalty, res = np.nan_to_num(penalty, nan=np.inf), np.nan_to_num(res, nan=-np.inf)
    by_label: dict[int, list[int]] = {}
    for node in nodes.tolist():
        by_label.setdefault(int(labels[node]), []).append(node)
    groups = []
    for members in by_label.values():
        rep = min(members, key=lambda p: (penalty[p], -res[p], ids[p]))
        rest = sorted(ids[p] for p in members if p != rep)
        groups.append((ids[rep], [ids[rep], *rest]))
    groups.sort()
    return [DupGroup(g, rep, members) for g, (rep, members) in enumerate(groups, start=1)]


def find_duplicate_groups(ids: list[str], hashes: np.ndarray, vectors: np.ndarray | None, *,
                          structure: np.ndarray | None = None, min_structure: float = 0.975,
                          max_hamming: int = 10, min_cosine: float = 0.92,
                          quality_penalty: Any = None, resolution: Any = None,
                          crop_hamming: int = 16, crop_cosine: float = 0.97,
                          max_neighbours: int = 32, crop_neighbours: int = 8,
                          index: Any = None, exact_max: int = 50_000,
                          timings: dict[str, float] | None = None) -> list[DupGroup]:
    """Near-duplicate groups of ``ids`` (hashes uint64 (N,), vectors float32 (N, d)).

    ``quality_penalty`` (N,): lower is better (e.g. the number of quality flags);
    ``resolution`` (N,): larger is better (e.g. width * height). See the module docstring
    for the rules, the representative and the numbering.
    """
    ids = [str(v) for v in ids]
    if len(set(ids)) != len(ids):
        raise UsageError("dedup ids must be unique")
    if not ids:
        return []
    pairs = duplicate_pairs(ids, hashes, vectors, structure=structure,
                            min_structure=min_structure, max_hamming=max_hamming,
                            min_cosine=min_cosine, crop_hamming=crop_hamming,
                            crop_cosine=crop_cosine, max_neighbours=max_neighbours,
                            crop_neighbours=crop_neighbours, index=index,
                            exact_max=exact_max, timings=timings)
    start = time.perf_counter()
    groups = group_pairs(ids, pairs, quality_penalty=quality_penalty, resolution=resolution)
    if timings is not None:
        timings["group"] = time.perf_counter() - start
    return groups
