"""Colour backend ms/image and colour naming ms/image on two sets, for before/after checks.

Sets (built by the other benchmarks, under ``--out``): ``generated`` (the first 128 images of
each of colour_eval.py's sample-shaded and sample-plain catalogs: studio shots) and
``realphoto`` (the first 256 images of realphoto_eval.py's seed-1 set: cut-outs, scenes and
full-bleed shots). Pixels are decoded at the working size first; then, best of ``--repeat``:
``ColourBackend.encode_images`` in batches of 64 and ``colour_names`` on its palettes, timed
by this thread's CPU time (torch on one thread), which other jobs on a busy machine inflate
less than wall time. Run it with PYTHONPATH pointing at each source tree to compare, in
alternation, on the same machine.

    PYTHONPATH=src python benchmarks/colour_speed.py [--out benchmarks/out] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _sets(out: Path) -> dict[str, list[Path]]:
    return {
        "generated": sorted((out / "colour-sample-shaded" / "images").rglob("*.jpg"))[:128]
        + sorted((out / "colour-sample-plain" / "images").rglob("*.jpg"))[:128],
        "realphoto": sorted((out / "realphoto" / "seed-1" / "images").glob("*.jpg"))[:256],
    }


def measure(paths: list[Path], repeat: int) -> dict:
    import torch

    from vismerch.config import load_settings
    from vismerch.features.colour import ColourBackend, colour_names
    from vismerch.imaging.decode import decode_image

    torch.set_num_threads(1)
    settings = load_settings()
    pix = np.stack([decode_image(p.read_bytes(), settings.working_size, thumb_size=None).pixels
                    for p in paths])
    backend = ColourBackend("cpu", settings)
    backend.encode_images(pix[:64])
    runs = []
    for _ in range(repeat):
        start = time.thread_time()
        cols = [backend.encode_images(pix[i:i + 64]).columns for i in range(0, len(pix), 64)]
        encode = time.thread_time() - start
        start = time.thread_time()
        for c in cols:
            colour_names(c["palette_lab"], c["palette_weight"])
        runs.append((encode, time.thread_time() - start))
    return {"images": len(pix),
            "encode_ms_per_image": round(min(e for e, _ in runs) * 1000 / len(pix), 3),
            "naming_ms_per_image": round(min(n for _, n in runs) * 1000 / len(pix), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import vismerch

    result = {"source": str(Path(vismerch.__file__).parent)}
    for name, paths in _sets(args.out).items():
        if paths:
            result[name] = measure(paths, args.repeat)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
