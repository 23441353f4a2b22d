"""The search bundle: what text, colour, hybrid and similar search read, built once per ingest.

For the store's ok products (sorted by id, the catalog's rows) it holds the category and
stock of each row (filters as numpy masks, no product read per query), the palette index
(``palette.PaletteIndex``) and the title index (a ``VectorIndex`` over the stored title and
description vectors, ``titles.py``). Derive builds it at the end of every ingest and saves it
under ``index/search/``: ``catalog.json`` (format, build token, the data key it was built
at, ids, category names), ``catalog.npz``, ``palettes.npz``, ``titles.faiss`` (+ ids). The
manifest ``catalog.json`` is renamed into place last and every file carries the build's
token, so a half-written set is seen as missing. A store ingested before the bundle existed
(or whose last ingest stopped before derive) gets it built once, on first use, with a
warning saying so; ``vismerch reindex`` builds it ahead.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vismerch.indexes.palette import PaletteIndex

if TYPE_CHECKING:
    from vismerch.catalog.store import Store
    from vismerch.config import Settings

log = logging.getLogger("vismerch.search")

FORMAT = 1
DIR = Path("index") / "search"
MANIFEST = "catalog.json"


def normalise_category(text: Any) -> str | None:
    """Categories compare case- and space-insensitively; empty is none."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return None
    return str(text).strip().casefold() or None


def data_key(store: Store) -> str:
    """Changes with every ingest run and every committed feature shard (two index reads)."""
    row = store.db.execute("SELECT (SELECT COALESCE(MAX(id), 0) FROM shards),"
                           " (SELECT COALESCE(MAX(id), 0) FROM runs)").fetchone()
    return f"{row[0]}:{row[1]}"


