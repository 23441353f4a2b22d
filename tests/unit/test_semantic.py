"""Hybrid semantic search: text->image, text->text over titles, colour constraint, RRF."""

from __future__ import annotations

import numpy as np
import pytest

from vismerch.errors import UsageError
from vismerch.features.base import create_backend
from vismerch.indexes.titles import product_text, text_features, text_key
from vismerch.merch.semantic import query_vector, semantic_search

HEX = {"red": (200, 32, 44), "blue": (47, 95, 179), "black": (26, 26, 26), "green": (46, 139, 62)}
PRODUCTS = [
    ("p0", "Red floral summer dress", "Light dress with a flower print", "dresses", "red"),
    ("p1", "Blue denim jacket", "Classic trucker jacket", "jackets", "blue"),
    ("p2", "Black leather ankle boots", None, "shoes", "black"),
    ("p3", "Green striped t-shirt", "Cotton tee with stripes", "tops", "green"),
    ("p4", "Red wool jumper", "Chunky knit", "tops", "red"),
    ("p5", None, None, "tops", "blue"),
]


def product_images() -> np.ndarray:
    """A coloured garment-like block on a white background per product."""
    out = np.full((len(PRODUCTS), 64, 64, 3), 247, np.uint8)
    for i, (*_, colour) in enumerate(PRODUCTS):
        out[i, 12:52, 16:48] = HEX[colour]
    return out


class CountingText:
    """Wraps the real text encoder and counts what it is asked to encode."""

    def __init__(self):
        from vismerch.features.text import TextBackend

        self.inner = TextBackend()
        self.fingerprint = self.inner.fingerprint
        self.encoded: list[str] = []

    def encode_texts(self, texts):
        self.encoded.extend(texts)
        return self.inner.encode_texts(texts)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from vismerch.features.neural import build_backend
    from vismerch.testing.models import save_tiny_clip, store_with_vectors

    base = tmp_path_factory.mktemp("semantic")
    clip = build_backend("clip", model=str(save_tiny_clip(base / "clip")))
    products = [
        {"id": pid, "title": title, "description": desc, "category": cat}
        for pid, title, desc, cat, _ in PRODUCTS
    ]
    images = product_images()
    s = store_with_vectors(base / "store", clip, products, images)
    store_with_vectors(base / "store", create_backend("colour"), products, images)
    return s


def test_product_text_and_key():
    assert product_text("  Red   dress ", "Cotton") == "Red dress. Cotton"
    assert product_text(None, "") == ""
    assert text_key("a") == text_key("a") != text_key("b")


def test_text_to_text_finds_the_title(store):
    hits = semantic_search(store, "red floral summer dress", weights={"image": 0.0})
    assert hits[0][0] == "p0"
    hits = semantic_search(store, "leather boots", weights={"image": 0.0})
    assert hits[0][0] == "p2"


def test_text_to_image_ranks_by_the_text_tower(store):
    from vismerch.merch.semantic import load_neural

    features, encoder = load_neural(store)
    q = query_vector(encoder, "a red dress")
    cosine = dict(zip(features.ids, features.vectors @ q, strict=True))
    hits = semantic_search(store, "a red dress", weights={"text": 0.0}, k=6)
    # the saved index ranks as a brute-force scan would (identical images tie: either order)
    ranked = [round(float(cosine[pid]), 4) for pid, _ in hits]
    assert len(hits) == 6 and ranked == sorted((round(float(c), 4) for c in cosine.values()), reverse=True)


def test_hybrid_results_are_fused_and_include_image_only_products(store):
    hits = semantic_search(store, "blue jacket", k=6)
    ids = [pid for pid, _ in hits]
    assert len(ids) == 6 and set(ids) == {p[0] for p in PRODUCTS}
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert semantic_search(store, "blue jacket", k=2) == hits[:2]


def test_category_filter(store):
    hits = semantic_search(store, "red", category="tops", k=10)
    assert {pid for pid, _ in hits} == {"p3", "p4", "p5"}


def test_colour_is_a_constraint_and_a_ranking(store):
    hits = semantic_search(store, "red floral summer dress", colour="red", k=10, weights={"image": 0.0})
    assert [pid for pid, _ in hits] == ["p0", "p4"]
    assert semantic_search(store, "anything", colour="#2e8b3e", k=10, weights={"image": 0.0})[0][0] == "p3"


def test_title_embeddings_are_cached_in_the_store(store):
    text_features(store)  # cache every title, whichever tests ran before
    enc = CountingText()
    ids, vectors = text_features(store, enc)
    assert ids == ["p0", "p1", "p2", "p3", "p4"]  # p5 has no text
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    rows = store.db.execute("SELECT COUNT(*) FROM features WHERE backend = 'text'").fetchone()[0]
    assert rows == 5
    assert enc.encoded == []  # every title was cached above
    with store.transaction() as con:
        con.execute("UPDATE products SET title = 'Red silk dress' WHERE id = 'p0'")
    try:
        text_features(store, enc)
        assert enc.encoded == ["Red silk dress. Light dress with a flower print"]
    finally:
        with store.transaction() as con:
            con.execute("UPDATE products SET title = 'Red floral summer dress' WHERE id = 'p0'")


def test_empty_query_and_nothing_to_search(tmp_path, store):
    from vismerch.testing.models import store_with_vectors

    with pytest.raises(UsageError, match="empty"):
        semantic_search(store, "   ")
    bare = store_with_vectors(
        tmp_path / "bare", create_backend("colour"), [{"id": "x"}], product_images()[:1]
    )
    with pytest.raises(UsageError) as err:
        semantic_search(bare, "red dress")
    assert "--backend clip" in err.value.hint


def test_text_only_store_still_answers(tmp_path):
    from vismerch.testing.models import store_with_vectors

    products = [{"id": pid, "title": t, "description": d} for pid, t, d, *_ in PRODUCTS]
    s = store_with_vectors(tmp_path / "textonly", create_backend("colour"), products, product_images())
    assert semantic_search(s, "denim jacket")[0][0] == "p1"
