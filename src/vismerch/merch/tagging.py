"""Attribute tags: zero-shot from the image-text model, overridden by few-shot labels.

Zero-shot: every label of an attribute gets a text embedding (the mean over its prompt
ensemble from ``data/attributes.toml``); an image's scores are a softmax over the
attribute's labels of ``logit_scale * cosine``; tags are the labels above a threshold.

Few-shot: labels a merchandiser gave to some products (the ``labels`` argument, a
``tag_labels`` table when the store has one, or a manifest column named like the
attribute) propagate to their nearest neighbours in image-embedding space; where a
product's neighbours are close enough, their similarity-weighted vote replaces the
zero-shot scores. A labelled product keeps its own label.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vismerch.config import setting
from vismerch.errors import UsageError

if TYPE_CHECKING:
    from vismerch.catalog.store import Store
    from vismerch.config import Settings

VOCABULARY = Path(__file__).resolve().parent.parent / "data" / "attributes.toml"
# keyword defaults of the lower-level functions: the settings table's defaults
DEFAULT_THRESHOLD = setting(None, "tag_threshold")
DEFAULT_KNN = setting(None, "tag_knn")
DEFAULT_KNN_MIN_SIMILARITY = setting(None, "tag_knn_min_similarity")


@dataclass(frozen=True)
class Attribute:
    name: str
    labels: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]  # per label, its prompt-ensemble phrases
    templates: tuple[str, ...]
    multi_label: bool = False
    threshold: float | None = None
    max_tags: int = 3
    applies_to: tuple[str, ...] | None = None
    help: str = ""

    def prompts(self) -> list[tuple[int, str]]:
        """(label index, prompt) for every phrase x template."""
        return [
            (i, template.replace("{}", phrase))
            for i, phrases in enumerate(self.phrases)
            for phrase in phrases
            for template in self.templates
        ]

    def key(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]

    def canonical(self, value: str) -> str | None:
        """A label name for a merchandiser's value (label name or one of its phrases)."""
        v = _norm(value)
        for label, phrases in zip(self.labels, self.phrases, strict=True):
            if v == _norm(label) or v in {_norm(p) for p in phrases}:
                return label
        return None


def _norm(text: str) -> str:
    words = str(text).lower().replace("_", " ").replace("-", " ").split()
    return " ".join(w for w in words if w not in {"a", "an", "the", "pair", "of"})


def load_vocabularies(path: str | Path | None = None) -> dict[str, Attribute]:
    """Read the attribute vocabularies (the packaged file unless ``path`` is given)."""
    path = Path(path) if path else VOCABULARY
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read attribute vocabulary {path}: {exc}") from exc
    defaults = data.get("defaults", {})
    out: dict[str, Attribute] = {}
    for name, spec in data.get("attribute", {}).items():
        labels = spec.get("labels") or {}
        if not labels:
            raise UsageError(f"attribute {name!r} in {path} has no labels")
        templates = tuple(spec.get("templates", defaults.get("templates", ["{}"])))
        if not all("{}" in t for t in templates):
            raise UsageError(f"attribute {name!r} in {path}: every template needs a {{}} placeholder")
        phrases = tuple(tuple(v) if isinstance(v, list) else (str(v),) for v in labels.values())
        applies = spec.get("applies_to")
        out[name] = Attribute(
            name=name,
            labels=tuple(labels),
            phrases=phrases,
            templates=templates,
            multi_label=bool(spec.get("multi_label", False)),
            threshold=spec.get("threshold"),
            max_tags=int(spec.get("max_tags", defaults.get("max_tags", 3))),
            applies_to=tuple(applies) if applies else None,
            help=str(spec.get("help", "")),
        )
    return out


# --------------------------------------------------------------------------- scoring


@functools.lru_cache(maxsize=64)
def label_embeddings(encoder: Any, attribute: Attribute) -> np.ndarray:
    """(L, d) L2-normalised text embeddings, one per label (mean of its prompt ensemble)."""
    prompts = attribute.prompts()
    vectors = encoder.encode_texts([p for _, p in prompts])
    owner = np.array([i for i, _ in prompts])
    out = np.stack([vectors[owner == i].mean(axis=0) for i in range(len(attribute.labels))])
    return (out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def zero_shot_scores(image_vectors: np.ndarray, label_vectors: np.ndarray, logit_scale: float) -> np.ndarray:
    """(N, L) softmax over labels of ``logit_scale * cosine`` (rows sum to 1)."""
    logits = float(logit_scale) * (np.asarray(image_vectors, np.float32) @ label_vectors.T)
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)


