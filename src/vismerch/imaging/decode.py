"""Safe image decode: refuse what is broken or dangerous with a specific reason,
normalise everything else to an RGB uint8 array at the working size.

- EXIF orientation applied; alpha composited over white; CMYK, 16-bit, float,
  palette, bilevel and greyscale converted to RGB; GIF/TIFF: first frame.
- An embedded ICC profile other than sRGB (Adobe RGB from studios, Display P3 from
  phones, a press CMYK profile) is converted to sRGB with littlecms, so colours are named
  as a browser shows them; an unreadable profile is ignored, never a reason to refuse.
- The pixel count is checked from the header before any pixel is decoded, so a
  decompression bomb is refused, not decoded.
- JPEGs are decoded straight to (about) the working size with Pillow's draft mode
  (DCT scaling), which is where most of the decode time is saved. Plain JPEGs (RGB or
  grey, upright, sRGB or no profile) are then decoded by libjpeg-turbo through
  simplejpeg straight into a numpy array at the scale Pillow's draft chose: the same
  pixels bit for bit (tests compare), without Pillow's two copies into and out of its
  own 4-byte layout (~0.8 ms of ~2 ms per 800 px image). Anything else, or any error
  there, takes the Pillow path, which also gives the refusal reason.
- The last step to the working size is torch's antialiased bilinear resize on uint8
  (Pillow's filter, within one level), about twice as fast as Pillow's own on one thread
  (``benchmarks/ingest.py`` prints both);
  far larger images are first box-reduced by Pillow to within 2x of the target.
"""

from __future__ import annotations

import contextlib
import functools
import io
import warnings
from dataclasses import dataclass

import numpy as np
import simplejpeg  # libjpeg-turbo straight into numpy (same pixels as Pillow's); a core dependency
import torch
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from vismerch.errors import DecodeError

_resize_aa = torch.ops.aten._upsample_bilinear2d_aa.out  # what F.interpolate(antialias=True) runs

SUPPORTED_FORMATS = frozenset({"JPEG", "MPO", "PNG", "WEBP", "GIF", "BMP", "TIFF"})
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})

# EXIF orientations 5..8 swap width and height.
_SWAPS_AXES = {5, 6, 7, 8}


@dataclass
class DecodedImage:
    pixels: np.ndarray  # (S, S, 3) uint8 RGB at the working size (aspect not preserved)
    thumb: np.ndarray | None  # (h, w, 3) uint8 RGB, aspect preserved, longest side <= thumb size
    width: int  # original size after EXIF orientation
    height: int
    format: str


def _to_rgb(im: Image.Image) -> Image.Image:
    """Convert any Pillow mode to RGB; transparency is composited over white."""
    mode = im.mode
    if mode == "RGB":
        return im
    if mode == "P" or mode == "PA":
        im = im.convert("RGBA")
        mode = "RGBA"
    if mode in ("RGBA", "LA", "RGBa", "La"):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if mode.startswith("I;16") or mode in ("I", "F"):
        # Pillow's own I/F -> L conversion clips instead of scaling; scale by the range.
        arr = np.asarray(im, dtype=np.float32)
        peak = 65535.0 if mode.startswith("I;16") or arr.max(initial=0) > 255 else 255.0
        if mode == "F" and arr.max(initial=0) <= 1.0:
            peak = 1.0
        grey = np.clip(arr * (255.0 / peak), 0, 255).astype(np.uint8)
        return Image.fromarray(grey, "L").convert("RGB")
    return im.convert("RGB")  # L, 1, CMYK, YCbCr, LAB, HSV


@functools.cache
def _srgb_profile() -> ImageCms.ImageCmsProfile:
    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB"))


@functools.lru_cache(maxsize=32)
def srgb_transform(icc: bytes, mode: str) -> ImageCms.ImageCmsTransform | None:
    """A transform from an embedded ICC profile (for images of ``mode``) to sRGB; None when
    the profile is sRGB already, or unreadable, or does not fit the mode."""
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        name = (ImageCms.getProfileDescription(source) or "").lower().replace(" ", "")
        if "srgb" in name:
            return None
        return ImageCms.buildTransform(source, _srgb_profile(), mode, "RGB",
                                       renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC)
    except (OSError, ValueError, TypeError, ImageCms.PyCMSError):
        return None


