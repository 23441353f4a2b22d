"""Retail colour names: the editable colour table, naming palettes, parsing user colours.

The table (``name,hex,family[,more]`` CSV) ships as ``vismerch/data/colours.csv``; a
retailer's own file replaces it. ``more`` lists extra swatches of the same name (hexes
separated by spaces).

Where one name ends and the next begins comes from how people name colours, not from the
swatches alone: ``data/colour_points.csv`` holds the XKCD colour survey's 931 named colours
that carry a colour word, each mapped to a retail name by its words (``xkcdnames.py``: the
source, its licence and the derivation). A colour is named by a vote of its
``VOTE_K`` nearest points (CIEDE2000) among those survey points and the table's own
swatches, each vote weighted by 1 / (1 + distance), a swatch's by ``SWATCH_VOTE`` (a
table's own tone names itself). A colour under ``SURFACE_MIN_CHROMA`` is named by the
neutral family's points only (its hue is noise: a shaded black is not navy). A
retailer's table keeps the survey points whose retail name it has.

Naming works on *surfaces*, not on single palette clusters, so that light and shadow do
not change a name. Light scales a surface's colour: its shadows, lit side and the blend
into a specular highlight keep the hue (CIELAB hue angle) and change lightness and
chroma. Palette clusters of one image are grouped into surfaces (complete linkage):
chromatic clusters (chroma >= ``SURFACE_MIN_CHROMA``) whose hues are all within
``SURFACE_HUE_DEG`` of each other, achromatic ones whose lightness is all within
``SURFACE_GREY_DL``. A surface is named by its most body-like cluster, the one with the
largest mass x chroma (the lit, fully saturated tone: shadows and highlight blends are
less chromatic; for greys, mass alone), and carries the whole surface's weight. So a
shaded red dress is ``red``, not half ``burgundy`` (its shadow) and a ``pink`` highlight
blend, while a navy shirt with light-blue stripes stays ``navy`` (the navy holds more
mass x chroma). Named surfaces that get the same name are merged (weights summed, Lab
averaged by weight). Thresholds: chosen on the generated shaded catalog
(``benchmarks/colour_eval.py``), reported on the OpenMoji set too (benchmarks/RESULTS.md).

``multicolour`` is a verdict about the whole product, not a colour: ``is_multicolour``
says a product is multicolour when no single named colour holds at least
``multicolour_max_weight`` of its pixels. A 50/50 two-colour item is therefore multicolour
under the default threshold (0.55: a name must cover a clear majority of the product). The
colour list itself only ever holds measured, named colours.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from vismerch.config import setting
from vismerch.errors import UsageError
from vismerch.features.colourspace import ciede2000, hex_to_lab, lab_to_hex, parse_hex, srgb_to_lab
from vismerch.features.colourtable import COLOUR_POINTS, COLOUR_TABLE

MULTICOLOUR = "multicolour"
SURFACE_MIN_CHROMA = 10.0  # CIELAB chroma under which a cluster is a grey (hue is noise)
SURFACE_HUE_DEG = 22.0  # one surface: hues within this (shadow and highlight blends drift)
SURFACE_GREY_DL = 25.0  # one grey surface: lightness within this (white vs light grey)
_ALIASES = {"gray": "grey", "multicolor": MULTICOLOUR, "multi": MULTICOLOUR}
VOTE_K = 7  # nearest named points that vote (the survey's points lie ~3-6 CIEDE2000 apart)
SWATCH_VOTE = 2.0  # a table swatch's vote against a survey point's
PREFILTER = 32  # nearest points by CIE76 whose CIEDE2000 is computed


@dataclass(frozen=True)
class NamedColour:
    """A named colour of a product: ``hex`` is the measured colour (weighted mean of the
    palette clusters given this name), ``weight`` its share of the product's pixels."""

    name: str
    hex: str
    weight: float
    lab: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class ColourTable:
    names: tuple[str, ...]
    hexes: tuple[str, ...]
    families: tuple[str, ...]
    lab: np.ndarray  # (N, 3) float64, one per name (its hex)
    source: str
    swatch_lab: np.ndarray  # (S, 3): every swatch, the names' own first
    swatch_name: np.ndarray  # (S,) index into names of each swatch
    point_lab: np.ndarray | None = None  # (P, 3): swatches, then survey points (module doc)
    point_name: np.ndarray | None = None  # (P,) index into names
    point_vote: np.ndarray | None = None  # (P,) weight of each point's vote

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int | None:
        """Position of ``name`` (case-, space- and gray/grey-insensitive), else None."""
        key = normalise_name(name)
        for i, known in enumerate(self.names):
            if normalise_name(known) == key:
                return i
        return None


