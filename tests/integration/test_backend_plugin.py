"""A backend installed by a third party (a real distribution with a ``vismerch.backends``
entry point on sys.path) is a neural backend everywhere: the CLI hands it the model
options, its check runs before ingest, text search and "more like this" use its vectors,
Ray puts it on the encoder actors and derive takes its index as duplicate candidates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

SRC = Path(__file__).resolve().parents[2] / "src"

PLUGIN = '''
import numpy as np
import torch

from vismerch.errors import UsageError
from vismerch.features.base import BackendInfo, FeatureBatch

COLOURS = {"red": (220, 20, 20), "green": (20, 200, 40), "blue": (20, 40, 220)}


class Toy:
    """Mean colour of 4x4 cells; a text names a colour and is embedded as that colour."""

    name = "toy"
    dim = 48

    def __init__(self, model="toy-default", revision=None, precision="auto", compile=None):
        self.model, self.precision = model, precision

    @property
    def fingerprint(self):
        return {"backend": "toy", "model": self.model, "precision": self.precision, "dim": 48}

    def encode_images(self, images):
        x = torch.as_tensor(images).to(torch.float32)
        b, h, w, _ = x.shape
        cells = x.reshape(b, 4, h // 4, 4, w // 4, 3).mean(dim=(2, 4)).reshape(b, -1).numpy()
        return FeatureBatch(_unit(cells))

    def encode_texts(self, texts):
        rgb = [next((c for n, c in COLOURS.items() if n in t), (128, 128, 128)) for t in texts]
        return _unit(np.tile(np.asarray(rgb, dtype=np.float32), (1, 16)))


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def factory(settings=None, device="cpu", **options):
    return Toy(**options)


def check(name, model, revision):
    if model == "missing":
        raise UsageError(f"no toy model {model!r}")


TOY = BackendInfo("toy", factory, text_tower=True, check=check)
'''

PROBE = '''
import json
from vismerch.features.base import BACKENDS, has_capability, list_backends
from vismerch.pipeline.distributors.ray_cluster import split_spec
from vismerch.pipeline.ingest import backend_specs
from vismerch.pipeline.tasks import IngestSpec

spec = IngestSpec(store_path="s", backends=backend_specs(["toy"], {"toy": {"model": "m"}}),
                  settings=(), device="cpu", run_id=1)
cpu, encoders = split_spec(spec)
print(json.dumps({
    "registered": "toy" in BACKENDS,
    "neural": list_backends(neural=True), "visual": list_backends(visual=True),
    "text_tower": list_backends(text_tower=True),
    "duplicate_candidates": has_capability("toy", "neural"),
    "ray_cpu": [b.name for b in cpu.backends], "ray_encoders": [b.name for b in encoders.backends],
}))
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site")
    (site / "toy_backend.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "toy_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vismerch.backends]\ntoy = toy_backend:TOY\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(site)])}


def _run(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)


def _cli(env, *args: str) -> subprocess.CompletedProcess:
    return _run(env, "-m", "vismerch.cli", *args)


def test_the_registry_lists_the_plugin_as_neural_and_ray_gives_it_an_encoder(plugin):
    done = _run(plugin, "-c", PROBE)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["registered"] and got["duplicate_candidates"]
    assert got["neural"] == ["siglip", "clip", "openclip", "toy"]  # by rank: built-ins first
    assert got["visual"][-2:] == ["colour", "style"]  # after the neural ones, plugins included
    assert "toy" in got["visual"] and "text" not in got["visual"]
    assert "toy" in got["text_tower"]
    assert got["ray_cpu"] == ["colour"] and got["ray_encoders"] == ["toy"]


def test_a_plugin_backend_is_ingested_and_searched_as_a_neural_one(plugin, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    for name, rgb in {"red": (220, 20, 20), "green": (20, 200, 40), "blue": (20, 40, 220),
                      "grey": (128, 128, 128)}.items():
        Image.new("RGB", (64, 64), rgb).save(images / f"{name}.png")
    # its check runs before the store is touched
    bad = _cli(plugin, "ingest", str(images), "--store", str(tmp_path / "bad"), "--backend", "toy",
               "--model", "missing", "--workers", "1", "--json")
    assert bad.returncode == 2 and "no toy model 'missing'" in bad.stderr
    assert not (tmp_path / "bad" / "store.sqlite").exists()

    store = tmp_path / "store"
    done = _cli(plugin, "ingest", str(images), "--store", str(store), "--backend", "toy",
                "--model", "toy-m1", "--workers", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ingested"] == 4
    from vismerch.catalog.store import Store

    with Store.open(store) as st:
        fingerprint = json.loads(st.fingerprints("toy")[0])
    assert fingerprint["model"] == "toy-m1"  # the CLI handed it the neural options
    assert fingerprint["precision"] == "auto"

    # text search embeds the query with the plugin's text tower (rebuilt from the fingerprint)
    found = _cli(plugin, "search", str(store), "green", "-k", "2", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["id"] == "green.png"
    # "more like this" by style answers from the plugin's vectors: cosines of the mean colours
    similar = _cli(plugin, "similar", str(store), "grey.png", "-k", "3", "--mode", "style", "--json")
    assert similar.returncode == 0, similar.stderr
    hits = json.loads(similar.stdout)
    grey, green = np.array([128, 128, 128.0]), np.array([20, 200, 40.0])
    assert hits[0]["id"] == "green.png"
    assert hits[0]["score"] == pytest.approx(grey @ green / np.linalg.norm(grey) / np.linalg.norm(green),
                                             abs=0.005)
