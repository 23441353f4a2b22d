"""Model folders in every layout the installed transformers writes or the hub serves, hub
ids from a local hub cache (offline), and a model that cannot load stopping an ingest once,
before any task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import transformers
from packaging.version import Version

from vismerch.errors import UsageError, VismerchError
from vismerch.features.neural import build_backend, calibration_images, check_model
from vismerch.pipeline.ingest import ingest
from vismerch.testing.catalog import small_catalog
from vismerch.testing.models import save_tiny_clip, save_tiny_siglip

SAVERS = {"clip": save_tiny_clip, "siglip": save_tiny_siglip}
TRANSFORMERS_5 = Version(transformers.__version__).major >= 5


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[tuple[str, str], Path]:
    base = tmp_path_factory.mktemp("layouts")
    return {
        (kind, layout): save(base / f"{kind}-{layout}", seed=1, layout=layout)
        for kind, save in SAVERS.items()
        for layout in ("processor", "image-processor")
    }


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_both_layouts_load_to_the_same_encoder(kind, folders):
    nested, legacy = folders[(kind, "processor")], folders[(kind, "image-processor")]
    assert (legacy / "preprocessor_config.json").is_file()
    if TRANSFORMERS_5:  # Processor.save_pretrained nests the image processor, writes no preprocessor_config
        assert not (nested / "preprocessor_config.json").exists()
        assert "image_processor" in json.loads((nested / "processor_config.json").read_text())
    a = build_backend(kind, model=str(nested), precision="fp32")
    b = build_backend(kind, model=str(legacy), precision="fp32")
    assert a.preprocess == b.preprocess
    pixels = calibration_images(3, 40, seed=5)
    np.testing.assert_allclose(a.encode_images(pixels).vectors, b.encode_images(pixels).vectors, atol=1e-6)
    texts = ["a red dress", "blue jeans"]
    np.testing.assert_allclose(a.encode_texts(texts), b.encode_texts(texts), atol=1e-6)


def _hub_cache(root: Path, repo: str, folder: Path, commit: str) -> Path:
    """A huggingface_hub cache holding ``folder`` as ``repo`` at ``commit`` (what a
    download would have left), so a hub id resolves with no network."""
    entry = root / ("models--" + repo.replace("/", "--"))
    shutil.copytree(folder, entry / "snapshots" / commit)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(commit)
    return root


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_a_hub_id_loads_from_the_hub_cache_offline_and_pins_its_commit(kind, folders, tmp_path, monkeypatch):
    import huggingface_hub.constants as hub

    commit = "0123456789abcdef0123456789abcdef01234567"
    cache = _hub_cache(tmp_path / "hub", f"vismerch-test/tiny-{kind}", folders[(kind, "processor")], commit)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    backend = build_backend(kind, model=f"vismerch-test/tiny-{kind}", precision="fp32")
    assert backend.fingerprint["revision"] == commit
    assert backend.fingerprint["model"] == f"vismerch-test/tiny-{kind}"
    local = build_backend(kind, model=str(folders[(kind, "processor")]), precision="fp32")
    pixels = calibration_images(2, 32, seed=9)
    np.testing.assert_allclose(backend.encode_images(pixels).vectors, local.encode_images(pixels).vectors,
                               atol=1e-6)
    with pytest.raises(VismerchError, match="cannot load model 'vismerch-test/absent'"):
        check_model(kind, "vismerch-test/absent")


def _broken(folders, tmp_path: Path, drop: tuple[str, ...]) -> Path:
    folder = shutil.copytree(folders[("clip", "processor")], tmp_path / "broken")
    for name in drop:
        (folder / name).unlink(missing_ok=True)
    return folder


def test_check_model_names_what_is_missing(folders, tmp_path):
    no_processor = _broken(folders, tmp_path, ("processor_config.json", "preprocessor_config.json"))
    with pytest.raises(VismerchError, match="no image-processor config") as exc:
        check_model("clip", str(no_processor))
    assert "save_pretrained" in exc.value.hint
    shutil.rmtree(no_processor)
    no_weights = _broken(folders, tmp_path, ("model.safetensors",))
    with pytest.raises(VismerchError, match="has no weights"):
        check_model("clip", str(no_weights))
    with pytest.raises(UsageError, match="is a 'siglip' model, not clip"):
        check_model("clip", str(folders[("siglip", "processor")]))
    check_model("clip", str(folders[("clip", "processor")]))  # a good folder passes


def test_an_ingest_with_a_model_that_cannot_load_stops_once_before_any_task(folders, tmp_path):
    catalog = small_catalog(tmp_path / "cat", n=12)
    broken = _broken(folders, tmp_path, ("processor_config.json", "preprocessor_config.json"))
    store = tmp_path / "store"
    with pytest.raises(VismerchError, match="no image-processor config"):
        ingest(catalog.root, store, backends=["clip"], backend_options={"clip": {"model": str(broken)}},
               workers=1, progress=False)
    assert not store.exists()  # stopped before the store was made: nothing to clean up
