"""Drawing for the sample catalog: product silhouettes, patterns and product texts.

A shape is a list of drawing operations in unit coordinates (the product's box is
[0, 1] x [0, 1], y down) with a role each: ``body`` (main colour, patterned), ``part``
(a solid trim colour: a sole, a hat band), ``detail`` (seams and stitching: the main
colour, darker) and ``hole`` (background shows through). Every style parameter is drawn
from the item's generator, so two products of the same category and colour differ in
proportions and details, not only in position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

CATEGORIES = ("t-shirt", "dress", "trousers", "skirt", "sneakers", "bag", "hat", "jacket",
              "shorts", "scarf")
CATEGORY_P = (0.16, 0.12, 0.11, 0.08, 0.11, 0.10, 0.08, 0.09, 0.08, 0.07)
PATTERNS = ("solid", "striped", "dotted", "checked")
PATTERN_P = (0.55, 0.2, 0.12, 0.13)
SOLID_ONLY = frozenset({"sneakers"})  # the sole already takes up to a third of the area
MIN_MAIN_FRACTION = 0.66

Op = tuple  # (kind: "poly" | "line", role, points, line width)


@dataclass
class Shape:
    ops: list[Op]
    aspect: float  # box width / height
    coverage: float  # fraction of the box the silhouette fills
    centroid: tuple[float, float]  # the silhouette's centre of mass in the unit box
    trim: bool  # has a part in a trim colour
    noun: str | None = None  # what the style is called, when the category has several
    angle: float = 0.0  # turned by this many degrees (patterns turn with it)


def U(rng, lo, hi) -> float:
    return float(rng.uniform(lo, hi))


def ell(cx, cy, rx, ry, a0=0.0, a1=360.0, n=32) -> list[tuple[float, float]]:
    ts = np.radians(np.linspace(a0, a1, n))
    return [(cx + rx * math.cos(t), cy + ry * math.sin(t)) for t in ts]


def rrect(x0, y0, x1, y1, r) -> list[tuple[float, float]]:
    return (ell(x1 - r, y0 + r, r, r, 270, 360, 8) + ell(x1 - r, y1 - r, r, r, 0, 90, 8)
            + ell(x0 + r, y1 - r, r, r, 90, 180, 8) + ell(x0 + r, y0 + r, r, r, 180, 270, 8))


def mirror(left: list) -> list:
    """Left-half outline (top to bottom) -> closed outline symmetric about x = 0."""
    return left + [(-x, y) for x, y in reversed(left)]


def P(role, pts) -> Op:
    return ("poly", role, pts, 0.0)


def L(role, pts, width) -> Op:
    return ("line", role, pts, width)


# --------------------------------------------------------------------------- categories
def _top(rng, jacket: bool) -> tuple[list[Op], bool]:
    bw, nw, nd = U(rng, 0.26, 0.36), U(rng, 0.08, 0.12), U(rng, 0.03, 0.09)
    sh, arm, length = U(rng, 0.03, 0.07), U(rng, 0.26, 0.36), U(rng, 0.8, 1.15)
    flare = U(rng, -0.02, 0.06)
    style = "long" if jacket else str(rng.choice(["short", "short", "long", "tank"]))
    if jacket:
        bw, length = U(rng, 0.3, 0.38), U(rng, 0.85, 1.05)
    if style == "short":
        sx, sy, cw = U(rng, 0.1, 0.2), U(rng, 0.12, 0.22), U(rng, 0.12, 0.17)
        left = [(-nw, 0.0), (-bw - 0.02, sh), (-bw - sx, sh + sy),
                (-bw - sx * 0.4, sh + sy + cw), (-bw, max(arm, sh + sy + cw + 0.03))]
    elif style == "long":
        sx, sy, cw = U(rng, 0.14, 0.26), U(rng, 0.55, 0.8), U(rng, 0.08, 0.11)
        left = [(-nw, 0.0), (-bw - 0.03, sh), (-bw - sx, sh + sy), (-bw - sx + cw, sh + sy + 0.03),
                (-bw, arm)]
    else:
        left = [(-nw, 0.0), (-nw - U(rng, 0.04, 0.07), 0.0), (-bw + 0.03, arm * 0.55), (-bw, arm)]
        nd += 0.1
    left.append((-bw - flare, length))
    sag = U(rng, 0.0, 0.04)
    hem = [(x, length + sag * (1 - (x / (bw + flare)) ** 2)) for x in np.linspace(
        -(bw + flare), bw + flare, 9)[1:-1]]
    outline = left + hem + [(-x, y) for x, y in reversed(left)]
    ops = [P("body", outline), P("hole", ell(0, 0, nw, nd))]
    ops.append(L("detail", ell(0, 0, nw + 0.015, nd + 0.015, 0, 180, 16), 0.012))
    ops.append(L("detail", [(-bw - flare + 0.01, length - 0.03), (bw + flare - 0.01, length - 0.03)],
                 0.006))
    if jacket:
        zip_x = U(rng, -0.01, 0.01)
        ops.append(L("detail", [(zip_x, nd), (zip_x, length)], 0.012))
        lap = U(rng, 0.15, 0.3)
        ops.append(L("detail", [(-nw - 0.02, 0.0), (zip_x, lap)], 0.01))
        ops.append(L("detail", [(nw + 0.02, 0.0), (zip_x, lap)], 0.01))
        py = U(rng, 0.55, 0.7) * length
        for s in (-1, 1):
            ops.append(L("detail", [(s * bw * 0.75, py), (s * bw * 0.25, py)], 0.01))
    elif rng.random() < 0.35:
        px, py, pw = U(rng, -bw * 0.7, -bw * 0.4), U(rng, 0.22, 0.3), U(rng, 0.08, 0.12)
        ops.append(L("detail", rrect(px, py, px + pw, py + pw * 1.1, 0.01) + [(px + 0.01, py)],
                     0.006))
    noun = {"tank": "tank top", "long": "long-sleeve t-shirt"}.get(style)
    return ops, False, (None if jacket else noun)


def _dress(rng) -> tuple[list[Op], bool]:
    nw, tw, bw = U(rng, 0.06, 0.1), U(rng, 0.12, 0.17), U(rng, 0.15, 0.2)
    wy, ww = U(rng, 0.3, 0.42), U(rng, 0.11, 0.15)
    length = U(rng, 0.85, 1.3)
    hem = float(rng.choice([U(rng, 0.18, 0.24), U(rng, 0.28, 0.42), U(rng, 0.45, 0.6)]))
    left = [(-nw, 0.0), (-tw, 0.01)]
    if rng.random() < 0.4:  # short sleeves
        left += [(-tw - U(rng, 0.06, 0.1), U(rng, 0.06, 0.1)), (-tw - 0.04, U(rng, 0.15, 0.2))]
    left += [(-bw, 0.2), (-ww, wy), (-ww - 0.03, wy + 0.12), (-hem, length)]
    sag = U(rng, 0.0, 0.07)
    hem_pts = [(x, length + sag * (1 - (x / hem) ** 2)) for x in np.linspace(-hem, hem, 11)[1:-1]]
    outline = left + hem_pts + [(-x, y) for x, y in reversed(left)]
    ops = [P("body", outline)]
    if rng.random() < 0.5:
        ops.append(P("hole", [(-nw, -0.05), (-nw, 0.0), (0.0, U(rng, 0.08, 0.2)), (nw, 0.0),
                              (nw, -0.05)]))
    else:
        ops.append(P("hole", ell(0, 0, nw, U(rng, 0.03, 0.08))))
    trim = rng.random() < 0.3
    if trim:  # a belt in the trim colour
        ops.append(P("part", [(-ww - 0.005, wy - 0.02), (ww + 0.005, wy - 0.02),
                              (ww + 0.01, wy + 0.02), (-ww - 0.01, wy + 0.02)]))
    else:
        ops.append(L("detail", [(-ww, wy), (ww, wy)], 0.008))
    if rng.random() < 0.4:
        for k in range(1, int(rng.integers(3, 7))):
            f = k / 7 * 2 - 1
            ops.append(L("detail", [(f * ww, wy + 0.02), (f * hem * 0.95, length)], 0.005))
    return ops, trim, None


def _legs(rng, shorts: bool) -> tuple[list[Op], bool]:
    wb = U(rng, 0.17, 0.23)
    hw = wb + U(rng, 0.01, 0.04)
    length = U(rng, 0.35, 0.5) if shorts else U(rng, 0.95, 1.2)
    cy = U(rng, 0.27, 0.34)
    fit = "wide" if shorts else str(rng.choice(["slim", "straight", "wide"]))
    flare = {"slim": U(rng, -0.06, -0.02), "straight": U(rng, -0.01, 0.02),
             "wide": U(rng, 0.02, 0.08)}[fit]
    lw = {"slim": U(rng, 0.12, 0.15), "straight": U(rng, 0.16, 0.2),
          "wide": U(rng, 0.21, 0.27)}[fit]
    outer = -(hw + flare)
    inner = min(outer + lw, -0.012)
    outline = [(-wb, 0.0), (-hw, 0.22), (outer, length), (inner, length), (0.0, cy),
               (-inner, length), (-outer, length), (hw, 0.22), (wb, 0.0)]
    ops = [P("body", outline)]
    ops.append(L("detail", [(-wb, 0.05), (wb, 0.05)], 0.008))
    ops.append(L("detail", [(0.015, 0.05), (0.015, cy - 0.06), (-0.01, cy - 0.03)], 0.006))
    for s in (-1, 1):
        ops.append(L("detail", [(s * (wb - 0.06), 0.05), (s * (hw - 0.005), 0.13)], 0.006))
        if rng.random() < 0.5 and not shorts:
            ops.append(L("detail", [(s * (hw * 0.55), 0.3), (s * (-(outer + inner) / 2), length)],
                         0.004))
    if shorts and rng.random() < 0.5:
        ops.append(L("detail", [(outer + 0.01, length - 0.04), (inner - 0.01, length - 0.04)], 0.006))
        ops.append(L("detail", [(-outer - 0.01, length - 0.04), (-inner + 0.01, length - 0.04)],
                     0.006))
    return ops, False, None


def _skirt(rng) -> tuple[list[Op], bool]:
    ww, length = U(rng, 0.15, 0.2), U(rng, 0.45, 0.9)
    hem = ww + float(rng.choice([U(rng, 0.02, 0.06), U(rng, 0.1, 0.2), U(rng, 0.22, 0.32)]))
    sag = U(rng, 0.0, 0.06)
    hem_pts = [(x, length + sag * (1 - (x / hem) ** 2)) for x in np.linspace(hem, -hem, 11)]
    ops = [P("body", [(-ww, 0.0), (ww, 0.0)] + hem_pts)]
    band = U(rng, 0.03, 0.06)
    ops.append(L("detail", [(-ww, band), (ww, band)], 0.008))
    if rng.random() < 0.5:
        k = int(rng.integers(4, 9))
        for j in range(1, k):
            f = j / k * 2 - 1
            ops.append(L("detail", [(f * ww, band), (f * hem * 0.97, length)], 0.005))
    return ops, False, None


def _sneaker(rng) -> tuple[list[Op], bool]:
    g, st, spring = 0.6, U(rng, 0.045, 0.07), U(rng, 0.02, 0.045)
    collar = U(rng, 0.26, 0.34) if rng.random() < 0.7 else U(rng, 0.38, 0.5)
    top = g - st - collar
    tongue_x = U(rng, 0.3, 0.4)
    vamp_h = U(rng, 0.13, 0.18)
    upper = [(0.01, g - st), (0.02 + U(rng, 0.0, 0.03), top), (0.17, top + U(rng, 0.03, 0.07)),
             (tongue_x, top - U(rng, 0.0, 0.04)), (tongue_x + 0.06, top + 0.03),
             (0.72, g - st - vamp_h)]
    upper += ell(0.86, g - st - spring, 0.14, vamp_h - spring + 0.01, 270, 360, 10)[1:]
    sole = ([(0.0, g - st), (0.99, g - st - spring)] + ell(0.97, g - st * 0.5 - spring,
                                                          0.03, st * 0.5, 300, 420, 6)
            + [(0.9, g), (0.05, g), (0.0, g - 0.02)])
    ops = [P("body", upper), P("part", sole)]
    for k in range(int(rng.integers(3, 6))):
        x = tongue_x + 0.04 + k * 0.055
        y = top + 0.05 + k * (collar - vamp_h - 0.05) / 5
        ops.append(L("detail", [(x - 0.03, y), (x + 0.03, y + 0.015)], 0.01))
    ops.append(L("detail", [(0.05, g - st - 0.02), (0.05, top + 0.04)], 0.01))
    if rng.random() < 0.6:
        ops.append(L("detail", [(0.3, g - st - 0.03), (0.45, g - st - collar * 0.45),
                                (0.62, g - st - collar * 0.6)], 0.018))
    if rng.random() < 0.5:  # a pair: the second shoe behind, shifted back and up
        dx, dy = U(rng, -0.35, -0.12), U(rng, -0.2, -0.06)
        ops = [(k, role, [(x + dx, y + dy) for x, y in pts], w) for k, role, pts, w in ops] + ops
    return ops, True, ("high-top sneakers" if collar > 0.36 else None)


def _bag(rng) -> tuple[list[Op], bool]:
    style = str(rng.choice(["tote", "crossbody", "backpack"]))
    ops: list[Op] = []
    if style == "tote":
        tw, h = U(rng, 0.35, 0.45), U(rng, 0.7, 1.0)
        bw = tw + U(rng, -0.05, 0.06)
        rx, ry, t = U(rng, 0.12, 0.24), U(rng, 0.22, 0.4), U(rng, 0.025, 0.045)
        ops += [P("body", ell(0, 0, rx, ry)), P("hole", ell(0, 0, rx - t, ry - t))]
        ops += [P("body", [(-tw, 0.0), (tw, 0.0), (bw, h), (-bw, h)])]
        ops.append(L("detail", [(-tw + 0.01, 0.05), (tw - 0.01, 0.05)], 0.008))
    elif style == "crossbody":
        w, h = U(rng, 0.5, 0.7), U(rng, 0.35, 0.5)
        ry, t = U(rng, 0.3, 0.5), U(rng, 0.015, 0.025)
        ops += [P("body", ell(0, 0, w / 2 - 0.04, ry)), P("hole", ell(0, 0, w / 2 - 0.04 - t, ry - t))]
        ops += [P("body", rrect(-w / 2, 0.0, w / 2, h, 0.05))]
        fy = U(rng, 0.45, 0.7) * h
        ops.append(L("detail", [(-w / 2 + 0.01, fy), (w / 2 - 0.01, fy)], 0.01))
        ops.append(P("detail", ell(0, fy, 0.03, 0.025)))
    else:
        w, h = U(rng, 0.5, 0.66), U(rng, 0.7, 0.95)
        ops += [P("body", ell(0, 0.02, 0.08, 0.08)), P("hole", ell(0, 0.02, 0.055, 0.055))]
        ops += [P("body", ell(0, w / 2 + 0.03, w / 2, w / 2, 180, 360, 20)
                  + [(w / 2, h - 0.06), (w / 2 - 0.06, h), (-w / 2 + 0.06, h), (-w / 2, h - 0.06)])]
        py = U(rng, 0.5, 0.62) * h
        ops.append(L("detail", rrect(-w * 0.35, py, w * 0.35, h - 0.06, 0.04)
                     + [(-w * 0.35 + 0.04, py)], 0.01))
        ops.append(L("detail", [(-w * 0.3, py + 0.04), (w * 0.3, py + 0.04)], 0.008))
    return ops, False, {"tote": "tote bag", "crossbody": "crossbody bag"}.get(style, style)


def _hat(rng) -> tuple[list[Op], bool]:
    style = str(rng.choice(["cap", "beanie", "bucket", "fedora"]))
    ops: list[Op] = []
    trim = False
    if style == "cap":
        rx, ry = U(rng, 0.4, 0.5), U(rng, 0.3, 0.42)
        side = float(rng.choice([-1, 1]))
        brx, bry = U(rng, 0.25, 0.38), U(rng, 0.05, 0.09)
        ops += [P("body", ell(side * (rx * 0.85), 0.0, brx, bry)),
                P("body", ell(0, 0, rx, ry, 180, 360, 24))]
        ops.append(P("detail", ell(0, -ry + 0.01, 0.035, 0.02)))
        for a in (-0.5, 0.0, 0.5):
            ops.append(L("detail", [(0, -ry + 0.02), (a * rx, 0.0)], 0.006))
    elif style == "beanie":
        rx, ry, cuff = U(rng, 0.4, 0.48), U(rng, 0.5, 0.7), U(rng, 0.12, 0.22)
        ops += [P("body", ell(0, 0, rx, ry, 180, 360, 24) + [(rx, cuff), (-rx, cuff)])]
        for x in np.linspace(-rx + 0.04, rx - 0.04, int(rng.integers(8, 14))):
            ops.append(L("detail", [(x, 0.01), (x, cuff - 0.01)], 0.006))
        if rng.random() < 0.5:
            trim = True
            ops.append(P("part", ell(0, -ry - 0.08, 0.12, 0.1)))
    elif style == "bucket":
        tw, bw, h = U(rng, 0.22, 0.3), U(rng, 0.32, 0.38), U(rng, 0.3, 0.42)
        brim = U(rng, 0.48, 0.6)
        ops += [P("body", [(-bw, 0.0), (-tw, -h)] + ell(0, -h, tw, 0.04, 180, 360, 10)
                  + [(tw, -h), (bw, 0.0), (brim, U(rng, 0.1, 0.16)), (-brim, 0.13)])]
        ops.append(L("detail", [(-bw, 0.0), (bw, 0.0)], 0.01))
        ops.append(L("detail", [(-brim + 0.04, 0.1), (brim - 0.04, 0.1)], 0.005))
    else:
        cw, h, brim = U(rng, 0.24, 0.3), U(rng, 0.3, 0.4), U(rng, 0.55, 0.7)
        dent = U(rng, 0.03, 0.07)
        ops += [P("body", ell(0, 0, brim, U(rng, 0.07, 0.12))),
                P("body", [(-cw, 0.0), (-cw + 0.04, -h), (0.0, -h + dent), (cw - 0.04, -h),
                           (cw, 0.0)])]
        trim = rng.random() < 0.7
        band = [(-cw, 0.0), (-cw + 0.01, -0.07), (cw - 0.01, -0.07), (cw, 0.0)]
        ops.append(P("part", band) if trim else L("detail", [(-cw, -0.04), (cw, -0.04)], 0.02))
    return ops, trim, {"bucket": "bucket hat"}.get(style, style)


def _scarf(rng) -> tuple[list[Op], bool]:
    w, amp, waves = U(rng, 0.3, 0.45), U(rng, 0.0, 0.025), U(rng, 1.0, 3.0)
    ys = np.linspace(0.0, 1.0, 24)
    dx = amp * np.sin(ys * waves * 2 * math.pi)
    outline = [(-w / 2 + d, y) for d, y in zip(dx, ys, strict=True)]
    outline += [(w / 2 + d, y) for d, y in zip(dx[::-1], ys[::-1], strict=True)]
    ops = [P("body", outline)]
    fringe = U(rng, 0.04, 0.08)
    for x in np.linspace(-w / 2 + 0.015, w / 2 - 0.015, int(rng.integers(8, 14))):
        ops.append(L("body", [(x + dx[0], 0.0), (x + dx[0], -fringe)], 0.008))
        ops.append(L("body", [(x + dx[-1], 1.0), (x + dx[-1], 1.0 + fringe)], 0.008))
    if rng.random() < 0.5:
        ops.append(L("detail", [(-w / 2 + dx[1], 0.05), (w / 2 + dx[1], 0.05)], 0.008))
        ops.append(L("detail", [(-w / 2 + dx[-2], 0.95), (w / 2 + dx[-2], 0.95)], 0.008))
    return ops, False, None


_MAKERS = {
    "t-shirt": lambda r: _top(r, False), "jacket": lambda r: _top(r, True), "dress": _dress,
    "trousers": lambda r: _legs(r, False), "shorts": lambda r: _legs(r, True), "skirt": _skirt,
    "sneakers": _sneaker, "bag": _bag, "hat": _hat, "scarf": _scarf,
}


def make_shape(category: str, rng, angle: float = 0.0) -> Shape:
    """A random silhouette of ``category``, turned by ``angle`` degrees (anticlockwise),
    normalised to its unit box."""
    ops, trim, noun = _MAKERS[category](rng)
    if rng.random() < 0.5:  # mirror half of the products (asymmetric ones differ)
        ops = [(k, role, [(-x, y) for x, y in pts], w) for k, role, pts, w in ops]
    if angle:
        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        ops = [(k, role, [(x * c + y * s, -x * s + y * c) for x, y in pts], w)
               for k, role, pts, w in ops]
    pts = np.array([p for _, role, pp, _ in ops if role != "hole" for p in pp], float)
    x0, y0 = pts.min(0)
    sx, sy = pts.max(0) - pts.min(0)
    norm = [(k, role, [((x - x0) / sx, (y - y0) / sy) for x, y in pp], w / sx)
            for k, role, pp, w in ops]
    aspect = float(sx / sy)
    shape = Shape(norm, aspect, 1.0, (0.5, 0.5), trim, noun, angle)
    small = 96
    m, _, _ = raster(shape, max(4, round(small * min(1.0, aspect))),
                     max(4, round(small * min(1.0, 1 / aspect))), ss=1)
    shape.coverage = float(m.mean())
    ys, xs = np.mgrid[0:m.shape[0], 0:m.shape[1]]
    total = float(m.sum())
    shape.centroid = (float((m * (xs + 0.5)).sum() / total / m.shape[1]),
                      float((m * (ys + 0.5)).sum() / total / m.shape[0]))
    return shape


def raster(shape: Shape, w: int, h: int, ss: int = 2) -> tuple[np.ndarray, ...]:
    """Body, part and detail coverage maps (float32 in [0, 1]) at ``w`` x ``h``,
    antialiased by drawing at ``ss`` x and box-downsampling."""
    big = (w * ss, h * ss)
    layers = {name: Image.new("L", big, 0) for name in ("body", "part", "detail")}
    draws = {name: ImageDraw.Draw(im) for name, im in layers.items()}
    values = {"body": {"body": 255, "part": 0, "detail": 0}, "part": {"body": 255, "part": 255,
              "detail": 0}, "detail": {"detail": 255}, "hole": {"body": 0, "part": 0, "detail": 0}}
    for kind, role, pts, width in shape.ops:
        xy = [(x * (big[0] - 1), y * (big[1] - 1)) for x, y in pts]
        for layer, value in values[role].items():
            if kind == "poly":
                draws[layer].polygon(xy, fill=value)
            else:
                draws[layer].line(xy, fill=value, width=max(1, round(width * big[0])),
                                  joint="curve")
    out = []
    for name in ("body", "part", "detail"):
        im = layers[name].reduce(ss) if ss > 1 else layers[name]
        out.append(np.asarray(im, np.float32) / 255.0)
    body, part, detail = out
    return body, np.minimum(part, body), np.minimum(detail, body)


def _pattern(kind: str, w: int, h: int, rng, scale: float, angle: float) -> np.ndarray:
    """Secondary-colour coverage in [0, 1] (antialiased analytically): stripes, dots, checks."""
    size = min(w, h)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if angle:  # the fabric turns with the product
        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        xx, yy = xx * c - yy * s, xx * s + yy * c
    if kind == "striped":
        period = size * U(rng, 0.05, 0.11)
        angle = math.radians(float(rng.choice([0, 0, 90, 45, -45])))
        u = xx * math.sin(angle) + yy * math.cos(angle)
        return _band(u, period, U(rng, 0.2, 0.33) * scale, U(rng, 0, 1))
    if kind == "dotted":
        period = size * U(rng, 0.06, 0.1)
        r = period * math.sqrt(U(rng, 0.08, 0.2) * scale / math.pi)
        row = np.floor(yy / period)
        fx = (xx / period + 0.5 * (row % 2)) % 1.0 - 0.5
        fy = (yy / period) % 1.0 - 0.5
        return np.clip(r - np.hypot(fx, fy) * period + 0.5, 0, 1)
    period = size * U(rng, 0.07, 0.13)  # checked: a windowpane grid
    duty = U(rng, 0.1, 0.16) * scale
    return np.maximum(_band(xx, period, duty, U(rng, 0, 1)), _band(yy, period, duty, U(rng, 0, 1)))


def _band(u: np.ndarray, period: float, duty: float, phase: float) -> np.ndarray:
    d = np.abs((u / period + phase) % 1.0 - 0.5) * period  # px from the band's centre line
    return np.clip(duty * period / 2 - d + 0.5, 0, 1)


def paint(shape: Shape, w: int, h: int, main, secondary, trim, pattern: str, rng):
    """Render a product: (RGB image of its box, L mask, main-colour fraction of the product)."""
    body, part, detail = raster(shape, w, h)
    area = max(float(body.sum()), 1e-6)
    p = np.zeros_like(body)
    if pattern != "solid" and secondary is not None:
        seed = int(rng.integers(1 << 31))
        for scale in (1.0, 0.7, 0.5, 0.35):  # thin the pattern until the main colour dominates
            p = _pattern(pattern, w, h, np.random.default_rng(seed), scale, shape.angle)
            if float((body * (1 - p) * (1 - part)).sum()) / area >= MIN_MAIN_FRACTION:
                break
    main_frac = float((body * (1 - p) * (1 - part)).sum()) / area
    col = np.asarray(main, np.float32)[None, None, :] * (1 - p[..., None])
    if secondary is not None:
        col += np.asarray(secondary, np.float32)[None, None, :] * p[..., None]
    if trim is not None:
        col = col * (1 - part[..., None]) + np.asarray(trim, np.float32)[None, None, :] * part[..., None]
    yy = np.linspace(0, 1, h, dtype=np.float32)[:, None]
    xx = np.linspace(0, 1, w, dtype=np.float32)[None, :]
    light = 1.0 - 0.05 * yy + 0.025 * np.exp(-(((xx - U(rng, 0.2, 0.8)) / 0.15) ** 2))
    col = col * (light * (1 - 0.3 * detail))[..., None]
    rgb = Image.fromarray(np.clip(col + 0.5, 0, 255).astype(np.uint8), "RGB")
    mask = Image.fromarray((body * 255 + 0.5).astype(np.uint8), "L")
    return rgb, mask, main_frac


# --------------------------------------------------------------------------- texts
BRANDS = ("Northwind", "Atelier Vey", "Kite & Co", "Marlow", "Fjell", "Sunday Supply",
          "Oak & Ivy", "Brume", "Costa Linea", "Harbour Row", "Tessellate", "Wren Studio")
NOUNS = {
    "t-shirt": ("t-shirt", "tee", "crew-neck t-shirt"), "dress": ("dress", "midi dress", "shift dress"),
    "trousers": ("trousers", "chinos", "wide-leg trousers"), "skirt": ("skirt", "A-line skirt",
    "midi skirt"), "sneakers": ("sneakers", "trainers", "low-top sneakers"), "bag": ("bag",),
    "hat": ("hat",), "jacket": ("jacket",
    "zip jacket", "overshirt"), "shorts": ("shorts", "chino shorts", "running shorts"),
    "scarf": ("scarf", "wrap scarf", "knitted scarf"),
}
MATERIALS = {
    "t-shirt": ("cotton", "organic cotton", "jersey", "linen"), "dress": ("viscose", "linen",
    "cotton", "silk"), "trousers": ("cotton", "denim", "wool", "linen"), "skirt": ("cotton",
    "denim", "satin", "wool"), "sneakers": ("leather", "canvas", "suede", "mesh"), "bag": (
    "canvas", "leather", "nylon"), "hat": ("cotton", "wool", "canvas", "felt"), "jacket": (
    "nylon", "denim", "wool", "cotton"), "shorts": ("cotton", "linen", "nylon"), "scarf": (
    "wool", "cashmere", "silk", "cotton"),
}
PRICE_RANGE = {"t-shirt": (12, 45), "dress": (35, 160), "trousers": (30, 120), "skirt": (25, 90),
               "sneakers": (45, 180), "bag": (20, 220), "hat": (12, 60), "jacket": (60, 260),
               "shorts": (18, 60), "scarf": (15, 120)}
STYLES = ("classic", "relaxed", "slim", "oversized", "essential", "everyday", "vintage",
          "cropped", "tailored", "lightweight")
PATTERN_WORDS = {"solid": ("", "plain"), "striped": ("striped", "pinstripe"),
                 "dotted": ("polka-dot", "spotted"), "checked": ("checked", "windowpane-check")}
SEASONS = ("SS24", "AW24", "SS25", "AW25", "all-season")


def product_text(category: str, pattern: str, colour: str, rng,
                 noun: str | None = None) -> dict[str, str]:
    """Title, description, brand, material and season for a product."""
    noun = noun or str(rng.choice(NOUNS[category]))
    material = str(rng.choice(MATERIALS[category]))
    style = str(rng.choice(STYLES)) if rng.random() < 0.5 else ""
    pword = str(rng.choice(PATTERN_WORDS[pattern]))
    words = [style, colour, pword, material if rng.random() < 0.7 else "", noun]
    title = " ".join(w for w in words if w)
    pattern_phrase = "" if pattern == "solid" else f" with a {PATTERN_WORDS[pattern][0]} pattern"
    season = str(rng.choice(SEASONS))
    description = (f"{noun[0].upper() + noun[1:]} in {colour}{pattern_phrase}. "
                   f"Made from {material}; {str(rng.choice(STYLES))} fit. Collection {season}.")
    return {"title": title[0].upper() + title[1:], "description": description,
            "category": category, "brand": str(rng.choice(BRANDS)), "material": material,
            "season": season}
