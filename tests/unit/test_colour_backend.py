"""The offline colour backend: palette, names, background, mask geometry, blur, vector."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw, ImageFilter

from vismerch.config import load_settings
from vismerch.errors import UsageError
from vismerch.features.base import FeatureBackend, create_backend, fingerprint_key
from vismerch.features.colour import (
    DIM,
    MULTICOLOUR,
    ColourBackend,
    colour_names,
    dominant_colour,
    is_multicolour,
    load_colour_table,
    parse_colour,
)
from vismerch.features.colourspace import ciede2000_np, hex_to_lab, parse_hex, srgb_to_lab
from vismerch.features.quality import METRIC_NAMES

S = 256
WHITE = (255, 255, 255)
SHIRT = [(-60, -90), (-20, -100), (20, -100), (60, -90), (110, -40), (85, -10), (60, -30),
         (60, 100), (-60, 100), (-60, -30), (-85, -10), (-110, -40)]


def shirt_mask(scale: float = 1.0, shift: tuple[int, int] = (0, 0)) -> np.ndarray:
    im = Image.new("L", (S, S), 0)
    c = S / 2
    ImageDraw.Draw(im).polygon(
        [(c + shift[0] + x * scale, c + shift[1] + y * scale) for x, y in SHIRT], fill=255
    )
    return np.asarray(im) > 127


def paint(mask: np.ndarray, colour, bg=WHITE, shading: float = 0.0) -> np.ndarray:
    """Fill ``mask`` with ``colour`` (lit from the top when ``shading`` > 0) on ``bg``."""
    img = np.empty((S, S, 3), np.float64)
    img[:] = bg
    ramp = 1.0 + shading * np.linspace(0.5, -0.5, S)[:, None, None]
    fill = np.clip(np.asarray(colour, np.float64)[None, None] * ramp, 0, 255)
    img = np.where(mask[..., None], np.broadcast_to(fill, img.shape), img)
    return img.round().astype(np.uint8)


def jpeg(img: np.ndarray, quality: int = 85) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


def encode(*images: np.ndarray, backend: ColourBackend | None = None):
    backend = backend or ColourBackend(settings=load_settings(env={}))
    return backend.encode_images(torch.from_numpy(np.stack(images)))


def names_of(batch, i: int = 0):
    return colour_names(batch.columns["palette_lab"][i], batch.columns["palette_weight"][i])[0]


# ---------------------------------------------------------------- protocol and shapes


def test_backend_follows_the_protocol_and_registry():
    backend = create_backend("colour", settings=load_settings(env={}))
    assert isinstance(backend, FeatureBackend)
    assert backend.name == "colour" and backend.dim == DIM
    fp = backend.fingerprint
    assert fp["backend"] == "colour" and fp["working_size"] == 256 and "version" in fp
    assert fingerprint_key(fp) == fingerprint_key(ColourBackend(settings=load_settings(env={})).fingerprint)


def test_output_shapes_types_and_normalisation():
    images = [paint(shirt_mask(), (30, 40, 75)), paint(shirt_mask(0.6), (200, 30, 40))]
    out = encode(*images)
    assert out.vectors.shape == (2, DIM) and out.vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(out.vectors, axis=1), 1.0, atol=1e-5)
    c = out.columns
    assert c["palette_lab"].shape == (2, 5, 3) and c["palette_lab"].dtype == np.float32
    assert c["palette_weight"].shape == (2, 5)
    assert c["background_lab"].shape == (2, 3)
    assert c["phash"].dtype == np.uint64 and c["phash"].shape == (2,)
    for name in METRIC_NAMES:
        assert c[name].shape == (2,) and c[name].dtype == np.float32, name
    w = c["palette_weight"]
    assert np.allclose(w.sum(axis=1), 1.0, atol=1e-5)
    assert np.all(np.diff(w, axis=1) <= 1e-7)  # heaviest first
    unused = w == 0
    assert np.all(c["palette_lab"][unused] == 0)  # zero-padded


def test_accepts_numpy_and_other_sizes_and_empty_batches():
    backend = ColourBackend(settings=load_settings(env={}))
    small = np.asarray(Image.fromarray(paint(shirt_mask(), (30, 40, 75))).resize((200, 200)))
    out = backend.encode_images(small[None])
    assert out.vectors.shape == (1, DIM)
    assert names_of(out)[0].name == "navy"
    empty = backend.encode_images(np.zeros((0, S, S, 3), np.uint8))
    assert len(empty) == 0 and empty.columns["palette_lab"].shape == (0, 5, 3)


def test_rejects_wrong_input():
    backend = ColourBackend(settings=load_settings(env={}))
    with pytest.raises(UsageError):
        backend.encode_images(np.zeros((2, S, S, 3), np.float32))
    with pytest.raises(UsageError):
        backend.encode_images(np.zeros((S, S, 3), np.uint8))
    with pytest.raises(UsageError):
        ColourBackend(settings=load_settings(env={}), bogus=1)


def test_deterministic():
    images = [jpeg(paint(shirt_mask(), (30, 40, 75), shading=0.3)),
              jpeg(paint(shirt_mask(0.7, (20, 0)), (220, 180, 40)))]
    a, b = encode(*images), encode(*images)
    assert np.array_equal(a.vectors, b.vectors)
    for key in a.columns:
        assert np.array_equal(a.columns[key], b.columns[key]), key


# ---------------------------------------------------------------- colours


@pytest.mark.parametrize("navy", [(28, 37, 65), (35, 45, 80), (24, 32, 58)])
def test_navy_tshirt_on_white_is_navy(navy):
    img = jpeg(paint(shirt_mask(), navy, shading=0.3))
    out = encode(img)
    names = names_of(out)
    assert names[0].name == "navy" and names[0].weight > 0.8
    assert dominant_colour(out.columns["palette_lab"][0], out.columns["palette_weight"][0]).name == "navy"


@pytest.mark.parametrize("colour, name", [((200, 30, 40), "red"), ((25, 25, 25), "black"),
                                          ((45, 140, 60), "green"), ((245, 215, 50), "yellow")])
def test_solid_items_get_their_name(colour, name):
    assert names_of(encode(jpeg(paint(shirt_mask(), colour, shading=0.2))))[0].name == name


def _striped(bg, trim: bool) -> np.ndarray:
    mask = shirt_mask()
    stripes = (np.arange(S) // 10) % 2 == 0
    img = np.empty((S, S, 3), np.uint8)
    img[:] = bg
    img[mask & stripes[:, None]] = (200, 30, 40)
    img[mask & ~stripes[:, None]] = (250, 250, 250)
    if trim:  # a red piping round the garment encloses the white stripes
        im = Image.fromarray(img)
        c = S / 2
        ImageDraw.Draw(im).polygon([(c + x, c + y) for x, y in SHIRT], outline=(200, 30, 40),
                                   width=5)
        img = np.asarray(im)
    return img


def test_red_white_stripes_give_red_and_white():
    names = {c.name: c.weight for c in names_of(encode(jpeg(_striped((150, 150, 150), False))))}
    assert "red" in names and "white" in names
    assert names["red"] > 0.3 and names["white"] > 0.3


def test_white_stripes_enclosed_on_a_white_backdrop_are_product():
    names = {c.name: c.weight for c in names_of(encode(jpeg(_striped(WHITE, True))))}
    assert names.get("white", 0) > 0.25 and names.get("red", 0) > 0.3


def test_a_large_hole_is_not_product():
    # a gold ring/necklace: the big white hole inside it is backdrop, not product colour
    im = Image.new("RGB", (S, S), WHITE)
    ImageDraw.Draw(im).ellipse([38, 38, 218, 218], outline=(200, 160, 60), width=7)
    out = encode(jpeg(np.asarray(im)))
    names = names_of(out)
    assert names[0].name in ("gold", "mustard")
    assert all(c.name != "white" for c in names)
    assert out.columns["extent"][0] > 0.6  # judged by its span, not its pixel count


def test_fifty_fifty_item_is_multicolour():
    mask = shirt_mask()
    left = np.zeros((S, S), bool)
    left[:, : S // 2] = True
    img = paint(mask & left, (40, 80, 180))
    img[mask & ~left] = (245, 210, 50)
    names = names_of(encode(jpeg(img)))
    assert is_multicolour(names, 0.55)
    # the verdict is not a colour: the list holds only measured, named colours
    assert {c.name for c in names[:2]} == {"blue", "yellow"}
    assert all(c.name != MULTICOLOUR and c.hex.startswith("#") for c in names)
    # the rule itself: threshold above the heaviest share -> multicolour, below -> not
    lab = np.array([[50.0, 0.0, -50.0], [90.0, 0.0, 80.0]])
    assert is_multicolour(colour_names(lab, [0.5, 0.5])[0], multicolour_max_weight=0.55)
    assert not is_multicolour(colour_names(lab, [0.7, 0.3])[0], multicolour_max_weight=0.55)


def test_names_merge_clusters_of_the_same_name():
    navy = hex_to_lab("#1f2a4d")
    lab = np.stack([navy, navy + [2.0, 0.5, -1.0], hex_to_lab("#c8202c")])
    names = colour_names(lab, np.array([0.4, 0.3, 0.3]))[0]
    assert [c.name for c in names] == ["navy", "red"]
    assert names[0].weight == pytest.approx(0.7)


# ---------------------------------------------------------------- background and geometry


@pytest.mark.parametrize("bg", [(255, 255, 255), (200, 200, 200), (240, 232, 220)])
def test_background_estimate(bg):
    out = encode(paint(shirt_mask(), (30, 40, 75), bg=bg))
    est = out.columns["background_lab"][0]
    truth = hex_to_lab("#{:02x}{:02x}{:02x}".format(*bg))
    assert float(ciede2000_np(est, truth)) < 1.0
    expected_delta = float(ciede2000_np(truth, np.array([100.0, 0.0, 0.0])))
    assert out.columns["background_delta"][0] == pytest.approx(expected_delta, abs=0.5)


def test_square_geometry_from_first_principles():
    img = np.full((S, S, 3), 255, np.uint8)
    img[64:192, 64:192] = (40, 90, 160)  # 128 px square: a quarter of the frame, centred
    shifted = np.full((S, S, 3), 255, np.uint8)
    shifted[64:192, 96:224] = (40, 90, 160)  # 32 px right: centre off by 1/8 of the frame
    c = encode(img, shifted).columns
    assert c["fill"][0] == pytest.approx(0.25, abs=0.01)
    assert c["extent"][0] == pytest.approx(0.5, abs=0.02)
    assert c["centre_offset"][0] < 0.01
    assert c["centre_offset"][1] == pytest.approx(0.125, abs=0.01)


def test_blank_image_falls_back_to_the_whole_frame():
    out = encode(np.full((S, S, 3), 250, np.uint8))
    assert out.columns["fill"][0] == 0.0
    assert out.columns["palette_weight"][0][0] == pytest.approx(1.0)
    assert names_of(out)[0].name == "white"
    assert np.isfinite(out.vectors).all()


# ---------------------------------------------------------------- blur


def _blurred_disc(sigma: float, size: int = S) -> np.ndarray:
    """A dark disc whose edge is a step blurred by a Gaussian of ``sigma`` px (erf profile)."""
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    r = np.hypot(yy - size / 2, xx - size / 2)
    inside = 0.5 * (1 + np.vectorize(math.erf)((80 * size / S - r) / (sigma * math.sqrt(2))))
    grey = 255 - 180 * inside
    return np.repeat(grey.round().astype(np.uint8)[..., None], 3, axis=2)


def test_blur_metric_tracks_edge_width_from_first_principles():
    # for a Gaussian-blurred edge, Laplacian energy / gradient energy = 1 / (2 sigma^2)
    sigmas = (1.5, 2.0, 3.0)
    blur = encode(*[_blurred_disc(s) for s in sigmas]).columns["blur"]
    for s, got in zip(sigmas, blur, strict=True):
        assert got == pytest.approx(1 / (2 * s * s), rel=0.2), s


def test_blur_metric_does_not_depend_on_the_working_size():
    # the same picture at twice the size has edges twice as wide in pixels
    small = encode(_blurred_disc(1.5)).columns["blur"][0]
    large = encode(_blurred_disc(3.0, size=2 * S)).columns["blur"][0]
    assert large == pytest.approx(small, rel=0.15)


def test_blurred_copy_scores_much_lower_than_sharp():
    sharp = jpeg(paint(shirt_mask(), (30, 40, 75), shading=0.3))
    soft = np.asarray(Image.fromarray(sharp).filter(ImageFilter.GaussianBlur(3)))
    small_sharp = paint(shirt_mask(0.3), (30, 40, 75))  # sharpness does not depend on size
    blur = encode(sharp, soft, small_sharp).columns["blur"]
    assert blur[0] > 5 * blur[1]
    assert blur[2] > 5 * blur[1]


# ---------------------------------------------------------------- vector


def test_vector_prefers_the_same_colour_and_shape():
    navy = paint(shirt_mask(), (30, 40, 75), shading=0.2)
    navy_moved = paint(shirt_mask(0.9, (8, 6)), (32, 42, 78), shading=0.2)
    red = paint(shirt_mask(), (200, 30, 40), shading=0.2)
    v = encode(navy, navy_moved, red).vectors
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2


# ---------------------------------------------------------------- colour table and parsing


def test_colour_table_default_and_user_file(tmp_path):
    table = load_colour_table()
    assert "navy" in table.names and len(table) >= 20
    path = tmp_path / "colours.csv"
    path.write_text("name,hex,family\nSea Foam,#9fe2bf,green\nInk,#1b1b2f,blue\n")
    mine = load_colour_table(path)
    assert mine.names == ("Sea Foam", "Ink")
    assert np.allclose(parse_colour("sea foam", mine), hex_to_lab("#9fe2bf"))
    lab = hex_to_lab("#1c1c30")
    assert colour_names(lab[None], np.array([1.0]), table=mine)[0][0].name == "Ink"


@pytest.mark.parametrize("rgb, name", [
    ((0, 0, 255), "blue"), ((30, 144, 255), "blue"), ((0, 71, 171), "blue"),
    ((0, 255, 0), "green"), ((57, 255, 20), "green"), ((34, 139, 34), "green"),
    ((143, 0, 255), "purple"), ((120, 81, 169), "purple"), ((255, 0, 0), "red"),
    ((255, 255, 0), "yellow"), ((0, 255, 255), "turquoise"), ((135, 206, 235), "light blue"),
])
def test_saturated_and_retail_colours_get_their_everyday_name(rgb, name):
    """Pure and neon colours are named like their retail tones, not like the neighbour
    CIEDE2000 happens to put nearer (#0000ff is nearer the table's purple than its blue)."""
    lab = srgb_to_lab(torch.tensor([rgb], dtype=torch.uint8)).numpy()
    assert colour_names(lab, np.array([1.0]))[0][0].name == name


def test_extra_swatches_in_a_user_table(tmp_path):
    path = tmp_path / "colours.csv"
    path.write_text("name,hex,family,more\nblue,#2f5fb3,blue,#0000ff\npurple,#6a3d9a,purple\n")
    mine = load_colour_table(path)
    assert mine.names == ("blue", "purple") and len(mine.swatch_lab) == 3
    pure = hex_to_lab("#0000ff")
    assert colour_names(pure[None], np.array([1.0]), table=mine)[0][0].name == "blue"
    # without the extra swatch the survey's named points still call it blue (the nearest
    # swatch alone said purple)
    bare = tmp_path / "bare.csv"
    bare.write_text("name,hex\nblue,#2f5fb3\npurple,#6a3d9a\n")
    assert colour_names(pure[None], np.array([1.0]), table=load_colour_table(bare))[0][0].name == "blue"
    bad = tmp_path / "bad.csv"
    bad.write_text("name,hex,family,more\nblue,#2f5fb3,blue,#00f #nothex\n")
    with pytest.raises(UsageError, match="extra swatch '#nothex'"):
        load_colour_table(bad)


@pytest.mark.parametrize("text, problem", [("name,colour\nx,#fff\n", "header"),
                                           ("name,hex\nred,#ff00zz\n", "line 2"),
                                           ("name,hex\nred,#f00\nRed,#e00\n", "duplicate")])
def test_colour_table_errors_name_the_problem(tmp_path, text, problem):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_colour_table(path)
    assert problem in str(err.value) and "bad.csv" in str(err.value)


def test_parse_colour_names_and_hex():
    assert np.allclose(parse_colour("Navy"), hex_to_lab("#1f2a4d"))
    assert np.allclose(parse_colour("  LIGHT   blue "), parse_colour("light blue"))
    assert np.allclose(parse_colour("light gray"), parse_colour("light grey"))
    assert np.allclose(parse_colour("#f00"), hex_to_lab("#ff0000"))
    with pytest.raises(UsageError) as err:
        parse_colour("blurple")
    assert "navy" in str(err.value)  # the hint lists the known names


# ---------------------------------------------------------------- CPU vs CUDA


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    images = np.stack([jpeg(paint(shirt_mask(), (30, 40, 75), shading=0.3)),
                       jpeg(_striped((150, 150, 150), False)),
                       np.asarray(Image.fromarray(paint(shirt_mask(0.5, (40, 30)), (200, 30, 40)))
                                  .filter(ImageFilter.GaussianBlur(2)))])
    settings = load_settings(env={})
    cpu = ColourBackend("cpu", settings).encode_images(torch.from_numpy(images))
    gpu = ColourBackend("cuda", settings).encode_images(torch.from_numpy(images))
    assert (cpu.vectors * gpu.vectors).sum(axis=1).min() > 0.999
    assert np.array_equal(cpu.columns["phash"], gpu.columns["phash"])
    # float32 maths differ in the last bits between devices: a mask cell or a 0.25-L*
    # exposure bin right at a threshold may flip, nothing more
    for name in METRIC_NAMES:
        atol = 0.3 if name in ("highlights", "shadows", "brightness") else 0.02
        assert np.allclose(cpu.columns[name], gpu.columns[name], rtol=1e-3, atol=atol), name
    assert np.allclose(cpu.columns["palette_weight"], gpu.columns["palette_weight"], atol=0.02)
    for i in range(len(images)):
        assert names_of(cpu, i)[0].name == names_of(gpu, i)[0].name


# ---------------------------------------------------------------- light, shadow, outlines


def _shaded(colour, bg=WHITE, **strength) -> np.ndarray:
    """A shirt in ``colour`` rendered with volume, a light ramp and glossy highlights by
    the sample generator's shader (fixed strengths: a hard case, not a random one)."""
    from vismerch.sample.shading import Shading, shade

    mask = Image.fromarray((shirt_mask() * 255).astype(np.uint8))
    s = Shading(**{"light_azimuth": 220.0, "light_elevation": 40.0, "relief": 1.5,
                   "ambient": 0.25, "ramp": 0.25, "specular": 0.7, "shininess": 80.0,
                   "outline_px": 0, "outline_level": 20, **strength})
    flat = Image.new("RGB", (S, S), tuple(colour))
    product = np.asarray(shade(flat, mask, s))
    img = np.empty((S, S, 3), np.uint8)
    img[:] = bg
    img[shirt_mask()] = product[shirt_mask()]
    return jpeg(img)


@pytest.mark.parametrize("hex_, name", [("#c8202c", "red"), ("#1f2a4d", "navy"),
                                        ("#6e4a2f", "brown"), ("#2f5fb3", "blue"),
                                        ("#f5d833", "yellow"), ("#2e8b3e", "green")])
def test_light_and_shadow_do_not_change_the_name(hex_, name):
    rgb = parse_hex(hex_)
    flat = names_of(encode(jpeg(paint(shirt_mask(), rgb))))
    shaded = names_of(encode(_shaded(rgb)))
    assert flat[0].name == name
    assert shaded[0].name == name, [(c.name, c.weight) for c in shaded]


def test_a_thin_dark_outline_is_not_the_products_colour():
    mask = shirt_mask()
    for rgb, name in (((200, 32, 44), "red"), ((245, 216, 51), "yellow")):
        img = _shaded(rgb, outline_px=3, specular=0.0)
        names = names_of(encode(img))
        assert names[0].name == name and names[0].weight >= 0.9, [(c.name, c.weight) for c in names]
        assert all(c.name not in ("black", "charcoal") for c in names)
    # a black product keeps its black edge: the interior is dark too
    black = names_of(encode(jpeg(paint(mask, (26, 26, 26)))))
    assert black[0].name == "black" and black[0].weight > 0.9


def test_surfaces_group_shades_of_one_colour_and_keep_real_colours_apart():
    from vismerch.features.colournames import surfaces

    red, shadow, blend = hex_to_lab("#c8202c"), hex_to_lab("#7a1a22"), hex_to_lab("#e88a90")
    assert surfaces(np.stack([red, shadow, blend]), np.array([0.5, 0.3, 0.2])) == [[0, 1, 2]]
    navy, white = hex_to_lab("#1f2a4d"), hex_to_lab("#f7f7f5")
    assert surfaces(np.stack([navy, white]), np.array([0.6, 0.4])) == [[0], [1]]
    black = hex_to_lab("#1a1a1a")
    assert surfaces(np.stack([white, black]), np.array([0.5, 0.5])) == [[0], [1]]
    # a shaded red names the surface by its lit, saturated tone and carries its weight
    named = colour_names(np.stack([shadow, red, blend]), np.array([0.45, 0.4, 0.15]))[0]
    assert [(c.name, c.weight) for c in named] == [("red", 1.0)]


@pytest.mark.parametrize("grid, samples", [(32, 24), (128, 48)])
def test_sizes_are_parameters(grid, samples):
    """Another analysis grid and lattice: the same colours, geometry and background, and
    the sizes in the fingerprint (the defaults' fingerprint stays what stores hold)."""
    from vismerch.features.colour import Sizes

    settings = load_settings(env={})
    backend = ColourBackend(settings=settings, sizes=Sizes(grid=grid, samples=samples))
    img = np.full((S, S, 3), 255, np.uint8)
    img[64:192, 64:192] = (40, 90, 160)
    navy = jpeg(paint(shirt_mask(), (30, 40, 75), shading=0.3))
    out = encode(img, navy, backend=backend)
    assert out.vectors.shape == (2, DIM)
    assert out.columns["fill"][0] == pytest.approx(0.25, abs=0.02)
    assert names_of(out, 1)[0].name == "navy"
    default = encode(img, navy)
    assert np.allclose(out.columns["background_lab"], default.columns["background_lab"], atol=0.5)
    assert backend.fingerprint["grid"] == grid and backend.fingerprint["samples"] == samples
    assert "samples" not in ColourBackend(settings=settings).fingerprint


@pytest.mark.parametrize("size", [256, 320, 384])  # 2x2, none (resampled), 3x3 px per grid cell
def test_an_images_features_do_not_depend_on_its_batch(size):
    """The CPU path works in chunks of images and writes shared buffers (the duplicate
    grid's planes, stacked blur statistics): one image's features must be the same bit for
    bit whether it is encoded alone or in a batch that spans several chunks."""
    gen = np.random.default_rng(size)
    images = []
    for k in range(11):  # more than one chunk, the last one partial
        img = paint(shirt_mask(0.6 + 0.05 * k, (k * 3 - 15, 0)),
                    tuple(int(v) for v in gen.integers(0, 256, 3)), shading=0.3 * (k % 2))
        img[(k * 20) % S: (k * 20) % S + 6] = (20, 20, 20)  # a stripe: edges and detail
        images.append(jpeg(np.asarray(Image.fromarray(img).resize((size, size)))))
    backend = ColourBackend(settings=load_settings(env={}).replace(working_size=size))
    together = backend.encode_images(np.stack(images))
    for i, img in enumerate(images):
        alone = backend.encode_images(img[None])
        assert np.array_equal(alone.vectors[0], together.vectors[i]), i
        for key, column in alone.columns.items():
            assert np.array_equal(column[0], together.columns[key][i]), (i, key)
