"""Drawing and encoding: one product shot (a silhouette placed on a studio sweep, with its
measured truth), a near-duplicate or mirrored copy of it, or a corrupt stand-in."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

from vismerch.sample import edits, shading, shapes
from vismerch.sample.plan import BACKDROPS, Item, Palette, palette


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


def _render(item: Item, rng, pal: Palette) -> tuple[Image.Image, dict, str | None]:
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
    if item.shading:  # volume, light ramp, highlights, outlines: sample/shading.py
        shaded = shading.draw_shading(np.random.default_rng([int(rng.integers(1 << 31)), 5]))
        prod = shading.shade(prod, mask, shaded)
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


def duplicate(src_bytes: bytes, item: Item, rng, src_info: dict) -> tuple[bytes, dict]:
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


def _edited_copy(img: Image.Image, item: Item, rng, info: dict) -> tuple[bytes, dict]:
    """A copy through one of sample generator v2's edits (sample/edits.py)."""
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


def lookalike(src_bytes: bytes, item: Item, rng, src_info: dict) -> tuple[bytes, dict]:
    """A mirrored shot of the original (colourways are rendered, see ``shot``)."""
    img = edits.mirror(Image.open(io.BytesIO(src_bytes)).convert("RGB"))
    info = {**src_info, "lookalike": "mirror", "asymmetry": round(edits.asymmetry(img), 3)}
    info["offset"] = [-info["offset"][0], info["offset"][1]]
    return _encode(img, "jpeg", rng), info


def shot(job: tuple[Item, int]) -> tuple[bytes, dict, str | None]:
    """Render and encode one photo (or its corrupt stand-in); a pool worker's unit. A
    colourway replays its original's generator, so only the colours differ."""
    item, seed = job
    same_shot = item.dup_of if item.lookalike == "colourway" else item.index
    rng = np.random.default_rng([seed, 3, same_shot])
    img, info, noun = _render(item, rng, palette())
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


MIRROR_MIN_ASYMMETRY = 0.1  # 1 - correlation with its mirror image (32x32 grey box)