def normalise_name(name: str) -> str:
    words = re.split(r"[\s_\-]+", name.strip().lower())
    return " ".join(_ALIASES.get(w, w) for w in words if w)


def _parse_table(text: str, source: str) -> ColourTable:
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in (reader.fieldnames or [])]
    if "name" not in fields or "hex" not in fields:
        raise UsageError(
            f"colour table {source}: header must have columns name,hex[,family]",
            hint="first line should read: name,hex,family",
        )
    names, hexes, families, labs = [], [], [], []
    extra_lab, extra_name = [], []
    seen: set[str] = set()
    for line, row in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        if not any(row.values()):
            continue
        name, hex_ = row.get("name", ""), row.get("hex", "")
        if not name:
            raise UsageError(f"colour table {source} line {line}: empty name")
        if parse_hex(hex_) is None:
            raise UsageError(
                f"colour table {source} line {line}: {hex_!r} is not a colour",
                hint="write colours as #rrggbb",
            )
        key = normalise_name(name)
        if key in seen:
            raise UsageError(f"colour table {source} line {line}: duplicate name {name!r}")
        seen.add(key)
        names.append(name)
        hexes.append(hex_.lower())
        families.append(row.get("family", ""))
        labs.append(hex_to_lab(hex_))
        for more in row.get("more", "").split():
            if parse_hex(more) is None:
                raise UsageError(f"colour table {source} line {line}: extra swatch {more!r} "
                                 "is not a colour", hint="write colours as #rrggbb, space-separated")
            extra_lab.append(hex_to_lab(more))
            extra_name.append(len(names) - 1)
    if not names:
        raise UsageError(f"colour table {source} has no colours")
    lab = np.stack(labs)
    swatch_lab = np.concatenate([lab, np.array(extra_lab).reshape(-1, 3)])
    swatch_name = np.concatenate([np.arange(len(names)), np.array(extra_name, dtype=np.int64)])
    table = ColourTable(tuple(names), tuple(hexes), tuple(families), lab, source,
                        swatch_lab, swatch_name.astype(np.int64))
    return _with_points(table)


@functools.lru_cache(maxsize=1)
def _survey_points() -> tuple[np.ndarray, tuple[str, ...]]:
    """The packaged survey points: (P, 3) Lab and their retail names."""
    text = resources.files("vismerch").joinpath(COLOUR_POINTS).read_text(encoding="utf-8")
    rows = list(csv.DictReader(line for line in io.StringIO(text) if not line.startswith("# ")))
    rgb = torch.tensor([parse_hex(r["hex"]) for r in rows], dtype=torch.uint8)
    return srgb_to_lab(rgb, dtype=torch.float64).numpy(), tuple(r["name"] for r in rows)


def _with_points(table: ColourTable) -> ColourTable:
    """The table with its voting points: its swatches, then the survey points whose retail
    name it has."""
    lab, names = _survey_points()
    pos = [table.index(n) for n in names]
    keep = np.array([p is not None for p in pos], dtype=bool)
    point_name = np.concatenate([table.swatch_name, np.array([p for p in pos if p is not None],
                                                             dtype=np.int64)])
    vote = np.concatenate([np.full(len(table.swatch_name), SWATCH_VOTE), np.ones(int(keep.sum()))])
    return dataclasses.replace(table, point_lab=np.concatenate([table.swatch_lab, lab[keep]]),
                               point_name=point_name, point_vote=vote)


