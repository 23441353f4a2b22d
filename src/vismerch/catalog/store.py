"""The store: one directory holding a catalog's truth and its features.

- ``store.sqlite``: products, images, errors, tags, quality, duplicates, runs (WAL,
  every write in a transaction, schema version in ``PRAGMA user_version``);
- ``features/<backend>/part-*.parquet``: append-only feature shards, written to a temp
  name and renamed, and counted only once a row in ``shards`` names them;
- ``index/<backend>.faiss``: rebuilt from the shards after each ingest (and
  ``<backend>.white.faiss``, whitened, for a backend that asks: indexes/stored.py);
- ``thumbs/packs/<name>.pack``: small thumbnails for reports and the UI (JPEG, or WebP with
  ``thumb_format = "webp"``), one pack per ingest task, found through the ``thumbs``
  table (catalog/thumbs.py); stores from before packs keep ``thumbs/<sha256>.jpg`` files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vismerch.catalog.audit_context import record_pending
from vismerch.catalog.dbfile import (
    DB_NAME,
    can_write,
    check_database_file,
    connect,
    connect_read_only,
    connected,
    damaged,
    disk_full,
    track,
)
from vismerch.catalog.product import ProductFields
from vismerch.catalog.schema import MIGRATIONS, SCHEMA_VERSION
from vismerch.catalog.thumbs import Thumbnail, has_legacy, read_legacy, read_packed
from vismerch.errors import StoreError

THUMB_FORMATS = {  # thumb_format setting -> (Pillow format, save options)
    # JPEG q80 4:2:0 (the default): ~0.2 ms per 256 px thumbnail, ~4.9 KB; WebP method 0
    # (libwebp's fastest): ~1.1 ms, ~3.7 KB. See docs/decisions/0010-jpeg-thumbnails.md.
    "jpeg": ("JPEG", {"quality": 80, "subsampling": "4:2:0"}),
    "webp": ("WEBP", {"quality": 80, "method": 0}),
}


def write_descriptions(con: sqlite3.Connection,
                       described: list[tuple[str, list[tuple[str, str, float]],
                                             list[tuple[str, float, bool]], bool]]) -> None:
    """Replace the colour names, multicolour verdict and quality flags of images given as
    ``(sha, colours, flags, multicolour)``, inside the caller's transaction: one statement
    per table for all of them (a task's commit runs a few statements, not a few per image)."""
    keys = [(sha,) for sha, _, _, _ in described]
    con.executemany("DELETE FROM colours WHERE sha256 = ?", keys)
    con.executemany("INSERT INTO colours (sha256, rank, name, hex, weight) VALUES (?,?,?,?,?)",
                    [(sha, rank, name, hx, w) for sha, colours, _, _ in described
                     for rank, (name, hx, w) in enumerate(colours)])
    con.executemany("DELETE FROM multicolour WHERE sha256 = ?", keys)
    con.executemany("INSERT INTO multicolour (sha256) VALUES (?)",
                    [(sha,) for sha, _, _, mixed in described if mixed])
    con.executemany("DELETE FROM quality WHERE sha256 = ?", keys)
    con.executemany("INSERT INTO quality (sha256, name, value, flagged) VALUES (?,?,?,?)",
                    [(sha, name, value, int(flagged)) for sha, _, flags, _ in described
                     for name, value, flagged in flags])


def utc_timestamp() -> str:
    """The one timestamp format the store keeps: UTC, seconds, RFC 3339 (``...T12:00:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Product(ProductFields):
    """A product as the store keeps it (the catalog's fields are ``ProductFields``')."""

    id: str
    image_path: str
    sha256: str | None
    status: str
    width: int | None = None
    height: int | None = None


@dataclass
class Features:
    """Feature rows of one backend aligned with product ids (sorted)."""

    ids: list[str]
    vectors: np.ndarray  # (N, dim) float32
    columns: dict[str, np.ndarray]
    fingerprint: str | None

    def __len__(self) -> int:
        return len(self.ids)


class Store:
    """A vismerch store directory. Use ``Store.open(path, create=...)``."""

    def __init__(self, path: Path, db: sqlite3.Connection):
        self.path = path
        self.db = db
        self._writable = True  # Store.open without create starts read-only

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike, create: bool = False) -> Store:
        """Open a store. Without ``create`` the connection is read-only until the first
        ``transaction()`` (so read commands never write, and work on a read-only mount);
        a missing, empty or damaged ``store.sqlite`` is an error, never recreated."""
        path = Path(path)
        db_path = path / DB_NAME
        if not db_path.exists():
            if not create:
                raise StoreError(
                    f"{path} is not a vismerch store (no {DB_NAME})",
                    hint=f"create one with: vismerch ingest SOURCE --store {path}",
                    exit_code=2,
                )
            path.mkdir(parents=True, exist_ok=True)
        elif not connected(db_path):
            check_database_file(db_path)
        elif db_path.stat().st_size == 0:
            raise damaged(db_path, "0 bytes: a new empty database would hide the lost catalog")
        store = cls(path, connect_read_only(db_path) if not create else connect(db_path))
        store._writable = create
        store._opened = track(db_path, +1)
        if create:
            for sub in ("features", "index", "thumbs"):
                (path / sub).mkdir(exist_ok=True)
        try:
            store._migrate()
        except sqlite3.DatabaseError as exc:
            store.close()
            if disk_full(exc):  # not damage
                raise StoreError(
                    f"the disk holding {path} is full ({exc}); the store stays consistent: "
                    "the schema upgrade was rolled back", exit_code=2,
                    hint="free some space and run the same command again") from exc
            raise damaged(db_path, exc) from exc
        return store

    def _make_writable(self) -> None:
        """Swap the read-only connection for a read-write one (first write of a command)."""
        if getattr(self, "_writable", True):
            return
        db_path = self.path / DB_NAME
        if not can_write(self.path):
            raise StoreError(f"{self.path} is read-only: this command writes to the store",
                             hint="run it on a writable copy of the store", exit_code=2)
        self.db.close()
        self.db = connect(db_path)
        self._writable = True

    def close(self) -> None:
        self.db.close()
        opened, self._opened = getattr(self, "_opened", None), None
        if opened is not None:
            track(opened, -1)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # garbage fails here
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this vismerch ({SCHEMA_VERSION})",
                hint="upgrade vismerch to open this store",
            )
        if version < SCHEMA_VERSION and not can_write(self.path):
            raise StoreError(
                f"{self.path} has schema version {version} and is read-only; this vismerch "
                f"needs version {SCHEMA_VERSION}", exit_code=2,
                hint="open it once where it is writable (any write command upgrades it)",
            )
        for number in range(version, SCHEMA_VERSION):
            with self.transaction() as con:
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        con.execute(statement)
                con.execute(f"PRAGMA user_version = {number + 1}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error. Inside an
        audited CLI command the first one also holds its audit row (``audit_context``)."""
        self._make_writable()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
            record_pending(self.db)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- meta --------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as con:
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- products ----------------------------------------------------------------------
    def products(self, status: str | None = "ok") -> list[Product]:
        sql = (
            "SELECT p.*, i.width, i.height FROM products p "
            "LEFT JOIN images i ON i.sha256 = p.sha256"
        )
        args: tuple = ()
        if status is not None:
            sql += " WHERE p.status = ?"
            args = (status,)
        rows = self.db.execute(sql + " ORDER BY p.id", args).fetchall()
        return [_product(row) for row in rows]

    def product(self, product_id: str) -> Product | None:
        row = self.db.execute(
            "SELECT p.*, i.width, i.height FROM products p LEFT JOIN images i ON i.sha256 = p.sha256 "
            "WHERE p.id = ?",
            (product_id,),
        ).fetchone()
        return _product(row) if row else None

    def counts(self) -> dict[str, int]:
        rows = self.db.execute("SELECT status, COUNT(*) FROM products GROUP BY status").fetchall()
        return {row[0]: row[1] for row in rows}

    def errors(self, after: str | None = None, limit: int = -1) -> list[dict[str, Any]]:
        """Refused images by product id; ``after``/``limit`` page them (keyset, in SQL)."""
        rows = self.db.execute(
            "SELECT product_id, image_path, reason, detail FROM errors WHERE product_id > ?"
            " ORDER BY product_id LIMIT ?", ("" if after is None else after, int(limit))
        ).fetchall()
        return [dict(row) for row in rows]

    # -- features ----------------------------------------------------------------------
    def feature_backends(self) -> list[str]:
        """Backends the store has committed features for, sorted."""
        rows = self.db.execute("SELECT DISTINCT backend FROM shards ORDER BY backend").fetchall()
        return [row[0] for row in rows]

    def pick_backend(self, prefer: str | None, order: tuple[str, ...]) -> str | None:
        """``prefer`` when the store has its features (else a UsageError naming what it
        has), or the first backend of ``order`` it has, or None."""
        from vismerch.errors import UsageError

        have = self.feature_backends()
        if prefer:
            if prefer not in have:
                raise UsageError(
                    f"the store has no {prefer!r} features", hint=f"it has: {', '.join(have) or 'none'}"
                )
            return prefer
        return next((name for name in order if name in have), None)

    def fingerprints(self, backend: str) -> list[str]:
        rows = self.db.execute(
            "SELECT fingerprint, MAX(id) AS newest FROM shards WHERE backend = ? "
            "GROUP BY fingerprint ORDER BY newest DESC",
            (backend,),
        ).fetchall()
        return [row[0] for row in rows]

    def load_features(self, backend: str = "colour", fingerprint: str | None = None,
                      preread: dict[str, dict[str, np.ndarray]] | None = None) -> Features:
        """Vectors and columns of ``backend`` for every ok product whose image has them.

        Only one fingerprint is ever loaded (the newest unless named), so vectors of
        different models or precisions never mix. ``preread``: shards the caller already
        read (``read_shard``), by path relative to the store; those used are taken out.
        """
        from vismerch.catalog.shards import gather_rows

        if fingerprint is None:
            known = self.fingerprints(backend)
            if not known:
                return Features([], np.zeros((0, 0), np.float32), {}, None)
            fingerprint = known[0]
        rows = self.db.execute(
            "SELECT p.id, f.shard_id, f.row, s.path FROM products p "
            "JOIN features f ON f.sha256 = p.sha256 AND f.backend = ? AND f.fingerprint = ? "
            "JOIN shards s ON s.id = f.shard_id WHERE p.status = 'ok' ORDER BY p.id",
            (backend, fingerprint),
        ).fetchall()
        if not rows:
            return Features([], np.zeros((0, 0), np.float32), {}, fingerprint)
        ids = [row["id"] for row in rows]
        wanted = [(row["path"], row["row"]) for row in rows]
        vectors, columns, lost = gather_rows(self.path, wanted, preread)
        if vectors is None:  # every shard is gone
            return Features([], np.zeros((0, 0), np.float32), {}, fingerprint)
        if lost:  # rows of missing or damaged shards: left out, never a crash
            keep = np.setdiff1d(np.arange(len(ids)), np.array(lost))
            ids = [ids[i] for i in keep]
            vectors = vectors[keep]
            columns = {name: array[keep] for name, array in columns.items()}
        return Features(ids, vectors, columns, fingerprint)

    # -- derived views -----------------------------------------------------------------
    def colours(self) -> dict[str, list[dict[str, Any]]]:
        rows = self.db.execute(
            "SELECT p.id, c.name, c.hex, c.weight FROM products p JOIN colours c ON c.sha256 = p.sha256 "
            "WHERE p.status = 'ok' ORDER BY p.id, c.rank"
        ).fetchall()
        out: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            out.setdefault(row["id"], []).append(
                {"name": row["name"], "hex": row["hex"], "weight": round(row["weight"], 4)}
            )
        return out

    def multicolour(self) -> set[str]:
        """Ids of the ok products judged multicolour (no named colour holds a clear majority)."""
        rows = self.db.execute(
            "SELECT p.id FROM products p JOIN multicolour m ON m.sha256 = p.sha256 "
            "WHERE p.status = 'ok'").fetchall()
        return {row[0] for row in rows}

    def quality(self, flagged_only: bool = True) -> dict[str, list[dict[str, Any]]]:
        sql = (
            "SELECT p.id, q.name, q.value, q.flagged FROM products p JOIN quality q "
            "ON q.sha256 = p.sha256 WHERE p.status = 'ok'"
        )
        if flagged_only:
            sql += " AND q.flagged = 1"
        out: dict[str, list[dict[str, Any]]] = {}
        for row in self.db.execute(sql + " ORDER BY p.id, q.name").fetchall():
            item = {"name": row["name"], "value": round(float(row["value"]), 4)}
            if not flagged_only:
                item["flagged"] = bool(row["flagged"])
            out.setdefault(row["id"], []).append(item)
        return out

    def tags(self, products: list[Product] | None = None,
             colours: dict[str, list[dict[str, Any]]] | None = None,
             flags: dict[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
        """Colours, the multicolour verdict and flags per ok product; a caller that already
        read any of the three passes it in rather than have it read again."""
        colours = self.colours() if colours is None else colours
        flags = self.quality() if flags is None else flags
        products = self.products() if products is None else products
        multi = self.multicolour()
        return [
            {"id": p.id, "colours": colours.get(p.id, []), "multicolour": p.id in multi,
             "flags": flags.get(p.id, [])}
            for p in products
        ]

    def audit(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT product_id AS id, kind, listed, observed, distance FROM audit ORDER BY distance DESC"
        ).fetchall()
        return [dict(row) for row in rows]

    def dup_groups(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT group_id, product_id, representative FROM dup_groups ORDER BY group_id, product_id"
        ).fetchall()
        groups: dict[int, dict[str, Any]] = {}
        for row in rows:
            g = groups.setdefault(row[0], {"group": row[0], "representative": None, "members": []})
            g["members"].append(row[1])
            if row[2]:
                g["representative"] = row[1]
        return list(groups.values())

    def _thumb_row(self, product_id: str) -> tuple[str | None, Any]:
        """(the product's image hash, its ``thumbs`` row or None)."""
        row = self.db.execute(
            "SELECT p.sha256, t.pack, t.start, t.length, t.format FROM products p "
            "LEFT JOIN thumbs t ON t.sha256 = p.sha256 WHERE p.id = ?", (product_id,)).fetchone()
        if not row or not row[0]:
            return None, None
        return row[0], (row if row[1] is not None else None)

    def thumbnail(self, product_id: str) -> Thumbnail | None:
        """The product's thumbnail (bytes and format), or None when it has none (no image,
        thumbnails off, or a missing or damaged pack: logged, never raised)."""
        sha, row = self._thumb_row(product_id)
        if sha is None:
            return None
        if row is None:
            return read_legacy(self.path, sha)
        data = read_packed(self.path, row[1], row[2], row[3])
        return Thumbnail(data, row[4]) if data is not None else None

    def has_thumbnail(self, product_id: str) -> bool:
        """Whether the store holds a thumbnail for the product (without reading it)."""
        sha, row = self._thumb_row(product_id)
        if sha is None:
            return False
        return row is not None or has_legacy(self.path, sha)

    def thumb_packs(self) -> set[str]:
        """Every pack a ``thumbs`` row names (the rest are orphans of a killed run)."""
        return {row[0] for row in self.db.execute("SELECT DISTINCT pack FROM thumbs")}


def _product(row: sqlite3.Row) -> Product:
    data = dict(row)
    data.pop("updated_run", None)
    data.pop("file_size", None)
    data.pop("file_mtime", None)
    data["attributes"] = json.loads(data.get("attributes") or "{}")
    return Product(**data)
