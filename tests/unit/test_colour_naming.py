"""Colour names drawn from the XKCD survey's named points, and the scene foreground."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vismerch.features import xkcdnames
from vismerch.features.colournames import _parse_table, load_colour_table, name_lab
from vismerch.features.colourspace import hex_to_lab


def _names(hexes, table=None):
    table = table or load_colour_table()
    idx = name_lab(np.stack([hex_to_lab(h) for h in hexes]), table)
    return [table.names[i] for i in idx]


def test_committed_points_are_the_derivation():
    pytest.importorskip("matplotlib")
    from importlib import resources

    text = resources.files("vismerch").joinpath(xkcdnames.POINTS_FILE).read_text(encoding="utf-8")
    assert text == xkcdnames.points_csv(xkcdnames.build_points())


def test_words_decide_the_retail_name():
    assert xkcdnames.candidates("reddish brown")[0] == "brown"
    assert xkcdnames.candidates("navy blue") == ("navy",)
    assert xkcdnames.candidates("pale blue")[0] == "light blue"
    assert xkcdnames.candidates("dark red")[0] == "burgundy"
    assert xkcdnames.candidates("bruise") == ()


def test_table_swatches_name_themselves():
    table = load_colour_table()
    assert _names(table.hexes) == list(table.names)


def test_people_name_saturated_reds_red_and_shaded_blacks_black():
    # a material-design red sits between the red and coral swatches: the survey says red
    assert _names(["#f44336", "#d32f2f", "#8d4c3a", "#20222e", "#e8e8f0"]) == [
        "red", "red", "brown", "black", "light grey"]


def test_a_retailers_table_keeps_only_its_own_names():
    table = _parse_table("name,hex,family\nrouge,#c8202c,red\nnoir,#111111,neutral\n"
                         "blanc,#fafafa,neutral\n", "test.csv")
    assert set(table.point_name.tolist()) <= {0, 1, 2}
    assert _names(["#e53935", "#050505", "#ffffff"], table) == ["rouge", "noir", "blanc"]


def _scene(product_rgb, seed=0):
    """A 256 px frame: a scene of soft vertical bands (foliage, sky, sand) running off the
    frame, a product disc in the centre."""
    rng = np.random.default_rng(seed)
    scene = np.array([(40, 90, 60), (60, 110, 170), (200, 180, 140), (90, 120, 40)], np.float32)
    edges = np.sort(rng.uniform(0, 256, 5))
    band = np.searchsorted(edges, np.arange(256)) % len(scene)
    img = np.repeat(scene[band][None], 256, axis=0) + rng.normal(0, 4, (256, 256, 3))
    yy, xx = np.mgrid[:256, :256]
    img[(yy - 128) ** 2 + (xx - 128) ** 2 < 60 ** 2] = product_rgb
    return np.clip(img, 0, 255).astype(np.uint8)


def test_a_product_in_a_scene_is_named_by_its_own_colour():
    from vismerch.features.colour import ColourBackend, colour_names

    backend = ColourBackend("cpu")
    cols = backend.encode_images(torch.from_numpy(np.stack([_scene((200, 30, 40), s) for s in (1, 2)])))
    for named in colour_names(cols.columns["palette_lab"], cols.columns["palette_weight"]):
        assert named[0].name == "red"
        assert named[0].weight > 0.8


def test_a_full_bleed_product_cut_by_the_frame_is_named_by_its_own_colour():
    """The product runs off the frame on every side: the border's median colour is the
    product's own, so a backdrop mask would keep the scene in the corners."""
    from vismerch.features.colour import ColourBackend, colour_names

    images = []
    for seed in (3, 4):
        img = _scene((0, 0, 0), seed)
        yy, xx = np.mgrid[:256, :256]
        img[(yy - 128) ** 2 + (xx - 128) ** 2 < 150 ** 2] = (40, 70, 190)
        images.append(img)
    cols = ColourBackend("cpu").encode_images(torch.from_numpy(np.stack(images))).columns
    for named in colour_names(cols["palette_lab"], cols["palette_weight"]):
        assert named[0].name == "blue"
        assert named[0].weight > 0.8



