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
  (DCT scaling), which is where most of the decode time is saved.
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
import torch
import torch.nn.functional as F
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from vismerch.errors import DecodeError

SUPPORTED_FORMATS = frozenset({"JPEG", "MPO", "PNG", "WEBP", "GIF", "BMP", "TIFF"})
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})

# EXIF orientations 5..8 swap width and height.
_SWAPS_AXES = {5, 6, 7, 8}


@dataclass
class DecodedImage:
    pixels: np.ndarray  # (S, S, 3) uint8 RGB at the working size (aspect not preserved)
    thumb: Image.Image | None  # RGB, aspect preserved, longest side <= thumb size
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


def resize_rgb(im: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """RGB image -> (height, width, 3) uint8 array at ``size`` (width, height), antialiased.

    Pillow first box-reduces an image over twice the target (cheap, exact averaging), then
    torch's channels-last uint8 kernel does the antialiased bilinear step.
    """
    width, height = size
    factor = min(im.width // (2 * width), im.height // (2 * height))
    if factor >= 2:
        im = im.reduce(factor)
    arr = np.array(im)  # writable: torch takes it without a copy
    if im.size == size:
        return arr
    chw = torch.from_numpy(arr).permute(2, 0, 1)
    out = F.interpolate(chw[None], size=(height, width), mode="bilinear", antialias=True,
                        align_corners=False)
    return np.ascontiguousarray(out[0].permute(1, 2, 0).numpy())


def thumbnail(working: Image.Image, width: int, height: int, thumb_size: int) -> Image.Image:
    """The thumbnail of an image from its square working-size copy, aspect restored.

    Made from the small working image, not the decoded one (a thumbnail never needs more
    detail than the working size holds); a square image at the working size is its own
    thumbnail.
    """
    scale = min(thumb_size, working.width) / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return working if size == working.size else Image.fromarray(resize_rgb(working, size))


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
    fmt = im.format
    width, height = im.size
    if width <= 0 or height <= 0:
        raise DecodeError("corrupt", f"invalid image size {width}x{height}")
    if width * height > max_pixels:
        raise DecodeError(
            "too-many-pixels",
            f"{width}x{height} = {width * height:,} pixels exceeds the limit of {max_pixels:,}",
        )
    orientation = 1
    try:
        orientation = int(im.getexif().get(0x0112, 1) or 1)
    except Exception:  # a broken EXIF block must not refuse a good image
        orientation = 1
    if orientation in _SWAPS_AXES:
        width, height = height, width

    if im.format in ("JPEG", "MPO"):
        # DCT-domain downscale: decodes at 1/2, 1/4 or 1/8 while staying >= the target.
        im.draft("RGB" if im.mode == "RGB" else None, (working_size, working_size))
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

    icc = im.info.get("icc_profile")
    if orientation != 1:
        im = ImageOps.exif_transpose(im)
    im = _to_srgb(im, icc)

    pixels = resize_rgb(im, (working_size, working_size))
    thumb = None
    if thumb_size:
        thumb = thumbnail(Image.fromarray(pixels), width, height, thumb_size)
    return DecodedImage(pixels=pixels, thumb=thumb, width=width, height=height, format=fmt)
