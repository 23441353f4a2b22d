"""Safe decode: every bad file refused with its own reason, every awkward-but-valid file
decoded to the RGB a person would see."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from vismerch.errors import DecodeError
from vismerch.imaging.decode import decode_image
from vismerch.testing import write_bad_files, write_tricky_files

SIZE = 128


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bad")
    return {directory / name: reason for name, reason in write_bad_files(directory).items()}


@pytest.fixture(scope="module")
def tricky(tmp_path_factory):
    return write_tricky_files(tmp_path_factory.mktemp("tricky"))


def test_every_bad_file_is_refused_with_its_reason(bad):
    assert {"empty-file", "truncated", "not-an-image", "too-many-pixels"} <= set(bad.values())
    for path, reason in bad.items():
        with pytest.raises(DecodeError) as info:
            decode_image(path.read_bytes(), working_size=SIZE)
        assert info.value.reason == reason, f"{path.name}: {info.value.message}"
        assert info.value.message  # a specific sentence, not just a code


def test_tricky_files_decode_to_the_expected_colours(tricky):
    assert len(tricky) >= 8
    for name, tf in tricky.items():
        decoded = decode_image(tf.path.read_bytes(), working_size=SIZE, thumb_size=48)
        assert decoded.pixels.shape == (SIZE, SIZE, 3) and decoded.pixels.dtype == np.uint8, name
        assert (decoded.width, decoded.height) == tf.size, f"{name}: size after EXIF orientation"
        for probe in tf.probes:
            x = min(SIZE - 1, int(probe.x * SIZE))
            y = min(SIZE - 1, int(probe.y * SIZE))
            got = decoded.pixels[y, x].astype(int)
            assert np.abs(got - np.array(probe.rgb)).max() <= tf.tolerance + 6, (
                f"{name} at ({probe.x}, {probe.y}): {tuple(got)} != {probe.rgb} ({tf.note})"
            )
        assert max(decoded.thumb.shape[:2]) <= 48 and decoded.thumb.shape[2] == 3
        # the thumbnail keeps the aspect ratio of the upright image
        w, h = tf.size
        th, tw = decoded.thumb.shape[:2]
        assert abs(tw / th - w / h) < 0.1, name


def test_pixel_limit_is_configurable_and_checked_before_decoding():
    buf = io.BytesIO()
    Image.new("RGB", (300, 200), (10, 20, 30)).save(buf, "PNG")
    data = buf.getvalue()
    decode_image(data, working_size=SIZE, max_pixels=60_000)
    with pytest.raises(DecodeError) as info:
        decode_image(data, working_size=SIZE, max_pixels=59_999)
    assert info.value.reason == "too-many-pixels" and "60,000" in info.value.message


def test_large_jpeg_decodes_straight_to_the_working_size():
    rng = np.random.default_rng(0)
    arr = (rng.random((1600, 1200, 3)) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=90)
    decoded = decode_image(buf.getvalue(), working_size=SIZE, thumb_size=None)
    assert decoded.pixels.shape == (SIZE, SIZE, 3)
    assert (decoded.width, decoded.height) == (1200, 1600)  # the original size is reported
    assert decoded.thumb is None and decoded.format == "JPEG"


def test_empty_bytes_and_unsupported_format():
    with pytest.raises(DecodeError) as info:
        decode_image(b"")
    assert info.value.reason == "empty-file"
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, "PPM")
    with pytest.raises(DecodeError) as info:
        decode_image(buf.getvalue())
    assert info.value.reason == "unsupported-format" and "PPM" in info.value.message


@pytest.mark.parametrize("shape", [(1800, 3000), (400, 400), (300, 180), (40, 70)])
def test_working_resize_matches_pillows_antialiased_filter(shape):
    """Decoding resizes to the working size (a box pre-reduce for large images, then
    torch's kernel) as Pillow's bilinear filter does, for downscales big and small and
    for upscales."""
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    # smooth colour ramps plus a fine stripe: aliasing would show as a large error
    arr = np.stack([xx * 255 // max(1, w - 1), yy * 255 // max(1, h - 1),
                    ((xx // 3) % 2) * 200 + 20], axis=-1).astype(np.uint8)
    im = Image.fromarray(arr)
    png = io.BytesIO()
    im.save(png, "PNG")
    ours = decode_image(png.getvalue(), working_size=SIZE, thumb_size=None).pixels.astype(int)
    pillow = np.asarray(im.resize((SIZE, SIZE), Image.Resampling.BILINEAR)).astype(int)
    assert ours.shape == (SIZE, SIZE, 3) and ours.flags["C_CONTIGUOUS"]
    assert np.abs(ours - pillow).mean() < 2.5  # a nearest-neighbour resize is 6-33 off
    assert np.abs(ours - pillow).max() <= 10  # the box pre-reduce moves stripe edges a little


@pytest.mark.parametrize("mode, size", [("RGB", (800, 800)), ("RGB", (1001, 667)), ("L", (640, 900))])
def test_fast_jpeg_path_gives_pillows_draft_pixels_bit_for_bit(mode, size):
    """Plain JPEGs go through libjpeg-turbo straight into numpy: the pixels must be exactly
    those of Pillow's draft decode + the same resize (any drift would move blur, colour
    and duplicate measurements)."""
    from vismerch.imaging import decode as dec

    rng = np.random.default_rng(1)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    arr = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) % 64) * 4], -1).astype(np.uint8)
    arr = np.clip(arr + rng.integers(-6, 7, arr.shape), 0, 255).astype(np.uint8)
    im = Image.fromarray(arr if mode == "RGB" else arr[..., 0], mode)
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=88)
    data = buf.getvalue()
    fast = decode_image(data, working_size=SIZE, thumb_size=SIZE)
    ref = Image.open(io.BytesIO(data))
    ref.draft("RGB" if mode == "RGB" else None, (SIZE, SIZE))
    assert dec._fast_jpeg(data, ref) is not None  # this JPEG takes the fast path
    assert dec._plain_jpeg(data, SIZE, 10**9) is not None  # and needs no Pillow header parse
    # the plain-JPEG path only takes drafts within 2x of the target: no box pre-reduce
    slow = dec.resize_array(np.asarray(ref.convert("RGB")), (SIZE, SIZE))
    assert np.array_equal(fast.pixels, slow)
    assert fast.thumb.shape[:2] == (round(h * SIZE / max(w, h)), round(w * SIZE / max(w, h)))


def test_fast_jpeg_path_leaves_truncated_files_to_pillow():
    rng = np.random.default_rng(2)
    buf = io.BytesIO()
    Image.fromarray((rng.random((600, 600, 3)) * 255).astype(np.uint8)).save(buf, "JPEG")
    with pytest.raises(DecodeError) as info:
        decode_image(buf.getvalue()[: len(buf.getvalue()) // 2], working_size=SIZE)
    assert info.value.reason == "truncated"


def test_jpegs_with_exif_or_icc_segments_take_pillows_path():
    """Orientation and colour profiles live in APP1/APP2: such files must go through
    Pillow (which honours them), never the header-less fast path."""
    from vismerch.imaging import decode as dec

    im = Image.new("RGB", (400, 300), (200, 30, 40))
    plain, rotated, profiled = io.BytesIO(), io.BytesIO(), io.BytesIO()
    im.save(plain, "JPEG")
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90: the upright image is 300 x 400
    im.save(rotated, "JPEG", exif=exif.tobytes())
    from PIL import ImageCms

    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    im.save(profiled, "JPEG", icc_profile=srgb)
    assert dec._plain_jpeg(plain.getvalue(), SIZE, 10**9) is not None
    assert dec._plain_jpeg(rotated.getvalue(), SIZE, 10**9) is None
    assert dec._plain_jpeg(profiled.getvalue(), SIZE, 10**9) is None
    assert dec._plain_jpeg(plain.getvalue(), SIZE, 400 * 300 - 1) is None  # over the limit
    decoded = decode_image(rotated.getvalue(), working_size=SIZE, thumb_size=SIZE)
    assert (decoded.width, decoded.height) == (300, 400)
    with pytest.raises(DecodeError) as info:
        decode_image(plain.getvalue(), working_size=SIZE, max_pixels=400 * 300 - 1)
    assert info.value.reason == "too-many-pixels"
