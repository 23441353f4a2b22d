"""Candidate duplicate pairs from the framing- and light-invariant signatures
(dupes/signature.py), over a whole catalog or incrementally (new images against the rest).

Candidates, never all pairs:

* **box hash**: ``dup_hash`` (the DCT hash of the box signature) within ``hash_radius``
  bits: padding, letterbox, trims, light edits, resizing and re-encoding keep it close.
  Whole catalog: each image's 32 nearest, by the multi-index k-nearest search over
  distinct hashes of dupes/hashsearch.py (``hamming_nearest``); new images: one exact FAISS
  binary range search of the new hashes against all.
* **signature neighbours**: the ``neighbours`` nearest of each image by a 67-d vector
  (the box signature at 8x8, zero-mean and unit-norm, weighted 0.8, plus the product's
  a*b* and L* summary scaled by 1/100, weighted 0.2): crops that cut into the product move
  the hash but keep this vector near. Whole catalog: a VectorIndex (exact up to
  ``exact_max``, HNSW above, searched in ``locality_order``); new images: exact inner
  products against all.
* **other vectors** (optional): pairs the caller found by another backend's vectors, e.g.
  a neural backend's nearest neighbours.

Every candidate is then confirmed by dupes/confirm.py.
"""

from __future__ import annotations

import time

import faiss
import numpy as np

from vismerch.dupes import match
from vismerch.dupes.hashsearch import _codes, hamming_nearest, unique_sorted
from vismerch.dupes.model import DupRules, Signatures

VEC_GRID = 8
_QUERY_BATCH = 8_192


def signature_vectors(sigs: Signatures) -> np.ndarray:
    """(N, 67) float32 unit rows for the neighbour search (see the module docstring)."""
    n = len(sigs)
    coarse = np.empty((n, VEC_GRID * VEC_GRID), np.float32)
    for s in range(0, n, 65_536):  # blockwise: bounded temporaries at a million images
        block = match._shrink(sigs.sig[s:s + 65_536], VEC_GRID)
        coarse[s:s + len(block)] = match._unit(block.reshape(len(block), -1))
    ab, lightness = sigs.tone
    tone = np.concatenate([ab, lightness[:, None]], axis=1) / 100.0
    out = np.concatenate([0.8 * coarse, 0.2 * tone], axis=1).astype(np.float32)
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)


def unique_pairs(i: np.ndarray, j: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.minimum(i, j).astype(np.int64), np.maximum(i, j).astype(np.int64)
    keep = a != b
    key = unique_sorted(a[keep] * n + b[keep])
    return key // n, key % n


def candidates_all(sigs: Signatures, rules: DupRules, exact_max: int = 50_000,
                   timings: dict[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (i < j) over the whole catalog."""
    from vismerch.indexes.vector import VectorIndex, search_all

    timings = {} if timings is None else timings
    n = len(sigs)
    start = time.perf_counter()
    hi, hj, _ = hamming_nearest(sigs.hash, rules.hash_radius, 32)
    timings["box_hash"] = time.perf_counter() - start
    start = time.perf_counter()
    vec = signature_vectors(sigs)
    index = VectorIndex.build(vec, [str(p) for p in range(n)], exact_max=exact_max)
    vi_, vj_, _ = search_all(index, vec, rules.neighbours + 1, _QUERY_BATCH)
    ok = vj_ >= 0
    timings["signature_neighbours"] = time.perf_counter() - start
    start = time.perf_counter()
    out = unique_pairs(np.concatenate([hi, vi_[ok]]), np.concatenate([hj, vj_[ok]]), n)
    timings["merge"] = time.perf_counter() - start
    return out


def candidates_new(sigs: Signatures, new: np.ndarray, rules: DupRules,
                   timings: dict[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (i < j) with at least one end in ``new`` (positions): the new
    images against every image, the new ones included. Exact, in O(len(new) * N)."""
    timings = {} if timings is None else timings
    n = len(sigs)
    new = np.asarray(new, np.int64)
    if not new.size or n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start = time.perf_counter()
    codes = _codes(sigs.hash)
    flat = faiss.IndexBinaryFlat(64)
    flat.add(codes)
    lims, _, nbr = flat.range_search(codes[new], rules.hash_radius + 1)
    hi = np.repeat(new, np.diff(lims).astype(np.int64))
    hj = nbr.astype(np.int64)
    timings["box_hash"] = time.perf_counter() - start
    start = time.perf_counter()
    vec = signature_vectors(sigs)
    flat_ip = faiss.IndexFlatIP(vec.shape[1])
    flat_ip.add(vec)
    _, rows = flat_ip.search(vec[new], min(n, rules.neighbours + 1))
    vi = np.repeat(new, rows.shape[1])
    vj = rows.reshape(-1).astype(np.int64)
    ok = vj >= 0
    timings["signature_neighbours"] = time.perf_counter() - start
    return unique_pairs(np.concatenate([hi, vi[ok]]), np.concatenate([hj, vj[ok]]), n)


def index_candidates(index, row_of: dict[str, int], k: int,
                     query_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (signature rows) among each queried image's ``k`` nearest in another
    backend's :class:`~vismerch.indexes.vector.VectorIndex` (e.g. a neural one): all its
    rows, or the images at ``query_rows``. Ids the index lacks are skipped."""
    to_row = np.array([row_of.get(v, -1) for v in index.ids], dtype=np.int64)
    if query_rows is None:
        q_index = np.arange(len(index.ids))
    else:
        where = index.positions
        ids_of = {r: v for v, r in row_of.items()}
        q_index = np.array([where[ids_of[r]] for r in np.asarray(query_rows).tolist()
                            if ids_of.get(r) in where], dtype=np.int64)
    ii, jj = [], []
    for s in range(0, q_index.size, _QUERY_BATCH):
        q = q_index[s:s + _QUERY_BATCH]
        _, rows = index.search_positions(index.vectors_at(q), k + 1)
        ii.append(np.repeat(to_row[q], rows.shape[1]))
        jj.append(np.where(rows.reshape(-1) >= 0, to_row[rows.reshape(-1).clip(0)], -1))
    if not ii:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    i, j = np.concatenate(ii), np.concatenate(jj)
    ok = (i >= 0) & (j >= 0)
    return i[ok], j[ok]
