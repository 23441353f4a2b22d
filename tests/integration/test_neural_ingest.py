"""End to end on CPU with tiny local models: ingest --backend clip/siglip -> search -> tags
-> similar, through the CLI, with no network."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vismerch.cli import app
from vismerch.sample import generate_catalog
from vismerch.testing.models import save_tiny_clip, save_tiny_siglip

runner = CliRunner()


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    return generate_catalog(tmp_path_factory.mktemp("neural-cat"), n=24, seed=7, duplicates=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("neural-models")
    return {"clip": save_tiny_clip(base / "clip"), "siglip": save_tiny_siglip(base / "siglip")}


def _run(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _ingest(catalog, store, model, backend: str = "clip", *extra: str):
    """``vismerch ingest`` of the catalog into ``store`` with one worker, as JSON."""
    return _run(
        ["ingest", str(catalog.manifest_path), "--store", str(store), "--backend", backend,
         "--model", str(model), *extra, "--workers", "1", "--json"]
    )


@pytest.fixture(scope="module")
def store(catalog, models, tmp_path_factory):
    path = tmp_path_factory.mktemp("neural-store")
    summary = _ingest(catalog, path, models["clip"])
    assert summary["ingested"] == summary["total"] - summary["failed"] > 0
    assert any(k.startswith("encode:clip") for k in summary["phases"])
    return path


def test_neural_shards_carry_the_fingerprint(store, models):
    from vismerch.catalog.store import Store

    s = Store.open(store)
    fingerprints = s.fingerprints("clip")
    assert len(fingerprints) == 1
    fp = json.loads(fingerprints[0])
    assert fp["model"] == str(models["clip"].resolve()) and fp["precision"] == "fp32"
    assert fp["revision"].startswith("sha256:") and "crop=32x32" in fp["preprocess"]
    features = s.load_features("clip")
    assert len(features) == len(s.products()) and features.vectors.shape[1] == fp["dim"]


def test_search_by_text(store):
    hits = _run(["search", str(store), "red dress", "--json"])
    assert 0 < len(hits) <= 12
    assert all(set(h) == {"id", "score"} for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    few = _run(["search", str(store), "red floral summer dress", "-k", "3", "--json"])
    assert len(few) == 3


def test_search_with_colour_and_category(store, catalog):
    from vismerch.catalog.store import Store

    s = Store.open(store)
    category = next(p.category for p in s.products() if p.category)
    hits = _run(["search", str(store), "summer outfit", "--category", category, "--json"])
    cats = {p.id: p.category for p in s.products()}
    assert hits and all(cats[h["id"]].lower() == category.lower() for h in hits)
    dominant = next(c[0]["name"] for c in s.colours().values() if c and c[0]["name"] != "multicolour")
    coloured = _run(["search", str(store), "dress", "--colour", dominant, "--json"])
    from vismerch.features.colour import parse_colour
    from vismerch.merch.search import colour_scores

    features = s.load_features("colour")
    share = dict(
        zip(
            features.ids,
            colour_scores(
                features.columns["palette_lab"], features.columns["palette_weight"], parse_colour(dominant)
            ),
            strict=True,
        )
    )
    assert coloured and all(share[h["id"]] >= 0.1 for h in coloured)
    assert len(coloured) == min(12, sum(v >= 0.1 for v in share.values()))


def test_tags_by_attribute(store):
    # threshold 0: the random-weight model's near-uniform scores all come out as tags, so
    # the shape and range checks below see every label
    tags = _run(["tags", str(store), "--attribute", "pattern", "--threshold", "0", "--json"])
    assert tags and all(t["attribute"] == "pattern" for t in tags)
    assert all(t["tags"] for t in tags)
    for t in tags:
        for tag in t["tags"]:
            assert set(tag) >= {"name", "score"} and 0.0 <= tag["score"] <= 1.0


def test_similar_uses_the_neural_vectors(store):
    from vismerch import api
    from vismerch.catalog.store import Store

    s = Store.open(store)
    assert api.vector_backend(s) == "clip"
    pid = s.products()[0].id
    hits = _run(["similar", str(store), pid, "-k", "4", "--json"])
    assert len(hits) == 4 and pid not in {h["id"] for h in hits}


def test_rerun_is_incremental_and_siglip_adds_its_own_vectors(store, catalog, models):
    again = _ingest(catalog, store, models["clip"])
    assert again["ingested"] == 0 and again["skipped"] > 0
    summary = _ingest(catalog, store, models["siglip"], "siglip", "--precision", "bf16")
    assert any(k.startswith("encode:siglip") for k in summary["phases"])
    from vismerch.catalog.store import Store

    fp = json.loads(Store.open(store).fingerprints("siglip")[0])
    assert fp["precision"] == "bf16"
    assert _run(["search", str(store), "black boots", "-k", "2", "--json"])


def test_the_model_folder_is_what_clipmodel_and_clipprocessor_save(models):
    """The fixture above ingests, searches and tags with a folder written by
    CLIPModel.save_pretrained + CLIPProcessor.save_pretrained of the installed transformers
    (5.x: processor_config.json with the image processor nested, no preprocessor_config)."""
    import transformers

    files = {p.name for p in models["clip"].iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert "processor_config.json" in files and "preprocessor_config.json" not in files


def test_a_model_that_cannot_load_stops_the_cli_run_once(catalog, models, tmp_path, capsys):
    import shutil

    from vismerch.cli import main

    broken = shutil.copytree(models["clip"], tmp_path / "broken")
    for name in ("processor_config.json", "preprocessor_config.json"):
        (broken / name).unlink(missing_ok=True)
    rc = main(["ingest", str(catalog.manifest_path), "--store", str(tmp_path / "s"),
               "--backend", "clip", "--model", str(broken), "--workers", "1"])
    err = " ".join(capsys.readouterr().err.split())  # rich folds long lines
    assert rc == 1
    assert err.count("cannot load model") == 1 and "hint:" in err
    assert not (tmp_path / "s").exists()
