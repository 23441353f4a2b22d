"""The synthetic sample catalog and the public catalog test helpers.

The checks measure the written files with plain numpy/Pillow (not vismerch's own
decoder or quality module), so a generator that plants the wrong thing fails here.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps, UnidentifiedImageError

from vismerch import sample
from vismerch.errors import UsageError
from vismerch.sample import FLAG_NAMES, FLAWS, MANIFEST_COLUMNS, TRUTH_COLOURS, edits, plan, render
from vismerch.testing.catalog import (
    MANIFEST_PROBLEMS,
    adobe_to_srgb,
    make_manifest,
    read_manifest_rows,
    small_catalog,
    write_bad_files,
    write_bad_manifests,
    write_manifest_variants,
    write_tricky_files,
)

imagehash = pytest.importorskip("imagehash")


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return sample.generate_catalog(tmp_path_factory.mktemp("sample"), n=80, seed=11,
                                   size_range=(520, 640))


@pytest.fixture(scope="module")
def truth(cat):
    return cat.truth()


def _rgb(path: Path) -> Image.Image:
    im = Image.open(path)
    if im.mode in ("RGBA", "LA", "P"):
        im = im.convert("RGBA")
        white = Image.new("RGBA", im.size, (255, 255, 255, 255))
        im = Image.alpha_composite(white, im)
    return im.convert("RGB")


def _foreground(img: Image.Image) -> np.ndarray:
    """Pixels that differ clearly from the median border colour."""
    a = np.asarray(img, np.float32)
    border = np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]])
    return np.abs(a - np.median(border, 0)).max(-1) > 25


def _sharpness(img: Image.Image) -> float:
    g = np.asarray(img.convert("L").resize((256, 256), Image.BILINEAR), np.float32)
    lap = g[1:-1, :-2] + g[1:-1, 2:] + g[:-2, 1:-1] + g[2:, 1:-1] - 4 * g[1:-1, 1:-1]
    return float(lap.var() / max(g.var(), 1e-6))  # contrast-free: blur, not a pale colour


def _products(truth, flaw=None):
    return {pid: p for pid, p in truth["products"].items() if p["flaw"] == flaw}


# --------------------------------------------------------------------------- structure
def test_counts_files_and_manifest(cat, truth):
    rows = read_manifest_rows(cat.manifest_path)
    lookalikes = len(truth["colourway_pairs"]) + len(truth["mirror_pairs"]) + len(
        truth["mirror_symmetric_pairs"])
    assert cat.n_images == 80 + lookalikes == len(rows) == truth["meta"]["n"]
    assert list(rows[0]) == list(MANIFEST_COLUMNS)
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    assert set(ids) == set(truth["products"]) | set(truth["corrupt"])
    assert not set(truth["products"]) & set(truth["corrupt"])
    for r in rows:
        assert (cat.root / r["image"]).is_file()
        assert r["image"].startswith("images/")
        float(r["price"]), int(r["stock"]), int(r["sales"])
    assert any(r["stock"] == "0" for r in rows) or len(rows) < 50
    assert len(truth["corrupt"]) >= 1
    assert {p["flaw"] for p in truth["products"].values()} == {None, *FLAWS}


def test_truth_is_consistent(cat, truth):
    rows = {r["id"]: r for r in read_manifest_rows(cat.manifest_path)}
    for pid, p in truth["products"].items():
        assert p["colour"] in TRUTH_COLOURS
        assert set(p["flags"]) <= set(FLAG_NAMES)
        assert p["flags"] == (list(FLAWS[p["flaw"]]) if p["flaw"] else [])
        assert p["category"] == rows[pid]["category"]
        assert p["main_fraction"] >= 0.65
        assert (p["pattern"] == "solid") == (p["secondary_colour"] is None)
        assert p["image"] == rows[pid]["image"]
    dark = [p for p in truth["products"].values() if p["flaw"] == "dark"]
    assert dark and all(p["flags"] == ["under-exposed"] for p in dark)
    grouped = [pid for g in truth["duplicate_groups"] for pid in g]
    assert len(grouped) == len(set(grouped)) >= 2
    for group in truth["duplicate_groups"]:
        assert 2 <= len(group) <= 3
        members = [truth["products"][pid] for pid in group]
        assert all(m["flaw"] is None for m in members)
        assert len({(m["colour"], m["category"], m["pattern"]) for m in members}) == 1
        assert len({rows[pid]["title"] for pid in group}) == len(group)  # listed differently
    wrong = set(truth["listed_colour_wrong"])
    assert wrong
    pal = plan.Palette()
    for pid, p in truth["products"].items():
        if pid in wrong:
            assert pal.de(rows[pid]["colour"], p["colour"]) >= 30
        else:
            assert rows[pid]["colour"] == p["colour"]


def test_truth_colours_are_well_separated():
    pal = plan.Palette()
    for a, b in itertools.combinations(TRUTH_COLOURS, 2):
        assert pal.de(a, b) >= 13.5, (a, b)
    for c in TRUTH_COLOURS:
        assert pal.de(c, (255, 255, 255)) >= 18, c
    for backdrop in plan.BACKDROPS:
        assert pal.de(backdrop, (255, 255, 255)) >= 14, backdrop


def test_same_seed_same_catalog_other_seed_differs(tmp_path):
    def digest(root: Path) -> dict[str, str]:
        return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*")) if p.is_file()}

    a = digest(small_catalog(tmp_path / "a", n=16, seed=4).root)
    b = digest(small_catalog(tmp_path / "b", n=16, seed=4).root)
    c = digest(small_catalog(tmp_path / "c", n=16, seed=5).root)
    assert a == b
    assert a["truth.json"] != c["truth.json"]
    assert a["manifest.csv"] != c["manifest.csv"]


def test_regenerating_replaces_old_images(tmp_path):
    small_catalog(tmp_path, n=20, seed=1)
    cat = small_catalog(tmp_path, n=12, seed=2, corrupt=False, flawed=False, duplicates=False)
    files = [p for p in cat.images_dir.rglob("*") if p.is_file()]
    assert len(files) == 12


def test_refuses_a_foreign_folder_and_bad_arguments(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "mine.jpg").write_bytes(b"x")
    with pytest.raises(UsageError):
        sample.generate_catalog(tmp_path, n=10)
    assert (tmp_path / "images" / "mine.jpg").exists()
    with pytest.raises(UsageError):
        sample.generate_catalog(tmp_path / "x", n=10, formats={"gif": 1.0})
    with pytest.raises(UsageError):
        sample.generate_catalog(tmp_path / "y", n=4)
    with pytest.raises(UsageError):
        sample.generate_catalog(tmp_path / "z", n=10, size_range=(300, 400))


def test_clean_only_and_progress(tmp_path):
    calls = []
    cat = sample.generate_catalog(tmp_path, n=12, seed=3, clean_only=True,
                                  progress=lambda done, total: calls.append((done, total)))
    t = cat.truth()
    assert calls[-1] == (12, 12) and len(calls) == 12
    assert not t["corrupt"] and not t["duplicate_groups"] and not t["listed_colour_wrong"]
    for p in t["products"].values():
        assert p["flags"] == [] and p["image"].endswith(".jpg")
        with Image.open(cat.root / p["image"]) as im:
            assert im.size == (800, 800) and im.format == "JPEG"


def test_folder_ids_map_back_to_manifest_ids(cat, truth):
    mapping = cat.folder_ids()
    assert sorted(mapping.values()) == sorted([*truth["products"], *truth["corrupt"]])
    for rel, pid in mapping.items():
        assert (cat.images_dir / rel).is_file() and pid in rel


# --------------------------------------------------------------------------- pixels
def test_corrupt_files_really_are_corrupt(cat, truth):
    for pid, reason in truth["corrupt"].items():
        path = cat.root / truth["corrupt_images"][pid]
        if reason == "empty-file":
            assert path.stat().st_size == 0
        elif reason == "truncated":
            with pytest.raises(OSError), Image.open(path) as im:
                im.load()
        else:
            with pytest.raises(UnidentifiedImageError):
                Image.open(path)


@pytest.mark.parametrize("kind", sorted(sample.CORRUPT_KINDS))
def test_every_corrupt_kind_is_broken(kind):
    rng = np.random.default_rng(0)
    img = render._background(64, 64, rng)
    good_jpeg, good_png = render._encode(img, "jpeg", rng), render._encode(img, "png", rng)
    data = render._corrupt_bytes(kind, rng, good_jpeg, good_png)
    reason = sample.CORRUPT_KINDS[kind]
    if reason == "empty-file":
        assert data == b""
    elif reason == "truncated":
        with pytest.raises(OSError):
            Image.open(io.BytesIO(data)).load()
    else:
        with pytest.raises(UnidentifiedImageError):
            Image.open(io.BytesIO(data))


def test_clean_shots_are_clean(cat, truth):
    fill_checked = 0
    for p in list(_products(truth).values())[:20]:
        img = _rgb(cat.root / p["image"])
        assert min(img.size) >= 500
        img = img.reduce(2)
        fg = _foreground(img)
        assert 0.1 < fg.mean() < 0.75
        ys, xs = np.nonzero(fg)
        assert abs(xs.mean() / img.width - 0.5) < 0.09 and abs(ys.mean() / img.height - 0.5) < 0.09
        border = np.concatenate([np.asarray(img)[0], np.asarray(img)[-1]]).astype(np.float32)
        assert border.mean() > 238  # studio white
        if p["pattern"] == "solid" and p["trim_colour"] in (None, "black", "navy", "brown"):
            assert abs(fg.mean() - p["fill"]) < 0.03  # the recorded fill is what is on disk
            fill_checked += 1
    assert fill_checked >= 1  # the fill check above ran for some product


def test_flawed_shots_really_differ(cat, truth):
    clean = list(_products(truth).values())
    clean_sharp = min(_sharpness(_rgb(cat.root / p["image"])) for p in clean[:30])
    clean_light = min(np.asarray(_rgb(cat.root / p["image"]).convert("L")).mean()
                      for p in clean[:30])
    pal = plan.Palette()
    for p in truth["products"].values():
        flaw = p["flaw"]
        if flaw is None:
            continue
        img = _rgb(cat.root / p["image"])
        if flaw == "blur":
            assert _sharpness(img) < 0.3 * clean_sharp
        elif flaw == "dark":
            assert np.asarray(img.convert("L")).mean() < 0.3 * clean_light
        elif flaw == "background":
            a = np.asarray(img, np.float32)
            border = np.median(np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]]), 0)
            assert pal.de(tuple(border), (255, 255, 255)) > 12
        elif flaw == "tiny":
            assert _foreground(img).mean() < 0.04
        elif flaw == "off-centre":
            ys, xs = np.nonzero(_foreground(img))
            off = max(abs(xs.mean() / img.width - 0.5), abs(ys.mean() / img.height - 0.5))
            assert off > 0.22
            assert _foreground(img).mean() > 0.1  # not also too small
        elif flaw == "low-res":
            assert min(img.size) < 400


def test_patterned_products_keep_their_main_colour(cat, truth):
    pal = plan.Palette()
    checked = 0
    for p in truth["products"].values():
        if p["pattern"] == "solid" or p["flaw"] or not p["image"].endswith((".jpg", ".png")):
            continue
        img = _rgb(cat.root / p["image"]).reduce(2)
        a = np.asarray(img, np.float32)[_foreground(img)]
        main = np.asarray(pal.rgb[p["colour"]], np.float32)
        sec = np.asarray(pal.rgb[p["secondary_colour"]], np.float32)
        nearer_main = np.linalg.norm(a - main, axis=1) < np.linalg.norm(a - sec, axis=1)
        assert nearer_main.mean() > 0.6, p
        checked += 1
    assert checked >= 3


def test_alpha_pngs_have_a_transparent_background(cat, truth):
    alpha = []
    for p in truth["products"].values():
        with Image.open(cat.root / p["image"]) as im:
            if im.mode == "RGBA":
                alpha.append(np.asarray(im)[..., 3])
    assert alpha  # the fixture catalog has cut-out PNGs: the check below must run
    for a in alpha:
        assert a[0, 0] == 0 and a[-1, -1] == 0 and a.max() == 255


def test_reencoded_and_resized_copies_keep_their_phash(tmp_path):
    # its own catalog: the module's fixture (seed 11) plants no copy that is only re-encoded
    # or resized, so a check there would never run
    cat = sample.generate_catalog(tmp_path / "c", n=80, seed=2, size_range=(520, 640))
    truth = cat.truth()
    simple = set(edits.SIMPLE)  # re-encoded or resized: phash stays close (framing edits
    checked = 0                 # and light are what it cannot follow)
    for group in truth["duplicate_groups"]:
        for a, b in itertools.combinations(group, 2):
            kinds = {truth["products"][x].get("duplicate_transform") for x in (a, b)} - {None}
            if kinds <= simple and all(truth["products"][x]["flaw"] is None for x in (a, b)):
                ha, hb = (imagehash.phash(_rgb(cat.root / truth["products"][x]["image"])) for x in (a, b))
                assert ha - hb <= 10, (a, b)
                checked += 1
    assert checked >= 1


def test_duplicates_close_and_unrelated_products_far(cat, truth):
    hashes = {pid: imagehash.phash(_rgb(cat.root / p["image"]))
              for pid, p in truth["products"].items() if p["flaw"] is None}
    in_group = {pid for g in truth["duplicate_groups"] for pid in g[1:]}
    singles = [pid for pid in hashes if pid not in in_group]
    cats = {pid: truth["products"][pid]["category"] for pid in singles}
    dists = np.array([hashes[a] - hashes[b] for a, b in itertools.combinations(singles, 2)
                      if cats[a] == cats[b]])
    assert len(dists) > 50
    assert np.median(dists) > 16
    assert (dists <= 8).mean() < 0.08


def test_v2_edits_colourways_and_mirrors(cat, truth):
    products = truth["products"]
    copies = {p["duplicate_transform"] for p in products.values() if p.get("duplicate_transform")}
    assert copies <= set(edits.EDITS) and len(copies) >= 3
    for p in products.values():  # framing and light edits leave no quality verdict to score
        if p.get("duplicate_transform") in edits.NO_QUALITY_TRUTH:
            assert p["quality_truth"] is False
    assert truth["colourway_pairs"]
    for a, b in truth["colourway_pairs"]:  # the same shot in another colour
        pa, pb = products[a], products[b]
        assert pa["category"] == pb["category"] and pa["colour"] != pb["colour"]
        assert pa["fill"] == pytest.approx(pb["fill"], abs=0.01)
        assert {pa.get("lookalike"), pb.get("lookalike")} == {None, "colourway"}
    mirrors = truth["mirror_pairs"] + truth["mirror_symmetric_pairs"]
    assert mirrors
    for a, b in mirrors:  # pixel for pixel the mirror image (up to JPEG)
        x = np.asarray(_rgb(cat.root / products[a]["image"]), np.float32)
        y = np.asarray(_rgb(cat.root / products[b]["image"]), np.float32)[:, ::-1]
        assert np.abs(x - y).mean() < 4
    dup_ids = {pid for g in truth["duplicate_groups"] for pid in g}
    assert not any({a, b} <= dup_ids and any(a in g and b in g for g in truth["duplicate_groups"])
                   for a, b in truth["colourway_pairs"] + mirrors)


# --------------------------------------------------------------------------- helpers
def _png_size(data: bytes) -> tuple[int, int]:
    return struct.unpack(">II", data[16:24])


def test_bad_files_are_bad(tmp_path):
    bad = write_bad_files(tmp_path)
    assert set(bad.values()) == {"empty-file", "truncated", "not-an-image", "too-many-pixels"}
    for name, reason in bad.items():
        path = tmp_path / name
        if reason == "empty-file":
            assert path.stat().st_size == 0
        elif reason == "truncated":
            with pytest.raises(OSError), Image.open(path) as im:
                im.load()
        elif reason == "not-an-image":
            with pytest.raises(UnidentifiedImageError):
                Image.open(path)
        else:  # read the header only: decoding it is the attack
            data = path.read_bytes()
            w, h = _png_size(data)
            assert w * h > 40_000_000 and len(data) < 200_000


def _reference_decode(path: Path) -> Image.Image:
    """A plain-Pillow reference: upright, first frame, 16-bit scaled, alpha over white."""
    im = ImageOps.exif_transpose(Image.open(path))
    if im.mode.startswith("I;16"):
        a = (np.asarray(im, np.float32) * 255 / 65535 + 0.5).astype(np.uint8)
        im = Image.fromarray(a, "L")
    return _rgb_from(im)


def _rgb_from(im: Image.Image) -> Image.Image:
    if im.mode in ("RGBA", "LA", "P", "PA"):
        im = im.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", im.size, (255,) * 4), im).convert("RGB")
    return im.convert("RGB")


def test_tricky_files_match_their_expectations(tmp_path):
    tricky = write_tricky_files(tmp_path)
    assert {"exif_rotated.jpg", "alpha.png", "cmyk.jpg", "grey16.png", "two_frames.gif",
            "grey.jpg", "image.bmp", "image.tiff", "image.webp"} <= set(tricky)
    with Image.open(tricky["cmyk.jpg"].path) as im:
        assert im.mode == "CMYK"
    with Image.open(tricky["two_frames.gif"].path) as im:
        assert im.mode == "P" and im.n_frames == 2
    with Image.open(tricky["grey16.png"].path) as im:
        assert im.mode.startswith("I")
    with Image.open(tricky["exif_rotated.jpg"].path) as im:
        assert im.size == (160, 96)  # stored sideways
    for name, tf in tricky.items():
        im = _reference_decode(tf.path)
        assert im.size == tf.size, name
        a = np.asarray(im, np.int32)
        for p in tf.probes:
            px = a[int(p.y * (im.height - 1)), int(p.x * (im.width - 1))]
            if name.startswith("adobe_rgb"):  # stored in Adobe RGB: shown as its sRGB
                px = np.array(adobe_to_srgb(tuple(int(v) for v in px)))
            assert np.abs(px - p.rgb).max() <= tf.tolerance, (name, p, px)


def test_manifest_variants_and_bad_manifests(tmp_path):
    cat = small_catalog(tmp_path / "cat", n=12, seed=0, corrupt=False, flawed=False,
                        duplicates=False)
    variants = write_manifest_variants(cat)
    import pyarrow.parquet as pq

    table = pq.read_table(variants["parquet"])
    assert table.num_rows == 12 and str(table.schema.field("price").type) == "double"
    lines = variants["jsonl"].read_text().splitlines()
    assert len(lines) == 12 and isinstance(json.loads(lines[0])["stock"], int)

    bad = write_bad_manifests(cat)
    assert set(bad) == set(MANIFEST_PROBLEMS)
    with bad["missing-image-column"].open() as fh:
        assert "image" not in next(csv.reader(fh))
    ids = [r["id"] for r in read_manifest_rows(bad["duplicate-ids"])]
    assert len(set(ids)) == len(ids) - 1
    assert "twelve pounds" in [r["price"] for r in read_manifest_rows(bad["bad-price"])]
    escape = read_manifest_rows(bad["path-escape"])[0]["image"]
    assert escape.startswith("../") and (cat.root / escape).is_file()
    bad_parquet = make_manifest(tmp_path / "bad.parquet", read_manifest_rows(cat.manifest_path),
                                problem="bad-price")
    assert str(pq.read_table(bad_parquet).schema.field("price").type) == "string"
    with pytest.raises(ValueError):
        make_manifest(tmp_path / "x.csv", [], problem="nope")


def test_shaded_catalog_keeps_the_truth_and_really_shades(tmp_path):
    """shading=True: same products and truth colours, each shot lit with volume (its
    product pixels spread over a wide lightness range), strengths recorded in the truth."""
    from vismerch.sample import generate_catalog

    kw = dict(n=12, seed=6, corrupt=False, flawed=False, duplicates=False, wrong_listed=False,
              formats={"png": 1.0})
    flat = generate_catalog(tmp_path / "flat", **kw)
    shaded = generate_catalog(tmp_path / "shaded", shading=True, **kw)
    t_flat, t_shaded = flat.truth()["products"], shaded.truth()["products"]
    assert {k: v["colour"] for k, v in t_flat.items()} == {k: v["colour"] for k, v in t_shaded.items()}
    spreads = {}
    for name, cat, truth in (("flat", flat, t_flat), ("shaded", shaded, t_shaded)):
        spread = []
        for p in truth.values():
            if p["pattern"] != "solid" or p.get("trim_colour"):
                continue
            with Image.open(cat.root / p["image"]) as opened:
                if opened.mode != "RGBA":  # cut-outs only: the alpha is the product
                    continue
                im = np.asarray(opened, np.float32)
            luma = im[..., :3].mean(axis=2)[im[..., 3] > 250]
            spread.append(np.percentile(luma, 95) - np.percentile(luma, 5))
        assert len(spread) >= 2, name
        spreads[name] = float(np.median(spread))
        assert all(("shading" in p) == (name == "shaded") for p in truth.values())
    assert spreads["shaded"] > spreads["flat"] + 20, spreads