def knn_scores(
    vectors: np.ndarray,
    example_rows: Sequence[int],
    example_labels: Sequence[int],
    n_labels: int,
    k: int = DEFAULT_KNN,
    min_similarity: float = DEFAULT_KNN_MIN_SIMILARITY,
) -> tuple[np.ndarray, np.ndarray]:
    """Propagate labelled examples to every row by similarity-weighted kNN vote.

    Returns ``(scores (N, L), covered (N,))``: ``covered`` rows had at least one labelled
    neighbour with cosine >= ``min_similarity``; only those neighbours vote.
    """
    n = len(vectors)
    scores = np.zeros((n, n_labels), np.float32)
    covered = np.zeros(n, bool)
    if not len(example_rows) or n == 0:
        return scores, covered
    rows = np.asarray(example_rows)
    labels = np.asarray(example_labels)
    sims = np.asarray(vectors, np.float32) @ np.asarray(vectors, np.float32)[rows].T  # (N, m)
    sims[rows, np.arange(len(rows))] = -np.inf  # an example does not vote for itself
    kk = min(k, len(rows))
    nearest = (
        np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        if kk < len(rows)
        else np.tile(np.arange(len(rows)), (n, 1))
    )
    for i in range(n):
        cand = nearest[i]
        s = sims[i, cand]
        keep = s >= min_similarity
        if not keep.any():
            continue
        covered[i] = True
        np.add.at(scores[i], labels[cand[keep]], s[keep])
        scores[i] /= scores[i].sum()
    return scores, covered


def top_tags(
    scores: np.ndarray, labels: Sequence[str], threshold: float, max_tags: int
) -> list[tuple[str, float]]:
    """Labels with score >= threshold, best first, at most ``max_tags``."""
    order = np.argsort(-scores)[:max_tags]
    return [(labels[j], float(scores[j])) for j in order if scores[j] >= threshold]


@dataclass(frozen=True)
class TagLimits:
    """How sure a tag must be: ``threshold`` on its score; the few-shot vote of the ``k``
    nearest labelled products counts only when one is at least ``min_similarity`` close."""

    threshold: float = DEFAULT_THRESHOLD
    k: int = DEFAULT_KNN
    min_similarity: float = DEFAULT_KNN_MIN_SIMILARITY

    @classmethod
    def from_settings(cls, settings: Settings, threshold: float | None = None) -> TagLimits:
        return cls(float(threshold if threshold is not None else setting(settings, "tag_threshold")),
                   int(setting(settings, "tag_knn")), float(setting(settings, "tag_knn_min_similarity")))


def tag_vectors(
    ids: Sequence[str],
    vectors: np.ndarray,
    attribute: Attribute,
    label_vectors: np.ndarray,
    logit_scale: float,
    *,
    examples: Mapping[str, str] | None = None,
    limits: TagLimits = TagLimits(),  # frozen: safe to share as a default
    categories: Mapping[str, str | None] | None = None,
) -> list[dict[str, Any]]:
    """Tags of one attribute for every row: label > few-shot kNN > zero-shot.

    ``examples`` maps product id -> label (merchandiser labels); ``categories`` maps
    product id -> category label, used by ``applies_to``.
    """
    threshold = attribute.threshold if attribute.threshold is not None else limits.threshold
    k, min_similarity = limits.k, limits.min_similarity
    max_tags = attribute.max_tags if attribute.multi_label else 1
    labels = list(attribute.labels)
    zs = zero_shot_scores(vectors, label_vectors, logit_scale)
    row_of = {pid: i for i, pid in enumerate(ids)}
    given: dict[int, int] = {}
    for pid, value in (examples or {}).items():
        if pid not in row_of:
            continue
        label = attribute.canonical(value) or str(value)
        if label not in labels:  # merchandisers may introduce a label the vocabulary lacks
            labels.append(label)
            zs = np.pad(zs, ((0, 0), (0, 1)))
        given[row_of[pid]] = labels.index(label)
    ks, covered = knn_scores(vectors, list(given), list(given.values()), len(labels), k, min_similarity)
    out = []
    for i, pid in enumerate(ids):
        entry: dict[str, Any] = {"id": pid, "attribute": attribute.name, "tags": []}
        if attribute.applies_to and categories is not None:
            cat = categories.get(pid)
            if cat is not None and cat not in attribute.applies_to:
                out.append(entry)
                continue
        if i in given:
            entry["tags"] = [{"name": labels[given[i]], "score": 1.0, "source": "label"}]
        elif covered[i]:
            entry["tags"] = [
                {"name": n, "score": round(s, 4), "source": "few-shot"}
                for n, s in top_tags(ks[i], labels, threshold, max_tags)
            ]
        else:
            entry["tags"] = [
                {"name": n, "score": round(s, 4), "source": "zero-shot"}
                for n, s in top_tags(zs[i], labels, threshold, max_tags)
            ]
        out.append(entry)
    return out


