"""The driver: ``generate_catalog`` plans the items, renders them (in a process pool when
asked), writes the images, ``manifest.csv`` and ``truth.json``."""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from vismerch.errors import UsageError
from vismerch.features.quality_flags import flag_names
from vismerch.sample import shapes
from vismerch.sample.plan import (
    CORRUPT_KINDS,
    DEFAULT_FORMATS,
    EXCLUDED_COLOURS,
    FLAWS,
    TRUTH_COLOURS,
    Item,
    plan_items,
)
from vismerch.sample.render import MIN_CLEAN_SIDE, MIRROR_MIN_ASYMMETRY, duplicate, lookalike, shot

VERSION = 2  # 2: every duplicate edit kind (sample/edits.py), colourways and mirrors
FLAG_NAMES = flag_names()  # the truth uses the flags vismerch reports
MANIFEST_COLUMNS = ("id", "image", "title", "description", "category", "brand", "price",
                    "stock", "sales", "created_at", "colour", "material", "season")
# Studio backdrops for the non-white-background flaw (each >= CIEDE2000 14 from white).

EXT = {"jpeg": ".jpg", "png": ".png", "webp": ".webp"}


@dataclass(frozen=True)
class SampleCatalog:
    root: Path
    manifest_path: Path
    truth_path: Path
    images_dir: Path
    n_images: int

    def truth(self) -> dict:
        return json.loads(self.truth_path.read_text())

    def folder_ids(self) -> dict[str, str]:
        """Map folder-source ids (path relative to ``images_dir``) to manifest ids."""
        t = self.truth()
        rel = {pid: p["image"] for pid, p in t["products"].items()}
        rel.update(t.get("corrupt_images", {}))
        return {Path(path).relative_to("images").as_posix(): pid for pid, path in rel.items()}



def _lookalike_truth(lookalikes: dict[str, list[list[str]]], products: dict) -> dict:
    """Known non-duplicate pairs: colourways; mirrors of products that are visibly
    asymmetric (mirror_pairs) and of nearly symmetric ones (mirror_symmetric_pairs: the
    same picture either way, scored neither way)."""
    mirrors = sorted(lookalikes.get("mirror", []))
    lopsided = [p for p in mirrors if products[p[0]].get("asymmetry",
                                                         products[p[1]].get("asymmetry", 0))
                >= MIRROR_MIN_ASYMMETRY]
    return {"colourway_pairs": sorted(lookalikes.get("colourway", [])),
            "mirror_pairs": lopsided,
            "mirror_symmetric_pairs": [p for p in mirrors if p not in lopsided]}




# --------------------------------------------------------------------------- metadata
def _metadata(item: Item, listed: str, rng, noun: str | None) -> dict:
    meta = shapes.product_text(item.category, item.pattern, listed, rng, noun)
    lo, hi = shapes.PRICE_RANGE[item.category]
    price = math.floor(rng.uniform(lo, hi)) + float(rng.choice([0.99, 0.0, 0.5]))
    meta["price"] = f"{price:.2f}"
    meta["stock"] = "0" if rng.random() < 0.1 else str(int(rng.integers(1, 250)))
    meta["sales"] = str(int(rng.lognormal(3.0, 1.2)))
    meta["created_at"] = (date(2023, 9, 1) + timedelta(days=int(rng.integers(0, 730)))).isoformat()
    meta["colour"] = listed
    return meta


# --------------------------------------------------------------------------- driver
@dataclass(frozen=True)
class SampleOptions:
    """What a sample catalog holds besides its size and seed (``generate_catalog``'s options).

    ``clean_only`` (benchmarks): no flaws, corrupt files, duplicates or wrong listed colours;
    every image an 800x800 JPEG. ``formats`` maps jpeg/png/webp to weights for the clean
    shots. ``workers > 1`` renders in that many processes (same bytes as one process).
    ``shading`` renders every product with volume, gradient light, and on some glossy
    highlights and thin dark outlines (``sample/shading.py``); the truth colour is unchanged.
    """

    corrupt: bool = True
    flawed: bool = True
    duplicates: bool = True
    size_range: tuple[int, int] = (640, 1024)
    formats: Mapping[str, float] | None = None
    clean_only: bool = False
    wrong_listed: bool = True
    workers: int = 1
    shading: bool = False

    def resolved(self) -> SampleOptions:
        """The options ``clean_only`` implies, checked, with the default formats filled in."""
        opts = self
        if self.clean_only:
            opts = replace(self, corrupt=False, flawed=False, duplicates=False, wrong_listed=False,
                           size_range=(800, 800), formats={"jpeg": 1.0})
        formats = dict(opts.formats or DEFAULT_FORMATS)
        if unknown := set(formats) - set(EXT):
            raise UsageError(f"unknown image formats {sorted(unknown)}", hint="use jpeg, png, webp")
        lo, hi = opts.size_range
        if not MIN_CLEAN_SIDE <= lo <= hi:
            raise UsageError(f"bad size_range {opts.size_range}: clean shots need a shorter side of "
                             f"at least {MIN_CLEAN_SIDE} px (below that they are low-resolution)",
                             hint="e.g. (640, 1024)")
        return replace(opts, formats=formats)


Made = dict[int, tuple[bytes, dict, str | None]]  # item index -> (file bytes, truth info, noun)


