"""Quality flags: the rules on given metrics, and end to end on drawn product shots."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw, ImageFilter

from vismerch.config import load_settings
from vismerch.features.colour import ColourBackend, load_colour_table
from vismerch.features.colourspace import hex_to_lab
from vismerch.features.quality import audit_listed_colour, metrics_row
from vismerch.features.quality_flags import assess_quality, flag_names

S = 256
SETTINGS = load_settings(env={})
SHIRT = [(-60, -90), (-20, -100), (20, -100), (60, -90), (110, -40), (85, -10), (60, -30),
         (60, 100), (-60, 100), (-60, -30), (-85, -10), (-110, -40)]


def shot(colour=(30, 40, 75), bg=(255, 255, 255), scale=1.0, shift=(0, 0)) -> Image.Image:
    im = Image.new("RGB", (S, S), bg)
    c = S / 2
    ImageDraw.Draw(im).polygon(
        [(c + shift[0] + x * scale, c + shift[1] + y * scale) for x, y in SHIRT], fill=colour
    )
    return im


def jpeg(im: Image.Image) -> np.ndarray:
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


def flags_of(*images: Image.Image, width: int = 1000, height: int = 1000) -> list[set[str]]:
    backend = ColourBackend(settings=SETTINGS)
    out = backend.encode_images(torch.from_numpy(np.stack([jpeg(im) for im in images])))
    return [
        {q.name for q in assess_quality(metrics_row(out.columns, i), width, height, SETTINGS)
         if q.flagged}
        for i in range(len(images))
    ]


def clean() -> dict[str, float]:
    """Metrics of a good studio shot (every flag clear)."""
    return {"blur": 2.0, "brightness": 70.0, "highlights": 100.0, "shadows": 20.0,
            "background_delta": 0.5, "background_clutter": 0.3, "fill": 0.4, "extent": 0.8,
            "centre_offset": 0.02}


# ---------------------------------------------------------------- the rules


def test_flag_names_are_fixed():
    assert flag_names() == ("low-resolution", "extreme-aspect", "blur", "under-exposed",
                             "over-exposed", "non-white-background", "cluttered-background",
                             "too-small", "off-centre")


def test_every_flag_names_a_real_setting_and_metric():
    from vismerch.config import SETTINGS
    from vismerch.features.quality import METRIC_NAMES
    from vismerch.features.quality_flags import FLAGS

    settings = {s.name for s in SETTINGS}
    for flag in FLAGS.values():
        assert flag.setting in settings and flag.setting.startswith("quality_"), flag.name
        assert flag.metric in (*METRIC_NAMES, ""), flag.name  # "": judged on the original's size
        assert flag.meaning.strip(), flag.name


def test_a_flag_registered_in_one_place_is_judged_reported_and_rejudges_stores():
    """What adding a flag takes: a class with @register and its threshold setting."""
    from vismerch.features import quality_flags as qf
    from vismerch.features.describe import describe_key

    key = describe_key(SETTINGS)

    class Grey(qf.QualityFlag):
        name, metric, setting, above = "grey-backdrop", "brightness", "quality_dark_max", False
        meaning = "the frame's mean L* is under the threshold"

    qf.register(Grey)
    try:
        with pytest.raises(ValueError, match="registered twice"):
            qf.register(Grey)
        results = {r.name: r for r in assess_quality({**clean(), "brightness": 40.0}, 1200, 1000, SETTINGS)}
        assert list(results)[-1] == "grey-backdrop"
        assert results["grey-backdrop"].flagged and results["grey-backdrop"].value == 40.0
        assert not any(r.flagged for n, r in results.items() if n != "grey-backdrop")
        assert describe_key(SETTINGS) != key  # stored images are re-judged on the next ingest
    finally:
        del qf.FLAGS["grey-backdrop"]
    assert describe_key(SETTINGS) == key


def test_clean_metrics_raise_nothing_and_report_values():
    results = assess_quality(clean(), 1200, 1000, SETTINGS)
    assert [r.name for r in results] == list(flag_names())
    assert not any(r.flagged for r in results)
    values = {r.name: r.value for r in results}
    assert values["low-resolution"] == 1000 and values["extreme-aspect"] == pytest.approx(1.2)
    assert values["too-small"] == 0.8 and values["blur"] == 2.0


@pytest.mark.parametrize(
    "key, value, flag",
    [
        ("blur", 0.05, "blur"),
        ("highlights", 30.0, "under-exposed"),
        ("shadows", 95.0, "over-exposed"),
        ("background_delta", 20.0, "non-white-background"),
        ("background_clutter", 15.0, "cluttered-background"),
        ("extent", 0.2, "too-small"),
        ("centre_offset", 0.3, "off-centre"),
    ],
)
def test_each_metric_raises_its_flag(key, value, flag):
    metrics = clean() | {key: value}
    flagged = {r.name for r in assess_quality(metrics, 1000, 1000, SETTINGS) if r.flagged}
    assert flagged == {flag}


def test_size_flags_from_width_and_height():
    flagged = {r.name for r in assess_quality(clean(), 300, 1200, SETTINGS) if r.flagged}
    assert flagged == {"low-resolution", "extreme-aspect"}


def test_thresholds_come_from_settings():
    strict = SETTINGS.replace(quality_blur_min=5.0)
    assert any(r.flagged for r in assess_quality(clean(), 1000, 1000, strict) if r.name == "blur")


def test_exposure_flags_silence_background_flags():
    metrics = clean() | {"highlights": 30.0, "background_delta": 40.0, "background_clutter": 9.0}
    flagged = {r.name for r in assess_quality(metrics, 1000, 1000, SETTINGS) if r.flagged}
    assert flagged == {"under-exposed"}


def test_no_foreground_means_no_size_or_position_verdict():
    metrics = clean() | {"fill": 0.0, "extent": 0.0, "centre_offset": 0.0}
    assert not any(r.flagged for r in assess_quality(metrics, 1000, 1000, SETTINGS))


def test_over_exposure_is_not_judged_on_a_product_smaller_than_the_darkest_percent():
    washed = clean() | {"shadows": 96.0}
    verdict = {fill: "over-exposed" in {r.name for r in assess_quality(
        washed | {"fill": fill}, 1000, 1000, SETTINGS) if r.flagged}
        for fill in (0.0, 0.005, 0.015, 0.03, 0.4)}
    assert verdict == {0.0: True, 0.005: False, 0.015: False, 0.03: True, 0.4: True}


def test_an_under_exposed_shot_gets_no_size_or_position_verdict():
    dark = clean() | {"highlights": 30.0, "extent": 0.05, "centre_offset": 0.4}
    flagged = {r.name for r in assess_quality(dark, 1000, 1000, SETTINGS) if r.flagged}
    assert flagged == {"under-exposed"}
    lit = clean() | {"extent": 0.05, "centre_offset": 0.4}
    assert {r.name for r in assess_quality(lit, 1000, 1000, SETTINGS) if r.flagged} == {
        "too-small", "off-centre"}


def test_tiny_dark_product_on_white_is_too_small_not_over_exposed():
    tiny, normal = flags_of(shot(scale=0.12), shot(scale=0.9))
    assert "too-small" in tiny and "over-exposed" not in tiny
    assert normal == set()


def test_missing_metrics_are_nan_and_never_flag():
    results = assess_quality({}, 1000, 1000, SETTINGS)
    by_name = {r.name: r for r in results}
    assert math.isnan(by_name["blur"].value) and not by_name["blur"].flagged
    assert not any(r.flagged for r in results)


# ---------------------------------------------------------------- end to end on pictures


def test_good_studio_shot_is_clean():
    assert flags_of(shot(), shot(colour=(20, 20, 20)), shot(colour=(217, 196, 160))) == [
        set(), set(), set()]


def test_dark_shot_is_under_exposed_not_grey_backdrop():
    dark = Image.eval(shot(colour=(200, 40, 40)), lambda v: int(v * 0.22))
    assert flags_of(dark) == [{"under-exposed"}]


def test_washed_out_shot_is_over_exposed():
    pale = Image.eval(shot(colour=(217, 196, 160)), lambda v: min(255, int(v * 1.25)))
    assert flags_of(pale) == [{"over-exposed"}]


def test_small_and_shifted_products():
    small, shifted = flags_of(shot(scale=0.3), shot(scale=0.6, shift=(60, 40)))
    assert small == {"too-small"}
    assert shifted == {"off-centre"}


def test_soft_focus_is_blur_even_with_sensor_noise():
    # optical blur first, then noise (as a camera makes it): the noise must not pass for
    # sharp detail
    soft = np.asarray(shot().filter(ImageFilter.GaussianBlur(3)), np.float64)
    noisy = soft + np.random.default_rng(0).normal(0, 3, soft.shape)
    noisy = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
    assert flags_of(shot().filter(ImageFilter.GaussianBlur(3)), noisy) == [{"blur"}, {"blur"}]


def test_grey_backdrop_is_non_white():
    assert flags_of(shot(bg=(180, 180, 180))) == [{"non-white-background"}]


def _cluttered() -> Image.Image:
    rng = np.random.default_rng(3)
    im = Image.new("RGB", (S, S), (235, 230, 220))
    d = ImageDraw.Draw(im)
    for _ in range(80):  # a room: objects of every colour and size behind the product
        x, y = rng.integers(-20, S, 2)
        w, h = rng.integers(10, 70, 2)
        d.rectangle([int(x), int(y), int(x + w), int(y + h)],
                    fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    c = S / 2
    d.polygon([(c + x, c + y) for x, y in SHIRT], fill=(30, 40, 75))
    return im


def test_cluttered_backdrop_is_cluttered_but_a_product_touching_the_edge_is_not():
    big = Image.new("RGB", (S, S), (255, 255, 255))
    ImageDraw.Draw(big).rectangle([40, 60, 215, 255], fill=(30, 40, 75))  # cut off at bottom
    cluttered, touching = flags_of(_cluttered(), big)
    assert "cluttered-background" in cluttered
    assert "cluttered-background" not in touching and "non-white-background" not in touching


def test_metrics_on_a_uniform_grey_backdrop():
    backend = ColourBackend(settings=SETTINGS)
    out = backend.encode_images(np.asarray(shot(bg=(180, 180, 180)))[None])
    # first principles: the border is exactly #b4b4b4 with no spread
    assert out.columns["background_clutter"][0] < 0.05
    assert out.columns["highlights"][0] == pytest.approx(hex_to_lab("#b4b4b4")[0], abs=0.3)


# ---------------------------------------------------------------- listed-colour audit


def _palette(*hex_weights):
    lab = np.zeros((5, 3))
    w = np.zeros(5)
    for i, (hex_, weight) in enumerate(hex_weights):
        lab[i], w[i] = hex_to_lab(hex_), weight
    return lab, w


def test_audit_agrees_with_the_right_colour_and_flags_the_wrong_one():
    lab, w = _palette(("#202a48", 0.9), ("#f5f5f5", 0.1))
    table = load_colour_table()
    ok = audit_listed_colour("Navy", lab, w, table, SETTINGS.audit_colour_delta)
    assert ok is not None and not ok.disagrees and ok.observed == "navy"
    wrong = audit_listed_colour("red", lab, w, table, SETTINGS.audit_colour_delta)
    assert wrong.disagrees and wrong.distance > SETTINGS.audit_colour_delta
    assert wrong.listed == "red" and wrong.dominant == "navy"


def test_audit_accepts_a_main_secondary_colour():
    lab, w = _palette(("#c8202c", 0.55), ("#f7f7f5", 0.45))  # red and white stripes
    res = audit_listed_colour("white", lab, w, threshold=SETTINGS.audit_colour_delta)
    assert not res.disagrees and res.observed == "white" and res.dominant == "red"


def test_audit_skips_unknown_and_multicolour_listings_with_a_reason():
    lab, w = _palette(("#202a48", 1.0))
    reasons: list[str] = []
    assert audit_listed_colour("Blurple", lab, w, reasons=reasons) is None
    assert audit_listed_colour("multi-color", lab, w, reasons=reasons) is None
    assert audit_listed_colour("", lab, w, reasons=reasons) is None
    assert len(reasons) == 3 and "Blurple" in reasons[0]
    assert audit_listed_colour("#ff0000", lab, w).disagrees  # hex listings work too


@pytest.mark.parametrize("k", [2, 3, 4, 12])
def test_cell_means_of_uint8_pixels_are_the_float_paths_values(k):
    """uint8 pixels are summed as integers (int16, int32 past k = 11): exactly the means the
    float32 path gives, channels last and without, cropping what does not fill a cell."""
    import torch

    from vismerch.features.quality import cell_mean

    gen = torch.Generator().manual_seed(k)
    rgb = torch.randint(0, 256, (3, 5 * k + 1, 5 * k - 1, 3), dtype=torch.uint8, generator=gen)
    rgb[0] = 255  # the largest sums
    for x in (rgb, rgb[..., 0]):
        got = cell_mean(x, k)
        assert got.dtype == torch.float32 and got.shape[1:3] == (5, 4)
        assert torch.equal(got, cell_mean(x.to(torch.float32), k))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 12])  # 12: sums past int16
@pytest.mark.parametrize("shape", [(2, 256, 256, 3), (3, 50, 38, 3), (1, 24, 36, 1)])
def test_cell_means_on_planes_are_cell_mean_transposed(k, shape):
    """The colour backend's 128x128 means, written onto channel planes from the uint8
    pixels, are exactly ``cell_mean``'s (cropping a remainder alike)."""
    from vismerch.features.quality import cell_mean, cell_mean_planes

    x = torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(k))
    b, h, w, c = shape
    out = torch.full((b, c, h // k, w // k), -1.0)
    cell_mean_planes(x, k, out)
    assert torch.equal(out, cell_mean(x, k).reshape(b, h // k, w // k, c).permute(0, 3, 1, 2))