# --------------------------------------------------------------------------- store level


def store_labels(store: Store, attribute: str, products: Sequence[Any] | None = None) -> dict[str, str]:
    """Merchandiser labels for one attribute: the ``tag_labels`` table, else a manifest
    column of that name (``products.category`` for ``category``). ``products`` saves
    re-reading ``store.products()`` when the caller already has them."""
    labels: dict[str, str] = {}
    for product in store.products() if products is None else products:
        value = product.category if attribute == "category" else product.attributes.get(attribute)
        if value not in (None, ""):
            labels[product.id] = str(value)
    # explicit labels win over manifest columns (every opened store has the table: migration 3)
    for row in store.db.execute(
        "SELECT product_id, label FROM tag_labels WHERE attribute = ?", (attribute,)
    ).fetchall():
        labels[row[0]] = row[1]
    return labels


def tag_attributes(
    store: Store,
    attribute: str | None = None,
    threshold: float | None = None,
    *,
    labels: Mapping[str, Mapping[str, str]] | None = None,
    vocabulary: str | Path | None = None,
    settings: Settings | None = None,
    backend: str | None = None,
    device: str = "cpu",
) -> list[dict[str, Any]]:
    """Attribute tags for every product with neural image vectors.

    Returns ``[{id, attribute, tags: [{name, score, source}]}]`` (one entry per product
    and attribute; ``source`` is label | few-shot | zero-shot). ``labels`` maps
    attribute -> {product id: label} and adds to the store's own labels.
    """
    from vismerch.merch.semantic import load_neural

    vocab = load_vocabularies(vocabulary)
    if attribute is not None and attribute not in vocab:
        raise UsageError(f"unknown attribute {attribute!r}", hint=f"choose one of: {', '.join(vocab)}")
    names = [attribute] if attribute else list(vocab)
    features, encoder = load_neural(store, backend=backend, device=device)
    limits = TagLimits.from_settings(settings, threshold)
    products = store.products()
    categories = (
        _categories(products, features, encoder, vocab)
        if any(vocab[n].applies_to for n in names)
        else None
    )
    results: list[dict[str, Any]] = []
    for name in names:
        attr = vocab[name]
        examples = store_labels(store, name, products)
        examples.update((labels or {}).get(name, {}))
        results.extend(
            tag_vectors(
                features.ids,
                features.vectors,
                attr,
                label_embeddings(encoder, attr),
                encoder.logit_scale,
                examples=examples,
                limits=limits,
                categories=categories,
            )
        )
    results.sort(key=lambda r: (r["id"], names.index(r["attribute"])))
    return results


def _categories(
    products: Sequence[Any], features: Any, encoder: Any, vocab: dict[str, Attribute]
) -> dict[str, str | None]:
    """Category label per product: the listed category when it names a label, else zero-shot."""
    attr = vocab.get("category")
    if attr is None:
        return {}
    listed = {p.id: p.category for p in products}
    zs = zero_shot_scores(features.vectors, label_embeddings(encoder, attr), encoder.logit_scale)
    out: dict[str, str | None] = {}
    for i, pid in enumerate(features.ids):
        canon = attr.canonical(listed[pid]) if listed.get(pid) else None
        out[pid] = canon or attr.labels[int(np.argmax(zs[i]))]
    return out


def set_tag_label(store: Store, product_id: str, attribute: str, label: str) -> None:
    """Record a merchandiser's label (the ``tag_labels`` table, schema migration 3)."""
    with store.transaction() as con:
        con.execute(
            "INSERT OR REPLACE INTO tag_labels (product_id, attribute, label) VALUES (?,?,?)",
            (product_id, attribute, label),
        )