def test_a_product_in_front_of_a_larger_scene_object_is_named_by_its_own_colour():
    """A big flower behind the product stands out from the border as much as the product
    does; the product is the one framed at the centre, the flower is nearer the scene."""
    from vismerch.features.colour import ColourBackend, colour_names

    images = []
    for seed in (5, 6):
        img = _scene((0, 0, 0), seed).astype(np.float32)
        yy, xx = np.mgrid[:256, :256]
        img[(yy - 128) ** 2 + (xx - 128) ** 2 < 100 ** 2] = (235, 150, 90)  # the flower
        img[108:148, 68:188] = (50, 160, 60)  # the product: a green bar across it
        images.append(np.clip(img, 0, 255).astype(np.uint8))
    cols = ColourBackend("cpu").encode_images(torch.from_numpy(np.stack(images))).columns
    for named in colour_names(cols["palette_lab"], cols["palette_weight"]):
        assert named[0].name == "green"
        assert named[0].weight > 0.8


def test_a_scene_with_no_product_found_still_weights_the_frame_by_its_centre():
    """A scene frame (the border is no backdrop) where no product stands out from the scene
    keeps the backdrop mask, the whole frame, but its border must not weigh as much as
    its centre: the product is framed there, the scene around it."""
    from vismerch.features.foreground import scene_mask

    g = 64
    lab = torch.zeros(1, g, g, 3)
    lab[..., 0] = torch.linspace(20, 80, g)[None, None, :]  # a smooth scene, nothing stands out
    mask = torch.ones(1, g, g, dtype=torch.bool)
    out, weight, replaced = scene_mask(lab, mask, torch.tensor([5.0]))
    assert not bool(replaced[0]) and bool(out[0].all())
    assert float(weight[0, g // 2, g // 2]) > 2 * float(weight[0, 0, 0])
    assert float(weight[0, g // 2, g // 2]) > 2 * float(weight[0, g // 2, 0])


def _sky_over_land(product_rgb, radius, seed):
    """A 256 px frame: a pale sky over the top 65%, darker land below, a product disc of
    ``radius`` px in the centre. Most of the border is sky, so a backdrop mask keeps the
    land and the product and leaves most of the frame out."""
    rng = np.random.default_rng(seed)
    img = np.empty((256, 256, 3), np.float32)
    img[:] = np.linspace((185, 205, 235), (235, 238, 240), 256)[:, None, :]  # a sky's gradient
    img[166:] = (70, 95, 60)
    img[215:, : int(rng.uniform(60, 200))] = (120, 125, 130)  # a road along the bottom
    img += rng.normal(0, 4, img.shape)
    yy, xx = np.mgrid[:256, :256]
    img[(yy - 128) ** 2 + (xx - 128) ** 2 < radius**2] = product_rgb
    return np.clip(img, 0, 255).astype(np.uint8)


def test_a_product_before_a_sky_and_land_is_named_by_its_own_colour():
    """The backdrop mask covers under half the frame (the sky passes for a backdrop), but
    the border is no uniform backdrop and the mask runs along the frame's edge: a scene."""
    from vismerch.features.colour import ColourBackend, colour_names

    images = np.stack([_sky_over_land((200, 30, 40), 34, s) for s in (1, 2)])
    cols = ColourBackend("cpu").encode_images(torch.from_numpy(images)).columns
    for named in colour_names(cols["palette_lab"], cols["palette_weight"]):
        assert named[0].name == "red"
        assert named[0].weight > 0.8


def test_a_small_product_in_a_scene_is_named_by_its_own_colour():
    """A product covering about 2% of a scene frame is still found and named, not the
    scene around it."""
    from vismerch.features.colour import ColourBackend, colour_names

    images = np.stack([_scene((200, 30, 40), s) for s in (7, 8)])
    yy, xx = np.mgrid[:256, :256]
    for img in images:  # shrink the product disc of _scene to a 20 px radius
        ring = ((yy - 128) ** 2 + (xx - 128) ** 2 < 60**2) & ((yy - 128) ** 2 + (xx - 128) ** 2 >= 20**2)
        img[ring] = _scene((0, 0, 0), 9)[ring]
    cols = ColourBackend("cpu").encode_images(torch.from_numpy(images)).columns
    for named in colour_names(cols["palette_lab"], cols["palette_weight"]):
        assert named[0].name == "red"
        assert named[0].weight > 0.6
