"""Colour naming top-1 accuracy on four image sets, vismerch beside colorthief, same images.

Sets:

- ``sample-plain``: the generated catalog (``vismerch.sample``, clean shots only:
  solid and patterned apparel on studio white), truth = the main colour's name;
- ``sample-shaded``: the same generator with ``shading=True`` (volume, light ramp,
  glossy highlights, thin dark outlines: ``catalog/sample_shading.py``), same truth;
- ``openmoji-flat`` / ``openmoji-shaded``: real third-party artwork (OpenMoji product
  glyphs, CC BY-SA 4.0) built by ``benchmarks/realset_colour.py``; truth = a colour
  *family* from the Unicode name or the artist's declared fills (see that file).

Scores: ``name`` (exact colour name, sample sets only) and ``family`` (the ``family``
column of data/colours.csv: navy and light blue are both blue) top-1 accuracy of the
dominant colour; ``names_by_family``: the names given per true family (a red named
"coral" is right by family, not by the name a shopper reads).

Methods, each on the same files:

- ``vismerch``: the ingest path (``decode_image`` at the working size, ``ColourBackend``,
  ``colour_names``), dominant = the first named colour;
- ``colorthief``: ``fast_colorthief.get_dominant_color(path, 1)`` as users call it, named
  with the same colour table (nearest swatch by CIEDE2000);
- ``colorthief-nobg``: colorthief given help it does not have on its own: its 6-colour
  palette with every colour within CIEDE2000 10 of the image's border colour (the
  backdrop) dropped, then the first left.

    python benchmarks/colour_eval.py [--n 240] [--json benchmarks/results/colour-eval.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _families() -> dict[str, str]:
    from vismerch.features.colourtable import colour_families

    return colour_families()


def sample_set(out: Path, n: int, shading: bool) -> list[tuple[Path, str, str]]:
    """(path, truth name, truth family) of a clean generated catalog."""
    from vismerch.sample import generate_catalog

    marker = out / f".complete-{n}"
    if not marker.exists():
        generate_catalog(out, n=n, seed=11, corrupt=False, flawed=False, duplicates=False,
                         wrong_listed=False, size_range=(640, 800), shading=shading)
        marker.write_text("ok")
    truth = json.loads((out / "truth.json").read_text())
    fam = _families()
    return [(out / p["image"], p["colour"], fam[p["colour"]])
            for _, p in sorted(truth["products"].items())]


def openmoji_set(out: Path, variant: str) -> list[tuple[Path, str | None, str]]:
    from realset_colour import build

    labels_path = out / "labels.json"
    built = json.loads(labels_path.read_text()) if labels_path.exists() else build(out)
    return [(out / variant / f"{code}.jpg", None, v["family"])
            for code, v in sorted(built["labels"].items())]


def vismerch_names(paths: list[Path]) -> list[str | None]:
    import torch

    from vismerch.config import load_settings
    from vismerch.features.colour import ColourBackend, colour_names
    from vismerch.imaging.decode import decode_image

    torch.set_num_threads(1)
    settings = load_settings()
    backend = ColourBackend("cpu", settings=settings)
    out: list[str | None] = []
    for start in range(0, len(paths), 64):
        pixels = np.stack([decode_image(p.read_bytes(), working_size=settings.working_size,
                                        thumb_size=None).pixels for p in paths[start:start + 64]])
        cols = backend.encode_images(pixels).columns
        for named in colour_names(cols["palette_lab"], cols["palette_weight"]):
            # the first measured colour (older code put a "multicolour" verdict first)
            out.append(next((c.name for c in named if c.name != "multicolour"), None))
    return out


def _name_rgb(rgbs: list[tuple[int, int, int] | None]) -> list[str | None]:
    import torch

    from vismerch.features.colour import colour_names
    from vismerch.features.colourspace import srgb_to_lab

    out: list[str | None] = []
    for rgb in rgbs:
        if rgb is None:
            out.append(None)
            continue
        lab = srgb_to_lab(torch.tensor(rgb, dtype=torch.uint8), dtype=torch.float64).numpy()
        out.append(colour_names(lab[None], np.array([1.0]))[0][0].name)
    return out


def colorthief_names(paths: list[Path], drop_background: bool) -> list[str | None]:
    import fast_colorthief
    import torch
    from PIL import Image

    from vismerch.features.colourspace import ciede2000_np, srgb_to_lab

    picks: list[tuple[int, int, int] | None] = []
    for path in paths:
        if not drop_background:
            picks.append(tuple(fast_colorthief.get_dominant_color(str(path), 1)))
            continue
        palette = fast_colorthief.get_palette(str(path), 6, 1)
        with Image.open(path) as im:
            a = np.asarray(im.convert("RGB"))
        ring = np.concatenate([a[:4].reshape(-1, 3), a[-4:].reshape(-1, 3),
                               a[:, :4].reshape(-1, 3), a[:, -4:].reshape(-1, 3)])
        bg = np.median(ring, axis=0).round().astype(np.uint8)

        def lab(rgb):
            return srgb_to_lab(torch.tensor(rgb, dtype=torch.uint8), dtype=torch.float64).numpy()

        keep = [c for c in palette if float(ciede2000_np(lab(c), lab(bg))) >= 10.0]
        picks.append(tuple(keep[0]) if keep else None)
    return _name_rgb(picks)


def score(items, predicted: list[str | None]) -> dict:
    fam = _families()
    n = len(items)
    name_hits = sum(1 for (_, name, _), p in zip(items, predicted, strict=True)
                    if name is not None and p == name)
    fam_hits = sum(1 for (_, _, family), p in zip(items, predicted, strict=True)
                   if p is not None and fam.get(p) == family)
    has_names = any(name is not None for _, name, _ in items)
    confusions = Counter((family, fam.get(p) if p else None)
                         for (_, _, family), p in zip(items, predicted, strict=True)
                         if p is None or fam.get(p) != family)
    by_family: dict[str, Counter] = {}
    for (_, _, family), p in zip(items, predicted, strict=True):
        by_family.setdefault(family, Counter())[p or "none"] += 1
    return {"n": n, "name_top1": round(name_hits / n, 3) if has_names else None,
            "family_top1": round(fam_hits / n, 3),
            "family_confusions": {f"{a}->{b}": c for (a, b), c in confusions.most_common(8)},
            "names_by_family": {f: dict(c.most_common()) for f, c in sorted(by_family.items())}}


def run(n: int, out_dir: Path, methods: tuple[str, ...]) -> dict:
    sets = {
        "sample-plain": sample_set(out_dir / "colour-sample-plain", n, False),
        "sample-shaded": sample_set(out_dir / "colour-sample-shaded", n, True),
        "openmoji-flat": openmoji_set(out_dir / "realset-colour", "flat"),
        "openmoji-shaded": openmoji_set(out_dir / "realset-colour", "shaded"),
    }
    result: dict = {"date": time.strftime("%Y-%m-%d"), "sets": {}}
    for set_name, items in sets.items():
        paths = [p for p, _, _ in items]
        row = {}
        for method in methods:
            if method == "vismerch":
                predicted = vismerch_names(paths)
            else:
                predicted = colorthief_names(paths, drop_background=method == "colorthief-nobg")
            row[method] = score(items, predicted)
            s = row[method]
            print(f"{set_name:<16} {method:<16} n={s['n']:<4} name={s['name_top1']}  "
                  f"family={s['family_top1']}  {s['family_confusions']}", flush=True)
        result["sets"][set_name] = row
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=240)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--methods", default="vismerch,colorthief,colorthief-nobg")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.n, args.out, tuple(args.methods.split(",")))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
