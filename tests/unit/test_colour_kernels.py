"""Each fast path of the colour backend (features/kernels.py and the backend's own stages)
against its plain definition (features/reference.py), on data made here; and no stage
changes its inputs.

Tolerances: kernels that do the same arithmetic in another order or on other axes are
held to exact equality (booleans, counts, indices, sums of small integers); float
results computed by another formula (k-means distances, Sobel by convolution) to 1e-5
relative, on data whose clusters and bins are well apart from any decision boundary.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vismerch.features import analysis, colour, kernels, reference
from vismerch.features.colourspace import srgb_to_lab, srgb_to_lab_quantised


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _random_lab(n: int, seed: int) -> torch.Tensor:
    rgb = torch.randint(0, 256, (n, 3), generator=_gen(seed)).to(torch.uint8)
    return srgb_to_lab(rgb)


def _blobs(b: int, h: int, w: int, seed: int, p: float = 0.6) -> torch.Tensor:
    return torch.rand(b, h, w, generator=_gen(seed)) > p


# ---------------------------------------------------------------- small kernels


def test_plane_sum_and_max_are_the_channel_reductions():
    planes = torch.rand(4, 3, 50, generator=_gen(1)) * 100
    assert torch.equal(kernels.plane_sum(planes), reference.plane_sum(planes))
    ints = torch.randint(-255, 256, (4, 3, 7, 50), generator=_gen(2)).to(torch.int16)
    assert torch.equal(kernels.plane_max(ints), reference.plane_max(ints))


def test_2x2_means_are_the_cell_means_bit_for_bit():
    x = torch.rand(5, 64, 48, generator=_gen(3)) * 255
    assert torch.equal(kernels.mean_2x2(x), reference.cell_means(x, 2))


def test_channel_weights_of_uint8_pixels_are_those_of_their_float_copy():
    x = torch.randint(0, 256, (3, 40, 56, 3), generator=_gen(4)).to(torch.uint8)
    weights = np.array([0.299, 0.587, 0.114], np.float32)
    got = kernels.weigh_channels(x, weights)
    assert torch.equal(got, torch.from_numpy(np.matmul(x.float().numpy(), weights)))
    assert torch.allclose(got, x.float() @ torch.from_numpy(weights), rtol=1e-6)  # torch's own


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_first_min_is_argmin_ties_included(k):
    dist = torch.randint(0, 4, (3, k, 200), generator=_gen(k)).to(torch.float32)  # many ties
    assert torch.equal(kernels.first_min(dist), reference.first_min(dist))
    dist = torch.rand(3, k, 200, generator=_gen(k + 10))
    assert torch.equal(kernels.first_min(dist), reference.first_min(dist))


@pytest.mark.parametrize("delta", [2.0, 6.0, 15.0])
def test_far_from_by_bounds_is_the_full_formula(delta):
    lab = _random_lab(6 * 2000, int(delta)).reshape(6, 40, 50, 3)
    # references: random colours, and colours a few units from the samples (near delta)
    ref = torch.cat([_random_lab(3, 99), lab[3:, 0, 0] + torch.tensor([delta / 2, 1.0, -1.0])])
    got = kernels.far_from(lab, ref, delta)
    want = reference.far_from(lab, ref, delta)
    assert got.shape == (6, 40, 50) and torch.equal(got, want)
    assert 0 < int(want.sum()) < want.numel()  # both answers occur


def test_box_count_is_a_3x3_convolution():
    m = _blobs(5, 17, 23, 3).to(torch.float32)
    assert torch.equal(kernels.box_count(m), reference.box_count(m))


@pytest.mark.parametrize("r", [1, 2, 3])
def test_erode_is_a_min_pool_with_the_outside_inside(r):
    mask = _blobs(4, 20, 31, r, p=0.2)
    got = kernels.erode(mask, r)
    assert torch.equal(got, reference.erode(mask, r))
    assert got.any() and not got.all()


@pytest.mark.parametrize("width", [9, 300])  # uint8 counts, and int32 past 255 cells
def test_run_sums_are_counts_per_run(width):
    barrier = torch.rand(3, 4, width, generator=_gen(width)) > 0.9
    values = torch.rand(3, 4, width, generator=_gen(width + 1)) > 0.3
    got = kernels.run_sum(values, kernels.runs(barrier))
    assert torch.equal(got.to(torch.int64), reference.run_sum(values, barrier))


def test_open_to_border_is_the_four_directions():
    fg = _blobs(6, 9, 11, 7)
    bg = ~fg  # the kernel is asked about background cells only
    assert torch.equal(kernels.open_to_border(fg) & bg, reference.open_to_border(fg) & bg)


def _holey_masks() -> torch.Tensor:
    """Rings with a narrow stripe hole, a large hole, open shapes, random blobs."""
    m = torch.zeros(6, 32, 32, dtype=torch.bool)
    m[0, 4:28, 4:28] = True
    m[0, 10:12, 6:26] = False  # a narrow enclosed stripe
    m[1, 2:30, 2:30] = True
    m[1, 6:26, 6:26] = False  # a large hole
    m[2, 8:24, 8:24] = True  # no hole
    m[3:] = _blobs(3, 32, 32, 11, p=0.45)
    m[5, 12:20, 3:29] = True
    m[5, 15, 4:28] = False
    return m


@pytest.mark.parametrize("sweeps", [1, 3])
def test_fill_narrow_holes_with_its_shortcuts_is_the_definition(sweeps):
    fg = _holey_masks()
    got = kernels.fill_narrow_holes(fg, 3, sweeps)
    want = reference.fill_narrow_holes(fg, 3, sweeps)
    assert torch.equal(got, want)
    assert got[0, 10, 10] and not got[1, 16, 16]  # the stripe filled, the large hole not


def test_the_mask_of_a_striped_ring_is_the_definition():
    """The analysis' mask on the grid of an image: a ring with narrow stripes across its
    inside, a solid square, specks, on a white backdrop."""
    img = torch.full((2, 256, 256, 3), 255, dtype=torch.uint8)
    img[0, 40:216, 40:216] = torch.tensor([200, 30, 40], dtype=torch.uint8)
    img[0, 60:196, 60:196] = 255  # a large hole ...
    img[0, 60:196:24, 60:196] = torch.tensor([200, 30, 40], dtype=torch.uint8)  # ... striped
    img[1, 100:160, 80:200] = torch.tensor([30, 40, 75], dtype=torch.uint8)
    img[1, 8:12, 8:12] = 0  # a speck: one grid cell
    lab = analysis.grid_lab(analysis.grid_means(img, 64), analysis.grid_levels(256, 256, 64))
    background = analysis.backdrop(lab)["background_lab"]
    got = analysis.foreground_mask(lab, background, 10.0)
    want = reference.foreground_mask(lab, background, 10.0, 6, analysis.REACH_SWEEPS)
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    mask, holes = got
    assert holes[0].any() and mask[1, 30, 30] and not mask[1, 2, 2]  # holes filled; no speck


# ---------------------------------------------------------------- k-means, histogram, edges


def _clusters(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Points around five Lab colours 30+ apart (spread 2), random weights, some zero."""
    centres = torch.tensor([[20.0, 0, 0], [50, 40, 30], [80, -30, 40], [60, 10, -50], [90, 0, 5]])
    label = torch.randint(0, 5, (3, 400), generator=_gen(seed))
    points = centres[label] + 2.0 * torch.randn(3, 400, 3, generator=_gen(seed + 1))
    weights = (torch.rand(3, 400, generator=_gen(seed + 2)) > 0.2).to(torch.float32)
    return points, weights


