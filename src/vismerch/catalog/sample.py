"""The synthetic sample catalog shared by ``vismerch demo``, the tests and the benchmarks.

``generate_catalog(out_dir, n, seed)`` draws an apparel catalog (silhouettes of t-shirts,
dresses, trousers, ... in named retail colours and solid/striped/dotted/checked patterns
on studio-white backgrounds), plants problems with known answers (near-duplicates,
flawed shots, corrupt files, wrong listed colours) and writes::

    out_dir/images/<category>/<id>.<ext>    the photos (JPEG mostly, some PNG/WebP)
    out_dir/manifest.csv                    id,image,title,...,colour,material,season
    out_dir/truth.json                      the ground truth (schema below)

truth.json::

    {"meta": {"generator", "version", "seed", "n", "truth_colours", "excluded_colours",
              "flag_names", "flaws": {flaw: [flags]}},
     "products": {id: {                        # every image that is not corrupt
         "colour": name,                       # the main colour (TRUTH_COLOURS)
         "pattern": "solid" | "striped" | "dotted" | "checked",
         "category": str,
         "flags": [flag, ...],                 # exactly the quality flags to expect
         "flaw": None | "blur" | "dark" | "off-centre" | "background" | "tiny" | "low-res",
         "secondary_colour": name | None,      # the pattern's colour
         "trim_colour": name | None,           # a sole, a belt, a hat band
         "main_fraction": float,               # main colour's share of the product area
         "fill": float,                        # product area / frame area
         "offset": [dx, dy],                   # product centroid - frame centre (fractions)
         "duplicate_transform": str,           # copies only: requality|resize|crop|png|webp
         "image": "images/<category>/<id>.<ext>"}},
     "duplicate_groups": [[id, ...], ...],     # sorted; groups of 2-3
     "corrupt": {id: reason},                  # empty-file | truncated | not-an-image
     "corrupt_images": {id: relative path},
     "listed_colour_wrong": [id, ...]}         # manifest colour far (CIEDE2000 >= 30) from truth

Flaw -> flags: blur -> blur, dark -> under-exposed (only: exposure suppresses the
background checks), off-centre -> off-centre, background -> non-white-background,
tiny -> too-small, low-res -> low-resolution. Clean shots keep clear of every threshold
in vismerch.config (shorter side >= 520, fill >= 0.13, centroid within 0.06 of the
middle, background within CIEDE2000 ~4 of white); flawed shots are well past theirs.

The product's ground-truth colour is its main colour, which covers at least ~65% of the
product area (``main_fraction``, measured on the rendered mask). Main colours come from
``TRUTH_COLOURS``, a subset of colours.csv whose names are well separated (CIEDE2000 >= 14
between any two, >= 19 from white); see ``EXCLUDED_COLOURS`` for why the rest are left out.
Everything is deterministic for a seed (one numpy generator per item).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageFilter

from vismerch.catalog import _sample_edits as edits
from vismerch.catalog import _sample_shapes as shapes
from vismerch.errors import UsageError
from vismerch.features.colournames import load_colour_table
from vismerch.features.colourspace import ciede2000_np, parse_hex, srgb_to_lab
from vismerch.features.quality_flags import flag_names

VERSION = 2  # 2: every duplicate edit kind (_sample_edits.py), colourways and mirrors
FLAG_NAMES = flag_names()  # the truth uses the flags vismerch reports
# Main colours a product can have in the truth: no two closer than CIEDE2000 14.
TRUTH_COLOURS = (
    "black", "grey", "beige", "brown", "navy", "blue", "light blue", "teal", "turquoise",
    "green", "olive", "mint", "burgundy", "red", "coral", "pink", "hot pink", "orange",
    "mustard", "yellow", "purple", "lavender",
)
EXCLUDED_COLOURS = {
    "white": "the studio background is white",
    "cream": "CIEDE2000 11 from white, 9 from beige",
    "light grey": "5 from silver, 12 from white",
    "silver": "5 from light grey",
    "gold": "4 from mustard",
    "khaki": "8 from tan and gold, 10 from beige",
    "tan": "8 from khaki, 12 from beige",
    "charcoal": "12 from black",
}
# A flaw -> the exact quality flags it must raise (dark shots: exposure only).
FLAWS: dict[str, tuple[str, ...]] = {
    "blur": ("blur",),
    "dark": ("under-exposed",),
    "off-centre": ("off-centre",),
    "background": ("non-white-background",),
    "tiny": ("too-small",),
    "low-res": ("low-resolution",),
}
CORRUPT_KINDS = {  # kind -> reason code the decoder must give
    "truncated": "truncated", "zero-byte": "empty-file",
    "text": "not-an-image", "broken-png": "not-an-image",
}
DEFAULT_FORMATS = {"jpeg": 0.84, "png": 0.09, "webp": 0.07}
MANIFEST_COLUMNS = ("id", "image", "title", "description", "category", "brand", "price",
                    "stock", "sales", "created_at", "colour", "material", "season")
# Studio backdrops for the non-white-background flaw (each >= CIEDE2000 14 from white).
BACKDROPS = ((172, 172, 172), (160, 163, 168), (214, 190, 156), (166, 196, 226),
             (228, 176, 176), (172, 196, 162), (200, 178, 210))

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


# --------------------------------------------------------------------------- colours
class _Palette:
    """The colour table (sRGB per name) and the CIEDE2000 between every name and studio
    backdrop, computed once: the generator asks for thousands of such distances."""

    def __init__(self) -> None:
        table = load_colour_table()
        self.names = list(table.names)
        self.rgb = {n: parse_hex(h) for n, h in zip(table.names, table.hexes, strict=True)}
        keys = [*self.names, *BACKDROPS]
        backdrops = srgb_to_lab(torch.tensor(BACKDROPS, dtype=torch.uint8), dtype=torch.float64)
        lab = np.concatenate([table.lab, backdrops.numpy()])
        self._pos = {key: i for i, key in enumerate(keys)}
        self._lab = lab
        self._de = ciede2000_np(lab[:, None], lab[None])

    def de(self, a, b) -> float:
        """CIEDE2000 between colour names and/or sRGB triples (names and ``BACKDROPS``
        come from the table computed once)."""
        if a in self._pos and b in self._pos:
            return float(self._de[self._pos[a], self._pos[b]])
        return float(ciede2000_np(self.lab(a), self.lab(b)))

    def lab(self, colour) -> np.ndarray:
        if colour in self._pos:
            return self._lab[self._pos[colour]]
        rgb = torch.tensor([float(v) for v in colour], dtype=torch.float64)
        return srgb_to_lab(rgb, dtype=torch.float64).numpy()

    def pick_far(self, rng, base: str, min_de: float, pool=None) -> str:
        pool = [n for n in (pool or self.names) if n != base and self.de(n, base) >= min_de]
        return str(rng.choice(pool))


@functools.lru_cache(maxsize=1)
def _palette() -> _Palette:
    return _Palette()


# --------------------------------------------------------------------------- planning
@dataclass
class _Item:
    index: int
    role: str  # clean | flawed | dup | corrupt
    category: str
    colour: str
    pattern: str
    flaw: str | None = None
    fmt: str = "jpeg"
    alpha: bool = False
    size: tuple[int, int] = (800, 800)
    dup_of: int | None = None
    dup_transform: str | None = None
    corrupt_kind: str | None = None
    listed_wrong: str | None = None
    shading: bool = False  # realistic shading (catalog/_sample_shading.py)
    lookalike: str | None = None  # colourway | mirror: of item dup_of, never its duplicate


def _frame(rng, size_range, portrait_p: float) -> tuple[int, int]:
    lo, hi = size_range
    side = 800 if lo <= 800 <= hi and rng.random() < 0.55 else int(rng.uniform(lo, hi) // 16 * 16)
    side = max(lo, min(hi, side))
    return (side, side * 4 // 3) if rng.random() < portrait_p else (side, side)


def _plan(n, seed, corrupt, flawed, duplicates, size_range, formats, wrong_listed) -> list[_Item]:
    rng = np.random.default_rng([seed, 1])
    n_corrupt = max(1, round(0.01 * n)) if corrupt else 0
    n_flawed = max(2, round(0.09 * n)) if flawed else 0
    n_dup = max(2, round(0.10 * n)) if duplicates else 0
    if n < 1 or n_corrupt + n_flawed + n_dup > n // 2:
        raise UsageError(f"n={n} is too small for the planted problems",
                         hint="use n >= 10, or turn the planted problems off")
    group_sizes: list[int] = []  # near-duplicate groups of 2-3 covering n_dup products
    while n_dup - sum(group_sizes) >= 2:
        left = n_dup - sum(group_sizes)
        group_sizes.append(3 if left >= 3 and (left == 3 or rng.random() < 0.3) else 2)
    n_copies = sum(group_sizes) - len(group_sizes)
    roles = ["corrupt"] * n_corrupt + ["flawed"] * n_flawed
    roles += ["clean"] * (n - len(roles) - n_copies)
    items: list[_Item] = []
    fmt_names = list(formats)
    fmt_p = np.array([formats[f] for f in fmt_names], float)
    flaw_cycle = list(FLAWS)
    for i, role in enumerate(roles):
        it = _Item(i, role, str(rng.choice(shapes.CATEGORIES, p=shapes.CATEGORY_P)),
                   str(rng.choice(TRUTH_COLOURS)), str(rng.choice(shapes.PATTERNS, p=shapes.PATTERN_P)))
        if it.category in shapes.SOLID_ONLY:
            it.pattern = "solid"
        it.size = _frame(rng, size_range, 0.0 if size_range[0] == size_range[1] else 0.25)
        if role == "flawed":
            it.flaw = flaw_cycle[(i - n_corrupt) % len(flaw_cycle)]
            if it.flaw == "low-res":
                side = int(rng.integers(240, 361))
                it.size = (side, side * 4 // 3) if rng.random() < 0.25 else (side, side)
        elif role == "corrupt":
            it.corrupt_kind = list(CORRUPT_KINDS)[i % len(CORRUPT_KINDS)]
            it.size = (640, 640)
        else:
            it.fmt = str(rng.choice(fmt_names, p=fmt_p / fmt_p.sum()))
            it.alpha = it.fmt == "png" and rng.random() < 0.6
        items.append(it)
    # near-duplicate groups: copies of clean originals (JPEGs first; never a cut-out PNG)
    originals = [it for it in items if it.role == "clean" and not it.alpha]
    rng.shuffle(originals)
    originals.sort(key=lambda it: it.fmt == "jpeg")  # stable: JPEGs last, popped first
    transforms = edits.EDITS
    for k in group_sizes:
        src = originals.pop()
        src.role = "dup"
        for _ in range(k - 1):
            t = str(rng.choice(transforms))
            items.append(_Item(len(items), "dup", src.category, src.colour, src.pattern,
                               fmt={"png": "png", "webp": "webp"}.get(t, "jpeg"),
                               size=src.size, dup_of=src.index, dup_transform=t))
    _plan_lookalikes(items, np.random.default_rng([seed, 5]), n if duplicates else 0)
    # clean singles get a listed colour that is plainly wrong (for the catalog audit)
    if wrong_listed:
        pal = _palette()
        singles = [it for it in items if it.role == "clean"]
        for j in rng.choice(len(singles), size=max(1, round(0.02 * n)), replace=False):
            singles[j].listed_wrong = pal.pick_far(rng, singles[j].colour, 30.0, TRUTH_COLOURS)
    return items


def _plan_lookalikes(items: list[_Item], rng, n: int) -> None:
    """Known non-duplicates that look like one: colourways (the same shot in another
    colour, ~3% of n) and mirrored shots (~2%, preferring products that are not left-right
    symmetric: a mirrored symmetric product is the same picture)."""
    pool = [it for it in items if it.role in ("clean", "dup") and not it.alpha
            and it.dup_of is None and it.flaw is None]
    if not pool or n < 20:
        return
    pal = _palette()
    picks = rng.choice(len(pool), size=min(len(pool), max(1, round(0.03 * n))), replace=False)
    for k in picks:
        src = pool[int(k)]
        colour = pal.pick_far(rng, src.colour, 25.0, TRUTH_COLOURS)
        items.append(_Item(len(items), "clean", src.category, colour, src.pattern,
                           fmt=src.fmt, size=src.size, dup_of=src.index, lookalike="colourway"))
    lopsided = [it for it in pool if it.category in ("sneakers", "bag", "scarf")] or pool
    picks = rng.choice(len(lopsided), size=min(len(lopsided), max(1, round(0.02 * n))),
                       replace=False)
    for k in picks:
        src = lopsided[int(k)]
        items.append(_Item(len(items), "clean", src.category, src.colour, src.pattern,
                           fmt="jpeg", size=src.size, dup_of=src.index, lookalike="mirror"))


# --------------------------------------------------------------------------- rendering
def _background(w: int, h: int, rng, colour=None) -> Image.Image:
    """A studio sweep: near-white (or a given backdrop) with a faint vertical gradient."""
    if colour is None:
        base = 251 + rng.uniform(-2, 3) + rng.uniform(-1.5, 1.5, 3)
    else:
        base = np.asarray(colour, float) + rng.uniform(-3, 3, 3)
    ramp = np.linspace(0.0, rng.uniform(2, 6), h, dtype=np.float32)[:, None, None]
    column = np.clip(base[None, None, :] - ramp + 0.5, 0, 255).astype(np.uint8)
    return Image.fromarray(column, "RGB").resize((w, h), Image.NEAREST)


# Layout targets, as fractions of the frame. A clean shot keeps the silhouette's centroid
# within CLEAN_MAX_OFFSET of the middle and fills at least CLEAN_MIN_FILL of the frame, well
# clear of the flaws' thresholds; flawed shots are well past them.
MIN_CLEAN_SIDE = 520  # quality_min_side is 500; near-duplicates are never resized below this
MARGIN = 0.09  # clear border around a clean product (a near-duplicate's centre crop keeps it)
CLEAN_MIN_FILL, CLEAN_MAX_OFFSET = 0.13, 0.06
OFFCENTRE_MIN_FILL, OFFCENTRE_MIN_SHIFT = 0.11, 0.23
TINY_MAX_FILL = 0.035


@dataclass
class _Placement:
    bw: float  # box size in px (the shape is already turned)
    bh: float
    x: float  # box centre in px
    y: float
    fill: float  # estimated silhouette fraction of the frame
    offset: tuple[float, float]  # estimated centroid offset from the middle (frame fractions)


def _place(shape, fw: int, fh: int, ext: float, target: tuple[float, float],
           room: tuple[float, float], margin: float) -> _Placement:
    """Scale the box to ``ext`` of the room and put the silhouette's centroid at ``target``,
    as close as the margins allow."""
    bh = min(ext * room[0] * fw / shape.aspect, ext * room[1] * fh)
    bw = bh * shape.aspect
    ew, eh = bw / fw, bh / fh
    dx = (shape.centroid[0] - 0.5) * ew
    dy = (shape.centroid[1] - 0.5) * eh
    cx = min(max(target[0] - dx, margin + ew / 2), 1 - margin - ew / 2) if ew < 1 - 2 * margin else 0.5
    cy = min(max(target[1] - dy, margin + eh / 2), 1 - margin - eh / 2) if eh < 1 - 2 * margin else 0.5
    return _Placement(bw, bh, cx * fw, cy * fh, shape.coverage * bw * bh / (fw * fh),
                      (cx + dx - 0.5, cy + dy - 0.5))


def _layout(rng, kind: str, fw: int, fh: int, category: str, angle: float) -> tuple:
    """Pick a silhouette and place it for a layout kind (clean, tiny, off-centre); sparse
    silhouettes that cannot reach the kind's fill are redrawn; an off-centre shot of a
    sparse product (a diagonal scarf) takes the fullest placement found."""
    fallback = None
    for _ in range(24):
        shape = shapes.make_shape(category, rng, angle)
        if kind == "tiny":
            jitter = tuple(0.5 + rng.uniform(-0.02, 0.02, 2))
            pl = _place(shape, fw, fh, rng.uniform(0.13, 0.19), jitter, (1, 1), MARGIN)
            while pl.fill > TINY_MAX_FILL:
                pl = _place(shape, fw, fh, pl.bh / fh * 0.9, jitter, (1, 1), MARGIN)
            return shape, pl
        if kind == "off-centre":
            major, minor = rng.uniform(0.26, 0.3), rng.uniform(0.05, 0.12)
            sx, sy = rng.choice([-1.0, 1.0], size=2)
            margin = 0.04
            # shift along the axis where the product is narrower (relative to the frame)
            tall = shape.aspect * fh / fw < 1.0
            shift = (minor, major) if not tall else (major, minor)
            room = (2 * (0.5 - margin - shift[0]), 2 * (0.5 - margin - shift[1]))
            target = (0.5 + sx * shift[0], 0.5 + sy * shift[1])
            pl = _place(shape, fw, fh, rng.uniform(0.94, 1.0), target, room, margin)
            if max(map(abs, pl.offset)) >= OFFCENTRE_MIN_SHIFT:
                if pl.fill >= OFFCENTRE_MIN_FILL:
                    return shape, pl
                if fallback is None or pl.fill > fallback[1].fill:
                    fallback = (shape, pl)
            continue
        target = tuple(0.5 + rng.uniform(-0.045, 0.045, 2))
        room = (1 - 2 * MARGIN,) * 2
        ext = rng.uniform(0.6, 1.0)
        pl = _place(shape, fw, fh, ext, target, room, MARGIN)
        while max(map(abs, pl.offset)) > CLEAN_MAX_OFFSET - 0.01 and ext > 0.5:
            ext *= 0.95  # lopsided silhouettes (a bag's handle) need room to re-centre
            pl = _place(shape, fw, fh, ext, target, room, MARGIN)
        if pl.fill < CLEAN_MIN_FILL + 0.01:
            ext = min(1.0, ext * math.sqrt((CLEAN_MIN_FILL + 0.02) / pl.fill))
            pl = _place(shape, fw, fh, ext, target, room, MARGIN)
        if pl.fill >= CLEAN_MIN_FILL + 0.01 and max(map(abs, pl.offset)) <= CLEAN_MAX_OFFSET - 0.01:
            return shape, pl
    if fallback is not None:
        return fallback
    raise RuntimeError(f"no {kind} layout for a {category} in {fw}x{fh}")  # a generator bug


def _render(item: _Item, rng, pal: _Palette) -> tuple[Image.Image, dict, str | None]:
    """Draw one product shot: the image (RGB or RGBA), its measured truth, its noun."""
    fw, fh = item.size
    main = pal.rgb[item.colour]
    secondary = None
    if item.pattern != "solid":
        secondary = "white" if rng.random() < 0.45 else pal.pick_far(rng, item.colour, 25.0)
    kind = {"tiny": "tiny", "off-centre": "off-centre"}.get(item.flaw or "", "clean")
    angle = 0.0 if kind == "off-centre" else float(rng.uniform(-9, 9))
    if item.category == "scarf" and rng.random() < 0.5:  # laid diagonally
        angle = float(rng.choice([-1, 1]) * rng.uniform(20, 45))
    shape, pl = _layout(rng, kind, fw, fh, item.category, angle)
    trim = shape.trim and ("white" if rng.random() < 0.6 else pal.pick_far(
        rng, item.colour, 20.0, ("black", "tan", "brown", "navy", "light grey")))
    bw, bh, cx, cy = pl.bw, pl.bh, pl.x, pl.y
    prod, mask, main_fraction = shapes.paint(
        shape, int(round(bw)), int(round(bh)), main, pal.rgb[secondary] if secondary else None,
        pal.rgb[trim] if trim else None, item.pattern, rng)
    shaded = None
    if item.shading:  # volume, light ramp, highlights, outlines: catalog/_sample_shading.py
        from vismerch.catalog import _sample_shading

        shaded = _sample_shading.draw_shading(np.random.default_rng([int(rng.integers(1 << 31)), 5]))
        prod = _sample_shading.shade(prod, mask, shaded)
    x, y = int(round(cx - prod.width / 2)), int(round(cy - prod.height / 2))
    backdrop = None
    if item.flaw == "background":
        ok = [c for c in BACKDROPS if pal.de(c, item.colour) >= 22
              and (secondary is None or pal.de(c, secondary) >= 12)]
        backdrop = ok[int(rng.integers(len(ok)))] if ok else BACKDROPS[0]
    if item.alpha:
        canvas = Image.new("RGB", (fw, fh), (0, 0, 0))
        canvas.paste(prod, (x, y))
        alpha = Image.new("L", (fw, fh), 0)
        alpha.paste(mask, (x, y))
        canvas.putalpha(alpha)
        img = canvas
    else:
        img = _background(fw, fh, rng, backdrop)
        if kind == "clean" and rng.random() < 0.4:
            _shadow(img, mask, x, y, rng)
        img.paste(prod, (x, y), mask)
    m = np.asarray(mask, np.float32) / 255.0  # the product lies inside the frame
    total = float(m.sum())
    info = {
        "secondary_colour": secondary, "trim_colour": trim or None,
        "main_fraction": round(main_fraction, 3), "fill": round(total / (fw * fh), 4),
        **({"shading": shaded.as_dict()} if shaded else {}),
        "offset": [round(float((m.sum(0) * (np.arange(m.shape[1]) + 0.5 + x)).sum()
                               / total / fw - 0.5), 3),
                   round(float((m.sum(1) * (np.arange(m.shape[0]) + 0.5 + y)).sum()
                               / total / fh - 0.5), 3)],
    }
    if item.flaw == "blur":
        img = img.filter(ImageFilter.GaussianBlur(min(fw, fh) * rng.uniform(0.011, 0.016)))
    elif item.flaw == "dark":
        k = rng.uniform(0.10, 0.18)
        img = img.point([int(v * k + 0.5) for v in range(256)] * 3)
    return img, info, shape.noun


def _shadow(img: Image.Image, mask: Image.Image, x: int, y: int, rng) -> None:
    """A faint soft contact shadow, offset down-right (at most ~7% darker)."""
    strength = rng.uniform(0.03, 0.07)
    lut = [int(v * strength + 0.5) for v in range(256)]
    soft = mask.reduce(8).filter(ImageFilter.GaussianBlur(2.5)).point(lut)
    soft = soft.resize(mask.size, Image.BILINEAR)
    dx, dy = int(mask.width * 0.02) + 2, int(mask.height * 0.03) + 3
    img.paste((0, 0, 0), (x + dx, y + dy, x + dx + mask.width, y + dy + mask.height), soft)


def _encode(img: Image.Image, fmt: str, rng) -> bytes:
    buf = io.BytesIO()
    if fmt == "jpeg":
        img.convert("RGB").save(buf, "JPEG", quality=int(rng.integers(84, 96)))
    elif fmt == "png":
        img.save(buf, "PNG", compress_level=1)
    else:
        img.save(buf, "WEBP", quality=int(rng.integers(80, 92)), method=2)
    return buf.getvalue()


def _duplicate(src_bytes: bytes, item: _Item, rng, src_info: dict) -> tuple[bytes, dict]:
    """A near-duplicate of an original photo: re-encoded or re-formatted here, every other
    edit kind in ``_edited_copy``."""
    img = Image.open(io.BytesIO(src_bytes)).convert("RGB")
    t = item.dup_transform
    info = {**src_info, "duplicate_transform": t}
    if t in edits.NO_QUALITY_TRUTH or t == "resize":
        return _edited_copy(img, item, rng, info)
    if t in ("png", "webp"):
        short = min(img.size)
        lo = max(0.5, MIN_CLEAN_SIDE / short)
        if rng.random() < 0.5:
            f = rng.uniform(lo, max(0.8, min(1.0, lo + 0.08)))
            img = img.resize((round(img.width * f), round(img.height * f)), Image.LANCZOS)
    return _encoded(img, item.fmt, rng, (58, 78)), info


def _edited_copy(img: Image.Image, item: _Item, rng, info: dict) -> tuple[bytes, dict]:
    """A copy through one of sample generator v2's edits (_sample_edits.py)."""
    img, done = edits.apply(img, item.dup_transform, rng)
    info.update(done)
    if item.dup_transform in edits.NO_QUALITY_TRUTH:
        info["quality_truth"] = False  # its framing/exposure verdicts are not modelled
    return _encoded(img, item.fmt, rng, (58, 90)), info


