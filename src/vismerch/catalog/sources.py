"""Catalog sources: a folder of images or a manifest (CSV, JSONL, Parquet) -> ProductRecords.

A folder is walked recursively; a product's id is its path relative to the folder,
POSIX-style, extension included. A manifest needs an ``image`` column: a path relative
to the manifest's folder, or a URL (``http(s)://``, ``s3://``, ``gs://``, or ``file://``
inside the manifest's folder) downloaded by the workers (``catalog/fetch.py``); ``id,
title, description, category, brand, price, stock, sales, created_at`` are optional;
every other column is kept as an attribute.
Problems are SourceErrors that name the file and the row. Every text a manifest holds
(id, image, each column, attribute names and values) has a length cap
(``manifest_max_id_chars``, ``manifest_max_text_chars``): a longer one stops the run naming
the row and column, so no row can make every later search or product read carry megabytes.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from vismerch.catalog.fetch import check_url, url_scheme
from vismerch.catalog.product import KNOWN_COLUMNS, NUMERIC_FIELDS, TEXT_FIELDS, ProductFields
from vismerch.errors import SourceError
from vismerch.imaging.decode import IMAGE_EXTENSIONS

MANIFEST_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
MAX_ID_CHARS, MAX_TEXT_CHARS = 500, 10_000  # defaults of the manifest_max_* settings


@dataclass
class ProductRecord(ProductFields):
    """A product as its source lists it (the catalog's fields are ``ProductFields``')."""

    id: str
    image_path: Path | None  # absolute; None when the image is a URL
    image_url: str | None = None  # http(s):// or an fsspec URL, downloaded by the workers

    @property
    def location(self) -> str:
        """Where the image is read from: its URL, or its absolute path."""
        return self.image_url if self.image_url is not None else str(self.image_path)


def read_source(source: str | os.PathLike, *, max_id_chars: int = MAX_ID_CHARS,
                max_text_chars: int = MAX_TEXT_CHARS) -> list[ProductRecord]:
    """Read a folder or a manifest file into product records (sorted by id); a manifest's
    texts are capped at ``max_id_chars`` (ids) and ``max_text_chars`` (the rest)."""
    path = Path(source)
    if not path.exists():
        raise SourceError(f"source {path} does not exist", hint="pass a folder of images or a manifest")
    if path.is_dir():
        return read_folder(path)
    kind = MANIFEST_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise SourceError(
            f"{path}: unknown source type {path.suffix!r}",
            hint="use a folder, or a manifest ending in .csv, .jsonl or .parquet",
        )
    return read_manifest(path, max_id_chars=max_id_chars, max_text_chars=max_text_chars)


def read_folder(folder: Path) -> list[ProductRecord]:
    """One record per image file under ``folder`` (hidden files and folders left out), its
    id the path relative to the folder with "/" separators. Names are handled as strings:
    a Path per file and ``relative_to`` cost most of listing a large folder."""
    root = os.fspath(Path(folder).resolve())
    records = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = os.path.relpath(dirpath, root)
        prefix = "" if rel == os.curdir else rel.replace(os.sep, "/") + "/"
        for name in filenames:
            if name.startswith(".") or os.path.splitext(name)[1].lower() not in IMAGE_EXTENSIONS:
                continue
            records.append(ProductRecord(id=prefix + name, image_path=Path(dirpath, name)))
    records.sort(key=lambda r: r.id)
    return records


def _rows(path: Path, kind: str) -> tuple[list[str], list[dict[str, Any]]]:
    try:
        if kind == "csv":
            with path.open(newline="", encoding="utf-8-sig") as fh:
                reader = csv.DictReader(fh)
                return list(reader.fieldnames or []), list(reader)
        if kind == "jsonl":
            rows, columns = [], {}
            with path.open(encoding="utf-8-sig") as fh:  # a BOM is accepted, as for CSV
                for lineno, line in enumerate(fh, start=1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise SourceError(f"{path}: line {lineno} is not valid JSON: {exc.msg}") from None
                    except RecursionError:
                        raise SourceError(f"{path}: line {lineno} nests its values too deeply to read",
                                          hint="attributes are plain values or shallow objects") from None
                    if not isinstance(row, dict):
                        raise SourceError(f"{path}: line {lineno} is not a JSON object")
                    rows.append(row)
                    columns.update(dict.fromkeys(row))
            return list(columns), rows
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return table.column_names, table.to_pylist()
    except SourceError:
        raise
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        raise SourceError(f"cannot read manifest {path}: {exc}") from exc


# a comma is only a thousands separator in whole groups of three: "1,250.00"; "12,50" is
# a decimal comma and ambiguous, so it is refused rather than read as 1250
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")
# above these a value is a data error (a pasted barcode, a unit mix-up), not a product
NUMBER_LIMITS = {"price": 1e9, "stock": 1e9, "sales": 1e12}


def _number(value: Any, column: str, where: str) -> float | None:
    """A manifest number: plain, finite, not negative and within NUMBER_LIMITS. Anything
    else stops the run naming the file, row and column (like every manifest problem)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise SourceError(f"{where}: column {column!r} has {value!r}, not a number")
    text = str(value).strip() if isinstance(value, str) else None
    if text is not None and "," in text:
        if not _THOUSANDS.match(text):
            raise SourceError(f"{where}: column {column!r} has {value!r}: a decimal comma is ambiguous",
                              hint="write decimals with a point, like 12.50")
        text = text.replace(",", "")
    try:
        number = float(text) if text is not None else float(value)
    except (TypeError, ValueError):
        raise SourceError(
            f"{where}: column {column!r} has {value!r}, not a number",
            hint="use plain numbers like 19.99 (no currency symbols)",
        ) from None
    if math.isnan(number):
        return None
    if not math.isfinite(number) or number < 0 or number > NUMBER_LIMITS[column]:
        raise SourceError(
            f"{where}: column {column!r} has {value!r}, outside 0 to {NUMBER_LIMITS[column]:g}",
            hint=f"{column} must be a finite number, not negative; leave it empty when unknown",
        )
    return number


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    text = str(value).strip()
    return text or None


