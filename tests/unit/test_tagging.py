"""Zero-shot and few-shot attribute tagging."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from vismerch.errors import UsageError
from vismerch.merch.tagging import (
    Attribute,
    TagLimits,
    knn_scores,
    label_embeddings,
    load_vocabularies,
    tag_attributes,
    tag_vectors,
    top_tags,
    zero_shot_scores,
)

DIM = 256


def word_vector(word: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
    v = np.random.default_rng(seed).standard_normal(DIM)
    return v / np.linalg.norm(v)


STOP = {"a", "an", "of", "photo", "product", "with", "the", "garment", "clothing", "pattern", "print"}


class BagOfWords:
    """A deterministic stand-in text encoder: the sum of word vectors (stop words dropped)."""

    logit_scale = 100.0
    logit_bias = None

    def __init__(self):
        self.calls = 0

    def encode_texts(self, texts):
        self.calls += 1
        out = []
        for t in texts:
            words = [w.strip(".,").lower() for w in t.split()]
            v = sum((word_vector(w) for w in words if w and w not in STOP), np.zeros(DIM))
            out.append(v / max(np.linalg.norm(v), 1e-12))
        return np.asarray(out, np.float32)


def image_like(word: str, noise: float = 0.3, seed: int = 0) -> np.ndarray:
    v = word_vector(word) + noise * np.random.default_rng(seed).standard_normal(DIM) / np.sqrt(DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


PATTERN = Attribute(
    name="pattern",
    labels=("striped", "floral", "checked"),
    phrases=(
        ("a striped garment", "stripes"),
        ("a floral garment", "flowers"),
        ("a checked garment", "plaid"),
    ),
    templates=("a photo of {}.", "{}"),
)


def test_packaged_vocabulary_has_every_attribute_with_prompt_ensembles():
    vocab = load_vocabularies()
    expected = {"category", "pattern", "sleeve_length", "neckline", "style", "material", "occasion"}
    assert expected <= set(vocab)
    for attr in vocab.values():
        assert len(attr.labels) >= 3 or attr.name == "sleeve_length"
        assert all("{}" in t for t in attr.templates)
        assert all(len(p) >= 1 for p in attr.phrases)
        assert len(attr.prompts()) == sum(len(p) for p in attr.phrases) * len(attr.templates)
    assert vocab["material"].multi_label and not vocab["pattern"].multi_label
    assert set(vocab["sleeve_length"].applies_to) <= set(vocab["category"].labels)


def test_custom_vocabulary_file(tmp_path):
    path = tmp_path / "attrs.toml"
    path.write_text(
        '[defaults]\ntemplates = ["a photo of {}."]\n'
        "[attribute.finish]\nthreshold = 0.4\n"
        'labels.matte = ["a matte finish"]\nlabels.glossy = ["a glossy finish"]\n'
    )
    vocab = load_vocabularies(path)
    assert list(vocab) == ["finish"] and vocab["finish"].threshold == 0.4
    path.write_text('[attribute.bad]\ntemplates = ["no placeholder"]\nlabels.x = ["x"]\n')
    with pytest.raises(UsageError, match="placeholder"):
        load_vocabularies(path)
    path.write_text("[attribute.bad\n")
    with pytest.raises(UsageError, match="cannot read"):
        load_vocabularies(path)


def test_label_embeddings_average_the_prompt_ensemble():
    enc = BagOfWords()
    vectors = label_embeddings(enc, PATTERN)
    assert vectors.shape == (3, DIM)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # "striped" + "stripes" both contribute to the striped label
    assert vectors[0] @ word_vector("stripes") > 0.3 and vectors[0] @ word_vector("striped") > 0.3
    # cached per (encoder, attribute): one encode for every prompt, none on the second call
    assert label_embeddings(enc, PATTERN) is vectors and enc.calls == 1


def test_zero_shot_picks_the_matching_label():
    enc = BagOfWords()
    labels = label_embeddings(enc, PATTERN)
    images = np.stack(
        [image_like("flowers", seed=1), image_like("plaid", seed=2), image_like("stripes", seed=3)]
    )
    scores = zero_shot_scores(images, labels, enc.logit_scale)
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)
    assert list(scores.argmax(axis=1)) == [1, 2, 0]


def test_top_tags_threshold_and_limit():
    scores = np.array([0.5, 0.3, 0.15, 0.05])
    names = ["a", "b", "c", "d"]
    assert top_tags(scores, names, 0.2, 3) == [("a", 0.5), ("b", 0.3)]
    assert top_tags(scores, names, 0.2, 1) == [("a", 0.5)]
    assert top_tags(scores, names, 0.9, 3) == []


def test_knn_propagates_only_to_close_neighbours():
    base = image_like("flowers", noise=0.0)
    near = image_like("flowers", noise=0.2, seed=4)
    far = image_like("stripes", noise=0.0)
    vectors = np.stack([base, near, far])
    scores, covered = knn_scores(vectors, [0], [1], 3, k=3, min_similarity=0.75)
    assert covered.tolist() == [False, True, False]
    assert scores[1].argmax() == 1 and scores[1].sum() == pytest.approx(1.0)


def test_few_shot_labels_override_zero_shot():
    enc = BagOfWords()
    labels = label_embeddings(enc, PATTERN)
    # three products that look "flowery" to the text model, but the merchandiser says the
    # first is checked: its look-alikes follow the label, the unrelated one stays zero-shot
    vectors = np.stack(
        [
            image_like("flowers", noise=0.1, seed=1),
            image_like("flowers", noise=0.1, seed=2),
            image_like("stripes", noise=0.1, seed=3),
        ]
    )
    ids = ["p1", "p2", "p3"]
    plain = tag_vectors(ids, vectors, PATTERN, labels, enc.logit_scale)
    assert [r["tags"][0]["name"] for r in plain] == ["floral", "floral", "striped"]
    assert all(r["tags"][0]["source"] == "zero-shot" for r in plain)
    tagged = tag_vectors(ids, vectors, PATTERN, labels, enc.logit_scale, examples={"p1": "Plaid"})
    by_id = {r["id"]: r["tags"][0] for r in tagged}
    assert by_id["p1"] == {"name": "checked", "score": 1.0, "source": "label"}
    assert by_id["p2"]["name"] == "checked" and by_id["p2"]["source"] == "few-shot"
    assert by_id["p3"]["name"] == "striped" and by_id["p3"]["source"] == "zero-shot"


def test_a_new_label_from_a_merchandiser_is_kept():
    enc = BagOfWords()
    labels = label_embeddings(enc, PATTERN)
    vectors = np.stack([image_like("flowers", noise=0.05, seed=1), image_like("flowers", noise=0.05, seed=2)])
    out = tag_vectors(["a", "b"], vectors, PATTERN, labels, enc.logit_scale, examples={"a": "liberty print"})
    assert out[1]["tags"][0]["name"] == "liberty print"


def test_applies_to_skips_products_of_other_categories():
    enc = BagOfWords()
    attr = Attribute(
        name="sleeve",
        labels=("short", "long"),
        phrases=(("short sleeves",), ("long sleeves",)),
        templates=("{}",),
        applies_to=("dress",),
    )
    vectors = np.stack([image_like("short"), image_like("long")])
    out = tag_vectors(
        ["d", "b"],
        vectors,
        attr,
        label_embeddings(enc, attr),
        enc.logit_scale,
        categories={"d": "dress", "b": "bag"},
    )
    assert out[0]["tags"] and out[1]["tags"] == []


def test_multi_label_attributes_return_several_tags():
    enc = BagOfWords()
    attr = Attribute(
        name="material",
        labels=("cotton", "linen", "leather"),
        phrases=(("cotton",), ("linen",), ("leather",)),
        templates=("{}",),
        multi_label=True,
        max_tags=3,
    )
    mixed = word_vector("cotton") + word_vector("linen")
    vectors = (mixed / np.linalg.norm(mixed))[None].astype(np.float32)
    out = tag_vectors(["x"], vectors, attr, label_embeddings(enc, attr), 10.0,
                      limits=TagLimits(threshold=0.2))
    assert {t["name"] for t in out[0]["tags"]} == {"cotton", "linen"}


# --------------------------------------------------------------------------- on a store


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    from vismerch.features.neural import build_backend, calibration_images
    from vismerch.testing.models import save_tiny_clip, store_with_vectors

    base = tmp_path_factory.mktemp("tagging")
    backend = build_backend("clip", model=str(save_tiny_clip(base / "clip")))
    images = calibration_images(6, 32, seed=9)
    products = [
        {"id": f"p{i}", "title": f"item {i}", "category": "dress" if i < 3 else "bag"} for i in range(6)
    ]
    products[0]["attributes"] = {"pattern": "floral"}
    return store_with_vectors(base / "store", backend, products, images)


def test_tag_attributes_on_a_store(tiny_store):
    out = tag_attributes(tiny_store, attribute="pattern", threshold=0.0)
    assert [r["id"] for r in out] == [f"p{i}" for i in range(6)]
    assert all(r["attribute"] == "pattern" for r in out)
    first = out[0]["tags"][0]
    assert first == {"name": "floral", "score": 1.0, "source": "label"}  # the manifest column
    for r in out[1:]:
        assert len(r["tags"]) == 1 and 0.0 <= r["tags"][0]["score"] <= 1.0
    # the listed category makes sleeve length apply to the dresses only
    sleeves = {
        r["id"]: r["tags"] for r in tag_attributes(tiny_store, attribute="sleeve_length", threshold=0.0)
    }
    assert sleeves["p1"] and sleeves["p4"] == []


def test_explicit_labels_and_unknown_attribute(tiny_store):
    out = tag_attributes(
        tiny_store, attribute="pattern", labels={"pattern": {"p5": "striped"}}, threshold=0.0
    )
    assert {r["id"]: r["tags"][0] for r in out}["p5"]["source"] == "label"
    with pytest.raises(UsageError, match="unknown attribute"):
        tag_attributes(tiny_store, attribute="flavour")


def test_tagging_without_neural_features_explains_what_to_do(tmp_path):
    from vismerch.catalog.store import Store

    store = Store.open(tmp_path / "empty", create=True)
    with pytest.raises(UsageError) as err:
        tag_attributes(store, attribute="pattern")
    assert "--backend clip" in err.value.hint
