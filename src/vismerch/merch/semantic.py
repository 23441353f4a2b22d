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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vismerch.config import setting
from vismerch.errors import UsageError
from vismerch.features.base import encoder_for, list_backends

if TYPE_CHECKING:
    from vismerch.catalog.store import Store
    from vismerch.config import Settings

log = logging.getLogger("vismerch.semantic")

QUERY_TEMPLATES = ("{}", "a photo of {}.", "a product photo of {}.")


# --------------------------------------------------------------------------- neural vectors


def load_neural(store: Store, backend: str | None = None, device: str = "cpu"):
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


# --------------------------------------------------------------------------- ranking


POSTFILTER_ROUNDS = 3  # a ranking under a colour: 4x, 16x, 64x its depth before the full set
POSTFILTER_MIN_ROWS = 50_000  # below, the full set at once is cheaper than reading on


@dataclass
class ColourConstraint:
    """Only products with at least ``min_share`` of their foreground near a colour."""

    bundle: Any
    lab: np.ndarray
    min_share: float

    def ranking(self, allowed: np.ndarray | None, depth: int) -> list[tuple[str, float]]:
        """The products closest to the colour (scores: the share of the foreground near it,
        ``merch.search``), best first, from the palette index."""
        rows, scores = self.bundle.colour_rows(self.lab, depth, allowed, min_score=self.min_share)
        return self.bundle.named(rows, scores)

    def within(self, index: Any, query: np.ndarray, depth: int, allowed: np.ndarray | None,
               ) -> list[tuple[str, float]]:
        """``index``'s top ``depth`` for ``query`` among the allowed products that meet the
        constraint: its ranking read further and further, each product's colour share
        checked, and only when that falls short, the index searched within every product
        that meets it."""
        mask = self.bundle.index_mask(index.ids, allowed)
        n = 4 * depth
        for _ in range(POSTFILTER_ROUNDS if len(index) > POSTFILTER_MIN_ROWS else 0):
            hits = index.search(query, n, mask)[0]
            rows = self.bundle.rows_of([pid for pid, _ in hits])
            kept = [hit for hit, share in zip(hits, self.bundle.colour_share(rows, self.lab), strict=True)
                    if share >= self.min_share]
            if len(kept) >= depth or len(hits) < n:
                return kept[:depth]
            n *= 4
        rows, _ = self.bundle.colour_rows(self.lab, len(self.bundle), allowed, min_score=self.min_share)
        meets = np.zeros(len(self.bundle), bool)
        meets[rows] = True
        return index.search(query, depth, self.bundle.index_mask(index.ids, meets))[0]


def _ranked(index: Any, query: np.ndarray, depth: int, bundle: Any, allowed: np.ndarray | None,
            constraint: ColourConstraint | None) -> list[tuple[str, float]]:
    if constraint is None:
        return index.search(query, depth, bundle.index_mask(index.ids, allowed))[0]
    return constraint.within(index, query, depth, allowed)


@dataclass(frozen=True)
class TextSearch:
    """What a text search asks besides the query: a ``colour`` constraint, a ``category``
    filter, the neural ``backend`` (default: the store's preferred one with a text tower)
    and the ``device`` its text tower runs on, and ``weights`` per ranking (``image``,
    ``text``, ``colour``; default 1 each)."""

    colour: str | None = None
    category: str | None = None
    device: str = "cpu"
    backend: str | None = None
    weights: dict[str, float] | None = None


def semantic_search(store: Store, query: str, *, k: int = 12, settings: Settings | None = None,
                    cache: Any = None, **options: Any) -> list[tuple[str, float]]:
    """Hybrid search; returns ``[(product id, fused score)]``, best first. ``options``: the
    fields of ``TextSearch``.

    ``cache`` (a ``service.Workspace``) supplies the loaded indexes and encoders. Raises
    UsageError when the store can answer a text query neither by image nor by title.
    """
    from vismerch.merch.search import reciprocal_rank_fusion

    ask = TextSearch(**options)
    if not query or not query.strip():
        raise UsageError("the search query is empty")
    weights = {"image": 1.0, "text": 1.0, "colour": 1.0, **(ask.weights or {})}
    depth = max(int(setting(settings, "search_depth")), k)
    bundle = _bundle(store, settings, cache)
    allowed = bundle.mask(category=ask.category)  # over the bundle's rows; None: all
    rankings: list[list[tuple[str, float]]] = []
    used: list[float] = []
    constraint = _constraint(bundle, ask.colour, settings)  # a constraint, not only a ranking
    if constraint is not None:
        rankings.append(constraint.ranking(allowed, depth))
        used.append(weights["colour"])
    sources = 0
    name = store.pick_backend(ask.backend, tuple(list_backends(text_tower=True)))
    if name is not None:
        index, encoder = _image_index(store, name, settings, ask.device, cache)
        rankings.append(_ranked(index, query_vector(encoder, query), depth, bundle, allowed, constraint))
        used.append(weights["image"])
        sources += 1
    if bundle.titles is not None and len(bundle.titles):
        from vismerch.features.text import TextBackend

        encoder = TextBackend() if cache is None else cache.text_encoder()
        rankings.append(_ranked(bundle.titles, encoder.encode_texts([query]), depth, bundle, allowed,
                                constraint))
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


def _bundle(store: Store, settings: Settings | None, cache: Any) -> Any:
    """The store's search indexes: the Workspace's (loaded once), or read here."""
    if cache is not None:
        return cache.search_index()
    from vismerch.indexes.catalog import search_index

    return search_index(store, settings)


def _constraint(bundle: Any, colour: str | None, settings: Settings | None) -> ColourConstraint | None:
    from vismerch.features.colour import parse_colour

    if not colour:
        return None
    if not len(bundle.palettes):
        raise UsageError("the store has no colour features to constrain by colour")
    return ColourConstraint(bundle, parse_colour(colour), float(setting(settings, "search_colour_min_share")))


def _image_index(store: Store, name: str, settings: Settings | None, device: str,
                 cache: Any) -> tuple[Any, Any]:
    """Text -> image: the image index ingest saved (exact, or approximate for large
    catalogs) and the neural model whose text tower encodes the query."""
    from vismerch.indexes.stored import similarity_index

    index = similarity_index(store, name, settings) if cache is None else cache.similarity_index(name)
    if not len(index):
        raise UsageError(f"{store.path} has no {name} features for its products")
    encoder = (encoder_for(index.meta["fingerprint"], device=device) if cache is None
               else cache.encoder(index.meta["fingerprint"]))
    return index, encoder
