"""Semantic search: "red floral summer dress" -> products.

Up to three rankings are fused by reciprocal rank fusion:
- text -> image: the query through the CLIP/SigLIP text tower against the stored image
  vectors (the encoder is rebuilt from the vectors' fingerprint, so they always match);
- text -> text: the query through the offline sentence encoder against the products'
  title + description embeddings;
- colour (optional): products ranked by the share of their foreground near the colour; it
  is also a constraint: only products with at least ``search_colour_min_share`` (10 %) of
  their foreground near the colour are returned.

Every ranking comes from an index loaded once per process (``indexes.catalog``: titles
and palettes, built at ingest; the neural image index): per query only the query is
encoded. Title/description vectors are kept in the store (``indexes.titles``).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from vismerch.config import setting
from vismerch.errors import UsageError

log = logging.getLogger("vismerch.semantic")

NEURAL_BACKENDS = ("siglip", "clip", "openclip")
QUERY_TEMPLATES = ("{}", "a photo of {}.", "a product photo of {}.")


# --------------------------------------------------------------------------- neural vectors


def load_neural(store: Any, backend: str | None = None, device: str = "cpu"):
    """(Features, encoder) of the store's neural image vectors; UsageError if it has none."""
    from vismerch.features.neural import backend_from_fingerprint

    name = store.pick_backend(backend, NEURAL_BACKENDS)
    if name is None:
        raise UsageError(
            f"{store.path} has no neural image features",
            hint="ingest with one: vismerch ingest DIR --store S --backend clip [--model PATH]",
        )
    features = store.load_features(name)
    if not len(features):
        raise UsageError(f"{store.path} has no {name} features for its products")
    return features, backend_from_fingerprint(features.fingerprint, device=device)


def query_vector(encoder: Any, query: str) -> np.ndarray:
    """Query embedding through the image model's text tower (a small prompt ensemble)."""
    vectors = encoder.encode_texts([t.format(query) for t in QUERY_TEMPLATES])
    v = vectors.mean(axis=0)
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


# --------------------------------------------------------------------------- ranking


def colour_ranking(bundle: Any, colour: str, allowed: np.ndarray | None, min_share: float = 0.1,
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores) of the products whose foreground is at least ``min_share`` near
    ``colour``, best first (scores: the share of the foreground near it, ``merch.search``),
    from the palette index."""
    from vismerch.features.colour import parse_colour

    if not len(bundle.palettes):
        raise UsageError("the store has no colour features to constrain by colour")
    return bundle.colour_rows(parse_colour(colour), len(bundle), allowed, min_score=min_share)


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
    ``service.Workspace``) supplies the loaded indexes and encoders. Raises UsageError when
    the store can answer a text query neither by image nor by title.
    """
    from vismerch.merch.search import reciprocal_rank_fusion

    if not query or not query.strip():
        raise UsageError("the search query is empty")
    weights = {"image": 1.0, "text": 1.0, "colour": 1.0, **(weights or {})}
    depth = max(int(setting(settings, "search_depth")), k)
    if cache is None:
        from vismerch.indexes.catalog import search_index

        bundle = search_index(store, settings)
    else:
        bundle = cache.search_index()
    allowed = bundle.mask(category=category)  # over the bundle's rows; None: all
    rankings: list[list[tuple[str, float]]] = []
    used: list[float] = []
    if colour:
        rows, scores = colour_ranking(bundle, colour, allowed,
                                      float(setting(settings, "search_colour_min_share")))
        allowed = np.zeros(len(bundle), bool)  # the colour is a constraint, not only a ranking
        allowed[rows] = True
        rankings.append(bundle.named(rows[:depth], scores[:depth]))
        used.append(weights["colour"])
    sources = 0
    name = store.pick_backend(backend, NEURAL_BACKENDS)
    if name is not None:
        rankings.append(_image_ranking(store, name, query, bundle, allowed, depth, settings, device, cache))
        used.append(weights["image"])
        sources += 1
    if bundle.titles is not None and len(bundle.titles):
        from vismerch.features.text import TextBackend

        encoder = TextBackend() if cache is None else cache.text_encoder()
        q = encoder.encode_texts([query])
        rankings.append(bundle.titles.search(q, depth, bundle.index_mask(bundle.titles.ids, allowed))[0])
        used.append(weights["text"])
        sources += 1
    if sources == 0:
        raise UsageError(
            f"{store.path} has neither neural image features nor product titles to search by text",
            hint="ingest with --backend clip (or siglip), or give the catalog titles; "
            "or search by colour alone: vismerch search STORE --colour red",
        )
    # every ranking above is already limited to ``allowed``
    fused = reciprocal_rank_fusion(rankings, k=int(setting(settings, "search_rrf_k")), weights=used)
    return [(pid, float(score)) for pid, score in fused[:k]]


def _image_ranking(store: Any, name: str, query: str, bundle: Any, allowed: np.ndarray | None,
                   depth: int, settings: Any, device: str, cache: Any) -> list[tuple[str, float]]:
    """Text -> image: the query through the neural model's text tower, against the image
    index ingest saved (exact, or approximate for large catalogs)."""
    from vismerch.features.neural import backend_from_fingerprint
    from vismerch.indexes.stored import similarity_index

    index = similarity_index(store, name, settings) if cache is None else cache.similarity_index(name)
    if not len(index):
        raise UsageError(f"{store.path} has no {name} features for its products")
    encoder = (backend_from_fingerprint(index.meta["fingerprint"], device=device) if cache is None
               else cache.encoder(index.meta["fingerprint"]))
    return index.search(query_vector(encoder, query), depth, bundle.index_mask(index.ids, allowed))[0]
