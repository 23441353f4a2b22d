"""Semantic search: "red floral summer dress" -> products.

Up to three rankings are fused by reciprocal rank fusion:
- text -> image: the query through the CLIP/SigLIP text tower against the stored image
  vectors (the encoder is rebuilt from the vectors' fingerprint, so they always match);
- text -> text: the query through the offline sentence encoder against the products'
  title + description embeddings;
- colour (optional): products ranked by the share of their foreground near the colour; it
  is also a constraint: only products with at least ``search_colour_min_share`` (10 %) of
  their foreground near the colour are returned.

Title/description embeddings are cached in the store as the ``text`` backend: one row
per distinct text, keyed by ``text_key`` (SHA-256 of the normalised text) in the usual
``shards``/``features`` tables and ``features/text/*.parquet`` shards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from vismerch.config import setting
from vismerch.errors import UsageError
from vismerch.features.base import encoder_for, list_backends

log = logging.getLogger("vismerch.semantic")

TEXT_BACKEND = "text"
QUERY_TEMPLATES = ("{}", "a photo of {}.", "a product photo of {}.")


# --------------------------------------------------------------------------- neural vectors


def load_neural(store: Any, backend: str | None = None, device: str = "cpu"):
    """(Features, encoder) of the store's neural image vectors; UsageError if it has none."""
    name = store.pick_backend(backend, tuple(list_backends(text_tower=True)))
    if name is None:
        raise UsageError(
            f"{store.path} has no neural image features",
            hint="ingest with one: vismerch ingest DIR --store S --backend clip [--model PATH]",
        )
    features = store.load_features(name)
    if not len(features):
        raise UsageError(f"{store.path} has no {name} features for its products")
    return features, encoder_for(features.fingerprint, device=device)


def query_vector(encoder: Any, query: str) -> np.ndarray:
    """Query embedding through the image model's text tower (a small prompt ensemble)."""
    vectors = encoder.encode_texts([t.format(query) for t in QUERY_TEMPLATES])
    v = vectors.mean(axis=0)
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


# --------------------------------------------------------------------------- text vectors


def product_text(title: str | None, description: str | None) -> str:
    """The text embedded for a product: title, then description."""
    parts = [" ".join(str(p).split()) for p in (title, description) if p and str(p).strip()]
    return ". ".join(parts)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_vectors(store: Any, rows: list[Any]) -> dict[str, np.ndarray]:
    from vismerch.catalog.shards import read_shard_or_none

    out: dict[str, np.ndarray] = {}
    by_path: dict[str, list[Any]] = {}
    for row in rows:
        by_path.setdefault(row["path"], []).append(row)
    for path, items in by_path.items():
        data = read_shard_or_none(store.path / path, columns=["vector"])
        if data is None:  # a missing or damaged cache shard: those texts are encoded again
            continue
        flat = data["vector"]
        for row in items:
            out[row["sha256"]] = flat[row["row"]].astype(np.float32)
    return out