def _encoded(img: Image.Image, fmt: str, rng, jpeg_quality: tuple[int, int]) -> bytes:
    """A copy's file bytes: JPEG at a random quality in ``jpeg_quality``, else PNG/WebP."""
    buf = io.BytesIO()
    if fmt == "jpeg":
        img.save(buf, "JPEG", quality=int(rng.integers(*jpeg_quality)))
    else:
        img.save(buf, "PNG" if fmt == "png" else "WEBP",
                 **({"compress_level": 1} if fmt == "png" else {"quality": 82}))
    return buf.getvalue()


def _lookalike(src_bytes: bytes, item: _Item, rng, src_info: dict) -> tuple[bytes, dict]:
    """A mirrored shot of the original (colourways are rendered, see ``_shot``)."""
    img = edits.mirror(Image.open(io.BytesIO(src_bytes)).convert("RGB"))
    info = {**src_info, "lookalike": "mirror", "asymmetry": round(edits.asymmetry(img), 3)}
    info["offset"] = [-info["offset"][0], info["offset"][1]]
    return _encode(img, "jpeg", rng), info


def _shot(job: tuple[_Item, int]) -> tuple[bytes, dict, str | None]:
    """Render and encode one photo (or its corrupt stand-in); a pool worker's unit. A
    colourway replays its original's generator, so only the colours differ."""
    item, seed = job
    same_shot = item.dup_of if item.lookalike == "colourway" else item.index
    rng = np.random.default_rng([seed, 3, same_shot])
    img, info, noun = _render(item, rng, _palette())
    if item.role != "corrupt":
        return _encode(img, item.fmt, rng), info, noun
    png = _encode(img, "png", rng) if item.corrupt_kind == "broken-png" else b""
    return _corrupt_bytes(item.corrupt_kind, rng, _encode(img, "jpeg", rng), png), info, noun


