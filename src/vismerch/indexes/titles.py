"""Title and description vectors of a store's products (the offline text encoder).

They are kept in the store as the ``text`` backend: one row per distinct text, keyed by
``text_key`` (SHA-256 of the normalised text) in the usual ``shards``/``features`` tables and
``features/text/*.parquet`` shards, so a title is encoded once, at the ingest that brings
it, and a query is the only text encoded per search.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from vismerch.catalog.store import Store

log = logging.getLogger("vismerch.titles")

TEXT_BACKEND = "text"


def product_text(title: str | None, description: str | None) -> str:
    """The text embedded for a product: title, then description."""
    parts = [" ".join(str(p).split()) for p in (title, description) if p and str(p).strip()]
    return ". ".join(parts)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_vectors(store: Store, rows: list[Any]) -> tuple[list[str], np.ndarray | None]:
    """(text keys, their vectors as one float32 matrix) from the shards ``rows`` point at."""
    from vismerch.catalog.shards import read_shard_or_none

    by_path: dict[str, list[Any]] = {}
    for row in rows:
        by_path.setdefault(row["path"], []).append(row)
    keys: list[str] = []
    blocks: list[np.ndarray] = []
    for path, items in by_path.items():
        data = read_shard_or_none(store.path / path, columns=["vector"])
        if data is None:  # a missing or damaged cache shard: those texts are encoded again
            continue
        blocks.append(data["vector"][np.array([row["row"] for row in items])].astype(np.float32))
        keys.extend(row["sha256"] for row in items)
    return keys, (np.concatenate(blocks) if blocks else None)


def text_features(store: Store, encoder: Any | None = None, write: bool = True,
                  products: Sequence[Any] | None = None) -> tuple[list[str], np.ndarray]:
    """(product ids, L2-normalised title+description vectors) for ok products with text
    (``products``: the store's ok products, when the caller already read them).

    Embeddings already cached in the store are reused; missing ones are computed with the
    offline text encoder and, when ``write``, appended as a ``text`` shard.
    """
    from vismerch.features.base import fingerprint_key

    products = store.products() if products is None else products
    texts = {p.id: product_text(p.title, p.description) for p in products}
    texts = {pid: t for pid, t in texts.items() if t}
    if not texts:
        return [], np.zeros((0, 0), np.float32)
    if encoder is None:
        from vismerch.features.text import TextBackend

        encoder = TextBackend()
    fingerprint = fingerprint_key(encoder.fingerprint)
    keys = {pid: text_key(t) for pid, t in texts.items()}
    rows = store.db.execute(
        "SELECT f.sha256, f.row, s.path FROM features f JOIN shards s ON s.id = f.shard_id "
        "WHERE f.backend = ? AND f.fingerprint = ?",
        (TEXT_BACKEND, fingerprint),
    ).fetchall()
    wanted = set(keys.values())
    found, matrix = _read_vectors(store, [r for r in rows if r["sha256"] in wanted])
    position = {key: i for i, key in enumerate(found)}
    missing = sorted(wanted - position.keys())
    if missing:
        by_key = {keys[pid]: texts[pid] for pid in keys}
        vectors = encoder.encode_texts([by_key[k] for k in missing])
        matrix = vectors if matrix is None else np.concatenate([matrix, vectors])
        position.update((key, len(found) + i) for i, key in enumerate(missing))
        if write:
            _write_text_shard(store, missing, vectors, fingerprint)
    ids = sorted(keys)
    matrix = matrix[np.array([position[keys[pid]] for pid in ids])]
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)  # float16 round trip
    return ids, matrix


def _write_text_shard(store: Store, keys: list[str], vectors: np.ndarray, fingerprint: str) -> None:
    from vismerch.catalog.shards import record_shard, write_shard

    try:
        path = write_shard(store.path, TEXT_BACKEND, f"part-text-{uuid.uuid4().hex[:12]}", keys, vectors, {})
        with store.transaction() as con:
            spec_key = json.dumps({"backend": TEXT_BACKEND})
            record_shard(con, TEXT_BACKEND, fingerprint, spec_key, path, keys)
    except Exception as exc:  # a read-only store still answers, just without the cache
        log.warning("could not cache text embeddings in %s: %s", store.path, exc)