def generate_catalog(out_dir: str | Path, n: int = 600, seed: int = 0, *,
                     progress: Callable[[int, int], None] | None = None, **options: Any) -> SampleCatalog:
    """Write a synthetic catalog of ``n`` products with ground truth to ``out_dir``.

    ``options`` are ``SampleOptions``' fields. ``progress(done, total)`` is called after
    each image."""
    opts = SampleOptions(**options).resolved()
    root = Path(out_dir)
    _fresh_images_dir(root)
    items = plan_items(n, seed, opts.corrupt, opts.flawed, opts.duplicates, opts.size_range,
                       opts.formats, opts.wrong_listed)
    for it in items:
        it.shading = opts.shading
    order = np.random.default_rng([seed, 2]).permutation(len(items))
    ids = {items[j].index: f"P{k + 1:05d}" for k, j in enumerate(order)}
    shots = [it for it in items if it.dup_of is None or it.lookalike == "colourway"]
    copies = [it for it in items if it.dup_of is not None and it.lookalike != "colourway"]
    made = _render_shots(shots, seed, opts.workers, progress, len(items))
    _render_copies(copies, seed, made, progress, len(items))
    rows, truth = _write_files(root, shots + copies, made, ids, seed)
    rows.sort(key=lambda r: r["id"])
    manifest = root / "manifest.csv"
    with manifest.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=MANIFEST_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    truth["meta"]["n"] = len(items)
    truth["listed_colour_wrong"] = sorted(ids[it.index] for it in items if it.listed_wrong)
    truth_path = root / "truth.json"
    truth_path.write_text(json.dumps(truth, indent=1) + "\n")
    return SampleCatalog(root, manifest, truth_path, root / "images", len(items))


def _fresh_images_dir(root: Path) -> None:
    """An empty ``root/images``, replacing a previous sample's, never anything else."""
    images_dir = root / "images"
    marker = root / ".vismerch-sample"
    if images_dir.exists():
        if not marker.exists():
            raise UsageError(f"{images_dir} exists and is not a sample catalog",
                             hint="choose an empty output folder")
        shutil.rmtree(images_dir)  # a previous sample: replace it, leave no stale images
    images_dir.mkdir(parents=True)
    marker.write_text("written by vismerch.sample.generate_catalog\n")


def _render_shots(shots: list[Item], seed: int, workers: int,
                  progress: Callable[[int, int], None] | None, total: int) -> Made:
    made: Made = {}
    jobs = [(it, seed) for it in shots]
    if workers > 1:  # every shot has its own generator, so the bytes do not depend on this
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(workers) as pool:
            for it, out in zip(shots, pool.imap(shot, jobs, chunksize=8), strict=True):
                made[it.index] = out
                if progress:
                    progress(len(made), total)
    else:
        for job in jobs:
            made[job[0].index] = shot(job)
            if progress:
                progress(len(made), total)
    return made


def _render_copies(copies: list[Item], seed: int, made: Made,
                   progress: Callable[[int, int], None] | None, total: int) -> None:
    for it in copies:
        src_bytes, src_info, noun = made[it.dup_of]
        make = lookalike if it.lookalike == "mirror" else duplicate
        data, info = make(src_bytes, it, np.random.default_rng([seed, 3, it.index]), src_info)
        made[it.index] = (data, info, noun)
        if progress:
            progress(len(made), total)


def _write_files(root: Path, items: list[Item], made: Made, ids: dict[int, str],
                 seed: int) -> tuple[list[dict], dict]:
    """Write every item's file (``made`` is emptied); its manifest rows and the truth."""
    rows, products, corrupt_map, corrupt_images = [], {}, {}, {}
    groups: dict[int, list[str]] = {}
    lookalikes: dict[str, list[list[str]]] = {}
    titles: dict[int, set[str]] = {}
    for item in items:
        pid = ids[item.index]
        data, info, noun = made.pop(item.index)
        if item.role == "corrupt":
            item.fmt = "png" if item.corrupt_kind == "broken-png" else "jpeg"
        rel = f"images/{item.category}/{pid}{EXT[item.fmt]}"
        (root / "images" / item.category).mkdir(exist_ok=True)
        (root / rel).write_bytes(data)
        group = item.dup_of if item.dup_of is not None else item.index
        if item.lookalike:
            info = {**info, "lookalike": item.lookalike, "lookalike_of": ids[item.dup_of]}
            lookalikes.setdefault(item.lookalike, []).append(sorted([ids[item.dup_of], pid]))
        if item.role == "dup":
            groups.setdefault(group, []).append(pid)
        rows.append({"id": pid, "image": rel, **_listing(item, seed, noun, titles.setdefault(group, set()))})
        if item.role == "corrupt":
            corrupt_map[pid] = CORRUPT_KINDS[item.corrupt_kind]
            corrupt_images[pid] = rel
        else:
            products[pid] = {
                "colour": item.colour, "pattern": item.pattern, "category": item.category,
                "flags": list(FLAWS[item.flaw]) if item.flaw else [], "flaw": item.flaw,
                "image": rel, **info,
            }
    truth = {
        "meta": {"generator": "vismerch.sample", "version": VERSION, "seed": seed,
                 "n": len(items), "truth_colours": list(TRUTH_COLOURS),
                 "excluded_colours": EXCLUDED_COLOURS, "flag_names": list(FLAG_NAMES),
                 "flaws": {k: list(v) for k, v in FLAWS.items()}},
        "products": dict(sorted(products.items())),
        "duplicate_groups": sorted(sorted(g) for g in groups.values()),
        "corrupt": dict(sorted(corrupt_map.items())),
        "corrupt_images": dict(sorted(corrupt_images.items())),
        "listed_colour_wrong": [],
        **_lookalike_truth(lookalikes, products),
    }
    return rows, truth


def _listing(item: Item, seed: int, noun: str | None, taken: set[str]) -> dict:
    """The item's manifest fields; copies of one product get different titles."""
    listed = item.listed_wrong or item.colour
    rng = np.random.default_rng([seed, 4, item.index])
    meta = _metadata(item, listed, rng, noun)
    while meta["title"] in taken:
        meta = _metadata(item, listed, rng, noun)
    taken.add(meta["title"])
    return meta
