"""What a sample catalog holds before anything is drawn: each item's role (clean, flawed,
copy, corrupt), category, colour, pattern, frame and format; the colour table it draws from."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from vismerch.errors import UsageError
from vismerch.features.colournames import load_colour_table
from vismerch.features.colourspace import ciede2000_np, parse_hex, srgb_to_lab
from vismerch.sample import edits, shapes

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
BACKDROPS = ((172, 172, 172), (160, 163, 168), (214, 190, 156), (166, 196, 226),
             (228, 176, 176), (172, 196, 162), (200, 178, 210))



# --------------------------------------------------------------------------- colours
class Palette:
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
def palette() -> Palette:
    return Palette()


# --------------------------------------------------------------------------- planning
@dataclass
class Item:
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
    shading: bool = False  # realistic shading (sample/shading.py)
    lookalike: str | None = None  # colourway | mirror: of item dup_of, never its duplicate


def _frame(rng, size_range, portrait_p: float) -> tuple[int, int]:
    lo, hi = size_range
    side = 800 if lo <= 800 <= hi and rng.random() < 0.55 else int(rng.uniform(lo, hi) // 16 * 16)
    side = max(lo, min(hi, side))
    return (side, side * 4 // 3) if rng.random() < portrait_p else (side, side)


def plan_items(n, seed, corrupt, flawed, duplicates, size_range, formats, wrong_listed) -> list[Item]:
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
    items: list[Item] = []
    fmt_names = list(formats)
    fmt_p = np.array([formats[f] for f in fmt_names], float)
    flaw_cycle = list(FLAWS)
    for i, role in enumerate(roles):
        it = Item(i, role, str(rng.choice(shapes.CATEGORIES, p=shapes.CATEGORY_P)),
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
            items.append(Item(len(items), "dup", src.category, src.colour, src.pattern,
                               fmt={"png": "png", "webp": "webp"}.get(t, "jpeg"),
                               size=src.size, dup_of=src.index, dup_transform=t))
    _plan_lookalikes(items, np.random.default_rng([seed, 5]), n if duplicates else 0)
    # clean singles get a listed colour that is plainly wrong (for the catalog audit)
    if wrong_listed:
        pal = palette()
        singles = [it for it in items if it.role == "clean"]
        for j in rng.choice(len(singles), size=max(1, round(0.02 * n)), replace=False):
            singles[j].listed_wrong = pal.pick_far(rng, singles[j].colour, 30.0, TRUTH_COLOURS)
    return items


def _plan_lookalikes(items: list[Item], rng, n: int) -> None:
    """Known non-duplicates that look like one: colourways (the same shot in another
    colour, ~3% of n) and mirrored shots (~2%, preferring products that are not left-right
    symmetric: a mirrored symmetric product is the same picture)."""
    pool = [it for it in items if it.role in ("clean", "dup") and not it.alpha
            and it.dup_of is None and it.flaw is None]
    if not pool or n < 20:
        return
    pal = palette()
    picks = rng.choice(len(pool), size=min(len(pool), max(1, round(0.03 * n))), replace=False)
    for k in picks:
        src = pool[int(k)]
        colour = pal.pick_far(rng, src.colour, 25.0, TRUTH_COLOURS)
        items.append(Item(len(items), "clean", src.category, colour, src.pattern,
                           fmt=src.fmt, size=src.size, dup_of=src.index, lookalike="colourway"))
    lopsided = [it for it in pool if it.category in ("sneakers", "bag", "scarf")] or pool
    picks = rng.choice(len(lopsided), size=min(len(lopsided), max(1, round(0.02 * n))),
                       replace=False)
    for k in picks:
        src = lopsided[int(k)]
        items.append(Item(len(items), "clean", src.category, src.colour, src.pattern,
                           fmt="jpeg", size=src.size, dup_of=src.index, lookalike="mirror"))


