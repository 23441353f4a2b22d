"""Position-corrected attractiveness against simulated truth, beside raw CTR.

Traffic comes from ``vismerch.sample.shoppers``: the position-based model the estimator
assumes (three examination shapes) and a misspecified one (a cascade that stops after a
click with probability 0.6, and an F-pattern examination that is not row x column
separable). 200 products, 4000 visitors (~210k impressions), 3 published versions.

Reported per traffic model, over the seeds: Spearman of the corrected estimate and of raw
CTR with the truth, 95% interval coverage, the raw-CTR bias by row of the 4-column grid
(clicks / sum of impressions x true attractiveness of what was shown there: the
examination raw CTR silently carries), the estimated examination beside the truth, fit time.

    python benchmarks/clickmodel_eval.py [--seeds 1 2 3 4 5] [--json benchmarks/results/clickmodel_eval.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import date
from pathlib import Path

import numpy as np
from scipy import stats

from vismerch.events.clickmodel import CellCounts, fit_click_model
from vismerch.sample.shoppers import simulate_shoppers

HERE = Path(__file__).resolve().parent
MODELS = {
    "pbm-geometric": {"behaviour": "pbm", "examination": "geometric"},
    "pbm-power": {"behaviour": "pbm", "examination": "power"},
    "pbm-step": {"behaviour": "pbm", "examination": "step"},
    "pbm-geometric-no-width": {"behaviour": "pbm", "examination": "geometric", "columns_known": 0.0},
    "misspecified-cascade-fpattern": {"behaviour": "cascade", "examination": "fpattern"},
}
ROWS = 10


def one_run(seed: int, kw: dict) -> dict:
    traffic = simulate_shoppers(200, visitors=4000, seed=seed, **kw)
    c = traffic.cells()
    counts = CellCounts.build(c["product_idx"], c["position"], c["columns"], c["impressions"], c["clicks"])
    t0 = time.perf_counter()
    fit = fit_click_model(counts, traffic.truth.category)
    fit_s = time.perf_counter() - t0
    truth, p = traffic.truth.attractiveness, fit.products
    width = 4 if kw.get("columns_known", 1.0) > 0 else 0
    row = (c["position"] - 1) // 4
    four = c["columns"] == width
    shown = np.bincount(row[four], c["impressions"][four] * truth[c["product_idx"][four]], minlength=ROWS)
    raw_bias = np.bincount(row[four], c["clicks"][four], minlength=ROWS) / shown
    s = fit.slots
    est = [float(s.examination[(s.columns == width) & (s.position == 4 * r + 1)][0]) for r in range(ROWS)]
    return {
        "impressions": int(traffic.impressions), "clicks": int(traffic.click.sum()),
        "spearman_corrected": float(stats.spearmanr(p.attractiveness_corrected, truth).statistic),
        "spearman_raw_ctr": float(stats.spearmanr(p.raw_ctr, truth).statistic),
        "coverage_95": float(np.mean((p.ci_low <= truth) & (truth <= p.ci_high))),
        "mean_abs_error_corrected": float(np.mean(np.abs(p.attractiveness_corrected - truth))),
        "raw_bias_by_row": raw_bias[:ROWS].tolist(), "examination_by_row": est,
        "true_examination_by_row": traffic.truth.examination(4, 4 * np.arange(ROWS) + 1).tolist(),
        "fit_s": fit_s, "iterations": fit.iterations,
    }


def summarise(runs: list[dict]) -> dict:
    mean = lambda k: round(float(np.mean([r[k] for r in runs])), 4)  # noqa: E731
    return {
        "seeds": len(runs), "impressions_mean": int(mean("impressions")),
        "spearman_corrected": mean("spearman_corrected"), "spearman_raw_ctr": mean("spearman_raw_ctr"),
        "spearman_corrected_min": round(min(r["spearman_corrected"] for r in runs), 4),
        "corrected_beats_raw": sum(r["spearman_corrected"] > r["spearman_raw_ctr"] for r in runs),
        "coverage_95": mean("coverage_95"), "coverage_95_min": round(min(r["coverage_95"] for r in runs), 4),
        "mean_abs_error_corrected": mean("mean_abs_error_corrected"),
        "raw_bias_by_row": np.round(np.mean([r["raw_bias_by_row"] for r in runs], 0), 3).tolist(),
        "examination_by_row": np.round(np.mean([r["examination_by_row"] for r in runs], 0), 3).tolist(),
        "true_examination_by_row": np.round(runs[0]["true_examination_by_row"], 3).tolist(),
        "fit_s_median": round(float(np.median([r["fit_s"] for r in runs])), 3),
        "iterations_median": int(np.median([r["iterations"] for r in runs])),
    }


def big_fit_seconds(n_products: int = 10_000, visitors: int = 20_000) -> dict:
    traffic = simulate_shoppers(n_products, visitors=visitors, seed=1)
    c = traffic.cells()
    counts = CellCounts.build(c["product_idx"], c["position"], c["columns"], c["impressions"], c["clicks"])
    t0 = time.perf_counter()
    fit_click_model(counts, traffic.truth.category)
    return {"products": n_products, "impressions": int(traffic.impressions), "cells": len(counts.clicks),
            "fit_s": round(time.perf_counter() - t0, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--json", type=Path, default=HERE / "results" / "clickmodel_eval.json")
    args = ap.parse_args()
    traffic = {}
    for name, kw in MODELS.items():
        traffic[name] = summarise([one_run(seed, kw) for seed in args.seeds])
        t = traffic[name]
        print(f"{name:<32} spearman {t['spearman_corrected']:.3f} (min {t['spearman_corrected_min']:.3f})"
              f" raw {t['spearman_raw_ctr']:.3f}  coverage {t['coverage_95']:.3f}"
              f" (min {t['coverage_95_min']:.3f})  fit {t['fit_s_median']:.2f}s")
        print(f"{'':<32} raw CTR bias by row {t['raw_bias_by_row']}")
    big = big_fit_seconds()
    print(f"10k products: {big}")
    result = {"schema": "vismerch.bench/1", "date": date.today().isoformat(), "cpu": os.cpu_count(),
              "products": 200, "visitors": 4000, "versions": 3, "seeds": args.seeds,
              "traffic": traffic, "fit_10k_products": big}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
