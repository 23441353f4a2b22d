"""Catalog whitening of the style vectors: a direction every product shares stops deciding
"more like this"; only the backends that ask for it are whitened."""

from __future__ import annotations

import numpy as np
import pytest

from vismerch.indexes.whiten import MIN_ROWS, whiten


def _catalog(n: int = 240, dim: int = 128, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Vectors whose strongest directions are the photo's setting (each photo its own,
    widely spread), a weaker one the product's kind (two kinds), plus noise and an offset
    every vector shares; returns (vectors, kinds)."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 2, n) * 2 - 1
    x = rng.normal(0, 0.3, (n, dim))
    x[:, :4] += rng.normal(0, 8.0, (n, 4))
    x[:, 6] += 2.0 * kind
    x[:, 8:16] += 1.5
    return x.astype(np.float32), kind


def _same_kind_share(v: np.ndarray, kind: np.ndarray) -> float:
    s = v @ v.T
    np.fill_diagonal(s, -np.inf)
    return float((kind[s.argmax(axis=1)] == kind).mean())


def test_whitening_lets_the_product_kind_decide_over_a_shared_background():
    x, kind = _catalog()
    raw = x / np.linalg.norm(x, axis=1, keepdims=True)
    white = whiten(x)
    assert white.dtype == np.float32 and white.shape == x.shape
    assert np.allclose(np.linalg.norm(white, axis=1), 1.0, atol=1e-5)
    assert _same_kind_share(raw, kind) < 0.8  # the setting decides a quarter of the time
    assert _same_kind_share(white, kind) > 0.92


def test_small_or_degenerate_catalogs_are_compared_as_they_are():
    x, _ = _catalog(n=MIN_ROWS - 1)
    assert np.allclose(whiten(x), x / np.linalg.norm(x, axis=1, keepdims=True), atol=1e-6)
    same = np.ones((40, 8), np.float32)
    assert np.isfinite(whiten(same)).all()
    with pytest.raises(ValueError, match="shape"):
        whiten(np.ones(8, np.float32))


def test_the_style_backend_gets_a_whitened_index_beside_its_own_and_colour_does_not():
    from vismerch.catalog.store import Features
    from vismerch.config import load_settings
    from vismerch.indexes.stored import WHITE, backend_indexes, index_vectors
    from vismerch.indexes.whiten import VERSION

    x, _ = _catalog(n=64)
    features = Features(ids=[f"p{i}" for i in range(len(x))], vectors=x, columns={}, fingerprint="fp")
    settings = load_settings()
    style = backend_indexes("style", features, settings)
    colour = backend_indexes("colour", features, settings)
    assert sorted(style) == ["style", "style" + WHITE] and list(colour) == ["colour"]
    assert style["style" + WHITE].meta == {"fingerprint": "fp", "whiten": VERSION}
    assert style["style"].meta == colour["colour"].meta == {"fingerprint": "fp"}
    unit = x[:1] / np.linalg.norm(x[0])
    assert np.allclose(style["style" + WHITE].vectors_at([0]), index_vectors("style", x, True)[:1], atol=1e-6)
    assert np.allclose(style["style"].vectors_at([0]), unit, atol=1e-6)  # as they are
    assert np.allclose(index_vectors("colour", x, True), x)  # colour is never whitened