def name_lab(lab: np.ndarray, table: ColourTable | None = None) -> np.ndarray:
    """The retail name (index into ``table.names``) of each CIELAB colour (..., 3): the
    vote of its nearest named points (module docstring)."""
    table = table or load_colour_table()
    flat = torch.from_numpy(np.ascontiguousarray(lab, dtype=np.float64).reshape(-1, 3))
    points = torch.from_numpy(table.point_lab)
    # CIE76 picks the candidates (cheap, a matrix product), CIEDE2000 ranks them
    d2 = (flat * flat).sum(1, keepdim=True) - 2 * flat @ points.T + (points * points).sum(1)
    near = d2.topk(min(PREFILTER, len(points)), dim=1, largest=False).indices  # (M, C)
    d = ciede2000(flat[:, None, :], points[near])  # (M, C)
    # a near-grey's hue is noise (SURFACE_MIN_CHROMA): only neutral names vote on it
    neutral = torch.from_numpy(np.array([f == "neutral" for f in table.families]))
    grey = torch.hypot(flat[:, 1], flat[:, 2]) < SURFACE_MIN_CHROMA
    off = grey[:, None] & ~neutral[torch.from_numpy(table.point_name)[near]]
    off &= ~off.all(dim=1, keepdim=True)  # no neutral candidate: all vote
    d = d.masked_fill(off, math.inf)
    k = min(VOTE_K, d.shape[1])
    dk, ik = d.topk(k, dim=1, largest=False)
    chosen = near.gather(1, ik)
    vote = torch.from_numpy(table.point_vote)[chosen] / (1.0 + dk)
    names = torch.from_numpy(table.point_name)[chosen]
    tally = torch.zeros(len(flat), len(table.names), dtype=torch.float64)
    tally.scatter_add_(1, names, vote)
    return tally.argmax(1).numpy().reshape(np.shape(lab)[:-1])


@functools.lru_cache(maxsize=1)
def _default_table() -> ColourTable:
    text = resources.files("vismerch").joinpath(COLOUR_TABLE).read_text(encoding="utf-8")
    return _parse_table(text, f"vismerch/{COLOUR_TABLE}")


def load_colour_table(path: str | Path | None = None) -> ColourTable:
    """The packaged colour table, or a user CSV (``name,hex,family``) that replaces it."""
    if path is None:
        return _default_table()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UsageError(f"cannot read colour table {path}: {exc}") from exc
    return _parse_table(text, str(path))


def parse_colour(text: str, table: ColourTable | None = None) -> np.ndarray:
    """A table colour name (case-insensitive) or ``#rrggbb``/``#rgb`` -> CIELAB (3,)."""
    table = table or load_colour_table()
    raw = text.strip()
    if parse_hex(raw) is not None:
        return hex_to_lab(raw)
    i = table.index(raw)
    if i is None:
        raise UsageError(
            f"unknown colour {text!r}",
            hint="use #rrggbb or one of: " + ", ".join(table.names),
        )
    return table.lab[i].copy()


def _as_batch(palette_lab, palette_weight) -> tuple[np.ndarray, np.ndarray]:
    lab = np.asarray(palette_lab.cpu() if isinstance(palette_lab, torch.Tensor) else palette_lab,
                     dtype=np.float64)
    w = np.asarray(palette_weight.cpu() if isinstance(palette_weight, torch.Tensor)
                   else palette_weight, dtype=np.float64)
    if lab.ndim == 2:
        lab, w = lab[None], w[None]
    if lab.ndim != 3 or lab.shape[-1] != 3 or w.shape != lab.shape[:2]:
        raise ValueError(f"palette shapes {lab.shape} / {w.shape}: want (B,K,3) and (B,K)")
    return lab, w


