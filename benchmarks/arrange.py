"""Benchmark: grid arrangement speed and quality on generated catalogs.

Question: does `vismerch.arrange.engine.arrange` place 10,000 products in under 1 s on
one CPU core, while keeping ≥ 98 % of the plain sort-by-score order's business score
over the first 48 positions and removing ≥ 80 % of its look-alike neighbours there,
at every breakpoint (2, 3, 4, 5 columns) at once?

The catalogs are synthetic: styles (clusters of 1-8 look-alike products, pairwise
cosine about 0.85-0.97 in a 64-d space) whose members sell alike, so the plain score
order puts look-alikes side by side, as real colourways and near-variants do; colour
families, categories and brands are drawn per product/style.

    .venv/bin/python benchmarks/arrange.py [--sizes 500,10000,100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from vismerch.arrange.engine import ArrangeOptions, Products, arrange  # noqa: E402
from vismerch.arrange.explain import count_lookalikes, dcg  # noqa: E402
from vismerch.arrange.scoring import sort_by_score  # noqa: E402

FAMILIES = ["neutral"] * 4 + ["blue", "red", "green", "pink", "brown", "yellow", "purple",
                              "orange"]
WIDTHS = (2, 3, 4, 5)
DEPTH = 48
THRESHOLD = 0.9


def generate_catalog(n: int, seed: int = 0, dim: int = 64) -> dict:
    """Products grouped in look-alike styles whose members sell alike."""
    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(1, 9)))
    sizes[-1] -= sum(sizes) - n
    style = np.repeat(np.arange(len(sizes)), sizes)
    centres = rng.standard_normal((len(sizes), dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    spread = rng.uniform(0.12, 0.3, len(sizes))  # how tight each style is
    noise = rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    vectors = centres[style] + spread[style, None].astype(np.float32) * noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    popularity = rng.lognormal(0.0, 1.0, len(sizes))
    sales = popularity[style] * rng.lognormal(0.0, 0.15, n)
    score = np.log1p(sales)
    score = (score - score.min()) / (score.max() - score.min())
    return {
        "ids": [f"P{i:06d}" for i in range(n)],
        "scores": score,
        "vectors": vectors,
        "colour_family": [FAMILIES[i] for i in rng.integers(0, len(FAMILIES), n)],
        "category": [f"cat{c}" for c in rng.integers(0, 6, len(sizes))[style]],
        "brand": [f"brand{b}" for b in rng.integers(0, 20, len(sizes))[style]],
    }


def measure(n: int, mode: str = "mix", seed: int = 0) -> dict:
    cat = generate_catalog(n, seed)
    t0, c0 = time.perf_counter(), time.process_time()
    result = arrange(Products(cat["ids"], cat["scores"], cat["vectors"], colour_family=cat["colour_family"],
                              category=cat["category"], brand=cat["brand"]), columns=WIDTHS, mode=mode,
                     options=ArrangeOptions(lookalike_cosine=THRESHOLD, business_depth=DEPTH))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    plain = sort_by_score(cat["scores"], cat["ids"])  # the plain sort-by-score order
    v = cat["vectors"]
    business_plain = dcg(cat["scores"][plain], DEPTH)
    business = dcg(cat["scores"][result.order], DEPTH)
    per_width = {}
    for c in WIDTHS:
        before = count_lookalikes(v[plain], c, THRESHOLD, DEPTH)
        after = count_lookalikes(v[result.order], c, THRESHOLD, DEPTH)
        per_width[c] = {"plain": before, "arranged": after,
                        "drop": (1 - after / before) if before else 0.0}
    return {"n": n, "mode": mode, "seconds": seconds, "cpu_seconds": cpu,
            "business_ratio": business / business_plain, "per_width": per_width}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,10000,100000")
    parser.add_argument("--modes", default="mix,flow")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(int(n), mode) for n in args.sizes.split(",") for mode in args.modes.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"look-alike = cosine ≥ {THRESHOLD}; business = DCG of the first {DEPTH} positions; "
          f"widths {WIDTHS} optimised at once; one core")
    head = f"{'n':>7} {'mode':>5} {'wall s':>7} {'cpu s':>6} {'business':>9} " + " ".join(
        f"{f'{c} cols: before→after (drop)':>30}" for c in WIDTHS)
    print(head)
    for r in rows:
        cells = " ".join(
            f"{r['per_width'][c]['plain']:>13d} → {r['per_width'][c]['arranged']:<3d}"
            f"({r['per_width'][c]['drop']:>6.1%})" for c in WIDTHS)
        print(f"{r['n']:>7} {r['mode']:>5} {r['seconds']:>7.3f} {r['cpu_seconds']:>6.3f} "
              f"{r['business_ratio']:>9.2%} "
              + cells)


if __name__ == "__main__":
    main()
