"""Human-friendly numbers for the planner: counts (50M, 1.5B), durations (24h, 90m, 3d).

Every parser raises :class:`vismerch.errors.UsageError` (exit 2) with the accepted forms,
so a typo on the command line is a clear message, not a traceback.
"""

from __future__ import annotations

import math
import re

from vismerch.errors import UsageError

_COUNT_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_DURATION_SUFFIX = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)(?:e([+-]?\d+))?"


def parse_count(text: str | float | int, what: str = "count") -> float:
    """``"50M"`` -> 50e6, ``"1.5B"`` -> 1.5e9, ``"2k"`` -> 2000, ``"1e6"`` -> 1e6."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: expected a number, got {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        raw = str(text).strip().replace("_", "").replace(",", "")
        match = re.fullmatch(_NUMBER + r"\s*([a-zA-Z]?)", raw)
        if not match or match.group(3).lower() not in _COUNT_SUFFIX:
            raise UsageError(
                f"{what}: cannot read {text!r} as a count",
                hint="use a number with an optional k/M/B suffix, e.g. 50M, 2.5k, 1.5B",
            )
        value = float(match.group(1)) * 10 ** int(match.group(2) or 0)
        value *= _COUNT_SUFFIX[match.group(3).lower()]
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{what}: must be a positive number, got {text!r}")
    return value


def parse_duration(text: str | float | int, what: str = "deadline") -> float:
    """Seconds from ``"24h"``, ``"90m"``, ``"3d"``, ``"1.5h"``, ``"2w"``, ``"45s"``.

    A bare number is read as hours, the unit deadlines are usually given in.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text) * 3600
    else:
        raw = str(text).strip().lower().replace(" ", "")
        match = re.fullmatch(_NUMBER + r"([a-z]*)", raw)
        unit = match.group(3) if match else None
        if unit == "":
            unit = "h"
        if not match or unit not in _DURATION_SUFFIX:
            raise UsageError(
                f"{what}: cannot read {text!r} as a duration",
                hint="use a number with s, m, h, d or w, e.g. 24h, 90m, 3d",
            )
        seconds = float(match.group(1)) * 10 ** int(match.group(2) or 0) * _DURATION_SUFFIX[unit]
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{what}: must be longer than zero, got {text!r}")
    return seconds


def human_count(value: float) -> str:
    """50e6 -> "50M" (for tables and plot labels)."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def human_hours(hours: float) -> str:
    """0.25 -> "15.0 min", 30 -> "30.0 h", 100 -> "4.2 d"."""
    if hours < 1:
        return f"{hours * 60:.1f} min"
    if hours < 72:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} d"
