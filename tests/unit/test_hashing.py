"""The batched DCT perceptual hash agrees with imagehash.phash and behaves like one."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw, ImageFilter

from vismerch.features.hashing import hamming, hamming_matrix, pack_bits, phash

imagehash = pytest.importorskip("imagehash")
S = 256


def _scene(seed: int) -> Image.Image:
    """A product-like picture: soft coloured blobs and a few shapes on a light backdrop."""
    rng = np.random.default_rng(seed)
    im = Image.new("RGB", (S, S), tuple(int(v) for v in rng.integers(200, 256, 3)))
    d = ImageDraw.Draw(im)
    for _ in range(6):
        x0, y0 = rng.integers(0, S - 60, 2)
        w, h = rng.integers(30, 140, 2)
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        box = [int(x0), int(y0), int(min(S, x0 + w)), int(min(S, y0 + h))]
        (d.ellipse if rng.random() < 0.5 else d.rectangle)(box, fill=colour)
    return im.filter(ImageFilter.GaussianBlur(1.0))


def _ours(*images: Image.Image) -> np.ndarray:
    return phash(torch.from_numpy(np.stack([np.asarray(im.convert("RGB")) for im in images])))


def _theirs(im: Image.Image) -> int:
    return int(str(imagehash.phash(im)), 16)


def test_bit_exact_with_imagehash_when_the_32px_image_is_the_same():
    # imagehash leaves a 32x32 greyscale image as is; our area mean of its 8x8 nearest-
    # neighbour upscale gives back exactly the same 32x32 pixels, so every bit must agree
    rng = np.random.default_rng(0)
    for seed in range(5):
        small = rng.integers(0, 256, (32, 32), dtype=np.uint8)
        small = np.asarray(Image.fromarray(small).filter(ImageFilter.GaussianBlur(seed)))
        big = Image.fromarray(small).resize((S, S), Image.NEAREST).convert("RGB")
        assert int(_ours(big)[0]) == _theirs(Image.fromarray(small))


def test_close_to_imagehash_on_colour_pictures():
    # different shrink filters (area mean vs Lanczos) move a few bits, not many
    for seed in range(6):
        im = _scene(seed)
        assert int(hamming(_ours(im)[0], _theirs(im))) <= 8


def test_robust_to_reencoding_and_resizing_but_separates_different_items():
    images = [_scene(seed) for seed in range(6)]
    for im in images:
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=60)
        jpeg = Image.open(io.BytesIO(buf.getvalue()))
        resized = im.resize((170, 170), Image.BILINEAR).resize((S, S), Image.BILINEAR)
        h = _ours(im, jpeg, resized)
        assert int(hamming(h[0], h[1])) <= 4
        assert int(hamming(h[0], h[2])) <= 6
    distances = hamming_matrix(_ours(*images))
    off_diagonal = distances[~np.eye(len(images), dtype=bool)]
    assert off_diagonal.min() >= 14  # unrelated pictures sit near 32 of 64 bits


def test_hash_is_uint64_and_deterministic():
    x = torch.from_numpy(np.stack([np.asarray(_scene(s)) for s in range(3)]))
    a, b = phash(x), phash(x.clone())
    assert a.dtype == np.uint64 and a.shape == (3,)
    assert np.array_equal(a, b)


def test_pack_bits_most_significant_first_and_hamming():
    bits = np.zeros((2, 64), dtype=bool)
    bits[0, 0] = True
    bits[1, 63] = True
    packed = pack_bits(bits)
    assert packed.tolist() == [1 << 63, 1]
    assert int(hamming(0, np.uint64(2**64 - 1))) == 64
    assert int(hamming(0b1011, 0b0001)) == 2
    m = hamming_matrix(np.array([0, 1, 3], dtype=np.uint64))
    assert m.tolist() == [[0, 1, 2], [1, 0, 1], [2, 1, 0]]


@pytest.mark.parametrize("size", [32, 64])  # the fast paths; other sizes take the mean itself
def test_hashes_of_a_grid_are_those_of_its_area_mean(size):
    """The 32x32 hash input: a 32 px grid as it is, a 64 px one by its 2x2 means, give the
    hash of the plain area mean, bit for bit, so it does not depend on which path ran."""
    from vismerch.features.hashing import HASH_INPUT, phash_bits

    grey = torch.rand(5, size, size, generator=torch.Generator().manual_seed(size)) * 255
    k = size // HASH_INPUT
    want = grey.reshape(5, HASH_INPUT, k, HASH_INPUT, k).mean(dim=(2, 4))
    assert torch.equal(phash_bits(grey), phash_bits(want))


def test_luma_of_uint8_pixels_is_luma_of_their_float_copy():
    """The uint8 path (numpy converting on the fly) gives the float path's values exactly,
    so hashes and the blur metric do not depend on the input's dtype."""
    from vismerch.features.hashing import luma

    x = torch.randint(0, 256, (3, 40, 56, 3), dtype=torch.uint8,
                      generator=torch.Generator().manual_seed(3))
    assert torch.equal(luma(x), luma(x.to(torch.float32)))