def _corrupt_bytes(kind: str, rng, good_jpeg: bytes, good_png: bytes) -> bytes:
    if kind == "zero-byte":
        return b""
    if kind == "truncated":
        return good_jpeg[: int(len(good_jpeg) * rng.uniform(0.4, 0.75))]
    if kind == "text":
        return (b"<html><head><title>404 Not Found</title></head>\n"
                b"<body><h1>Not Found</h1><p>The requested image was not found.</p></body></html>\n")
    data = bytearray(good_png)  # broken-png: signature intact, IHDR chunk garbled
    data[12:24] = b"\x00GARBAGE\xff\xff\x00\x00\x01"
    return bytes(data)


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


MIRROR_MIN_ASYMMETRY = 0.1  # 1 - correlation with its mirror image (32x32 grey box)


# --------------------------------------------------------------------------- metadata
def _metadata(item: _Item, listed: str, rng, noun: str | None) -> dict:
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
def generate_catalog(
    out_dir: str | Path,
    n: int = 600,
    seed: int = 0,
    *,
    corrupt: bool = True,
    flawed: bool = True,
    duplicates: bool = True,
    size_range: tuple[int, int] = (640, 1024),
    formats: Mapping[str, float] | None = None,
    clean_only: bool = False,
    wrong_listed: bool = True,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    shading: bool = False,
) -> SampleCatalog:
    """Write a synthetic catalog of ``n`` products with ground truth to ``out_dir``.

    ``clean_only=True`` (benchmarks): no flaws, corrupt files, duplicates or wrong listed
    colours; every image an 800x800 JPEG. ``formats`` maps jpeg/png/webp to weights for
    the clean shots. ``progress(done, total)`` is called after each image. ``workers > 1``
    renders in that many processes (same bytes as one process). ``shading=True`` renders
    every product with volume, gradient light, and on some glossy highlights and thin dark
    outlines (``catalog/_sample_shading.py``); the truth colour is unchanged.
    """
    if clean_only:
        corrupt = flawed = duplicates = wrong_listed = False
        size_range, formats = (800, 800), {"jpeg": 1.0}
    formats = dict(formats or DEFAULT_FORMATS)
    if unknown := set(formats) - set(EXT):
        raise UsageError(f"unknown image formats {sorted(unknown)}", hint="use jpeg, png, webp")
    if not MIN_CLEAN_SIDE <= size_range[0] <= size_range[1]:
        raise UsageError(f"bad size_range {size_range}: clean shots need a shorter side of "
                         f"at least {MIN_CLEAN_SIDE} px (below that they are low-resolution)",
                         hint="e.g. (640, 1024)")
    root = Path(out_dir)
    images_dir = root / "images"
    marker = root / ".vismerch-sample"
    if images_dir.exists():
        if not marker.exists():
            raise UsageError(f"{images_dir} exists and is not a sample catalog",
                             hint="choose an empty output folder")
        shutil.rmtree(images_dir)  # a previous sample: replace it, leave no stale images
    images_dir.mkdir(parents=True)
    marker.write_text("written by vismerch.catalog.sample.generate_catalog\n")

    items = _plan(n, seed, corrupt, flawed, duplicates, size_range, formats, wrong_listed)
    for it in items:
        it.shading = shading
    order = np.random.default_rng([seed, 2]).permutation(len(items))
    ids = {items[j].index: f"P{k + 1:05d}" for k, j in enumerate(order)}
    shots = [it for it in items if it.dup_of is None or it.lookalike == "colourway"]
    copies = [it for it in items if it.dup_of is not None and it.lookalike != "colourway"]
    made: dict[int, tuple[bytes, dict, str | None]] = {}
    jobs = [(it, seed) for it in shots]
    if workers > 1:  # every shot has its own generator, so the bytes do not depend on this
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(workers) as pool:
            for it, out in zip(shots, pool.imap(_shot, jobs, chunksize=8), strict=True):
                made[it.index] = out
                if progress:
                    progress(len(made), len(items))
    else:
        for job in jobs:
            made[job[0].index] = _shot(job)
            if progress:
                progress(len(made), len(items))
    for it in copies:
        src_bytes, src_info, noun = made[it.dup_of]
        make = _lookalike if it.lookalike == "mirror" else _duplicate
        data, info = make(src_bytes, it, np.random.default_rng([seed, 3, it.index]), src_info)
        made[it.index] = (data, info, noun)
        if progress:
            progress(len(made), len(items))

    rows, products, corrupt_map, corrupt_images = [], {}, {}, {}
    groups: dict[int, list[str]] = {}
    lookalikes: dict[str, list[list[str]]] = {}
    titles: dict[int, set[str]] = {}
    for item in shots + copies:
        pid = ids[item.index]
        data, info, noun = made.pop(item.index)
        if item.role == "corrupt":
            item.fmt = "png" if item.corrupt_kind == "broken-png" else "jpeg"
        rel = f"images/{item.category}/{pid}{EXT[item.fmt]}"
        (images_dir / item.category).mkdir(exist_ok=True)
        (root / rel).write_bytes(data)
        group = item.dup_of if item.dup_of is not None else item.index
        if item.lookalike:
            info = {**info, "lookalike": item.lookalike, "lookalike_of": ids[item.dup_of]}
            lookalikes.setdefault(item.lookalike, []).append(sorted([ids[item.dup_of], pid]))
        if item.role == "dup":
            groups.setdefault(group, []).append(pid)
        listed = item.listed_wrong or item.colour
        rng = np.random.default_rng([seed, 4, item.index])
        meta = _metadata(item, listed, rng, noun)
        while meta["title"] in titles.setdefault(group, set()):  # a copy is listed differently
            meta = _metadata(item, listed, rng, noun)
        titles[group].add(meta["title"])
        rows.append({"id": pid, "image": rel, **meta})
        if item.role == "corrupt":
            corrupt_map[pid] = CORRUPT_KINDS[item.corrupt_kind]
            corrupt_images[pid] = rel
        else:
            products[pid] = {
                "colour": item.colour, "pattern": item.pattern, "category": item.category,
                "flags": list(FLAWS[item.flaw]) if item.flaw else [], "flaw": item.flaw,
                "image": rel, **info,
            }

    rows.sort(key=lambda r: r["id"])
    manifest = root / "manifest.csv"
    with manifest.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=MANIFEST_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    truth = {
        "meta": {"generator": "vismerch.catalog.sample", "version": VERSION, "seed": seed,
                 "n": len(items), "truth_colours": list(TRUTH_COLOURS),
                 "excluded_colours": EXCLUDED_COLOURS, "flag_names": list(FLAG_NAMES),
                 "flaws": {k: list(v) for k, v in FLAWS.items()}},
        "products": dict(sorted(products.items())),
        "duplicate_groups": sorted(sorted(g) for g in groups.values()),
        "corrupt": dict(sorted(corrupt_map.items())),
        "corrupt_images": dict(sorted(corrupt_images.items())),
        "listed_colour_wrong": sorted(ids[it.index] for it in items if it.listed_wrong),
        **_lookalike_truth(lookalikes, products),
    }
    truth_path = root / "truth.json"
    truth_path.write_text(json.dumps(truth, indent=1) + "\n")
    return SampleCatalog(root, manifest, truth_path, images_dir, len(items))


