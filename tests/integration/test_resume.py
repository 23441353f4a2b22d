"""A run killed with SIGKILL at any moment, run again, ends with exactly the store an
uninterrupted run makes (same products, features, tags, flags, groups, errors)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from vismerch.catalog.store import Store
from vismerch.sample import generate_catalog
from vismerch.testing.kill import kill_after_shards

pytestmark = pytest.mark.slow


def _env(task_size: int) -> dict[str, str]:
    env = dict(os.environ)
    env["VISMERCH_TASK_SIZE"] = str(task_size)
    env["VISMERCH_BATCH_SIZE"] = "8"
    return env


def _ingest_cmd(source, store) -> list[str]:
    return [sys.executable, "-m", "vismerch.cli", "ingest", str(source), "--store", str(store),
            "--workers", "1", "--json"]


def snapshot(path) -> dict:
    """The logical content of a store (shard layout may differ between runs)."""
    with Store.open(path) as store:
        products = [(p.id, p.sha256, p.status, p.title, p.price) for p in store.products(status=None)]
        features = store.load_features("colour")
        by_id = dict(zip(features.ids, features.vectors, strict=True))
        return {
            "products": products,
            "errors": [(e["product_id"], e["reason"]) for e in store.errors()],
            "colours": {k: [c["name"] for c in v] for k, v in store.colours().items()},
            "flags": {k: sorted(f["name"] for f in v) for k, v in store.quality().items()},
            "groups": [sorted(g["members"]) for g in store.dup_groups()],
            "vectors": by_id,
            "phash": dict(zip(features.ids, features.columns["phash"].tolist(), strict=True)),
            "thumbs": {p.id: store.thumbnail(p.id).data for p in store.products()},
        }


def _assert_same(a: dict, b: dict) -> None:
    for key in ("products", "errors", "colours", "flags", "groups", "phash", "thumbs"):
        assert a[key] == b[key], key
    assert a["vectors"].keys() == b["vectors"].keys()
    for pid, vec in a["vectors"].items():
        np.testing.assert_allclose(vec, b["vectors"][pid], atol=2e-3)


def test_sigkill_mid_run_then_resume_equals_uninterrupted(tmp_path):
    catalog = generate_catalog(tmp_path / "cat", n=60, seed=3)
    reference = tmp_path / "reference"
    done = subprocess.run(_ingest_cmd(catalog.manifest_path, reference), env=_env(4),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_ingest_cmd(catalog.manifest_path, killed), env=_env(4),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_after_shards(proc, killed, 3)

    with Store.open(killed) as store:
        partial = store.counts().get("ok", 0)
    assert 0 < partial < 60

    resumed = subprocess.run(_ingest_cmd(catalog.manifest_path, killed), env=_env(4),
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    _assert_same(snapshot(killed), snapshot(reference))
    # no stray shard files: every parquet file on disk is named by a committed row
    with Store.open(killed) as store:
        named = {r[0] for r in store.db.execute("SELECT path FROM shards")}
    on_disk = {p.relative_to(killed).as_posix() for p in (killed / "features").rglob("*") if p.is_file()}
    assert on_disk == named
    # nor stray thumbnail packs: a pack written by a task the kill left uncommitted is gone
    with Store.open(killed) as store:
        packs = store.thumb_packs()
    assert {f"thumbs/packs/{p.name}" for p in (killed / "thumbs" / "packs").iterdir()} == packs
