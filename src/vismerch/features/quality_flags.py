"""Quality flags as registered classes: the one place that says which flags exist, the
value each is judged on, its threshold setting and when another flag silences it.

The API's flag filter, the CLI's help and docs/settings.md are generated from ``FLAGS``.
Adding a flag: a class here with ``@register``, its ``quality_*`` threshold in
``config.py``, then ``python -m vismerch.docs_gen``; stored images are re-judged from
their metrics on the next ingest (the flag names enter ``describe_key``). Metrics are
measured in ``quality.py``; pure, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from vismerch.config import Settings

EXPOSURE_QUANTILE = 0.01  # the exposure metrics read the brightest/darkest 1% of the frame


@dataclass(frozen=True)
class QualityResult:
    name: str
    value: float
    flagged: bool


def _metric(metrics: dict[str, Any], key: str) -> float:
    value = metrics.get(key)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class QualityFlag:
    """One flag. ``metric``: the stored metric its value is (see quality.py; "" for flags
    judged on the original's size); ``setting``:
    its threshold; ``above``: raised when the value is above the threshold (else below).
    A missing or NaN value is never flagged (NaN comparisons are False)."""

    name: ClassVar[str]
    metric: ClassVar[str]
    setting: ClassVar[str]
    above: ClassVar[bool]
    meaning: ClassVar[str]  # one line for docs and help: when it is raised
    unless: ClassVar[str] = ""  # when ``silenced`` holds it back, for the docs

    @classmethod
    def value(cls, metrics: dict[str, Any], width: int, height: int) -> float:
        return _metric(metrics, cls.metric)

    @classmethod
    def raised(cls, value: float, threshold: float) -> bool:
        return value > threshold if cls.above else value < threshold

    @classmethod
    def silenced(cls, metrics: dict[str, Any], raised: dict[str, bool]) -> bool:
        """Whether other flags (``raised``: every flag before silencing) make this one moot."""
        return False


FLAGS: dict[str, type[QualityFlag]] = {}


def register(cls: type[QualityFlag]) -> type[QualityFlag]:
    """Class decorator: add a flag (reported in registration order)."""
    if cls.name in FLAGS:
        raise ValueError(f"quality flag {cls.name!r} is registered twice")
    FLAGS[cls.name] = cls
    return cls


def flag_names() -> tuple[str, ...]:
    return tuple(FLAGS)


@register
class LowResolution(QualityFlag):
    name, metric, setting, above = "low-resolution", "", "quality_min_side", False
    meaning = "the original's shorter side (px) is under the threshold"

    @classmethod
    def value(cls, metrics, width, height):
        return float(min(width, height))


@register
class ExtremeAspect(QualityFlag):
    name, metric, setting, above = "extreme-aspect", "", "quality_max_aspect", True
    meaning = "the original's long side over its short side exceeds the threshold"

    @classmethod
    def value(cls, metrics, width, height):
        short = min(width, height)
        return max(width, height) / short if short > 0 else math.inf


@register
class Blur(QualityFlag):
    name, metric, setting, above = "blur", "blur", "quality_blur_min", False
    meaning = "edge sharpness (about 1/(2 sigma^2) of a Gaussian blur, 256-px pixels) is under the threshold"


def _exposure_wrong(raised: dict[str, bool]) -> bool:
    return raised.get("under-exposed", False) or raised.get("over-exposed", False)


@register
class UnderExposed(QualityFlag):
    name, metric, setting, above = "under-exposed", "highlights", "quality_dark_max", False
    meaning = "even the brightest 1% of the frame is darker than the threshold (L*)"


@register
class OverExposed(QualityFlag):
    name, metric, setting, above = "over-exposed", "shadows", "quality_bright_min", True
    meaning = "even the darkest 1% of the frame is lighter than the threshold (L*)"
    unless = "the product covers under 2% of the frame"

    @classmethod
    def silenced(cls, metrics, raised):
        # under 2% of the frame, the darkest 1% is backdrop and outline blends, not the
        # product's inside; a tiny product is flagged too-small anyway
        return 0.0 < _metric(metrics, "fill") < 2 * EXPOSURE_QUANTILE


@register
class NonWhiteBackground(QualityFlag):
    name, metric, above = "non-white-background", "background_delta", True
    setting = "quality_background_delta"
    meaning = "the border's colour is further than the threshold (CIEDE2000) from white"
    unless = "an exposure flag is raised"

    @classmethod
    def silenced(cls, metrics, raised):
        return _exposure_wrong(raised)  # a white backdrop shot too dark looks grey: fix the exposure


@register
class ClutteredBackground(QualityFlag):
    name, metric, setting, above = "cluttered-background", "background_clutter", "quality_clutter", True
    meaning = "the border's colour spread (median over 16 segments) exceeds the threshold"
    unless = "an exposure flag is raised"

    @classmethod
    def silenced(cls, metrics, raised):
        return _exposure_wrong(raised)  # the noise of a dark shot looks like clutter


def _no_outline(metrics: dict[str, Any], raised: dict[str, bool]) -> bool:
    """No foreground at all (a white item on white), or too dark for its outline to be the
    product's: there is no size or position to judge."""
    return _metric(metrics, "fill") == 0.0 or raised.get("under-exposed", False)


@register
class TooSmall(QualityFlag):
    name, metric, setting, above = "too-small", "extent", "quality_min_fill", False
    meaning = "the product spans less than the threshold (fraction of the frame) along its longer side"
    unless = "no foreground was found, or the shot is under-exposed"

    @classmethod
    def silenced(cls, metrics, raised):
        return _no_outline(metrics, raised)


@register
class OffCentre(QualityFlag):
    name, metric, setting, above = "off-centre", "centre_offset", "quality_offcentre", True
    meaning = "the product's box centre is further than the threshold (fraction of the frame) from the middle"
    unless = "no foreground was found, or the shot is under-exposed"

    @classmethod
    def silenced(cls, metrics, raised):
        return _no_outline(metrics, raised)


def assess_quality(metrics: dict[str, float], width: int, height: int,
                   settings: Settings) -> list[QualityResult]:
    """One QualityResult per registered flag, each with the value it was judged on (the
    original's size for the first two, else its metric; NaN when the metric is missing,
    never flagged). A flag's ``silenced`` sees every flag as raised before any silencing."""
    values = {name: flag.value(metrics, width, height) for name, flag in FLAGS.items()}
    raised = {name: flag.raised(values[name], getattr(settings, flag.setting))
              for name, flag in FLAGS.items()}
    return [QualityResult(name, values[name], bool(raised[name] and not flag.silenced(metrics, raised)))
            for name, flag in FLAGS.items()]