def colour_names(
    palette_lab,
    palette_weight,
    table: ColourTable | None = None,
) -> list[list[NamedColour]]:
    """Name each image's palette: one list per image, heaviest first.

    ``palette_lab`` (B, K, 3) or (K, 3), ``palette_weight`` (B, K) or (K,); clusters of
    weight 0 are unused. Whether the product is multicolour: ``is_multicolour``.
    """
    table = table or load_colour_table()
    lab, w = _as_batch(palette_lab, palette_weight)
    nearest = name_lab(lab, table)  # (B, K): each cluster's name
    # merge surfaces by name per image; all hex strings come from one conversion at the
    # end (a torch call per colour costs more than the naming itself)
    merged_all: list[list[tuple[int, float, np.ndarray]]] = []
    for b in range(lab.shape[0]):
        merged: dict[int, tuple[float, np.ndarray]] = {}
        for members in surfaces(lab[b], w[b]):
            chroma = np.hypot(lab[b, members, 1], lab[b, members, 2])
            body = w[b, members] * (chroma if chroma.min() >= SURFACE_MIN_CHROMA else 1.0)
            k = members[int(np.argmax(body))]
            t = int(nearest[b, k])
            mass = float(w[b, members].sum())
            weight, acc = merged.get(t, (0.0, np.zeros(3)))
            merged[t] = (weight + mass, acc + mass * lab[b, k])
        merged_all.append([(t, weight, acc / weight) for t, (weight, acc) in merged.items()])
    means = [mean for merged in merged_all for _, _, mean in merged]
    hexes = iter(lab_to_hex(np.stack(means)) if means else [])
    out: list[list[NamedColour]] = []
    for merged in merged_all:
        total = sum(weight for _, weight, _ in merged) or 1.0
        named = [
            NamedColour(table.names[t], next(hexes), round(weight / total, 4), tuple(float(v) for v in mean))
            for t, weight, mean in merged
        ]
        named.sort(key=lambda c: (-c.weight, c.name))
        out.append(named)
    return out


def is_multicolour(named: list[NamedColour], multicolour_max_weight: float | None = None) -> bool:
    """True when no single named colour of one image (``colour_names`` row) covers at least
    ``multicolour_max_weight`` (default: the setting) of the product."""
    threshold = float(setting(None, "multicolour_max_weight") if multicolour_max_weight is None
                      else multicolour_max_weight)
    return bool(named) and named[0].weight < threshold


def surfaces(lab: np.ndarray, weight: np.ndarray) -> list[list[int]]:
    """Palette clusters of one image ((K, 3) Lab, (K,) weights) grouped into surfaces (see
    the module docstring): lists of cluster indices, complete linkage, heaviest first."""
    used = [int(k) for k in np.argsort(-weight, kind="stable") if weight[k] > 0]
    chroma = np.hypot(lab[:, 1], lab[:, 2])
    hue = np.degrees(np.arctan2(lab[:, 2], lab[:, 1]))

    def together(i: int, j: int) -> bool:
        grey_i, grey_j = chroma[i] < SURFACE_MIN_CHROMA, chroma[j] < SURFACE_MIN_CHROMA
        if grey_i and grey_j:
            return abs(lab[i, 0] - lab[j, 0]) <= SURFACE_GREY_DL
        if grey_i or grey_j:
            return False
        return abs((hue[i] - hue[j] + 180.0) % 360.0 - 180.0) <= SURFACE_HUE_DEG

    groups: list[list[int]] = []
    for k in used:  # heaviest first: each joins the first group it fits entirely
        for group in groups:
            if all(together(k, m) for m in group):
                group.append(k)
                break
        else:
            groups.append([k])
    return groups


def dominant_colour(
    palette_lab, palette_weight, table: ColourTable | None = None
) -> NamedColour | None:
    """The heaviest named colour of one image's palette."""
    names = colour_names(palette_lab, palette_weight, table)[0]
    return names[0] if names else None
