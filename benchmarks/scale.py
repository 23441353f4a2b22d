"""Scale check for the index and dedup: one million synthetic products on this machine.

Question: do near-duplicate detection and the vector index stay practical at 10^6 items on
a small CPU box, and do they still find what they should?

Data: n clustered, L2-normalised float32 vectors.

Phases (seconds each): synthesise, index build (HNSW above ``exact_max``), a batch of
queries (recall@k against brute force on a sample), filtered queries.

Then the duplicate search (dupes/: candidates, confirm, groups, as derive runs it): n
synthetic signatures (32x32 layouts drawn from 2,000 smooth templates, so every image has
look-alikes, with per-image noise and colour cells per template) with planted copies that
went through a light edit (log-luma offset and scale) and, for half, a crop (a
sub-rectangle of 70-95% per side, resampled); the whole search (box hash + signature
neighbours, confirm, group), then ``--new`` (1,000) further images, half of them copies of stored
ones, searched incrementally against everything (what an ingest of new images costs).

    python benchmarks/scale.py --n 1000000            # prints a table, --json for JSON
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vismerch.indexes.vector import VectorIndex


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def synthesise(n: int, dim: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Ids and clustered unit vectors (1,000 centres, so every item has near neighbours)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, dim)).astype(np.float32)
    vectors = np.empty((n, dim), np.float32)
    for s in range(0, n, 100_000):  # blockwise keeps the temporaries small
        m = min(100_000, n - s)
        block = centres[rng.integers(0, len(centres), m)]
        block += 0.5 * rng.standard_normal((m, dim), dtype=np.float32)
        vectors[s:s + m] = _unit(block)
    return [f"p{i:07d}" for i in range(n)], vectors


def _brute_top_k(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    best_s = np.full((len(queries), k), -np.inf, np.float32)
    best_i = np.zeros((len(queries), k), np.int64)
    for s in range(0, len(vectors), 100_000):
        scores = queries @ vectors[s:s + 100_000].T
        cand_s = np.concatenate([best_s, scores], axis=1)
        cand_i = np.concatenate([best_i, np.arange(s, s + scores.shape[1])[None, :]
                                 .repeat(len(queries), 0)], axis=1)
        top = np.argpartition(-cand_s, k - 1, axis=1)[:, :k]
        best_s = np.take_along_axis(cand_s, top, 1)
        best_i = np.take_along_axis(cand_i, top, 1)
    return best_i


@dataclass(frozen=True)
class DupPhases:
    """The duplicate-search phases: ``planted`` copy pairs among the signatures, ``new``
    images searched incrementally after the whole search."""

    planted: int = 2000
    new: int = 1000


def run_scale(n: int = 1_000_000, dim: int = 128, *, queries: int = 1000, k: int = 10,
              exact_max: int = 50_000, seed: int = 0, log: Callable[[str], None] | None = print,
              dups: DupPhases | None = DupPhases()) -> dict:  # noqa: B008 (frozen, shared safely)
    """Run every phase at ``n`` items (the duplicate search's unless ``dups`` is None);
    returns seconds per phase and the quality figures."""
    say = log or (lambda _msg: None)
    out: dict = {"n": n, "dim": dim, "queries": queries, "k": k, "cpus": os.cpu_count(),
                 "seconds": {}}
    sec = out["seconds"]

    def phase(name: str, start: float) -> None:
        sec[name] = round(time.perf_counter() - start, 3)
        say(f"{name:<22} {sec[name]:9.2f} s")

    t = time.perf_counter()
    ids, vectors = synthesise(n, dim, seed)
    phase("synthesise", t)

    t = time.perf_counter()
    index = VectorIndex.build(vectors, ids, exact_max=exact_max)
    phase(f"index_build_{index.kind}", t)

    rng = np.random.default_rng(seed + 1)
    qrows = rng.choice(n, size=min(queries, n), replace=False)
    qvec = _unit(vectors[qrows] + 0.2 * rng.standard_normal((len(qrows), dim), dtype=np.float32)
                 / np.sqrt(dim))
    t = time.perf_counter()
    _, got = index.search_positions(qvec, k)
    phase("queries", t)
    out["queries_per_second"] = round(len(qrows) / max(sec["queries"], 1e-9))
    sample = min(200, len(qrows))
    truth = _brute_top_k(vectors, qvec[:sample], k)
    out[f"recall_at_{k}"] = round(float(np.mean(
        [len(set(g) & set(w)) / k for g, w in zip(got[:sample], truth, strict=True)])), 4)

    for name, share in (("queries_filter_10pct", 0.10), ("queries_filter_0.5pct", 0.005)):
        allowed = rng.random(n) < share
        t = time.perf_counter()
        _, rows = index.search_positions(qvec, k, allowed=allowed)
        phase(name, t)
        out[f"{name}_all_allowed"] = bool(allowed[rows[rows >= 0]].all())
        out[f"{name}_full_k"] = bool((rows >= 0).all())

    if dups is not None:
        out["signatures"] = run_signatures(n, new=dups.new, seed=seed, exact_max=exact_max, say=say,
                                           planted=dups.planted)
    say(json.dumps({k: v for k, v in out.items() if k != "seconds"}))
    return out


def _templates(count: int, rng) -> np.ndarray:
    """Smooth random 32x32 layouts: 8x8 noise upsampled bilinearly (uint8 range)."""
    import torch

    coarse = torch.from_numpy(rng.random((count, 1, 8, 8), dtype=np.float32))
    up = torch.nn.functional.interpolate(coarse, size=(32, 32), mode="bilinear",
                                         align_corners=False)[:, 0].numpy()
    return up * 180 + 40


def synthesise_signatures(n: int, seed: int = 0, planted: int = 2000):
    """Signature columns for n images and planted (original, copy) pairs (see the doc)."""
    from vismerch.dupes.match import _sample
    from vismerch.dupes.model import Signatures

    rng = np.random.default_rng([seed, 7])
    templates = _templates(2000, rng)
    colours = rng.integers(30, 226, size=(2000, 1, 1, 3))
    which = rng.integers(0, 2000, n)
    sig = np.empty((n, 32, 32), np.uint8)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        block = templates[which[s:s + m]] + rng.normal(0, 12, (m, 32, 32)).astype(np.float32)
        sig[s:s + m] = block.clip(0, 255)
    colour = np.empty((n, 8, 8, 3), np.uint8)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        colour[s:s + m] = (colours[which[s:s + m]] + rng.integers(-4, 5, (m, 8, 8, 3))).clip(0, 255)
    box = np.tile(np.array([0.2, 0.2, 0.8, 0.8], np.float32), (n, 1))
    aspect = np.ones(n, np.float32)
    planted = min(planted, n // 2)
    ends = rng.choice(n, size=2 * planted, replace=False).reshape(-1, 2)
    a, b = ends[:, 0], ends[:, 1]
    light = sig[a].astype(np.float32) * rng.uniform(0.85, 1.15, (planted, 1, 1)) \
        + rng.uniform(-15, 15, (planted, 1, 1))
    crop = np.arange(planted) % 2 == 1
    su = rng.uniform(0.75, 0.95, planted)
    x0 = np.where(rng.random(planted) < 0.5, 0.0, 1 - su)
    view = _sample(light[crop], x0[crop, None], np.zeros((crop.sum(), 1)), su[crop, None],
                   np.ones((crop.sum(), 1)), 32)[:, 0].reshape(-1, 32, 32)
    light[crop] = view
    sig[b] = (light + rng.normal(0, 2, light.shape)).clip(0, 255)
    colour[b] = colour[a]
    # a crop cut the box on one side (it touches the frame there) and is narrower: its
    # frame's width / height makes the box's pixel aspect su (the original's is 1)
    keeps_left = (x0[crop] == 0)[:, None]
    box[b[crop]] = np.where(keeps_left, [0.4, 0.2, 1.0, 0.8], [0.0, 0.2, 0.6, 0.8])
    aspect[b[crop]] = su[crop]
    sigs = Signatures(box, sig, colour, np.zeros(n, np.uint64), aspect)
    return sigs, ends, crop


def _box_hashes(sigs) -> np.ndarray:
    import torch

    from vismerch.features.hashing import pack_bits, phash_bits

    out = np.empty(len(sigs), np.uint64)
    for s in range(0, len(sigs), 65_536):
        out[s:s + 65_536] = pack_bits(phash_bits(torch.from_numpy(
            sigs.sig[s:s + 65_536].astype(np.float32))))
    return out


def run_signatures(n: int, *, new: int = 1000, seed: int = 0, exact_max: int = 50_000,
                   say: Callable[[str], None] = print, planted: int = 2000) -> dict:
    """The duplicate search at n images, whole and incremental (see the module docstring)."""
    from vismerch.config import load_settings
    from vismerch.dupes.candidates import candidates_all, candidates_new
    from vismerch.dupes.confirm import confirm, judge
    from vismerch.dupes.groups import group_pairs, split_apart
    from vismerch.dupes.model import DupRules, Signatures

    out: dict = {"n": n, "new": new, "seconds": {}}
    sec = out["seconds"]

    def phase(name: str, start: float) -> None:
        sec[name] = round(time.perf_counter() - start, 3)
        say(f"signatures {name:<22} {sec[name]:9.2f} s")

    t = time.perf_counter()
    sigs, ends, crop = synthesise_signatures(n + new, seed, planted)
    sigs.hash = _box_hashes(sigs)
    phase("synthesise", t)
    rules = DupRules.from_settings(load_settings(env={}))  # the defaults
    old = Signatures(sigs.box[:n], sigs.sig[:n], sigs.colour[:n], sigs.hash[:n],
                     sigs.frame_aspect[:n])
    timings: dict[str, float] = {}
    t = time.perf_counter()
    i, j = candidates_all(old, rules, exact_max, timings)
    phase("whole_candidates", t)
    for k, v in timings.items():
        sec[f"whole_{k}"] = round(v, 3)
    t = time.perf_counter()
    got = judge(old, i, j, rules)
    ok = got.ok
    phase("whole_confirm", t)
    t = time.perf_counter()
    keep = split_apart(n, i[ok], j[ok], got.strength[ok], i[got.apart], j[got.apart])
    groups = group_pairs([f"p{k:07d}" for k in range(n)], i[ok][keep], j[ok][keep])
    phase("whole_group", t)
    out["groups"] = len(groups)
    found = {(int(a), int(b)) for a, b in zip(i[ok], j[ok], strict=True)}
    inside = (ends < n).all(axis=1)
    hit = np.array([(min(a, b), max(a, b)) in found for a, b in ends[inside]])
    out["candidates"] = int(i.size)
    out["pairs"] = len(found)
    out["planted"] = int(inside.sum())
    out["planted_found_light"] = int(hit[~crop[inside]].sum())
    out["planted_found_crop"] = int(hit[crop[inside]].sum())
    planted_pairs = {(min(a, b), max(a, b)) for a, b in ends.tolist()}
    out["unplanted_pairs"] = len(found - planted_pairs)
    t = time.perf_counter()
    ci, cj = candidates_new(sigs, np.arange(n, n + new), rules)
    ok, _ = confirm(sigs, ci, cj, rules)
    phase(f"incremental_{new}", t)
    out["incremental_candidates"] = int(ci.size)
    out["incremental_pairs"] = int(ok.sum())
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="items (default 1,000,000)")
    parser.add_argument("--dim", type=int, default=128, help="vector dimension (128-256)")
    parser.add_argument("--queries", type=int, default=1000, help="queries per search batch")
    parser.add_argument("--planted", type=int, default=2000,
                        help="duplicate pairs planted among the signatures")
    parser.add_argument("--new", type=int, default=1000,
                        help="images searched incrementally after the whole search")
    parser.add_argument("--no-signatures", action="store_true",
                        help="skip the duplicate-search phases (dupes/)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON only")
    args = parser.parse_args(argv)
    result = run_scale(args.n, args.dim, queries=args.queries, log=None if args.json else print,
                       dups=None if args.no_signatures else DupPhases(args.planted, args.new))
    if args.json:
        print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
