"""What a merchandiser reads off the colour backend's columns: colour names and quality
flags, and the key of the rules and settings that produced them.

Both are recomputed from stored metrics, never from pixels, so changing a threshold, the
multicolour share or the colour table re-judges every image on the next ingest without
decoding anything (``merch.derive.refresh_descriptions``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from vismerch.features.colourtable import COLOUR_POINTS, COLOUR_TABLE

if TYPE_CHECKING:
    from vismerch.config import Settings

# Bump when the naming or flag rules change in code (not for threshold changes: those
# are in the key already).
# 2: no over-exposure verdict on a product under 1% of the frame; 3: under 2%, and no size
# or position verdict on an under-exposed shot; 4: multicolour is its own verdict, not a
# pseudo-colour at the head of the colour list; 5: names by a vote of the XKCD survey's
# named points (data/colour_points.csv), not the nearest swatch
RULES_VERSION = 5

Colours = list[tuple[str, str, float]]  # (name, hex, weight), best first
Flags = list[tuple[str, float, bool]]  # (flag, measured value, flagged), every flag


def describe_key(settings: Settings) -> str:
    """A digest of everything colour names and quality flags depend on besides metrics.
    torch-free (derive calls it after every ingest): the colour table enters as its text."""
    used = {k: v for k, v in sorted(settings.as_dict().items())
            if k.startswith("quality_") or k == "multicolour_max_weight"}
    from vismerch.features.quality_flags import flag_names

    data = resources.files("vismerch")
    table = data.joinpath(COLOUR_TABLE).read_text(encoding="utf-8")
    points = data.joinpath(COLOUR_POINTS).read_text(encoding="utf-8")
    doc = {"rules": RULES_VERSION, "flags": flag_names(), "settings": used, "table": table,
           "points": points}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def describe(columns: dict[str, np.ndarray], sizes: Sequence[tuple[int, int]],
             settings: Settings) -> tuple[list[Colours], list[bool], list[Flags]]:
    """Colour names, the multicolour verdict and quality flags of each image from the
    colour backend's columns and the images' original (width, height)."""
    from vismerch.features.colournames import colour_names, is_multicolour
    from vismerch.features.quality import metrics_row
    from vismerch.features.quality_flags import assess_quality

    names = colour_names(columns["palette_lab"], columns["palette_weight"])
    colours = [[(c.name, c.hex, float(c.weight)) for c in row] for row in names]
    multi = [is_multicolour(row, settings.multicolour_max_weight) for row in names]
    flags = [[(q.name, float(q.value), bool(q.flagged))
              for q in assess_quality(metrics_row(columns, i), width, height, settings)]
             for i, (width, height) in enumerate(sizes)]
    return colours, multi, flags
