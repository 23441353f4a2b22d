"""CIELAB conversion and CIEDE2000 against published reference values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vismerch.features.colourspace import (
    ciede2000,
    ciede2000_np,
    hex_to_lab,
    lab_to_hex,
    lab_to_srgb,
    parse_hex,
    srgb_to_lab,
    srgb_to_lab_quantised,
)

# Sharma, Wu & Dalal (2005), "The CIEDE2000 color-difference formula: implementation
# notes, supplementary test data, and mathematical observations", Table 1 (all 34 pairs):
# L1 a1 b1 L2 a2 b2 dE00. They straddle the hue-mean and hue-difference branches.
SHARMA_PAIRS = [
    (50.0000, 2.6772, -79.7751, 50.0000, 0.0000, -82.7485, 2.0425),
    (50.0000, 3.1571, -77.2803, 50.0000, 0.0000, -82.7485, 2.8615),
    (50.0000, 2.8361, -74.0200, 50.0000, 0.0000, -82.7485, 3.4412),
    (50.0000, -1.3802, -84.2814, 50.0000, 0.0000, -82.7485, 1.0000),
    (50.0000, -1.1848, -84.8006, 50.0000, 0.0000, -82.7485, 1.0000),
    (50.0000, -0.9009, -85.5211, 50.0000, 0.0000, -82.7485, 1.0000),
    (50.0000, 0.0000, 0.0000, 50.0000, -1.0000, 2.0000, 2.3669),
    (50.0000, -1.0000, 2.0000, 50.0000, 0.0000, 0.0000, 2.3669),
    (50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0009, 7.1792),
    (50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0010, 7.1792),
    (50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0011, 7.2195),
    (50.0000, 2.4900, -0.0010, 50.0000, -2.4900, 0.0012, 7.2195),
    (50.0000, -0.0010, 2.4900, 50.0000, 0.0009, -2.4900, 4.8045),
    (50.0000, -0.0010, 2.4900, 50.0000, 0.0010, -2.4900, 4.8045),
    (50.0000, -0.0010, 2.4900, 50.0000, 0.0011, -2.4900, 4.7461),
    (50.0000, 2.5000, 0.0000, 50.0000, 0.0000, -2.5000, 4.3065),
    (50.0000, 2.5000, 0.0000, 73.0000, 25.0000, -18.0000, 27.1492),
    (50.0000, 2.5000, 0.0000, 61.0000, -5.0000, 29.0000, 22.8977),
    (50.0000, 2.5000, 0.0000, 56.0000, -27.0000, -3.0000, 31.9030),
    (50.0000, 2.5000, 0.0000, 58.0000, 24.0000, 15.0000, 19.4535),
    (50.0000, 2.5000, 0.0000, 50.0000, 3.1736, 0.5854, 1.0000),
    (50.0000, 2.5000, 0.0000, 50.0000, 3.2972, 0.0000, 1.0000),
    (50.0000, 2.5000, 0.0000, 50.0000, 1.8634, 0.5757, 1.0000),
    (50.0000, 2.5000, 0.0000, 50.0000, 3.2592, 0.3350, 1.0000),
    (60.2574, -34.0099, 36.2677, 60.4626, -34.1751, 39.4387, 1.2644),
    (63.0109, -31.0961, -5.8663, 62.8187, -29.7946, -4.0864, 1.2630),
    (61.2901, 3.7196, -5.3901, 61.4292, 2.2480, -4.9620, 1.8731),
    (35.0831, -44.1164, 3.7933, 35.0232, -40.0716, 1.5901, 1.8645),
    (22.7233, 20.0904, -46.6940, 23.0331, 14.9730, -42.5619, 2.0373),
    (36.4612, 47.8580, 18.3852, 36.2715, 50.5065, 21.2231, 1.4146),
    (90.8027, -2.0831, 1.4410, 91.1528, -1.6435, 0.0447, 1.4441),
    (90.9257, -0.5406, -0.9208, 88.6381, -0.8985, -0.7239, 1.5381),
    (6.7747, -0.2908, -2.4247, 5.8714, -0.0985, -2.2286, 0.6377),
    (2.0776, 0.0795, -1.1350, 0.9033, -0.0636, -0.5514, 0.9082),
]


def test_ciede2000_matches_sharma_table_in_float64():
    d = torch.tensor(SHARMA_PAIRS, dtype=torch.float64)
    got = ciede2000(d[:, :3], d[:, 3:6])
    assert float((got - d[:, 6]).abs().max()) < 1e-4  # the table has four decimals


def test_ciede2000_float32_is_close_enough_for_features():
    d = torch.tensor(SHARMA_PAIRS, dtype=torch.float32)
    got = ciede2000(d[:, :3], d[:, 3:6])
    assert float((got - d[:, 6]).abs().max()) < 1e-3


def test_ciede2000_is_symmetric_zero_on_identity_and_broadcasts():
    d = torch.tensor(SHARMA_PAIRS, dtype=torch.float64)
    a, b = d[:, :3], d[:, 3:6]
    assert torch.allclose(ciede2000(a, b), ciede2000(b, a), atol=1e-9)
    assert float(ciede2000(a, a).abs().max()) == 0.0
    grid = torch.rand(2, 4, 5, 3, dtype=torch.float64) * 50
    assert ciede2000(grid, torch.tensor([50.0, 0.0, 0.0], dtype=torch.float64)).shape == (2, 4, 5)


def test_ciede2000_never_exceeds_its_cie76_bound():
    # the colour backend skips CIEDE2000 for cells within delta / 2.13 (CIE76) of the
    # background, relying on dE00 <= sqrt(4.5) * dE76; check it on random pairs
    g = torch.Generator().manual_seed(1)
    a = torch.rand(20000, 3, generator=g, dtype=torch.float64) * torch.tensor(
        [100.0, 200.0, 200.0], dtype=torch.float64) - torch.tensor([0.0, 100.0, 100.0],
                                                                  dtype=torch.float64)
    b = a + torch.randn(20000, 3, generator=g, dtype=torch.float64) * 8
    ratio = ciede2000(a, b) / (a - b).norm(dim=-1)
    assert float(ratio.max()) <= 4.5**0.5


@pytest.mark.parametrize(
    "rgb, lab",
    [
        ((255, 255, 255), (100.0, 0.0, 0.0)),
        ((0, 0, 0), (0.0, 0.0, 0.0)),
        ((128, 128, 128), (53.585, 0.0, 0.0)),  # sRGB mid grey
        ((255, 0, 0), (53.24, 80.09, 67.20)),  # sRGB red, D65
        ((0, 0, 255), (32.30, 79.19, -107.86)),  # sRGB blue, D65
    ],
)
def test_srgb_to_lab_known_values(rgb, lab):
    got = srgb_to_lab(torch.tensor(rgb, dtype=torch.uint8), dtype=torch.float64).numpy()
    assert np.allclose(got, lab, atol=0.02)


def test_uint8_and_float_paths_agree():
    px = torch.randint(0, 256, (500, 3), generator=torch.Generator().manual_seed(0)).to(torch.uint8)
    assert torch.allclose(srgb_to_lab(px), srgb_to_lab(px.to(torch.float32)), atol=1e-3)


def test_lab_round_trips_to_hex():
    for hex_ in ("#1f2a4d", "#ffffff", "#000000", "#c8202c", "#9cc3e6"):
        assert lab_to_hex(hex_to_lab(hex_)) == [hex_]
    rgb = lab_to_srgb(torch.tensor([[100.0, 0.0, 0.0]]))
    assert torch.allclose(rgb, torch.ones(1, 3, dtype=torch.float64), atol=1e-4)


def test_parse_hex_forms_and_rejects():
    assert parse_hex("#abc") == (0xAA, 0xBB, 0xCC)
    assert parse_hex(" #FF0080 ") == (255, 0, 128)
    for bad in ("abc", "#abcd", "#gggggg", "red", ""):
        assert parse_hex(bad) is None
    with pytest.raises(ValueError):
        hex_to_lab("navy")


def test_ciede2000_np_wrapper():
    white = np.array([100.0, 0.0, 0.0])
    assert float(ciede2000_np(white, white)) == 0.0
    # a light grey backdrop #e0e0e0 is ~6.5 from white (the non-white threshold's anchor)
    assert 6.0 < float(ciede2000_np(hex_to_lab("#e0e0e0"), white)) < 7.0


@pytest.mark.parametrize("levels", [4, 16, 64])
def test_lab_of_cell_means_through_the_table_is_the_formulas(levels):
    """Means of ``levels`` uint8 pixels (k / levels) converted through the table of those
    values give exactly what the formula gives: every value a channel can take (as greys)
    and random colours of them."""
    values = torch.arange(255 * levels + 1, dtype=torch.float32) / levels
    gen = torch.Generator().manual_seed(levels)
    colours = values[torch.randint(0, len(values), (5000, 3), generator=gen)]
    rgb = torch.cat([values[:, None].expand(-1, 3), colours])
    assert torch.equal(srgb_to_lab_quantised(rgb, levels), srgb_to_lab(rgb))