def test_lloyd_on_planes_is_the_plain_iteration():
    points, weights = _clusters(5)
    start = points[:, [0, 50, 100, 150, 200]].clone()
    got = kernels.lloyd(points.transpose(1, 2).contiguous(), weights, start, 4)
    want = reference.lloyd(points, weights, start, 4)
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-4)


def _palette_case(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Five colours: two 5 CIEDE2000 apart (one colour, lit and shaded), one with 1% of
    the weight (dropped), two far from the rest; points spread 1.5 around them."""
    centres = torch.tensor([[40.0, 50, 30], [45, 52, 33], [80, -30, 40], [60, 10, -50], [20, 0, 0]])
    gen = _gen(seed)
    label = torch.multinomial(torch.tensor([0.3, 0.3, 0.01, 0.2, 0.19]), 3 * 600, True,
                              generator=gen).reshape(3, 600)
    points = centres[label] + 1.5 * torch.randn(3, 600, 3, generator=gen)
    weights = (torch.rand(3, 600, generator=gen) > 0.1).to(torch.float32)
    return points, weights


def test_batched_merging_is_per_image_complete_linkage():
    gen = _gen(12)
    centres = torch.tensor([[50.0, 0, 0], [53, 1, 0], [56, 2, 0], [59, 3, 0], [20, 40, 40]])
    centres = centres + 0.5 * torch.randn(4, 5, 3, generator=gen)  # a chain: not all one colour
    mass = torch.rand(4, 5, generator=gen)
    mass[1, 2] = 0.0  # an unused cluster stays out
    got = colour.merge_close(centres, mass)
    want = reference.merge_close(centres, mass, colour.MERGE_DELTA)
    assert torch.allclose(got[0], want[0], atol=1e-4) and torch.allclose(got[1], want[1], atol=1e-6)
    assert ((got[1] > 0).sum(1) < (mass > 0).sum(1)).all()  # something merged in each image


def test_palette_is_the_plain_kmeans():
    points, weights = _palette_case(13)
    got = colour.kmeans_palette(points, weights)
    schedule = ((colour.KMEANS_COARSE_STEP, colour.KMEANS_COARSE_ITERS),
                (1, colour.KMEANS_FINE_ITERS))
    want = reference.kmeans_palette(points, weights, colour.PALETTE_K, schedule,
                                    colour.MERGE_DELTA, colour.MIN_CLUSTER)
    assert torch.allclose(got[0], want[0], atol=1e-3)
    assert torch.allclose(got[1], want[1], atol=1e-5)
    assert ((got[1] > 0).sum(1) == 3).all()  # the shades merged, the 1% colour dropped


def test_solid_samples_by_planes_are_the_channel_definition():
    gen = _gen(14)
    b, n = 3, 300
    samples = torch.randint(0, 256, (b, 1, n, 3), generator=gen)
    near = (samples + torch.randint(-60, 61, (b, 4, n, 3), generator=gen)).clamp(0, 255)
    gathered = torch.cat([samples, near], 1).reshape(b, 5 * n, 3).to(torch.uint8)
    background = srgb_to_lab(torch.tensor([[255, 255, 255], [200, 200, 200], [30, 40, 75]],
                                          dtype=torch.uint8))
    bg_rgb = (colour.lab_to_srgb(background) * 255.0).round()
    got = colour.solid_samples(gathered, n, background)
    want = reference.solid_samples(gathered, n, bg_rgb, colour.INTERIOR_LEVELS,
                                   colour.BACKDROP_LEVELS)
    assert torch.equal(got, want) and 0 < int(got.sum()) < got.numel()


def test_histogram_corners_are_the_trilinear_definition():
    points = torch.cat([_random_lab(3000, 8).reshape(3, 1000, 3),
                        torch.tensor([[[0.0, -60, -60], [100, 60, 60], [100, 90, -90]]] * 3)], 1)
    weights = torch.rand(3, 1003, generator=_gen(9))
    centres = (colour.L_CENTRES, colour.AB_CENTRES, colour.AB_CENTRES)
    got = kernels.soft_histogram(points, weights, centres)
    want = reference.soft_histogram(points, weights, centres)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    assert torch.allclose(got.sum(1), weights.sum(1), rtol=1e-5)  # all weight lands


def test_edge_histogram_is_sobel_orientations_per_cell():
    grey = torch.rand(3, 40, 48, generator=_gen(10)) * 255
    want = reference.edge_histogram(grey, colour.EDGE_BINS, colour.EDGE_CELLS)
    want = (want / want.sum(1, keepdim=True)).sqrt()
    assert torch.allclose(colour.edge_histogram(grey), want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- the grid


@pytest.mark.parametrize("size", [128, 192, 200])  # 2x2 and 3x3 px per cell; resampled
def test_grid_means_and_lab_are_the_area_average(size):
    x = torch.randint(0, 256, (3, size, size, 3), generator=_gen(size)).to(torch.uint8)
    grid = 64
    want = reference.grid_means(x, grid)
    assert torch.allclose(analysis.grid_means(x, grid), want, rtol=1e-6, atol=1e-4)
    planes = torch.empty(3, 3, 64, 64) if size == 128 else None
    if planes is not None:  # through the duplicate signature's finer planes
        assert torch.allclose(analysis.grid_means(x, 32, planes), reference.grid_means(x, 32),
                              rtol=1e-6, atol=1e-4)
    levels = analysis.grid_levels(size, size, grid)
    got = analysis.grid_lab(analysis.grid_means(x, grid), levels)
    assert torch.allclose(got, reference.grid_lab(x, grid), rtol=1e-5, atol=2e-3)


def test_quantised_lab_says_it_rounds():
    """Exact for means of ``levels`` pixels; other values are snapped to the nearest one."""
    means = torch.tensor([[10.25, 200.5, 0.75]])
    assert torch.equal(srgb_to_lab_quantised(means, 4), srgb_to_lab(means))
    off = torch.tensor([[10.3, 200.4, 0.7]])
    assert torch.equal(srgb_to_lab_quantised(off, 4), srgb_to_lab(means))
    assert not torch.equal(srgb_to_lab(off), srgb_to_lab(means))


# ---------------------------------------------------------------- inputs stay as they are


def test_no_stage_changes_its_inputs():
    fg = _holey_masks()
    points, weights = _clusters(3)
    lab = _random_lab(3 * 32 * 32, 4).reshape(3, 32, 32, 3)
    x = torch.randint(0, 256, (2, 128, 128, 3), generator=_gen(4)).to(torch.uint8)
    grey = torch.rand(3, 32, 32, generator=_gen(5))
    args = [fg, points, weights, lab, x, grey]
    before = [a.clone() for a in args]
    kernels.fill_narrow_holes(fg, 3, 3)
    analysis.foreground_mask(lab, lab[:, 0, 0], 6.0)
    analysis.backdrop(lab, 2)
    colour.kmeans_palette(points, weights)
    colour.lab_histogram(points, weights)
    colour.edge_histogram(grey)
    colour.colour_layout(lab)
    colour.drop_outlines(points[:, :64], weights[:, :64], fg[:3, :8, :8], torch.arange(64))
    lattice = torch.arange(0, 128 * 128, 97)
    analysis.scan(x, lattice, 32, 64, chunk=1)
    for a, b in zip(args, before, strict=True):
        assert torch.equal(a, b)


def test_the_backend_leaves_its_images_alone():
    x = np.random.default_rng(0).integers(0, 256, (3, 256, 256, 3), dtype=np.uint8)
    kept = x.copy()
    colour.ColourBackend().encode_images(x)
    colour.ColourBackend().encode_images(torch.from_numpy(x))
    assert np.array_equal(x, kept)
