"""Thumbnail packs: each ingest task's thumbnails in one file, ``thumbs/packs/<name>.pack``.

A pack is the task's encoded thumbnails (JPEG or WebP bytes) one after another; the
``thumbs`` table maps an image hash to its pack, byte range and format. One file per task
instead of one per image: two workers creating and renaming files in one directory,
while the driver's commits fsync, spent 0.54 ms per thumbnail (``benchmarks/ingest.py``,
2 workers, 2,000 images; the JPEG encode is 0.14 of it); a pack is one create and one
rename per task. Packs are written like shards (temp name, rename; fsynced before the commit that
names them) and count only once the task's transaction names them, so a killed run
leaves at most an orphan file, which the next ingest removes.

Stores written before packs keep ``thumbs/<sha256>.jpg`` (or ``.webp``) files; readers
fall back to them.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("vismerch.thumbs")

PACK_DIR = "thumbs/packs"  # apart from the per-image files of older stores: the orphan
#                            sweep of every ingest lists only packs
PACK_SUFFIX = ".pack"
MEDIA_TYPES = {"jpeg": "image/jpeg", "webp": "image/webp"}
LEGACY_FILES = ((".jpg", "jpeg"), (".webp", "webp"))  # thumbs/<sha256><suffix>, before packs


@dataclass(frozen=True)
class PackedThumb:
    """Where one image's thumbnail lies: ``(sha256, pack, start, length, format)``."""

    sha256: str
    pack: str  # relative to the store
    start: int
    length: int
    format: str


@dataclass(frozen=True)
class Thumbnail:
    data: bytes
    format: str  # a thumb_format value: jpeg | webp

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES.get(self.format, "application/octet-stream")


def write_pack(store_path: Path, blobs: list[tuple[str, bytes]], fmt: str,
               sync: bool = True) -> list[PackedThumb]:
    """Write ``[(sha256, encoded bytes)]`` as one new pack under ``thumbs/packs/``; where each one
    lies. Nothing is written for an empty list. ``sync=False`` leaves the fsync to whoever
    commits the pack (the ingest driver does)."""
    if not blobs:
        return []
    rel = f"{PACK_DIR}/{uuid.uuid4().hex}{PACK_SUFFIX}"
    final = store_path / rel
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp")
    placed, start = [], 0
    with open(tmp, "wb") as fh:
        for sha, data in blobs:
            fh.write(data)
            placed.append(PackedThumb(sha, rel, start, len(data), fmt))
            start += len(data)
        if sync:  # the bytes reach the disk before the name does
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, final)
    return placed


def read_packed(store_path: Path, pack: str, start: int, length: int) -> bytes | None:
    """The bytes at ``start`` of a pack, or None (with a warning) when the pack is missing
    or shorter than its row says: the product shows no thumbnail, nothing fails."""
    path = store_path / pack
    try:
        with open(path, "rb") as fh:
            data = os.pread(fh.fileno(), length, start)
    except OSError as exc:
        log.warning("thumbnail pack %s cannot be read (%s)", path, exc)
        return None
    if len(data) != length:
        log.warning("thumbnail pack %s is shorter than the store says (damaged)", path)
        return None
    return data


def read_legacy(store_path: Path, sha256: str) -> Thumbnail | None:
    """A thumbnail file of a store written before packs, or None."""
    for suffix, fmt in LEGACY_FILES:
        try:
            return Thumbnail((store_path / "thumbs" / f"{sha256}{suffix}").read_bytes(), fmt)
        except OSError:
            continue
    return None


def has_legacy(store_path: Path, sha256: str) -> bool:
    return any((store_path / "thumbs" / f"{sha256}{suffix}").is_file() for suffix, _ in LEGACY_FILES)


def record_thumbs(con, placed: list[PackedThumb]) -> None:
    """Inside the caller's transaction: point each image hash at its packed thumbnail."""
    con.executemany(
        "INSERT OR REPLACE INTO thumbs (sha256, pack, start, length, format) VALUES (?,?,?,?,?)",
        [(t.sha256, t.pack, t.start, t.length, t.format) for t in placed],
    )


def forget_missing_packs(con, store_path: Path) -> list[str]:
    """Inside the caller's transaction: drop the rows of packs whose file is gone (deleted
    to save space, or lost), so those products count as having no thumbnail."""
    gone = [pack for (pack,) in con.execute("SELECT DISTINCT pack FROM thumbs")
            if not (store_path / pack).is_file()]
    con.executemany("DELETE FROM thumbs WHERE pack = ?", [(pack,) for pack in gone])
    return gone


def remove_orphan_packs(store_path: Path, known: set[str]) -> int:
    """Delete packs no row names (a run killed between rename and commit) and temp files
    of packs. Returns how many were removed."""
    root = store_path / PACK_DIR
    if not root.is_dir():
        return 0
    removed = 0
    for path in root.iterdir():
        name = path.name
        orphan = name.endswith(PACK_SUFFIX) and f"{PACK_DIR}/{name}" not in known
        if orphan or (name.startswith(".") and name.endswith(f"{PACK_SUFFIX}.tmp")):
            path.unlink(missing_ok=True)
            removed += 1
    return removed