def replicate_products(store, total: int) -> int:
    """Grow an ingested store to ``total`` products for benchmarks (the web app at 100,000
    products) by copying its ingested rows under new ids ``<id>~<n>`` with ``#n`` added to
    the title. Copies share the original's image hash, so thumbnails, colours and quality
    flags are shared too and nothing is decoded. Returns the number of rows added."""
    have = store.db.execute("SELECT COUNT(*) FROM products WHERE status = 'ok'").fetchone()[0]
    need = int(total) - int(store.db.execute("SELECT COUNT(*) FROM products").fetchone()[0])
    if have == 0 or need <= 0:
        return 0
    copies = math.ceil(need / have)
    with store.transaction() as con:
        con.execute(
            """WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?)
               INSERT INTO products (id, image_path, sha256, status, title, description, category,
                   brand, price, stock, sales, created_at, attributes, file_size, file_mtime, updated_run)
               SELECT p.id || '~' || n.k, p.image_path, p.sha256, p.status,
                   COALESCE(p.title, p.id) || ' #' || n.k, p.description, p.category, p.brand, p.price,
                   p.stock, p.sales, p.created_at, p.attributes, p.file_size, p.file_mtime, p.updated_run
               FROM n CROSS JOIN (SELECT * FROM products WHERE status = 'ok' ORDER BY id) p
               LIMIT ?""", (copies, need))
    return need
