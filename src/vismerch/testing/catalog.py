"""Public test helpers for catalogs: known-bad files, tricky-but-valid files with their
expected pixels, a small sample catalog, and manifest variants (good and bad).

    bad = write_bad_files(tmp_path)          # {"empty.jpg": "empty-file", ...}
    tricky = write_tricky_files(tmp_path)    # {"exif_rotated.jpg": TrickyFile(...), ...}
    cat = small_catalog(tmp_path / "cat")    # SampleCatalog with truth.json
    make_manifest(cat.root / "m.parquet", read_manifest_rows(cat.manifest_path))
    write_bad_manifests(cat)                 # {"duplicate-ids": Path(...), ...}
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from vismerch.sample import SampleCatalog, generate_catalog

RGB = tuple[int, int, int]


# --------------------------------------------------------------------------- bad files
def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bilevel_png(width: int, height: int) -> bytes:
    """A valid all-white 1-bit PNG of any size: a decompression bomb in a few kilobytes
    (20000 x 20000 is ~76 kB on disk, 400 M pixels once decoded)."""
    row = b"\x00" + b"\xff" * ((width + 7) // 8)
    comp = zlib.compressobj(9)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat)
            + _png_chunk(b"IEND", b""))


def _photo(size=(256, 256)) -> Image.Image:
    """A smooth colour gradient (compresses like a photo, unlike a flat colour)."""
    w, h = size
    x = np.linspace(0, 255, w, dtype=np.float32)[None, :]
    y = np.linspace(0, 255, h, dtype=np.float32)[:, None]
    arr = np.stack([np.broadcast_to(x, (h, w)), np.broadcast_to(y, (h, w)),
                    np.broadcast_to((x + y) / 2, (h, w))], -1)
    return Image.fromarray(arr.astype(np.uint8), "RGB")


def _save(im: Image.Image, fmt: str, **kw: Any) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def write_bad_files(directory: str | Path) -> dict[str, str]:
    """Write files the safe decoder must refuse; returns {file name: expected reason}.

    ``over_limit.png`` (7000 x 7000 = 49 M pixels) is refused under the default
    ``max_pixels`` (40 M) though Pillow's own bomb check would let it through;
    ``bomb.png`` (20000 x 20000) also trips Pillow's check.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    jpeg = _save(_photo(), "JPEG", quality=90)
    png = bytearray(_save(_photo((64, 64)), "PNG"))
    png[12:24] = b"\x00GARBAGE\xff\xff\x00\x00\x01"  # signature intact, IHDR garbled
    files = {
        "empty.jpg": (b"", "empty-file"),
        "truncated.jpg": (jpeg[: len(jpeg) * 6 // 10], "truncated"),
        "not_an_image.jpg": (b"<html><body><h1>404 Not Found</h1></body></html>\n",
                             "not-an-image"),
        "broken_header.png": (bytes(png), "not-an-image"),
        "bomb.png": (bilevel_png(20000, 20000), "too-many-pixels"),
        "over_limit.png": (bilevel_png(7000, 7000), "too-many-pixels"),
    }
    for name, (data, _) in files.items():
        (d / name).write_bytes(data)
    return {name: reason for name, (_, reason) in files.items()}


# --------------------------------------------------------------------------- tricky files
@dataclass(frozen=True)
class Probe:
    """An expected colour at a point given as fractions of the upright image's width and
    height (so it holds at any decode size)."""

    x: float
    y: float
    rgb: RGB


@dataclass(frozen=True)
class TrickyFile:
    path: Path
    size: tuple[int, int]  # (width, height) once upright (after EXIF orientation)
    probes: tuple[Probe, ...]
    tolerance: int  # max abs difference per channel (lossy formats need a few levels)
    note: str


def _halves(size, left: RGB, right: RGB, mode: str = "RGB") -> Image.Image:
    w, h = size
    im = Image.new(mode, size, left if mode == "RGB" else left[0])
    im.paste(right if mode == "RGB" else right[0], (w // 2, 0, w, h))
    return im


def _halves_probes(left: RGB, right: RGB) -> tuple[Probe, ...]:
    return (Probe(0.2, 0.5, left), Probe(0.8, 0.5, right))


# Adobe RGB (1998): D50-adapted colorants as its ICC profile carries them, and the D65
# matrix and gamma of the specification, for an independent expected value.
_ADOBE_COLORANTS_D50 = ((0.6097, 0.3111, 0.0195), (0.2053, 0.6257, 0.0609), (0.1492, 0.0632, 0.7446))
_ADOBE_GAMMA = 563 / 256  # 2.19921875, as u8Fixed8
_ADOBE_TO_XYZ = np.array([[0.5767309, 0.1855540, 0.1881852],
                          [0.2973769, 0.6273491, 0.0752741],
                          [0.0270343, 0.0706872, 0.9911085]])
_XYZ_TO_SRGB = np.array([[3.2404542, -1.5371385, -0.4985314],
                         [-0.9692660, 1.8760108, 0.0415560],
                         [0.0556434, -0.2040259, 1.0572252]])


def adobe_rgb_icc() -> bytes:
    """A minimal ICC v2 display profile (matrix + gamma) for Adobe RGB (1998), written
    here so tests need no profile file from the system."""
    def s15(v: float) -> bytes:
        return struct.pack(">i", round(v * 65536))

    def xyz(v) -> bytes:
        return b"XYZ " + bytes(4) + b"".join(s15(c) for c in v)

    name = b"Adobe RGB (1998) test profile\0"
    desc = b"desc" + bytes(4) + struct.pack(">I", len(name)) + name + bytes(4 + 4 + 2 + 1 + 67)
    curve = b"curv" + bytes(4) + struct.pack(">IH", 1, round(_ADOBE_GAMMA * 256)) + bytes(2)
    tags = [(b"desc", desc), (b"wtpt", xyz((0.9642, 1.0, 0.8249))), (b"cprt", b"text" + bytes(4) + b"none\0")]
    tags += [(tag, xyz(c)) for tag, c in zip((b"rXYZ", b"gXYZ", b"bXYZ"), _ADOBE_COLORANTS_D50, strict=True)]
    tags += [(tag, curve) for tag in (b"rTRC", b"gTRC", b"bTRC")]
    offset = 128 + 4 + 12 * len(tags)
    table, data = b"", b""
    for sig, body in tags:
        body += bytes(-len(body) % 4)
        table += sig + struct.pack(">II", offset + len(data), len(body))
        data += body
    size = offset + len(data)
    header = (struct.pack(">I", size) + b"lcms" + struct.pack(">I", 0x02100000) + b"mntrRGB XYZ "
              + struct.pack(">6H", 2026, 1, 1, 0, 0, 0) + b"acsp" + bytes(24)
              + struct.pack(">I", 1) + s15(0.9642) + s15(1.0) + s15(0.8249) + bytes(48))
    return header + struct.pack(">I", len(tags)) + table + data


def adobe_to_srgb(rgb: RGB) -> RGB:
    """The sRGB a colour-managed viewer shows for Adobe RGB (1998) values (8-bit)."""
    linear = (np.asarray(rgb, dtype=np.float64) / 255.0) ** _ADOBE_GAMMA
    out = np.clip(_XYZ_TO_SRGB @ (_ADOBE_TO_XYZ @ linear), 0.0, 1.0)
    encoded = np.where(out <= 0.0031308, out * 12.92, 1.055 * out ** (1 / 2.4) - 0.055)
    return tuple(int(round(v)) for v in encoded * 255.0)


def write_tricky_files(directory: str | Path) -> dict[str, TrickyFile]:
    """Write valid but awkward images, each with the RGB content a correct decoder yields
    (alpha composited over white, EXIF orientation applied, first frame, full 16-bit range)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out: dict[str, TrickyFile] = {}

    def add(name: str, data: bytes, size, probes, tol: int, note: str) -> None:
        (d / name).write_bytes(data)
        out[name] = TrickyFile(d / name, size, tuple(probes), tol, note)

    _orientation_and_alpha(add)
    _modes_and_profiles(add)
    return out


_RED, _BLUE, _YELLOW, _WHITE = (220, 30, 30), (30, 60, 200), (240, 200, 40), (255, 255, 255)


def _orientation_and_alpha(add: Callable[..., None]) -> None:
    red, blue, white = _RED, _BLUE, _WHITE
    # Stored 160x96 with red in the stored top-left; orientation 6 (turn 90 degrees
    # clockwise to view) puts it top-right in a 96x160 upright image.
    im = Image.new("RGB", (160, 96), blue)
    im.paste(red, (0, 0, 64, 40))
    exif = Image.Exif()
    exif[0x0112] = 6
    add("exif_rotated.jpg", _save(im, "JPEG", quality=95, exif=exif), (96, 160),
        [Probe(0.85, 0.15, red), Probe(0.2, 0.8, blue)], 12, "EXIF orientation 6")

    rgba = Image.new("RGBA", (120, 120), (0, 0, 0, 0))  # black under the transparent pixels
    rgba.paste((*red, 255), (40, 40, 80, 80))
    add("alpha.png", _save(rgba, "PNG"), (120, 120),
        [Probe(0.5, 0.5, red), Probe(0.08, 0.08, white), Probe(0.92, 0.92, white)], 1,
        "RGBA, transparent background (black underneath) must come out white")

    la = Image.new("LA", (120, 120), (0, 0))
    la.paste((90, 255), (30, 30, 90, 90))
    add("grey_alpha.png", _save(la, "PNG"), (120, 120),
        [Probe(0.5, 0.5, (90, 90, 90)), Probe(0.1, 0.1, white)], 1, "greyscale + alpha")

    pal = Image.new("P", (120, 120), 0)
    pal.putpalette([0, 0, 0, *blue] + [0, 0, 0] * 254)
    pal.paste(1, (30, 30, 90, 90))
    add("palette_transparent.png", _save(pal, "PNG", transparency=0), (120, 120),
        [Probe(0.5, 0.5, blue), Probe(0.1, 0.1, white)], 1,
        "palette PNG whose index 0 (black) is transparent")


def _modes_and_profiles(add: Callable[..., None]) -> None:
    red, blue, yellow = _RED, _BLUE, _YELLOW
    cmyk = _halves((128, 96), blue, yellow).convert("CMYK")
    add("cmyk.jpg", _save(cmyk, "JPEG", quality=95), (128, 96), _halves_probes(blue, yellow), 12,
        "CMYK JPEG (Adobe marker)")

    arr = np.full((96, 128), 8192, np.uint16)
    arr[:, 64:] = 49152
    add("grey16.png", _save(Image.fromarray(arr), "PNG"), (128, 96),
        _halves_probes((32, 32, 32), (191, 191, 191)), 3,
        "16-bit greyscale: must be scaled, not clipped to white")

    frame0 = _halves((128, 96), (30, 160, 60), yellow).quantize(colors=4)
    frame1 = Image.new("RGB", (128, 96), (150, 40, 160)).quantize(colors=4)
    gif = io.BytesIO()
    frame0.save(gif, "GIF", save_all=True, append_images=[frame1], duration=100, loop=0)
    add("two_frames.gif", gif.getvalue(), (128, 96), _halves_probes((30, 160, 60), yellow), 2,
        "palette GIF with 2 frames: the first frame counts")

    add("grey.jpg", _save(_halves((128, 96), (60,) * 3, (200,) * 3, "L"), "JPEG", quality=95),
        (128, 96), _halves_probes((60, 60, 60), (200, 200, 200)), 6, "greyscale (L) JPEG")
    add("progressive.jpg", _save(_halves((128, 96), red, blue), "JPEG", quality=92,
                                 progressive=True), (128, 96), _halves_probes(red, blue), 12,
        "progressive JPEG")
    # Adobe RGB values shown as sRGB: a muted green and a sky blue move 6-20 levels
    green, sky = (90, 140, 60), (120, 170, 220)
    add("adobe_rgb.png", _save(_halves((128, 96), green, sky), "PNG", icc_profile=adobe_rgb_icc()),
        (128, 96), _halves_probes(adobe_to_srgb(green), adobe_to_srgb(sky)), 3,
        "Adobe RGB (1998) ICC profile: converted to sRGB")
    add("adobe_rgb.jpg", _save(_halves((128, 96), green, sky), "JPEG", quality=95,
                               icc_profile=adobe_rgb_icc()),
        (128, 96), _halves_probes(adobe_to_srgb(green), adobe_to_srgb(sky)), 8,
        "Adobe RGB (1998) JPEG: converted to sRGB through draft mode too")
    add("broken_icc.png", _save(_halves((128, 96), red, blue), "PNG", icc_profile=b"not a profile"),
        (128, 96), _halves_probes(red, blue), 1, "unreadable ICC profile: ignored, pixels as stored")
    for name, fmt, kw, tol in (("image.bmp", "BMP", {}, 1), ("image.tiff", "TIFF", {}, 1),
                               ("image.webp", "WEBP", {"quality": 90}, 12)):
        add(name, _save(_halves((128, 96), red, blue), fmt, **kw), (128, 96),
            _halves_probes(red, blue), tol, f"{fmt} RGB")


# --------------------------------------------------------------------------- catalogs
def small_catalog(directory: str | Path, n: int = 24, seed: int = 0, **kwargs: Any) -> SampleCatalog:
    """A quick sample catalog (560-704 px images). At n=24 it holds one truncated file,
    a blurred and a dark shot, one near-duplicate pair and one wrong listed colour; every
    flaw kind appears from n=62 on. ``kwargs`` go to ``generate_catalog``."""
    kwargs.setdefault("size_range", (560, 704))
    return generate_catalog(directory, n=n, seed=seed, **kwargs)


def read_manifest_rows(path: str | Path) -> list[dict[str, str]]:
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


MANIFEST_PROBLEMS = ("missing-image-column", "duplicate-ids", "bad-price", "path-escape")


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    """Numbers as numbers (JSONL and Parquet carry types; CSV does not)."""
    out = dict(row)
    for key, kind in (("price", float), ("stock", int), ("sales", int)):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            out[key] = kind(out[key])
    return out


def make_manifest(path: str | Path, rows: list[dict[str, Any]], *,
                  problem: str | None = None) -> Path:
    """Write ``rows`` as CSV, JSONL or Parquet (by the suffix of ``path``), optionally with
    one of MANIFEST_PROBLEMS planted. Image paths stay relative to the manifest's folder.

    ``path-escape`` points the first row at ``../outside.jpg`` and puts a real image there,
    so a source that accepts it would not fail for a missing file instead.
    """
    path = Path(path)
    rows = [dict(r) for r in rows]
    if problem == "missing-image-column":
        rows = [{k: v for k, v in r.items() if k != "image"} for r in rows]
    elif problem == "duplicate-ids":
        rows[1]["id"] = rows[0]["id"]
    elif problem == "bad-price":
        rows[len(rows) // 2]["price"] = "twelve pounds"
    elif problem == "path-escape":
        outside = path.parent.parent / "outside.jpg"
        if not outside.exists():
            outside.write_bytes(_save(_photo((64, 64)), "JPEG"))
        rows[0]["image"] = "../outside.jpg"
    elif problem is not None:
        raise ValueError(f"unknown manifest problem {problem!r}; known: {MANIFEST_PROBLEMS}")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        fields = list(dict.fromkeys(k for r in rows for k in r))
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    elif suffix in (".jsonl", ".ndjson"):
        typed = rows if problem == "bad-price" else [_typed(r) for r in rows]
        path.write_text("".join(json.dumps(r) + "\n" for r in typed), encoding="utf-8")
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        typed = rows if problem == "bad-price" else [_typed(r) for r in rows]
        pq.write_table(pa.Table.from_pylist(typed), path)
    else:
        raise ValueError(f"unknown manifest suffix {suffix!r}: use .csv, .jsonl or .parquet")
    return path


def write_manifest_variants(catalog: SampleCatalog) -> dict[str, Path]:
    """The catalog's manifest also as JSONL and Parquet, beside manifest.csv."""
    rows = read_manifest_rows(catalog.manifest_path)
    return {"csv": catalog.manifest_path,
            "jsonl": make_manifest(catalog.root / "manifest.jsonl", rows),
            "parquet": make_manifest(catalog.root / "manifest.parquet", rows)}


def write_bad_manifests(catalog: SampleCatalog, suffix: str = ".csv") -> dict[str, Path]:
    """One bad manifest per problem in MANIFEST_PROBLEMS, beside manifest.csv."""
    rows = read_manifest_rows(catalog.manifest_path)
    return {p: make_manifest(catalog.root / f"bad-{p}{suffix}", rows, problem=p)
            for p in MANIFEST_PROBLEMS}