def _capped(value: str | None, column: str, where: str, limit: int, setting: str) -> str | None:
    """``value`` when it is at most ``limit`` characters (0: no cap); else a SourceError."""
    if value is not None and 0 < limit < len(value):
        raise SourceError(f"{where}: column {column[:100]!r} holds {len(value):,} characters, over the "
                          f"{limit:,} allowed", hint=f"shorten it, or raise the {setting} setting")
    return value


def _attributes(row: dict[str, Any], where: str, limit: int) -> dict[str, Any]:
    """Every column that is not a known one, its name and text capped at ``limit``."""
    out = {}
    for k, v in row.items():
        if k in KNOWN_COLUMNS or k is None:
            continue
        _capped(str(k), "(a column name)", where, limit, "manifest_max_text_chars")
        value = v if isinstance(v, (int, float)) and not isinstance(v, bool) else _text(v)
        if isinstance(value, str):
            _capped(value, str(k), where, limit, "manifest_max_text_chars")
        if value is not None:
            out[k] = value
    return out


def read_manifest(path: Path, *, max_id_chars: int = MAX_ID_CHARS,
                  max_text_chars: int = MAX_TEXT_CHARS) -> list[ProductRecord]:
    path = path.resolve()
    kind = MANIFEST_SUFFIXES[path.suffix.lower()]
    columns, rows = _rows(path, kind)
    if "image" not in columns:
        raise SourceError(
            f"{path}: no 'image' column (found: {', '.join(columns) or 'none'})",
            hint="add an 'image' column with each image's path relative to the manifest",
        )
    base = path.parent
    records: list[ProductRecord] = []
    seen: dict[str, int] = {}
    # rows are numbered as a person sees them in the file: CSV counts the header line
    first_row = 2 if kind == "csv" else 1
    for number, row in enumerate(rows, start=first_row):
        where = f"{path.name} row {number}"
        try:
            texts = {c: _capped(_text(row.get(c)), c, where, max_text_chars, "manifest_max_text_chars")
                     for c in ("image", *TEXT_FIELDS)}
            attributes = _attributes(row, where, max_text_chars)
        except RecursionError:  # str() of a value nested past Python's stack
            raise SourceError(f"{where}: a value nests too deeply to read",
                              hint="attributes are plain values, lists or shallow objects") from None
        image = texts["image"]
        if not image:
            raise SourceError(f"{where}: empty 'image' value")
        url, full, default_id = _image_location(image, base, where)
        product_id = _capped(_text(row.get("id")) or default_id, "id", where, max_id_chars,
                             "manifest_max_id_chars")
        if product_id in seen:
            raise SourceError(
                f"{where}: duplicate id {product_id!r} (first seen at row {seen[product_id]})",
                hint="every product needs its own id",
            )
        seen[product_id] = number
        records.append(ProductRecord(
            id=product_id, image_path=full, image_url=url, attributes=attributes,
            **{c: texts[c] for c in TEXT_FIELDS},
            **{c: _number(row.get(c), c, where) for c in NUMERIC_FIELDS}))
    records.sort(key=lambda r: r.id)
    return records


def _image_location(image: str, base: Path, where: str) -> tuple[str | None, Path | None, str]:
    """(URL, absolute path, default id) of a manifest's ``image`` value. A URL's default id
    is the URL itself. ``file://`` URLs, like plain paths, must stay inside the manifest's
    folder: a manifest is data, and must not read the machine's other files."""
    scheme = url_scheme(image)
    if scheme is not None:
        try:
            check_url(image)
        except SourceError as exc:
            raise SourceError(f"{where}: {exc.message}", hint=exc.hint) from None
        if scheme == "file":
            from urllib.parse import unquote, urlsplit

            parts = urlsplit(image)
            if parts.netloc not in ("", "localhost"):
                raise SourceError(f"{where}: {image!r} names another host; file:// URLs are local")
            local = Path(unquote(parts.path)).resolve()
            if not local.is_relative_to(base):
                raise SourceError(
                    f"{where}: image URL {image!r} is outside the manifest's folder",
                    hint="file:// URLs, like paths, must stay inside the manifest's folder",
                )
        return image, None, image
    rel = PurePosixPath(image.replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts:
        raise SourceError(
            f"{where}: image path {image!r} escapes the manifest's folder",
            hint="image paths must be relative to the manifest and stay inside its folder",
        )
    full = (base / rel).resolve()
    try:
        full.relative_to(base)
    except ValueError:  # a symlink pointing outside
        raise SourceError(f"{where}: image path {image!r} escapes the manifest's folder") from None
    return None, full, rel.as_posix()