@dataclass
class CatalogIndex:
    ids: list[str]
    category: np.ndarray          # (n,) int32 into ``categories``, -1 for none
    categories: list[str]
    stock: np.ndarray             # (n,) float32, NaN when unknown
    palettes: PaletteIndex
    titles: Any                   # VectorIndex of title vectors (ids: product ids) or None
    text_fingerprint: str | None
    key: str
    _positions: dict[str, int] | None = field(default=None, repr=False)
    _aligned: dict[int, tuple[Sequence[str], np.ndarray]] = field(default_factory=dict, repr=False)
    _palette_of: np.ndarray | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def positions(self) -> dict[str, int]:
        if self._positions is None:
            self._positions = {pid: i for i, pid in enumerate(self.ids)}
        return self._positions

    def mask(self, category: str | None = None, in_stock: bool = False) -> np.ndarray | None:
        """Rows in ``category`` (None: any) and, with ``in_stock``, with stock > 0 or
        unknown; None when nothing is filtered."""
        if category is None and not in_stock:
            return None
        keep = np.ones(len(self), bool)
        want = normalise_category(category)
        if want is not None:
            code = self.categories.index(want) if want in self.categories else -2  # -2: no row
            keep &= self.category == code
        if in_stock:
            keep &= np.isnan(self.stock) | (self.stock > 0)
        return keep

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Catalog row of each id (-1 when not a row)."""
        positions = self.positions
        return np.fromiter((positions.get(i, -1) for i in ids), np.int64, count=len(ids))

    def index_rows(self, ids: Sequence[str]) -> np.ndarray:
        """``rows_of`` an index's id list, kept for as long as this bundle (one per index)."""
        with self._lock:
            hit = self._aligned.get(id(ids))
            if hit is not None and hit[0] is ids:
                return hit[1]
            rows = self.rows_of(ids)
            while len(self._aligned) >= 4:  # indexes reloaded during an ingest: keep the newest
                self._aligned.pop(next(iter(self._aligned)))
            self._aligned[id(ids)] = (ids, rows)
            return rows

    def index_mask(self, ids: Sequence[str], allowed: np.ndarray | None) -> np.ndarray | None:
        """``allowed`` (a mask over catalog rows) as a mask over the rows of an index named by
        ``ids``; None stays None (everything allowed)."""
        if allowed is None:
            return None
        rows = self.index_rows(ids)
        return np.where(rows >= 0, allowed[np.maximum(rows, 0)], False)

    def colour_rows(self, query_lab: np.ndarray, k: int, allowed: np.ndarray | None = None, *,
                    min_score: float, sigma: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(rows, colour scores) of the top ``k`` scoring at least ``min_score``, best first,
        ties by id."""
        from vismerch.indexes.palette import COLOUR_SIGMA

        return self.palettes.search(query_lab, k, allowed, min_score=min_score,
                                    sigma=COLOUR_SIGMA if sigma is None else sigma)

    def colour_share(self, rows: np.ndarray, query_lab: np.ndarray, sigma: float | None = None,
                     ) -> np.ndarray:
        """Colour scores of the given catalog rows (0 for a row without a palette)."""
        from vismerch.indexes.palette import COLOUR_SIGMA, colour_scores

        if self._palette_of is None:
            self._palette_of = np.full(len(self), -1, np.int64)
            self._palette_of[self.palettes.rows] = np.arange(len(self.palettes))
        pos = self._palette_of[np.asarray(rows, np.int64)]
        out = np.zeros(len(pos), np.float32)
        have = pos >= 0
        if have.any():
            out[have] = colour_scores(self.palettes.lab[pos[have]], self.palettes.weight[pos[have]],
                                      query_lab, sigma=COLOUR_SIGMA if sigma is None else sigma)
        return out

    def named(self, rows: np.ndarray, scores: np.ndarray) -> list[tuple[str, float]]:
        return [(self.ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist(), strict=True)]


# ------------------------------------------------------------------------------ build
def build(store: Store, settings: Settings, colour: Any = None, products: list[Any] | None = None,
          write_text: bool = True) -> CatalogIndex:
    """The bundle from what the store holds; title vectors missing from it are encoded (and
    kept in the store when ``write_text``). ``colour``/``products``: already loaded."""
    from vismerch.indexes.stored import build_index
    from vismerch.indexes.titles import text_features

    products = store.products() if products is None else products
    colour = store.load_features("colour") if colour is None else colour
    key = data_key(store)
    ids = [p.id for p in products]
    names = [normalise_category(p.category) for p in products]
    categories = sorted({c for c in names if c is not None})
    code = {c: i for i, c in enumerate(categories)}
    category = np.array([code.get(c, -1) if c is not None else -1 for c in names], np.int32)
    stock = np.array([np.nan if p.stock is None else float(p.stock) for p in products], np.float32)
    positions = {pid: i for i, pid in enumerate(ids)}
    if len(colour) and "palette_lab" in colour.columns:
        rows = np.array([positions.get(pid, -1) for pid in colour.ids], np.int64)
        have = rows >= 0
        palettes = PaletteIndex.build(rows[have], colour.columns["palette_lab"][have],
                                      colour.columns["palette_weight"][have])
    else:
        palettes = PaletteIndex.build(np.zeros(0, np.int64), np.zeros((0, 1, 3), np.float32),
                                      np.zeros((0, 1), np.float32))
    colour = None  # a large catalog's vectors need not stay while the titles are indexed
    titles, fingerprint = None, None
    if any(p.title or p.description for p in products):
        encoder = _text_encoder()
        if encoder is not None:
            fingerprint = _fingerprint(encoder)
            title_ids, vectors = text_features(store, encoder, write=write_text, products=products)
            if title_ids:
                titles = build_index(vectors, title_ids, settings, meta={"fingerprint": fingerprint})
        key = data_key(store)  # the text shard just written is part of what this saw
    return CatalogIndex(ids, category, categories, stock, palettes, titles, fingerprint, key,
                        _positions=positions)


def _text_encoder() -> Any:
    from vismerch.errors import VismerchError
    from vismerch.features.text import TextBackend

    try:
        return TextBackend()
    except VismerchError as exc:  # no text model installed: search by image vectors and colour
        log.warning("product titles are not indexed for text search: %s", exc.message)
        return None


def _fingerprint(encoder: Any) -> str:
    from vismerch.features.base import fingerprint_key

    return fingerprint_key(encoder.fingerprint)


# ------------------------------------------------------------------------------ disk
def save(bundle: CatalogIndex, store_path: Path) -> None:
    """Write the bundle under ``index/search/``; the manifest last."""
    directory = Path(store_path) / DIR
    directory.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    tmp = f".tmp-{os.getpid()}"
    with open(directory / f"catalog.npz{tmp}", "wb") as fh:
        np.savez(fh, category=bundle.category, stock=bundle.stock, token=np.array(token))
    os.replace(directory / f"catalog.npz{tmp}", directory / "catalog.npz")
    with open(directory / f"palettes.npz{tmp}", "wb") as fh:
        bundle.palettes.save(fh, token)
    os.replace(directory / f"palettes.npz{tmp}", directory / "palettes.npz")
    if bundle.titles is not None:
        bundle.titles.meta["token"] = token
        bundle.titles.save(directory, "titles")
    else:
        for name in ("titles.faiss", "titles.ids.json"):
            (directory / name).unlink(missing_ok=True)
    doc = {"format": FORMAT, "token": token, "key": bundle.key, "titles": bundle.titles is not None,
           "text_fingerprint": bundle.text_fingerprint, "categories": bundle.categories,
           "ids": bundle.ids}
    (directory / f"{MANIFEST}{tmp}").write_text(json.dumps(doc))
    os.replace(directory / f"{MANIFEST}{tmp}", directory / MANIFEST)


def stamp(store_path: Path) -> tuple[int, int] | None:
    """(inode, mtime) of the manifest: a new one means a new bundle; None when there is none."""
    try:
        st = (Path(store_path) / DIR / MANIFEST).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def load(store_path: Path, settings: Settings) -> CatalogIndex | None:
    """The saved bundle, or None when missing, of another format or half-written."""
    from vismerch.errors import StoreError
    from vismerch.indexes.stored import load_index

    directory = Path(store_path) / DIR
    try:
        doc = json.loads((directory / MANIFEST).read_text())
        if doc.get("format") != FORMAT:
            return None
        token = doc["token"]
        with np.load(directory / "catalog.npz") as data:
            if str(data["token"]) != token:
                return None
            category, stock = data["category"], data["stock"]
        palettes = PaletteIndex.load(directory / "palettes.npz", token)
        titles = load_index(directory, "titles", settings) if doc["titles"] else None
    except (OSError, ValueError, KeyError, StoreError):
        return None
    if palettes is None or (titles is not None and titles.meta.get("token") != token):
        return None
    if len(doc["ids"]) != len(category):
        return None
    return CatalogIndex(doc["ids"], category, doc["categories"], stock, palettes, titles,
                        doc.get("text_fingerprint"), doc["key"])


def refresh(store: Store, settings: Settings, colour: Any = None, products: list[Any] | None = None,
            ) -> CatalogIndex:
    """Build and save the bundle (derive, at the end of an ingest, and ``vismerch reindex``)."""
    bundle = build(store, settings, colour, products)
    save(bundle, store.path)
    return bundle


def search_index(store: Store, settings: Settings) -> CatalogIndex:
    """The saved bundle when it is current (or an ingest is writing the store now), else one
    built now: saved when the store is writable, kept in memory when it is not or while an
    ingest writes it (which saves its own at its end)."""
    from vismerch.catalog.lock import writer_holder

    bundle = load(store.path, settings)
    busy = writer_holder(store.path) is not None
    if bundle is not None and (busy or bundle.key == data_key(store)):
        return bundle
    if busy:
        return build(store, settings, write_text=False)
    why = "has none yet" if bundle is None else "is older than the store's last ingest"
    log.warning("%s: building the search indexes once (the store %s; `vismerch reindex %s` "
                "builds them ahead)", store.path, why, store.path)
    writable = os.access(store.path, os.W_OK)
    bundle = build(store, settings, write_text=writable)
    if writable:
        try:
            save(bundle, store.path)
        except OSError as exc:
            log.warning("could not save the search indexes in %s: %s", store.path, exc)
    return bundle