def _to_srgb(im: Image.Image, icc: bytes | None) -> Image.Image:
    """RGB in sRGB: the embedded profile applied when there is one that is not sRGB."""
    if icc:
        if im.mode not in ("RGB", "CMYK", "L"):
            im = _to_rgb(im)  # alpha over white first, still in the image's own space
        transform = srgb_transform(icc, im.mode)
        if transform is not None:
            # on failure keep the untransformed pixels rather than refuse the image
            with contextlib.suppress(OSError, ValueError, ImageCms.PyCMSError):
                im = ImageCms.applyTransform(im, transform)
    return _to_rgb(im)


def _array(im: Image.Image) -> np.ndarray:
    """RGB image -> writable (H, W, 3) uint8 array. ``tobytes`` + ``frombuffer`` is about a
    third of the cost of ``np.array(im)`` on Pillow 13 (which goes through the array
    interface and copies twice); the bytearray makes it writable for torch."""
    return np.frombuffer(bytearray(im.tobytes()), np.uint8).reshape(im.height, im.width, 3)


def resize_array(arr: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(H, W, 3) uint8 -> (height, width, 3) uint8 at ``size`` (width, height) with torch's
    antialiased bilinear uint8 kernel (Pillow's filter, within one level)."""
    width, height = size
    if arr.shape[1] == width and arr.shape[0] == height:
        return arr
    if not arr.flags.writeable:
        arr = arr.copy()
    # F.interpolate's kernel works channels-last but returns a single image planar, which
    # then costs two transposing copies (into planar and back), as long as the resize
    # itself; the op's out= form writes straight into the (H, W, 3) array
    out = np.empty((1, height, width, 3), np.uint8)
    _resize_aa(torch.from_numpy(arr[None]).permute(0, 3, 1, 2), [height, width], False,
               None, None, out=torch.from_numpy(out).permute(0, 3, 1, 2))
    return out[0]


def thumbnail(working: np.ndarray | Image.Image, width: int, height: int,
              thumb_size: int) -> np.ndarray:
    """The thumbnail (h, w, 3) uint8 of an image from its square working-size copy, aspect
    restored.

    Made from the small working image, not the decoded one (a thumbnail never needs more
    detail than the working size holds); a square image at the working size is its own
    thumbnail.
    """
    arr = _array(working) if isinstance(working, Image.Image) else working
    scale = min(thumb_size, arr.shape[1]) / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return resize_array(arr, size)


_APP_SKIP = frozenset({0xE1, 0xE2})  # APP1 (EXIF orientation, XMP), APP2 (ICC, MPF)


def _plain_jpeg(data: bytes, working_size: int, max_pixels: int) -> tuple[np.ndarray, int, int] | None:
    """(pixels at Pillow's draft scale, width, height) of a plain JPEG, without Pillow:
    YCbCr or grey, no APP1/APP2 segment (so no EXIF orientation, ICC profile or
    multi-picture index to honour), under the pixel limit, and no larger than Pillow's
    draft leaves within 2x of the target. Pillow's marker parsing alone costs ~0.4 ms per
    file; a walk over the segment headers costs microseconds. None: anything else (the
    Pillow path decides, and gives any refusal its reason)."""
    if not data.startswith(b"\xff\xd8\xff"):
        return None
    i, n = 2, len(data)
    while True:  # segment headers up to the start of scan
        if i + 4 > n or data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0xDA:
            break
        if marker in _APP_SKIP or marker == 0xD9:
            return None
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    try:
        height, width, colourspace, _ = simplejpeg.decode_jpeg_header(data)
    except (ValueError, RuntimeError):
        return None
    if colourspace not in ("YCbCr", "Gray") or not 0 < width * height <= max_pixels:
        return None
    scale = min(width // working_size, height // working_size)
    s = next(f for f in (8, 4, 2, 1) if scale >= f or f == 1)  # Pillow's draft rule
    w, h = (width + s - 1) // s, (height + s - 1) // s
    if min(w // (2 * working_size), h // (2 * working_size)) >= 2:
        return None
    try:
        arr = simplejpeg.decode_jpeg(data, "RGB", min_height=h, min_width=w)
    except (ValueError, RuntimeError, OSError):
        return None
    return (arr, width, height) if arr.shape[:2] == (h, w) else None


def _fast_jpeg(data: bytes, im: Image.Image) -> np.ndarray | None:
    """libjpeg-turbo (simplejpeg) decode of a plain JPEG at the size Pillow's draft set on
    ``im``; None when not eligible or on any error (strict: a truncated or corrupt stream
    raises rather than being filled in), so the Pillow path decides the refusal."""
    if simplejpeg is None or im.format != "JPEG" or im.mode not in ("RGB", "L"):
        return None
    icc = im.info.get("icc_profile")
    if icc and srgb_transform(icc, im.mode) is not None:
        return None  # a profile to convert from: Pillow + littlecms
    width, height = im.size  # after draft: the DCT-scaled size
    try:
        arr = simplejpeg.decode_jpeg(data, "RGB", min_height=height, min_width=width)
    except (ValueError, RuntimeError, OSError):
        return None
    return arr if arr.shape[:2] == (height, width) else None


def decode_image(
    data: bytes,
    working_size: int = 256,
    max_pixels: int = 40_000_000,
    thumb_size: int | None = 192,
) -> DecodedImage:
    """Decode image bytes safely; raise DecodeError(reason, message) when refused.

    Reasons: empty-file, not-an-image, unsupported-format, too-many-pixels,
    truncated, corrupt.
    """
    if not data:
        raise DecodeError("empty-file", "the file is empty (0 bytes)")
    plain = _plain_jpeg(data, working_size, max_pixels)
    if plain is not None:
        return _finish(plain[0], plain[1], plain[2], "JPEG", working_size, thumb_size)
    im = _open(data)
    fmt = im.format
    width, height = _checked_size(im, max_pixels)
    orientation = _orientation(im)
    if orientation in _SWAPS_AXES:
        width, height = height, width

    if im.format in ("JPEG", "MPO"):
        # DCT-domain downscale: decodes at 1/2, 1/4 or 1/8 while staying >= the target.
        im.draft("RGB" if im.mode == "RGB" else None, (working_size, working_size))
        # (an image still over twice the target after draft is box-reduced by Pillow below)
        near = min(im.width // (2 * working_size), im.height // (2 * working_size)) < 2
        fast = _fast_jpeg(data, im) if orientation == 1 and near else None
        if fast is not None:
            return _finish(fast, width, height, fmt, working_size, thumb_size)
    _load(im)
    icc = im.info.get("icc_profile")
    if orientation != 1:
        im = ImageOps.exif_transpose(im)
    im = _to_srgb(im, icc)

    factor = min(im.width // (2 * working_size), im.height // (2 * working_size))
    if factor >= 2:
        im = im.reduce(factor)
    return _finish(_array(im), width, height, fmt, working_size, thumb_size)


def _open(data: bytes) -> Image.Image:
    """The image's header read by Pillow, in a format vismerch decodes; refused otherwise."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise DecodeError("not-an-image", "not a recognised image file") from None
    except Image.DecompressionBombError as exc:
        raise DecodeError("too-many-pixels", str(exc)) from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DecodeError("corrupt", f"cannot read the image header: {exc}") from None
    if im.format not in SUPPORTED_FORMATS:
        raise DecodeError("unsupported-format", f"image format {im.format} is not supported")
    return im


def _checked_size(im: Image.Image, max_pixels: int) -> tuple[int, int]:
    width, height = im.size
    if width <= 0 or height <= 0:
        raise DecodeError("corrupt", f"invalid image size {width}x{height}")
    if width * height > max_pixels:
        raise DecodeError(
            "too-many-pixels",
            f"{width}x{height} = {width * height:,} pixels exceeds the limit of {max_pixels:,}",
        )
    return width, height


def _orientation(im: Image.Image) -> int:
    try:
        return int(im.getexif().get(0x0112, 1) or 1)
    except Exception:  # a broken EXIF block must not refuse a good image
        return 1


def _load(im: Image.Image) -> None:
    """Decode the pixels; a truncated or corrupt stream is refused with its reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im.seek(0)
            im.load()
    except OSError as exc:
        text = str(exc).lower()
        reason = "truncated" if "truncat" in text or "broken data stream" in text else "corrupt"
        raise DecodeError(reason, f"cannot decode the image data: {exc}") from None
    except (SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        raise DecodeError("corrupt", f"cannot decode the image data: {exc}") from None


def _finish(arr: np.ndarray, width: int, height: int, fmt: str, working_size: int,
            thumb_size: int | None) -> DecodedImage:
    pixels = resize_array(arr, (working_size, working_size))
    thumb = thumbnail(pixels, width, height, thumb_size) if thumb_size else None
    return DecodedImage(pixels=pixels, thumb=thumb, width=width, height=height, format=fmt)
