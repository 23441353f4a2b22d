"""Duplicate signatures (dupes/signature.py) and the pair rules over them (dupes/match.py,
dupes/colourcheck.py, dupes/confirm.py, dupes/candidates.py) on synthetic product shots
with known edits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw, ImageFilter, ImageOps

from vismerch.config import load_settings
from vismerch.dupes.candidates import candidates_all, candidates_new
from vismerch.dupes.confirm import confirm
from vismerch.dupes.model import DupRules, Signatures
from vismerch.dupes.signature import empty_columns, has_signature, signatures
from vismerch.sample import edits

SIZE = 256  # the working size the colour backend sees
RULES = DupRules.from_settings(load_settings(env={}))  # the default dup_* settings


def _product(colour=(200, 40, 40), seed: int = 0, frame=(800, 800), boot: bool = False):
    """A lopsided product on an off-white sweep: a body with a pocket, a stripe and a tab on
    one side (so its mirror image differs), drawn at ``frame`` size."""
    rng = np.random.default_rng(seed)
    w, h = frame[0] * 2, frame[1] * 2  # drawn at twice the size, then reduced: soft edges
    img = Image.new("RGB", (w, h), (250, 250, 248))
    d = ImageDraw.Draw(img)
    x0, y0 = int(w * rng.uniform(0.12, 0.18)), int(h * rng.uniform(0.12, 0.18))
    x1, y1 = int(w * rng.uniform(0.8, 0.86)), int(h * rng.uniform(0.8, 0.86))
    d.polygon([(x0, y0 + 80), (x0 + 120, y0), (x1 - 120, y0), (x1, y0 + 80), (x1, y1),
               (x0, y1)], fill=colour)
    dark = tuple(int(c * 0.55) for c in colour)
    d.rectangle([x0 + 60, y0 + 180, x0 + 60 + int(rng.uniform(120, 240)), y0 + 380], fill=dark)
    d.rectangle([x0, (y0 + y1) // 2, x1, (y0 + y1) // 2 + int(rng.uniform(24, 60))], fill=dark)
    if boot:
        d.rectangle([x1, y1 - 240, x1 + 140, y1], fill=colour)
    for _ in range(6):  # some print: detail a look-alike does not share
        cx, cy = rng.uniform(x0 + 80, x1 - 80), rng.uniform(y0 + 120, y1 - 80)
        d.ellipse([cx - 32, cy - 32, cx + 32, cy + 32], fill=(245, 245, 240))
    return img.resize(frame, Image.LANCZOS)


def _working(img: Image.Image) -> np.ndarray:
    return np.array(img.convert("RGB").resize((SIZE, SIZE), Image.BOX))


def _sigs(images: list[Image.Image]) -> Signatures:
    cols = signatures(torch.from_numpy(np.stack([_working(im) for im in images])))
    aspect = np.array([im.width / im.height for im in images], np.float32)
    return Signatures(cols["dup_box"], cols["dup_sig"], cols["dup_colour"], cols["dup_hash"], aspect,
                      cols["dup_chroma"])


def _confirmed(sigs: Signatures, rules: DupRules | None = None) -> set[tuple[int, int]]:
    rules = rules or RULES
    n = len(sigs)
    i, j = np.triu_indices(n, 1)
    ok, _ = confirm(sigs, i.astype(np.int64), j.astype(np.int64), rules)
    return {(int(a), int(b)) for a, b in zip(i[ok], j[ok], strict=True)}


def test_the_box_is_the_product_whatever_the_frame():
    img = _product(seed=1)
    padded = ImageOps.expand(img, border=(200, 40, 60, 300), fill=(255, 255, 255))
    cols = signatures(torch.from_numpy(np.stack([_working(img), _working(padded)])))
    box = cols["dup_box"]
    arr = np.asarray(img)
    rows = np.flatnonzero((np.abs(arr.astype(int) - 250).max(axis=2) > 40).any(axis=1))
    assert box[0, 1] == pytest.approx(rows[0] / 800, abs=0.01)
    assert box[0, 3] == pytest.approx((rows[-1] + 1) / 800, abs=0.01)
    # in the padded frame the same box, moved and shrunk by the padding
    assert box[1, 0] == pytest.approx((box[0, 0] * 800 + 200) / 1060, abs=0.01)
    assert box[1, 1] == pytest.approx((box[0, 1] * 800 + 40) / 1140, abs=0.01)
    assert has_signature(box).all()
    assert not has_signature(np.zeros((1, 4), np.float32)).any()


def test_every_edit_kind_is_a_duplicate():
    """Four shots through each edit kind; the goal on catalogs is recall >= 0.95, here at
    least 25 of the 28 copies, and every kind found at least twice in four."""
    rng = np.random.default_rng(5)
    found: dict[str, int] = {}
    for edit in ("pad", "letterbox", "trim", "crop", "crop-off", "light", "chain"):
        for seed in range(4):
            img = _product(seed=seed)
            copy, _ = edits.apply(img, edit, rng)
            found[edit] = found.get(edit, 0) + ((0, 1) in _confirmed(_sigs([img, copy])))
    assert sum(found.values()) >= 25, found
    assert min(found.values()) >= 2, found


def test_colourway_and_lookalike_and_mirror_are_kept_apart():
    img = _product(seed=2, boot=True)
    shots = [img, _product(colour=(40, 70, 190), seed=2, boot=True),  # colourway
             _product(seed=3, boot=True),  # another product, same colour and silhouette
             ImageOps.mirror(img)]
    assert _confirmed(_sigs(shots)) == set()
    # the setting lets a mirrored shot count as a duplicate
    assert _confirmed(_sigs([img, shots[3]]), dataclasses.replace(RULES, allow_mirror=True)) == {(0, 1)}


def test_light_edit_keeps_the_colour_a_colourway_does_not():
    img = _product(seed=4)
    bright = Image.eval(img, lambda v: min(255, int(v * 1.15)))
    other = _product(colour=(40, 150, 60), seed=4)
    sigs = _sigs([img, bright, other])
    assert _confirmed(sigs) == {(0, 1)}


def test_a_box_of_other_proportions_is_another_cut_not_a_copy():
    """Copies that line up as they are keep their product box's proportions (within 2.5%
    on the generated catalogs): the same shot stretched by 2% is a copy, by 5% (a
    look-alike of another cut, whose box touches no frame edge, so no crop explains it)
    is not."""
    sig = _sigs([_product(seed=5)])

    def pair(stretch: float) -> Signatures:
        return Signatures(np.repeat(sig.box, 2, 0), np.repeat(sig.sig, 2, 0),
                          np.repeat(sig.colour, 2, 0), np.repeat(sig.hash, 2, 0),
                          np.array([1.0, stretch], np.float32))

    i, j = np.array([0]), np.array([1])
    assert confirm(pair(1.02), i, j, RULES)[0].tolist() == [True]
    assert confirm(pair(1.05), i, j, RULES)[0].tolist() == [False]


def test_new_against_all_finds_what_the_whole_search_finds():
    rng = np.random.default_rng(9)
    shots, copies = [], []
    for seed in range(12):
        img = _product(colour=tuple(int(v) for v in rng.integers(30, 220, 3)), seed=seed)
        shots.append(img)
        copies.append(edits.apply(img, str(rng.choice(edits.EDITS)), rng)[0])
    sigs = _sigs(shots + copies)
    rules = RULES
    i, j = candidates_all(sigs, rules)
    ok, _ = confirm(sigs, i, j, rules)
    whole = {(int(a), int(b)) for a, b in zip(i[ok], j[ok], strict=True)}
    assert whole == {(k, k + 12) for k in range(12)}
    new = np.arange(12, 24)  # the copies arrive in a second ingest
    i, j = candidates_new(sigs, new, rules)
    assert ((np.isin(i, new)) | (np.isin(j, new))).all()  # never old against old
    ok, _ = confirm(sigs, i, j, rules)
    assert {(int(a), int(b)) for a, b in zip(i[ok], j[ok], strict=True)} == whole


def test_empty_columns_match_the_computed_ones():
    cols = signatures(torch.from_numpy(_working(_product())[None]))
    empty = empty_columns()
    assert set(cols) == set(empty)
    for name, value in cols.items():
        assert value.dtype == empty[name].dtype and value.shape[1:] == empty[name].shape[1:]


def test_resampling_weights_are_the_gaussian_of_each_cell_with_edges_repeated():
    """Each signature cell is a Gaussian of BLUR cells (at least MIN_BLUR source cells)
    round its centre, cut at REACH sigmas, the mass beyond the frame's edge on the edge
    cell: the banded weights equal that definition written out densely."""
    from vismerch.dupes import signature as dupsig

    lo = torch.tensor([0.0, 0.1, 0.37, 0.5, 0.02, 0.45])
    hi = torch.tensor([1.0, 0.8, 0.61, 0.99, 0.3, 0.55])
    for size in (dupsig.BOX_GRID, 2 * dupsig.BOX_GRID):
        got = dupsig._resample_rows(lo, hi, size).numpy()
        for b in range(len(lo)):
            sigma = max(float(hi[b] - lo[b]) * size / dupsig.SIG * dupsig.BLUR, dupsig.MIN_BLUR)
            want = np.zeros((dupsig.SIG, size))
            for k in range(dupsig.SIG):
                centre = (float(lo[b]) + float(hi[b] - lo[b]) * (k + 0.5) / dupsig.SIG) * size - 0.5
                cells = np.arange(int(centre) - 60, int(centre) + 60)
                z = (cells - centre) / sigma
                w = np.where(np.abs(z) <= dupsig.REACH, np.exp(-0.5 * z * z), 0.0)
                np.add.at(want[k], np.clip(cells, 0, size - 1), w / w.sum())
            assert np.abs(got[b] - want).max() < 1e-3, (size, b)  # float32 vs float64


def test_small_boxes_from_the_pixels_agree_with_the_grid_on_smooth_content():
    """The pixel path (small boxes) and the grid path give the same cells where there is
    no detail finer than the grid, so a copy whose box crosses FINE_SPAN still pairs."""
    from vismerch.dupes import signature as dupsig

    yy, xx = np.mgrid[0:256, 0:256].astype(np.float32)
    smooth = np.stack([120 + 80 * np.sin(xx / 23.0), 100 + 60 * np.cos(yy / 31.0),
                       90 + 40 * np.sin((xx + yy) / 40.0)], axis=2)
    shot = np.full((256, 256, 3), 250.0, np.float32)  # a product on a white sweep
    shot[20:236, 20:236] = smooth[20:236, 20:236]
    x = torch.from_numpy(shot.astype(np.uint8)[None].repeat(3, 0))
    box, cells, back = dupsig.box_cells(x)
    spans = (dupsig.FINE_SPAN * 0.6, dupsig.FINE_SPAN * 0.9, dupsig.FINE_SPAN * 1.5)  # grid cells
    for b, span in enumerate(spans):  # inside the product
        box[b] = torch.tensor([0.25, 0.25, 0.25 + span / 128, 0.25 + span / 128])
    rows, cols = dupsig._rows_and_cols(box, dupsig.BOX_GRID, dupsig.BOX_GRID)
    grid = dupsig.quality.cell_mean(x, 2).permute(0, 3, 1, 2) * (255.0 / back)[:, :, None, None]
    from_grid = (rows[:, None] @ grid.clamp(0, 255) @ cols.transpose(1, 2)[:, None])
    from_pixels = dupsig._from_pixels(x, torch.arange(3), box, back)
    assert (from_grid - from_pixels).abs().max() < 2.0  # sRGB levels
    refined = dupsig.small_boxes_from_pixels(x, box, back, from_grid.clone())
    # under FINE_SPAN from the pixels (float rounding aside: another batch), over it the grid
    assert torch.allclose(refined[:2], from_pixels[:2], atol=1e-3)
    assert torch.equal(refined[2], from_grid[2])


def test_ring_backdrop_is_the_median_of_the_ring_cells():
    """The ring's medians equal torch's (lower) median of the cells of the ring mask and of
    the border, for grids of 2x2 means of uint8 pixels (quarter levels), and the fallback
    applies to a product that fills its frame."""
    from vismerch.dupes import signature as dupsig

    gen = torch.Generator().manual_seed(4)
    g = dupsig.BOX_GRID
    pixels = torch.randint(0, 256, (4, 3, 2 * g, 2 * g), generator=gen).float()
    grid = torch.nn.functional.avg_pool2d(pixels, 2)
    cells = torch.tensor([[30.0, 40.0, 90.0, 100.0], [0.0, 0.0, 64.0, 128.0],
                          [10.5, 20.25, 11.0, 21.0], [0.0, 0.0, 128.0, 128.0]])
    fallback = torch.full((4, 3), 77.0)
    got = dupsig._ring_backdrop(grid, cells, fallback)
    idx = torch.arange(g, dtype=torch.float32)
    for b in range(3):
        x0, y0, x1, y1 = cells[b]
        pad_out, pad_in = dupsig.RING_GAP + dupsig.RING, dupsig.RING_GAP
        ys_out = (idx >= y0 - pad_out) & (idx < y1 + pad_out)
        xs_out = (idx >= x0 - pad_out) & (idx < x1 + pad_out)
        ys_in = (idx >= y0 - pad_in) & (idx < y1 + pad_in)
        xs_in = (idx >= x0 - pad_in) & (idx < x1 + pad_in)
        ring = (ys_out[:, None] & xs_out[None]) & ~(ys_in[:, None] & xs_in[None])
        want = grid[b][:, ring].median(dim=1).values.clamp_min(16.0)
        assert torch.equal(got[b], want), b
    assert torch.equal(got[3], fallback[3])  # no ring cell inside the frame
    border = torch.ones(g, g, dtype=torch.bool)
    border[dupsig.BORDER:-dupsig.BORDER, dupsig.BORDER:-dupsig.BORDER] = False
    want = torch.stack([grid[b][:, border].median(dim=1).values for b in range(4)])
    assert torch.equal(dupsig._backdrop(grid), want)



@pytest.mark.parametrize("colour", [(96, 104, 40), (30, 40, 110), (200, 170, 120)])
def test_box_sides_follow_the_edge_inside_its_cell(colour):
    """A flat-edged product whose sides fall anywhere inside a grid cell: the box follows
    them to a fraction of a cell, by the same offset wherever they fall (counting a cell a
    sixth covered as whole moved a side by up to 0.9 cell with the edge's phase)."""
    over = 16  # drawn at 16x the working size, box-reduced: exact partial coverage
    cell = over * SIZE / 128  # drawn pixels per box-grid cell
    rng = np.random.default_rng(3)
    images, truth = [], []
    for phase in np.linspace(0.0, 0.95, 12):
        x0 = round((30 + phase) * cell)
        y0 = round((40 + rng.uniform(0, 1)) * cell)
        x1 = x0 + round((52 + rng.uniform(0, 1)) * cell)
        y1 = y0 + round((36 + rng.uniform(0, 1)) * cell)
        img = Image.new("RGB", (SIZE * over, SIZE * over), (250, 250, 248))
        ImageDraw.Draw(img).rectangle([x0, y0, x1 - 1, y1 - 1], fill=colour)
        images.append(np.asarray(img.resize((SIZE, SIZE), Image.BOX)))
        truth.append(np.array([x0, y0, x1, y1]) / cell)
    box = signatures(torch.from_numpy(np.stack(images)))["dup_box"] * 128
    err = box - np.array(truth)
    assert np.abs(err).max() < 0.25, err.round(2)
    assert np.ptp(err[:, 2] - err[:, 0]) < 0.2 and np.ptp(err[:, 3] - err[:, 1]) < 0.2


def _striped_shorts() -> Image.Image:
    """Olive shorts (a trapezoid) with ten thin white stripes: detail that a box off by a
    fraction of a stripe turns into a different signature."""
    w, h = 1600, 2132
    img = Image.new("RGB", (w, h), (250, 250, 248))
    d = ImageDraw.Draw(img)
    x0, x1, y0, y1 = int(w * 0.28), int(w * 0.72), int(h * 0.33), int(h * 0.66)
    d.polygon([(x0 + 40, y0), (x1 - 40, y0), (x1 + 40, y1), (x0 - 40, y1)], fill=(110, 110, 40))
    period = (y1 - y0) / 10
    for k in range(10):
        top = y0 + period * (k + 0.4)
        d.rectangle([x0 - 60, top, x1 + 60, top + period * 0.18], fill=(250, 250, 248))
    return img.resize((800, 1066), Image.LANCZOS)


def test_a_striped_product_zoomed_in_its_frame_stays_a_duplicate():
    """Crops that zoom 2-25% and leave the product whole (issue 11's generated seed 7 lost
    such a pair at layout 0.93): the box lands on the same part of the product in every
    copy to a third of a cell, so the copies line up as they are. Thin high-contrast
    stripes keep a third of a cell visible (layout 0.96-0.99): most zooms pass, not all
    (17 of 19 here, boxes within 0.16 cell; colour version 4: 7 of 19, 0.84 cell)."""
    img = _striped_shorts()
    w, h = img.size
    found, boxes = 0, []
    cuts = np.round(np.arange(0.02, 0.2001, 0.01), 2)
    for cut in cuts:
        left, top = int(w * cut / 2), int(h * cut / 2)
        crop = img.crop((left, top, w - left, h - top))
        sigs = _sigs([img, crop])
        found += _confirmed(sigs) == {(0, 1)}
        # the crop's box in the original's frame fractions
        b = sigs.box[1]
        boxes.append([(b[0] * crop.width + left) / w, (b[1] * crop.height + top) / h,
                      (b[2] * crop.width + left) / w, (b[3] * crop.height + top) / h])
    assert found >= 0.85 * len(cuts)
    assert np.ptp(np.array(boxes) * 128, axis=0).max() < 0.4


def test_a_frame_without_a_product_is_its_own_box_and_a_small_product_is_not():
    blank = np.full((SIZE, SIZE, 3), 250, np.uint8)
    faint = blank.copy()
    faint[96:104, 96:104] = 226  # a 4x4-cell tint, ~26 levels: stays out
    small = blank.copy()
    small[100:112, 140:152] = (30, 30, 120)  # a 6x6-cell dark product
    box = signatures(torch.from_numpy(np.stack([blank, faint, small])))["dup_box"]
    np.testing.assert_allclose(box[:2], [[0, 0, 1, 1], [0, 0, 1, 1]])
    np.testing.assert_allclose(box[2] * SIZE, [140, 100, 152, 112], atol=1.0)


def _scene(colour=(200, 40, 40), seed: int = 0, fill: float = 0.9, frame=(800, 800)) -> Image.Image:
    """A full-frame photo: a lopsided product filling ``fill`` of the frame in front of a
    room (smooth colour fields, a few hard-edged objects), no backdrop anywhere."""
    rng = np.random.default_rng(seed)
    w, h = frame
    field = rng.integers(30, 226, (5, 5, 3)).astype(np.uint8)
    img = Image.fromarray(field).resize((w, h), Image.BICUBIC)
    d = ImageDraw.Draw(img)
    for _ in range(8):
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        s = rng.uniform(0.05, 0.2) * w
        d.rectangle([x, y, x + s, y + s * rng.uniform(0.5, 2)],
                    fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    product = _product(colour=colour, seed=seed, frame=(w, h))
    mask = Image.fromarray(((np.abs(np.asarray(product, np.int16) - 249).max(axis=2) > 12)
                            * 255).astype(np.uint8))
    size = (round(w * fill), round(h * fill))
    img.paste(product.resize(size, Image.LANCZOS), ((w - size[0]) // 2, (h - size[1]) // 2),
              mask.resize(size, Image.LANCZOS))
    return img


def test_a_full_frame_photo_is_boxed_by_its_frame_less_the_bars():
    img = _scene(seed=1)
    padded = ImageOps.expand(img, border=(200, 40, 60, 300), fill=(255, 255, 255))
    box = signatures(torch.from_numpy(np.stack([_working(img), _working(padded)])))["dup_box"]
    assert box[0] == pytest.approx([0, 0, 1, 1], abs=0.01)
    # in the padded frame: the photo, not the product inside it
    assert box[1] == pytest.approx([200 / 1060, 40 / 1140, 1000 / 1060, 840 / 1140], abs=0.012)


def test_full_frame_copies_are_duplicates_and_look_alikes_are_not():
    """Full-frame shots through padding, letterbox, crops (a quarter of the area at most)
    and light edits are found; a colourway, a mirror and another scene are not."""
    rng = np.random.default_rng(3)
    found = {}
    for edit in ("pad", "letterbox", "crop", "crop-off", "light"):
        for seed in range(3):
            img = _scene(seed=seed)
            copy, _ = edits.apply(img, edit, rng)
            found[edit] = found.get(edit, 0) + ((0, 1) in _confirmed(_sigs([img, copy])))
    assert sum(found.values()) >= 13, found
    assert min(found.values()) >= 2, found
    img = _scene(seed=4)
    apart = [img, _scene(colour=(40, 190, 200), seed=4),  # colourway: the hue turned round
             ImageOps.mirror(img), _scene(seed=5)]
    assert _confirmed(_sigs(apart)) == set()


def test_a_product_lighter_than_a_dark_backdrop_keeps_its_colour():
    """Balanced by a dark teal backdrop, a light product would clip to white and match
    its colourway; balanced by its own brightest cells it keeps its colour."""
    def on_teal(colour):
        img = _product(colour=colour, seed=6)
        a = np.asarray(img).copy()
        back = np.abs(a.astype(np.int16) - 249).max(axis=2) <= 12
        a[back] = (20, 70, 80)
        return Image.fromarray(a)

    orange, green = on_teal((235, 150, 80)), on_teal((80, 235, 150))
    sigs = _sigs([orange, Image.eval(orange, lambda v: int(v * 0.9)), green])
    assert _confirmed(sigs) == {(0, 1)}
    ab, _ = sigs.tone
    assert ab[0, 0] - ab[2, 0] > 20  # orange lies red-ward of green in a*: not both white


def test_a_colourway_turned_half_round_is_not_a_light_edit():
    from vismerch.dupes.colourcheck import cell_colour_residual
    from vismerch.dupes.signature import LAB_CODE_OFFSET, LAB_CODE_SCALE

    lab = np.zeros((2, 8, 8, 3), np.float32)
    lab[..., 0] = 60.0
    lab[0, ..., 1:] = (40.0, 20.0)
    lab[1, ..., 1:] = (-40.0, -20.0)  # the same chroma, opposite hue
    code = (lab * LAB_CODE_SCALE + LAB_CODE_OFFSET).round().astype(np.uint8)
    assert cell_colour_residual(code, np.array([0]), np.array([1]))[0] > 40


def test_signatures_leave_the_callers_planes_as_they_were():
    """The colour backend hands its 128x128 channel-plane means to ``signatures``, and may
    read them afterwards: they are read, never changed, and give what ``x`` alone gives."""
    from vismerch.dupes import signature as dupsig

    shots = [_product(seed=1), ImageOps.expand(_product(seed=2), 60, (255, 255, 255)),
             _product((40, 60, 200), seed=3)]
    x = torch.from_numpy(np.stack([_working(im) for im in shots]))
    k = SIZE // dupsig.BOX_GRID
    planes = dupsig.quality.cell_mean_planes(x, k, torch.empty(len(x), 3, dupsig.BOX_GRID,
                                                                 dupsig.BOX_GRID))
    before = planes.clone()
    got = signatures(x, planes=planes)
    assert torch.equal(planes, before)
    alone = signatures(x)
    for name in got:
        assert np.array_equal(got[name], alone[name]), name


def test_the_same_shot_in_another_colour_is_kept_apart_a_light_edit_is_not():
    """A colourway lined up as it is (a*b* turned half round, L* kept: the same layout) is
    marked apart, so no chain of crops may group it with the original; a light edit is a
    duplicate and not apart; another product is neither."""
    from vismerch.dupes.confirm import judge
    from vismerch.features.colourspace import lab_to_srgb, srgb_to_lab

    img = _product(seed=4)
    lab = srgb_to_lab(torch.from_numpy(np.asarray(img.convert("RGB"))))
    lab[..., 1:] *= -1
    turned = Image.fromarray((lab_to_srgb(lab) * 255).clamp(0, 255).round().to(torch.uint8).numpy())
    shots = [img, turned, Image.eval(img, lambda v: min(255, int(v * 1.1))), _product(seed=5)]
    i, j = (x.astype(np.int64) for x in np.triu_indices(len(shots), 1))
    got = judge(_sigs(shots), i, j, RULES)
    pairs = list(zip(i.tolist(), j.tolist(), strict=True))
    assert {p for p, a in zip(pairs, got.apart, strict=True) if a} == {(0, 1), (1, 2)}
    assert {p for p, ok in zip(pairs, got.ok, strict=True) if ok} == {(0, 2)}
    assert got.strength[pairs.index((0, 2))] > 2  # lined up as it is: colour cells compared


def _bar_scene(bar: tuple[int, int, int]) -> Image.Image:
    """A busy scene (colour blobs, no backdrop) with a thin bar standing in it: a product
    that covers a sliver of each 8x8 cell it crosses."""
    rng = np.random.default_rng(7)
    img = Image.new("RGB", (640, 640), (90, 120, 80))
    d = ImageDraw.Draw(img)
    for _ in range(40):
        cx, cy, r = rng.uniform(0, 640), rng.uniform(0, 640), rng.uniform(30, 120)
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=tuple(int(v) for v in rng.integers(40, 220, 3)))
    img = img.filter(ImageFilter.GaussianBlur(3))
    ImageDraw.Draw(img).rectangle([300, 80, 314, 560], fill=bar)
    return img


def test_a_thin_products_colourway_is_apart_a_white_balance_is_not():
    """In a scene, a thin product in another colour (red to blue: the 8x8 cells barely
    move) is kept apart by the 32x32 cells, while a white balance and gamma edit of the
    whole photo is a duplicate."""
    from vismerch.dupes.confirm import judge

    img = _bar_scene((200, 30, 30))
    x = np.asarray(img, np.float32) / 255.0
    tinted = Image.fromarray((np.clip((x ** 0.9) * np.array([0.97, 1.03, 0.97]), 0, 1) * 255
                              + 0.5).astype(np.uint8))
    shots = [img, _bar_scene((30, 60, 200)), tinted]
    i, j = np.array([0, 0], np.int64), np.array([1, 2], np.int64)
    sigs = _sigs(shots)
    got = judge(sigs, i, j, RULES)
    assert got.ok.tolist() == [False, True]
    assert got.apart.tolist() == [True, False]
    old = Signatures(sigs.box, sigs.sig, sigs.colour, sigs.hash, sigs.frame_aspect)
    assert not judge(old, i, j, RULES).apart[0]  # the 8x8 cells alone: not apart
    # a row from a shard written before dup_chroma reads back as zeros: the 8x8 cells judge it
    mixed = dataclasses.replace(sigs, chroma=sigs.chroma.copy())
    mixed.chroma[1] = 0
    assert judge(mixed, i, j, RULES).apart.tolist() == [False, False]


def test_crops_of_a_detailed_photo_keep_their_detail_score():
    """Every crop of a quarter of the area at most, centred or not, of a full-frame photo
    is found: the crop's detail is compared blurred as the magnified view of the original
    is (unblurred, half the off-centre crops fell under the detail threshold)."""
    rng = np.random.default_rng(3)
    missed = []
    for edit in ("crop", "crop-off"):
        for seed in range(6):
            img = _scene(seed=seed)
            copy, _ = edits.apply(img, edit, rng)
            if (0, 1) not in _confirmed(_sigs([img, copy])):
                missed.append((edit, seed))
    assert missed == []


def test_a_product_on_a_coloured_backdrop_is_boxed_lighter_parts_and_all():
    """A product with parts lighter than its tan backdrop (balanced by its brightest cells,
    not by the backdrop) is boxed where it differs from the backdrop as balanced, not from
    white (which boxed the whole frame); padded with more backdrop, the box moves with it."""
    img = Image.new("RGB", (600, 600), (200, 150, 100))
    d = ImageDraw.Draw(img)
    rng = np.random.default_rng(2)
    for _ in range(25):
        cx, cy, r = rng.uniform(150, 450), rng.uniform(150, 450), rng.uniform(30, 90)
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=tuple(int(v) for v in rng.integers(30, 250, 3)))
    d.rectangle([260, 200, 340, 300], fill=(250, 250, 250))
    padded = ImageOps.expand(img, border=(120, 40, 60, 150), fill=(200, 150, 100))
    box = signatures(torch.from_numpy(np.stack([_working(img), _working(padded)])))["dup_box"]
    assert box[0][0] > 0.1 and box[0][2] < 0.9
    moved = (box[0] * 600 + np.array([120, 40, 120, 40])) / np.array([780, 790, 780, 790])
    assert box[1] == pytest.approx(moved, abs=0.01)


def test_a_dull_products_hue_turned_round_is_apart():
    """Forty fine cells of a dull product (chroma 10) turned a quarter round move 14 ΔE
    (under every cell tolerance) but turn their hue, which no light edit does: apart,
    while the same cells' saturation scaled and shifted (a light edit) stay a duplicate."""
    from vismerch.dupes.confirm import judge

    one = _sigs([_bar_scene((70, 75, 60))])
    chroma = np.repeat(one.chroma, 3, axis=0)
    cells = (slice(8, 16), slice(10, 15))  # 8 x 5 cells of the product
    chroma[:, cells[0], cells[1]] = (128, 138)  # a* 0, b* 10: a dull yellow-green
    chroma[1, cells[0], cells[1]] = (138, 128)  # turned a quarter round: a dull red
    lit = chroma[2].astype(np.float32) - 128
    chroma[2] = np.clip(lit * 1.1 + (1.5, -1.0) + 128, 0, 255).round().astype(np.uint8)
    rep = lambda v: np.repeat(v, 3, axis=0)  # noqa: E731
    sigs = Signatures(rep(one.box), rep(one.sig), rep(one.colour), rep(one.hash),
                      rep(one.frame_aspect), chroma)
    i, j = np.array([0, 0], np.int64), np.array([1, 2], np.int64)
    got = judge(sigs, i, j, RULES)
    assert got.ok.tolist() == [False, True]
    assert got.apart.tolist() == [True, False]
    blind = dataclasses.replace(RULES, colour_turn=float("inf"))
    assert judge(sigs, i, j, blind).ok.tolist() == [True, True]  # ΔE alone: merged


def test_a_crop_of_a_colourway_is_apart_a_crop_of_the_photo_is_not():
    """A crop of the thin product's colourway lines up only through the crop search, where
    no cell lines up as it is: its hue, compared with the part of the original it shows,
    is turned round, so it is refused and kept apart; the same crop of the photo itself is
    a duplicate."""
    from vismerch.dupes.confirm import judge

    img, other = _bar_scene((200, 30, 30)), _bar_scene((30, 60, 200))
    for seed, centred in ((0, True), (1, False)):
        copy = edits.crop(img, np.random.default_rng(seed), centred=centred)
        colourway = edits.crop(other, np.random.default_rng(seed), centred=centred)
        got = judge(_sigs([img, colourway, copy]), np.array([0, 0]), np.array([1, 2]), RULES)
        assert got.ok.tolist() == [False, True]
        assert got.apart.tolist() == [True, False]
