"""The colour backend's cost per image, this checkout against another commit's code, in
alternating processes: a change of a few percent, which the whole-ingest benchmark's
run-to-run spread (floor and peer included) hides.

Each process (PYTHONPATH = one ``src`` folder) decodes the same images to the working size
with its own code, encodes them once to warm up, then ``--repeat`` times in batches of the
``batch_size`` setting on one thread, and reports its best CPU time per image (this
thread's: a busy machine does not inflate it) and the backend's own stage profile. The two
codes take turns, ``--pairs`` times, the first of each pair alternating, so a slow spell of
the machine falls on both. The first pair's two processes also save the features they
computed, and the result says whether the two codes' are the same bit for bit
(``features_identical``; ``features_differing`` names the columns that are not).

    git archive <commit> src | tar -x -C /tmp/base
    python benchmarks/colour_ab.py --baseline-src /tmp/base/src [--images 512] [--pairs 5]
                                   [--json out.json]

The images are ``benchmarks/ingest.py``'s 800 px catalog (made on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

_CHILD = """
import json, sys, time
from pathlib import Path
import numpy as np
from vismerch.config import load_settings
from vismerch.features.colour import ColourBackend
from vismerch.imaging.decode import decode_image
from vismerch.pipeline.worker import init_worker
init_worker(1)  # one thread, as every ingest worker
repeat, features_out, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
settings = load_settings()
size, batch = settings.working_size, settings.batch_size
pixels = np.stack([decode_image(Path(p).read_bytes(), working_size=size, thumb_size=None).pixels
                   for p in paths])
backend = ColourBackend("cpu", settings=settings)
# warm-up (first calls, lattices, allocations), whose features are kept for the comparison
outs = [backend.encode_images(pixels[s:s + batch]) for s in range(0, len(pixels), batch)]
if features_out:
    np.savez(features_out, vector=np.concatenate([o.vectors for o in outs]),
             **{k: np.concatenate([o.columns[k] for o in outs]) for k in outs[0].columns})
best, stages = float("inf"), {}
for _ in range(repeat):
    profile = {}
    start = time.thread_time()
    for s in range(0, len(pixels), batch):
        backend.encode_images(pixels[s:s + batch], profile=profile)
    per = (time.thread_time() - start) / len(pixels)
    if per < best:
        best, stages = per, {k: v / len(pixels) for k, v in profile.items()}
print("RESULT" + json.dumps({"ms": best * 1e3, "stages_ms": {k: v * 1e3 for k, v in stages.items()}}))
"""


def _one(src: Path, paths: list[str], repeat: int, features_out: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(repeat), features_out, *paths],
                          env=env, capture_output=True, text=True, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT")), None)
    if done.returncode or line is None:
        raise SystemExit(f"the colour backend with {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT"):])


def run(baseline_src: Path, images: int = 512, pairs: int = 5, repeat: int = 3,
        out_dir: Path = HERE / "out") -> dict:
    from ingest import make_catalog

    catalog = make_catalog(out_dir / "catalog-2000", 2000, 800)
    paths = sorted(str(p) for p in (catalog / "images").rglob("*.jpg"))[:images]
    codes = {"baseline": Path(baseline_src).resolve(), "ours": HERE.parent / "src"}
    rounds = []
    scratch = Path(tempfile.mkdtemp(prefix="colour-ab-"))
    saved = {label: str(scratch / f"{label}.npz") for label in codes}
    for k in range(pairs):
        order = ("baseline", "ours") if k % 2 == 0 else ("ours", "baseline")
        got = {label: _one(codes[label], paths, repeat, saved[label] if k == 0 else "")
               for label in order}
        rounds.append(got)
        print(f"pair {k + 1}: baseline {got['baseline']['ms']:.3f} ms, ours {got['ours']['ms']:.3f} "
              f"ms per image", flush=True)
    differing = _differing(saved["baseline"], saved["ours"])
    shutil.rmtree(scratch, ignore_errors=True)
    diffs = [r["baseline"]["ms"] - r["ours"]["ms"] for r in rounds]
    ratios = [r["baseline"]["ms"] / r["ours"]["ms"] for r in rounds]
    result = {
        "date": date.today().isoformat(),
        "images": len(paths),
        "baseline_src": str(codes["baseline"]),
        "pairs": rounds,
        "median_ms_saved": round(statistics.median(diffs), 4),
        "median_speedup": round(statistics.median(ratios), 4),
        "pairs_ours_faster": sum(d > 0 for d in diffs),
        "features_identical": not differing,
        "features_differing": differing,
    }
    print(f"median saving {result['median_ms_saved']:.3f} ms per image "
          f"(baseline / ours {result['median_speedup']:.3f}); ours faster in "
          f"{result['pairs_ours_faster']} of {pairs} pairs; features "
          + ("the same bit for bit" if not differing else f"differ in {differing}"))
    return result


def _differing(a_path: str, b_path: str) -> list[str]:
    """Columns whose arrays are not the same bit for bit (or that only one code has)."""
    with np.load(a_path) as a, np.load(b_path) as b:
        return sorted(k for k in set(a.files) | set(b.files)
                      if k not in a.files or k not in b.files or not np.array_equal(a[k], b[k]))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", type=Path, required=True,
                        help="a src folder of another commit (git archive <commit> src)")
    parser.add_argument("--images", type=int, default=512, help="images encoded per process")
    parser.add_argument("--pairs", type=int, default=5, help="alternating pairs of processes")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per process (best)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    if not (args.baseline_src / "vismerch").is_dir():
        parser.error(f"{args.baseline_src} holds no vismerch package (give the src folder)")
    result = run(args.baseline_src, args.images, args.pairs, args.repeat)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return result


if __name__ == "__main__":
    main()