def text_features(store: Any, encoder: Any | None = None, write: bool = True,
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
    cached = _read_vectors(store, [r for r in rows if r["sha256"] in wanted])
    missing = sorted(wanted - set(cached))
    if missing:
        by_key = {keys[pid]: texts[pid] for pid in keys}
        vectors = encoder.encode_texts([by_key[k] for k in missing])
        cached.update(zip(missing, vectors, strict=True))
        if write:
            _write_text_shard(store, missing, vectors, fingerprint)
    ids = sorted(keys)
    matrix = np.stack([cached[keys[pid]] for pid in ids]).astype(np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)  # float16 round trip
    return ids, matrix


def _write_text_shard(store: Any, keys: list[str], vectors: np.ndarray, fingerprint: str) -> None:
    from vismerch.catalog.shards import record_shard, write_shard

    try:
        path = write_shard(store.path, TEXT_BACKEND, f"part-text-{uuid.uuid4().hex[:12]}", keys, vectors, {})
        with store.transaction() as con:
            spec_key = json.dumps({"backend": TEXT_BACKEND})
            record_shard(con, TEXT_BACKEND, fingerprint, spec_key, path, keys)
    except Exception as exc:  # a read-only store still answers, just without the cache
        log.warning("could not cache text embeddings in %s: %s", store.path, exc)


# --------------------------------------------------------------------------- ranking


def _rank(
    ids: Sequence[str], scores: np.ndarray, allowed: set[str] | None, depth: int
) -> list[tuple[str, float]]:
    order = np.argsort(-scores, kind="stable")
    out = []
    for j in order:
        if allowed is None or ids[j] in allowed:
            out.append((ids[j], float(scores[j])))
            if len(out) >= depth:
                break
    return out


def colour_ranking(
    store: Any, colour: str, allowed: set[str] | None, min_share: float = 0.1,
    features: Any = None,
) -> list[tuple[str, float]]:
    """Products whose foreground is at least ``min_share`` near ``colour``, best first
    (scores from ``merch.search.colour_scores``: the share of the foreground near it)."""
    from vismerch.features.colour import parse_colour
    from vismerch.merch.search import search_by_colour

    lab = parse_colour(colour)
    features = store.load_features("colour") if features is None else features
    if not len(features):
        raise UsageError(f"{store.path} has no colour features to constrain by colour")
    mask = None if allowed is None else np.array([pid in allowed for pid in features.ids])
    return search_by_colour(
        features.ids,
        features.columns["palette_lab"],
        features.columns["palette_weight"],
        lab,
        len(features.ids),
        allowed_mask=mask,
        min_score=min_share,
    )


def semantic_search(
    store: Any,
    query: str,
    *,
    colour: str | None = None,
    category: str | None = None,
    k: int = 12,
    settings: Any = None,
    device: str = "cpu",
    backend: str | None = None,
    weights: dict[str, float] | None = None,
    cache: Any = None,
) -> list[tuple[str, float]]:
    """Hybrid search; returns ``[(product id, fused score)]``, best first.

    ``weights`` per ranking (``image``, ``text``, ``colour``) default to 1. ``cache`` (a
    ``service.Workspace``) supplies loaded features, indexes and encoders. Raises
    UsageError when the store can answer a text query neither by image nor by title.
    """
    if not query or not query.strip():
        raise UsageError("the search query is empty")
    weights = {"image": 1.0, "text": 1.0, "colour": 1.0, **(weights or {})}
    rrf_k = int(setting(settings, "search_rrf_k"))
    depth = max(int(setting(settings, "search_depth")), k)
    allowed: set[str] | None = None
    products = store.products()
    if category is not None:
        from vismerch.merch.similar import category_mask

        mask = category_mask([p.category for p in products], category)
        allowed = {p.id for p, keep in zip(products, mask, strict=True) if keep}
    rankings: list[list[tuple[str, float]]] = []
    used: list[float] = []
    if colour:
        min_share = float(setting(settings, "search_colour_min_share"))
        ranked = colour_ranking(store, colour, allowed, min_share,
                                cache.features("colour") if cache is not None else None)
        allowed = {pid for pid, _ in ranked}  # the colour is a constraint, not only a ranking
        rankings.append(ranked[:depth])
        used.append(weights["colour"])
    sources = 0
    name = store.pick_backend(backend, tuple(list_backends(text_tower=True)))
    if name is not None:
        from vismerch.search.stored import similarity_index

        # the FAISS index ingest saved (exact, or HNSW for large catalogs), not a scan
        index = similarity_index(store, name, settings) if cache is None else cache.similarity_index(name)
        if not len(index):
            raise UsageError(f"{store.path} has no {name} features for its products")
        encoder = (encoder_for(index.meta["fingerprint"], device=device) if cache is None
                   else cache.encoder(index.meta["fingerprint"]))
        rankings.append(index.search(query_vector(encoder, query), depth, allowed)[0])
        used.append(weights["image"])
        sources += 1
    ids, vectors = text_features(store, products=products, write=False)  # a read never writes
    if ids:
        from vismerch.features.text import TextBackend

        q = TextBackend().encode_texts([query])[0]
        rankings.append(_rank(ids, vectors @ q, allowed, depth))
        used.append(weights["text"])
        sources += 1
    if sources == 0:
        raise UsageError(
            f"{store.path} has neither neural image features nor product titles to search by text",
            hint="ingest with --backend clip (or siglip), or give the catalog titles; "
            "or search by colour alone: vismerch search STORE --colour red",
        )
    from vismerch.merch.search import reciprocal_rank_fusion

    # every ranking above is already limited to ``allowed``
    fused = reciprocal_rank_fusion(rankings, k=rrf_k, weights=used)
    return [(pid, float(score)) for pid, score in fused[:k]]


