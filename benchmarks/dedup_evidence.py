"""The evidence behind the near-duplicate thresholds (dup_* settings, merch/dedup.py).

For generated catalogs with planted near-duplicates (re-encoded, resized, centre-cropped,
PNG and WebP copies) it ingests each catalog and measures, for

* every **true pair** (same planted group), by the copy's transform, and
* the **hardest non-duplicates**: each product's nearest neighbours by colour vector that
  are not in its group (same colour and silhouette: the look-alikes a merchandiser would
  not want merged),

the perceptual-hash Hamming distance, the vector cosine and the 32x32 structure
correlation; then how many of each pass the settings' rules with and without the
structure check.

    python benchmarks/dedup_evidence.py [--n 800] [--seeds 0 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import date
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
NEIGHBOURS = 5  # hardest non-duplicates per product


def _pairs_for(seed: int, n: int, out: Path, workers: int) -> dict[str, list[dict]]:
    from vismerch.catalog.store import Store
    from vismerch.merch.dedup import popcount, structure_correlation
    from vismerch.pipeline.ingest import ingest
    from vismerch.sample import generate_catalog

    root = out / f"dedup-evidence-{n}-{seed}"
    shutil.rmtree(root, ignore_errors=True)
    catalog = generate_catalog(root / "catalog", n=n, seed=seed, workers=workers)
    ingest(catalog.manifest_path, root / "store", workers=workers, progress=False)
    truth = json.loads((root / "catalog" / "truth.json").read_text())
    with Store.open(root / "store") as store:
        features = store.load_features("colour")
    row = {pid: r for r, pid in enumerate(features.ids)}
    group_of = {pid: g for g, members in enumerate(truth["duplicate_groups"]) for pid in members}
    transform = {pid: p.get("duplicate_transform") for pid, p in truth["products"].items()}

    positives, kinds = [], []
    for members in truth["duplicate_groups"]:
        present = [m for m in members if m in row]
        for a in range(len(present)):
            for b in range(a + 1, len(present)):
                x, y = present[a], present[b]
                positives.append((row[x], row[y]))
                kinds.append(transform.get(y) or transform.get(x) or "copy")
    vectors = features.vectors
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    negatives = set()
    for i, pid in enumerate(features.ids):
        same = group_of.get(pid)
        others = [int(j) for j in np.argsort(-sims[i])
                  if same is None or group_of.get(features.ids[j]) != same]
        negatives.update((min(i, j), max(i, j)) for j in others[:NEIGHBOURS])
    hashes = features.columns["phash"].astype(np.uint64)
    structure = features.columns["structure"]

    def measure(pairs: list[tuple[int, int]], labels: list[str]) -> list[dict]:
        if not pairs:
            return []
        i = np.array([p[0] for p in pairs])
        j = np.array([p[1] for p in pairs])
        ham = popcount(hashes[i] ^ hashes[j])
        cos = np.einsum("ij,ij->i", vectors[i], vectors[j])
        ncc = structure_correlation(structure, i, j)
        as_is = structure_correlation(structure, i, j, zooms=())
        return [{"kind": k, "hamming": int(h), "cosine": float(c), "structure": float(s),
                 "structure_as_is": float(a)}
                for k, h, c, s, a in zip(labels, ham, cos, ncc, as_is, strict=True)]

    neg = sorted(negatives)
    return {"positive": measure(positives, kinds), "negative": measure(neg, ["look-alike"] * len(neg))}


def _passes(p: dict, s, structure: str | None, threshold: float | None = None) -> bool:
    """The settings' rules; ``structure`` names the correlation checked (None: none)."""
    from vismerch.merch.dedup import passes_gates

    gates = bool(passes_gates(np.array(p["hamming"]), np.array(p["cosine"]), s.dup_hash_distance,
                              s.dup_cosine, s.dup_crop_hamming, s.dup_crop_cosine))
    limit = s.dup_structure if threshold is None else threshold
    return gates and (structure is None or p[structure] >= limit)


def summarise(pairs: dict[str, list[dict]]) -> dict:
    from vismerch.config import load_settings

    s = load_settings()
    out: dict = {"settings": {k: getattr(s, k) for k in (
        "dup_hash_distance", "dup_cosine", "dup_crop_hamming", "dup_crop_cosine", "dup_structure")}}
    groups: dict[str, list[dict]] = {}
    for p in pairs["positive"]:
        groups.setdefault(p["kind"], []).append(p)
    groups["look-alike (not a duplicate)"] = pairs["negative"]
    for kind, items in groups.items():
        ham = np.array([p["hamming"] for p in items])
        cos = np.array([p["cosine"] for p in items])
        ncc = np.array([p["structure"] for p in items])
        out[kind] = {
            "pairs": len(items),
            "hamming_min_median_max": [int(ham.min()), float(np.median(ham)), int(ham.max())],
            "cosine_min_median_max": [round(float(cos.min()), 4), round(float(np.median(cos)), 4),
                                      round(float(cos.max()), 4)],
            "structure_min_median_max": [round(float(ncc.min()), 4), round(float(np.median(ncc)), 4),
                                         round(float(ncc.max()), 4)],
            "pass_hash_and_cosine": sum(_passes(p, s, None) for p in items),
            "pass_with_structure": sum(_passes(p, s, "structure") for p in items),
            # the check before the zoom search: signatures as they are, at 0.96
            "pass_with_structure_as_is_0.96": sum(_passes(p, s, "structure_as_is", 0.96)
                                                  for p in items),
        }
        gated = np.array([p["structure"] for p in items if _passes(p, s, None)])
        if gated.size:  # what the structure check decides on
            out[kind]["structure_of_those_min_median_max"] = [
                round(float(gated.min()), 4), round(float(np.median(gated)), 4),
                round(float(gated.max()), 4)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pairs: dict[str, list[dict]] = {"positive": [], "negative": []}
    for seed in args.seeds:
        got = _pairs_for(seed, args.n, args.out, args.workers)
        for key in pairs:
            pairs[key].extend(got[key])
    summary = summarise(pairs)
    summary.update(date=date.today().isoformat(), n=args.n, seeds=args.seeds)
    print(f"{'pairs':<30}{'n':>6}  {'hamming min/med/max':>20}  {'cosine min/med/max':>24}  "
          f"{'structure min/med/max':>24}  {'pass hash+cos':>13}  {'+structure':>10}  "
          f"{'(as is, 0.96)':>13}")
    for kind, row in summary.items():
        if not isinstance(row, dict) or "pairs" not in row:
            continue
        h, c = row["hamming_min_median_max"], row["cosine_min_median_max"]
        st = row["structure_min_median_max"]
        print(f"{kind:<30}{row['pairs']:>6}  {h[0]:>5} {h[1]:>6.1f} {h[2]:>5}      "
              f"{c[0]:>7.4f} {c[1]:>7.4f} {c[2]:>7.4f}   {st[0]:>7.4f} {st[1]:>7.4f} {st[2]:>7.4f}  "
              f"{row['pass_hash_and_cosine']:>13}  {row['pass_with_structure']:>10}  "
              f"{row['pass_with_structure_as_is_0.96']:>13}")
    print("\nstructure of the pairs that pass hash + cosine (what the structure check decides on):")
    for kind, row in summary.items():
        if isinstance(row, dict) and "structure_of_those_min_median_max" in row:
            lo, mid, hi = row["structure_of_those_min_median_max"]
            print(f"  {kind:<30} {lo:>7.4f} {mid:>7.4f} {hi:>7.4f}")
    print(f"settings: {summary['settings']}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
