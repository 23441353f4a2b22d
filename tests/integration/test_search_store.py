"""Search on an ingested store: the indexes ingest saves, a product ingested while a
process is open, a store from before the indexes, and a clean `vismerch search --json`."""

from __future__ import annotations

import csv
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vismerch.config import load_settings
from vismerch.pipeline.ingest import ingest
from vismerch.service import search
from vismerch.service.workspace import Workspace

ROWS = [  # id, title, category, stock, colour
    ("a1", "Red floral summer dress", "dresses", 3, (200, 30, 40)),
    ("a2", "Navy wool coat with belt", "coats", 0, (20, 30, 90)),
    ("a3", "Green striped cotton t-shirt", "tops", 5, (40, 140, 60)),
    ("a4", "Yellow rain jacket", "coats", 2, (230, 200, 40)),
    ("a5", "Black leather ankle boots", "shoes", 1, (25, 25, 25)),
    ("a6", "Pink silk scarf", "scarves", 4, (230, 130, 170)),
    ("a7", "Brown suede loafers", "shoes", 0, (120, 75, 40)),
    ("a8", "Orange knitted beanie hat", "hats", 7, (240, 130, 30)),
]
NEW = ("z9", "Turquoise sequin evening clutch bag", "bags", 9, (0, 200, 190))


def write_catalog(folder: Path, rows) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "manifest.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["id", "image", "title", "category", "stock"])
        for pid, title, category, stock, rgb in rows:
            img = np.full((160, 160, 3), 248, np.uint8)
            img[30:130, 40:120] = rgb
            Image.fromarray(img).save(folder / f"{pid}.png")
            out.writerow([pid, f"{pid}.png", title, category, stock])
    return folder / "manifest.csv"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    base = tmp_path_factory.mktemp("search-store")
    manifest = write_catalog(base / "catalog", ROWS)
    ingest(manifest, base / "store", workers=1, progress=False)
    return base


@pytest.fixture
def store(template, tmp_path):
    shutil.copytree(template / "store", tmp_path / "store")
    shutil.copytree(template / "catalog", tmp_path / "catalog")
    return tmp_path / "store"


def ids(result) -> list[str]:
    return [h.id for h in result.hits]


def test_ingest_saves_the_search_indexes_and_every_kind_answers(store):
    assert (store / "index" / "search" / "catalog.json").exists()
    with Workspace.open(store) as ws:
        assert ids(search.text(ws, "leather boots", k=3))[0] == "a5"
        assert ids(search.colour(ws, "#1e2a5a", k=2))[0] == "a2"
        assert ids(search.text(ws, "coat", colour="navy", k=5)) == ["a2"]  # the colour constrains
        assert set(ids(search.colour(ws, "black", k=8, category="Shoes"))) <= {"a5", "a7"}
        assert "a2" not in ids(search.colour(ws, "navy", k=8, in_stock=True))
        similar = search.similar(ws, "a3", k=3, same_category=True)
        assert similar.hits == []  # the only product in "tops"


def test_a_newly_ingested_product_is_found_without_a_restart(store, tmp_path):
    with Workspace.open(store) as ws:
        assert "z9" not in ids(search.text(ws, "sequin clutch", k=3))
        manifest = write_catalog(tmp_path / "catalog", [*ROWS, NEW])
        ingest(manifest, store, workers=1, progress=False)
        assert ids(search.text(ws, "sequin clutch", k=3))[0] == "z9"
        assert ids(search.colour(ws, "#00c8be", k=1)) == ["z9"]
        assert "z9" in ids(search.similar(ws, "a6", k=8))


def test_a_store_from_before_the_indexes_answers_after_one_build(store, caplog):
    from vismerch.catalog.store import Store

    # as a store ingested by an older vismerch: no search bundle and no title vectors
    shutil.rmtree(store / "index" / "search")
    shutil.rmtree(store / "features" / "text")
    with Store.open(store) as s, s.transaction() as con:
        con.execute("DELETE FROM features WHERE backend = 'text'")
        con.execute("DELETE FROM shards WHERE backend = 'text'")
    with caplog.at_level(logging.WARNING, logger="vismerch.search"), Workspace.open(store) as ws:
        assert ids(search.text(ws, "rain jacket", k=2))[0] == "a4"
        assert ids(search.colour(ws, "orange", k=1)) == ["a8"]
    assert "building the search indexes once" in caplog.text and "vismerch reindex" in caplog.text
    assert (store / "index" / "search" / "catalog.json").exists()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="vismerch.search"), Workspace.open(store) as ws:
        assert ids(search.text(ws, "rain jacket", k=2))[0] == "a4"
    assert "building" not in caplog.text  # kept: built once


def test_title_search_from_an_ivf_index_matches_scanning_every_title(store):
    from vismerch.features.text import TextBackend
    from vismerch.indexes import catalog
    from vismerch.indexes.titles import text_features

    settings = load_settings(overrides={"index_exact_max": 0})  # every index approximate
    with Workspace.open(store, settings) as ws:
        bundle = catalog.refresh(ws.store, settings)
        assert bundle.titles.kind == "ivf"
        title_ids, vectors = text_features(ws.store, write=False)
        encoder = TextBackend()
        for query in ("dress", "warm coat", "shoes for autumn", "a hat"):
            full = np.argsort(-(vectors @ encoder.encode_texts([query])[0]), kind="stable")
            want = [title_ids[i] for i in full[:4]]
            assert ids(search.text(ws, query, k=4)) == want, query


def test_search_json_is_clean_json_without_progress_bars(store):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run([sys.executable, "-m", "vismerch.cli", "search", str(store), "summer dress",
                           "-k", "3", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert hits[0]["id"] == "a1" and set(hits[0]) == {"id", "score"}
    assert "Loading weights" not in done.stdout + done.stderr
    assert "\r" not in done.stdout + done.stderr  # no bar of any kind


def test_reindex_builds_the_indexes_ahead(store, caplog, capsys):
    from vismerch.cli import main

    shutil.rmtree(store / "index" / "search")
    assert main(["reindex", str(store), "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built == {"products": len(ROWS), "titles": len(ROWS), "palettes": len(ROWS)}
    with caplog.at_level(logging.WARNING, logger="vismerch.search"), Workspace.open(store) as ws:
        assert ids(search.text(ws, "beanie", k=1)) == ["a8"]
    assert "building" not in caplog.text


def test_hybrid_reads_the_ranking_further_as_the_full_constraint_would(store, monkeypatch):
    from vismerch.merch import semantic

    queries = [("coat", "navy"), ("shoes", "black"), ("summer", "red"), ("hat", "#f08020"), ("bag", "pink")]
    monkeypatch.setattr(semantic, "POSTFILTER_MIN_ROWS", 0)  # read on even in a small catalog
    with Workspace.open(store) as ws:
        read_on = [ids(search.text(ws, q, colour=c, k=5)) for q, c in queries]
        monkeypatch.setattr(semantic, "POSTFILTER_ROUNDS", 0)  # straight to every product that meets it
        assert [ids(search.text(ws, q, colour=c, k=5)) for q, c in queries] == read_on
    assert read_on[0] == ["a2"] and read_on[1][0] == "a5"
