"""A deleted or damaged feature shard: every read still answers (without the lost
products), and the next ingest notices, re-features exactly what the shard held and
leaves the store whole again."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from vismerch.catalog.store import Store
from vismerch.cli import app
from vismerch.config import load_settings
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog

runner = CliRunner()
SMALL_TASKS = load_settings(overrides={"task_size": 4})  # 12 products -> 3 colour shards


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("repair")
    cat = small_catalog(root / "cat", n=12, seed=3, corrupt=False, flawed=False, duplicates=False)
    store = root / "store"
    ingest(cat.manifest_path, store, workers=1, progress=False, settings=SMALL_TASKS)
    return cat, store


def _shards(store):
    return sorted((store / "features" / "colour").glob("part-*.parquet"))


def _held_by(store, shard) -> set[str]:
    rel = shard.relative_to(store).as_posix()
    with Store.open(store) as s:
        rows = s.db.execute(
            "SELECT p.id FROM products p JOIN features f ON f.sha256 = p.sha256 "
            "JOIN shards sh ON sh.id = f.shard_id WHERE sh.path = ?", (rel,)).fetchall()
    return {r[0] for r in rows}


def _ok(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result


@pytest.mark.parametrize("damage", ["deleted", "garbage", "empty"])
def test_reads_survive_a_lost_shard_and_ingest_repairs_it(built, tmp_path, damage):
    cat, original = built
    store = tmp_path / "store"
    shutil.copytree(original, store)
    shard = _shards(store)[1]
    lost = _held_by(store, shard)
    assert len(lost) == 4
    if damage == "deleted":
        shard.unlink()
    elif damage == "garbage":
        shard.write_bytes(b"PAR1 this is not a parquet file at all" * 10)
    else:
        shard.write_bytes(b"")

    # every read answers, without the lost products' vectors
    tags = json.loads(_ok(["tags", str(store), "--json"]).stdout)
    assert len(tags) == 12
    hits = json.loads(_ok(["search", str(store), "--colour", "red", "-k", "12", "--json"]).stdout)
    # answered from the search indexes ingest saved (as similar is), which a lost shard leaves whole
    before = json.loads(_ok(["search", str(original), "--colour", "red", "-k", "12", "--json"]).stdout)
    assert hits == before
    collections = json.loads(_ok(["collections", str(store), "--json"]).stdout)
    biggest = max(collections, key=lambda c: c["size"])["name"]
    _ok(["arrange", str(store), "--collection", biggest, "--json"])
    survivor = sorted({t["id"] for t in tags} - lost)[0]
    similar = json.loads(_ok(["similar", str(store), survivor, "-k", "11", "--json"]).stdout)
    assert survivor not in {h["id"] for h in similar}
    _ok(["report", str(store), "-o", str(tmp_path / "report.html")])

    # the next ingest re-features exactly the lost images, and the store is whole again
    summary = ingest(cat.manifest_path, store, workers=1, progress=False, settings=SMALL_TASKS)
    assert summary.ingested == len(lost) and summary.skipped == 12 - len(lost)
    assert summary.failed == 0
    with Store.open(store) as s:
        assert len(s.load_features("colour")) == 12
        named = {r[0] for r in s.db.execute("SELECT path FROM shards WHERE backend = 'colour'")}
    on_disk = {p.relative_to(store).as_posix() for p in _shards(store)}
    assert on_disk == named  # the damaged file went with its rows
    hits = json.loads(_ok(["search", str(store), "--colour", "red", "-k", "12", "--json"]).stdout)
    assert len(hits) == len(json.loads(_ok(["search", str(original), "--colour", "red", "-k", "12",
                                             "--json"]).stdout))
