"""Duplicate edits and look-alikes for the sample catalog (sample generator v2).

Every edit a copy of a product photo goes through on its way between suppliers and
channels (issue 11), each with randomised parameters:

* ``requality`` / ``png`` / ``webp`` / ``resize``: re-encoded, re-formatted, resized;
* ``pad``: margins added on every side (3-20% each, uneven), in the backdrop's colour
  or plain white; ``letterbox``: bars added on two opposite sides to reach another aspect;
* ``trim``: margins trimmed towards the product (30-95% of each margin);
* ``crop``: a centred crop keeping 75-95% of the area; ``crop-off``: an off-centre one
  (each axis cut from one side), which may cut into the product;
* ``light``: brightness, contrast, gamma and white balance, one to four of them;
* ``chain``: one framing edit (pad, letterbox, trim, crop, crop-off), a light edit,
  a resize and a re-encode, together.

Look-alikes that are *not* duplicates: ``colourway`` (the same shot rendered in another
colour: another SKU; rendered by sample.py from the original's generator) and ``mirror``
(the photo flipped left-right).
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageOps

MIN_SIDE = 520  # copies keep a clean shot's shorter side (quality_min_side is 500)
SIMPLE = ("requality", "resize", "png", "webp")
FRAMING = ("pad", "letterbox", "trim", "crop", "crop-off")
EDITS = (*SIMPLE, *FRAMING, "light", "chain")
# edits after which the copy's quality verdicts are not part of the truth: its framing
# or exposure moved by an amount the truth does not model (fill, margins, background)
NO_QUALITY_TRUTH = frozenset({*FRAMING, "light", "chain"})


def _product_box(img: Image.Image) -> tuple[int, int, int, int]:
    """Pixel box of everything that differs from the top-left backdrop colour by > 24."""
    a = np.asarray(img, np.int16)
    diff = np.abs(a - a[2, 2]).max(axis=2) > 24
    rows, cols = np.flatnonzero(diff.any(axis=1)), np.flatnonzero(diff.any(axis=0))
    if not rows.size:
        return 0, 0, img.width, img.height
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1


def pad(img: Image.Image, rng, letterbox: bool = False) -> Image.Image:
    w, h = img.size
    fill = tuple(int(v) for v in np.asarray(img)[2, 2]) if rng.random() < 0.5 else (255, 255, 255)
    if letterbox:  # to 4:3 or 3:4 (or wider), bars split evenly
        if rng.random() < 0.5:
            nw, nh = round(h * rng.uniform(1.2, 1.5)), h
        else:
            nw, nh = w, round(w * rng.uniform(1.2, 1.5))
        nw, nh = max(nw, w), max(nh, h)
        left, top = (nw - w) // 2, (nh - h) // 2
    else:
        left, right = (round(w * rng.uniform(0.03, 0.2)) for _ in range(2))
        top, bottom = (round(h * rng.uniform(0.03, 0.2)) for _ in range(2))
        nw, nh = w + left + right, h + top + bottom
    canvas = Image.new("RGB", (nw, nh), fill)
    canvas.paste(img, (left, top))
    return canvas


def trim(img: Image.Image, rng) -> Image.Image:
    x0, y0, x1, y1 = _product_box(img)
    w, h = img.size
    keep = [rng.uniform(0.05, 0.7) for _ in range(4)]  # share of each margin left
    box = (round(x0 * (1 - keep[0])), round(y0 * (1 - keep[1])),
           w - round((w - x1) * (1 - keep[2])), h - round((h - y1) * (1 - keep[3])))
    return img.crop(box)


def crop(img: Image.Image, rng, centred: bool) -> Image.Image:
    w, h = img.size
    area = rng.uniform(0.75, 0.95)
    if centred:
        s = np.sqrt(area)
        dx, dy = w * (1 - s) / 2, h * (1 - s) / 2
        return img.crop((round(dx), round(dy), round(w - dx), round(h - dy)))
    share = rng.uniform(0.0, 1.0)  # how the cut splits between the axes
    kx = area ** share
    ky = area / kx
    cx, cy = w * (1 - kx), h * (1 - ky)
    x0 = 0 if rng.random() < 0.5 else cx
    y0 = 0 if rng.random() < 0.5 else cy
    return img.crop((round(x0), round(y0), round(x0 + w * kx), round(y0 + h * ky)))


def light(img: Image.Image, rng) -> tuple[Image.Image, dict]:
    """Brightness, contrast, gamma and white balance (a random non-empty subset)."""
    kinds = [k for k in ("brightness", "contrast", "gamma", "balance") if rng.random() < 0.5]
    kinds = kinds or [str(rng.choice(["brightness", "contrast", "gamma", "balance"]))]
    x = np.asarray(img, np.float32) / 255.0
    params: dict = {}
    if "gamma" in kinds:
        params["gamma"] = g = float(rng.uniform(0.8, 1.25))
        x = x ** g
    if "contrast" in kinds:
        params["contrast"] = c = float(rng.uniform(0.8, 1.25))
        x = (x - 0.5) * c + 0.5
    if "brightness" in kinds:
        params["brightness"] = b = float(rng.uniform(0.85, 1.2))
        x = x * b
    if "balance" in kinds:
        gains = rng.uniform(0.93, 1.07, 3)
        params["balance"] = [round(float(v), 3) for v in gains]
        x = x * gains
    out = Image.fromarray((x.clip(0, 1) * 255 + 0.5).astype(np.uint8), "RGB")
    return out, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in params.items()}


def resize(img: Image.Image, rng) -> Image.Image:
    short = min(img.size)
    lo = max(0.5, MIN_SIDE / short)
    f = rng.uniform(lo, max(lo + 0.02, min(1.0, lo + 0.25)))
    return img.resize((round(img.width * f), round(img.height * f)), Image.LANCZOS)


def keep_size(img: Image.Image) -> Image.Image:
    """Scale up a copy whose shorter side fell under MIN_SIDE (a trimmed small shot)."""
    short = min(img.size)
    if short >= MIN_SIDE:
        return img
    f = MIN_SIDE / short
    return img.resize((round(img.width * f + 0.5), round(img.height * f + 0.5)), Image.LANCZOS)


def frame(img: Image.Image, kind: str, rng) -> Image.Image:
    if kind in ("pad", "letterbox"):
        return pad(img, rng, letterbox=kind == "letterbox")
    if kind == "trim":
        return trim(img, rng)
    return crop(img, rng, centred=kind == "crop")


def apply(img: Image.Image, kind: str, rng) -> tuple[Image.Image, dict]:
    """One copy's edit (``EDITS``) -> the edited RGB image and what was done."""
    done: dict = {"edit": kind}
    if kind in FRAMING:
        img = frame(img, kind, rng)
    elif kind == "light":
        img, done["light"] = light(img, rng)
    elif kind == "chain":
        framing = str(rng.choice(FRAMING))
        done["chain"] = [framing, "light", "resize"]
        img = frame(img, framing, rng)
        img, done["light"] = light(img, rng)
        img = resize(keep_size(img), rng)
    elif kind == "resize" or (kind in ("png", "webp") and rng.random() < 0.5):
        img = resize(img, rng)
    return keep_size(img), done


def mirror(img: Image.Image) -> Image.Image:
    return ImageOps.mirror(img)


def asymmetry(img: Image.Image) -> float:
    """1 - correlation of the product's box (32x32 grey) with its mirror image: how far
    a mirrored shot is from the original (0 for a symmetric product)."""
    box = _product_box(img)
    g = np.asarray(img.convert("L").crop(box).resize((32, 32), Image.BOX), np.float32)
    a, b = g - g.mean(), g[:, ::-1] - g.mean()
    return float(1 - (a * b).sum() / max(float(np.sqrt((a * a).sum() * (b * b).sum())), 1e-6))
