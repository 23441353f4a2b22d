"""The Ray distributor on a local Ray runtime started here (2 CPUs, no GPU): it makes the
same store as the local distributor, a Ray worker killed mid-task is re-run without a
double commit, and a driver killed with SIGKILL resumes to the same store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import ray
from typer.testing import CliRunner

from vismerch.catalog.store import Store
from vismerch.cli import app
from vismerch.config import load_settings
from vismerch.pipeline.distributors.ray_cluster import RayDistributor
from vismerch.pipeline.ingest import ingest
from vismerch.sample import generate_catalog
from vismerch.testing.kill import kill_after_shards

pytestmark = pytest.mark.ray

TASK_SIZE = 4


@pytest.fixture(scope="module")
def cluster():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="warning")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    # corrupt files, duplicates and flawed shots included: refusals must match too
    return generate_catalog(tmp_path_factory.mktemp("cat"), n=40, seed=11)


def _settings(**values):
    return load_settings().replace(task_size=TASK_SIZE, batch_size=8, **values)


@pytest.fixture(scope="module")
def reference(catalog, tmp_path_factory):
    path = tmp_path_factory.mktemp("local") / "store"
    ingest(catalog.manifest_path, path, settings=_settings(), workers=1, progress=False)
    return path


def _tags_json(store: Path) -> str:
    result = CliRunner().invoke(app, ["tags", str(store), "--json"])
    assert result.exit_code == 0, result.output
    return result.stdout


def _assert_same_store(store: Path, reference: Path) -> None:
    """Byte for byte in `vismerch tags --json`, and the same duplicate groups and errors."""
    assert _tags_json(store) == _tags_json(reference)
    with Store.open(store) as a, Store.open(reference) as b:
        assert a.dup_groups() == b.dup_groups()
        assert a.dup_groups(), "the catalog has planted duplicates; no groups means no check"
        assert [(e["product_id"], e["reason"]) for e in a.errors()] == \
            [(e["product_id"], e["reason"]) for e in b.errors()]
        # exactly once: every committed feature row belongs to one shard, one per task
        assert a.db.execute("SELECT COUNT(*) FROM features").fetchone()[0] == \
            b.db.execute("SELECT COUNT(*) FROM features").fetchone()[0]


def test_ray_ingest_makes_the_same_store_as_the_local_one(cluster, catalog, reference, tmp_path):
    summary = ingest(catalog.manifest_path, tmp_path / "store", progress=False,
                     settings=_settings(distributor="ray"))
    truth = catalog.truth()
    assert summary.ingested == catalog.n_images - len(truth["corrupt"])
    _assert_same_store(tmp_path / "store", reference)


def _stage_workers() -> list[int]:
    """Ray worker processes running the decode stage now (Ray titles them ray::<function>)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(b"ray::cpu_stage"):
                found.append(int(entry.name))
    return found


def test_a_ray_worker_killed_mid_task_is_rerun_and_the_store_is_the_same(
        cluster, catalog, reference, tmp_path):
    killed: list[int] = []
    done = threading.Event()

    def kill_one_worker() -> None:
        while not done.is_set() and not killed:
            for pid in _stage_workers():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    try:
        summary = ingest(catalog.manifest_path, tmp_path / "store", progress=False,
                         settings=_settings(), distributor=RayDistributor(workers=2))
    finally:
        done.set()
        killer.join()
    assert killed, "no Ray worker was seen running a task, so none was killed"
    # Ray re-ran the task: nothing was refused as a worker error
    assert "worker-error" not in summary.failed_by_reason
    _assert_same_store(tmp_path / "store", reference)


def _ingest_cmd(source, store, address) -> list[str]:
    return [sys.executable, "-m", "vismerch.cli", "ingest", str(source), "--store", str(store),
            "--distributor", "ray", "--ray-address", address, "--json"]


def test_a_driver_killed_with_sigkill_resumes_to_the_same_store(cluster, catalog, reference, tmp_path):
    env = dict(os.environ, VISMERCH_TASK_SIZE=str(TASK_SIZE), VISMERCH_BATCH_SIZE="8")
    store = tmp_path / "store"
    proc = subprocess.Popen(_ingest_cmd(catalog.manifest_path, store, cluster), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kill_after_shards(proc, store, 2, timeout=90)
    with Store.open(store) as partial:
        ok = partial.counts().get("ok", 0)
    assert 0 < ok < 40

    resumed = subprocess.run(_ingest_cmd(catalog.manifest_path, store, cluster), env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["skipped"] >= ok  # what the killed run committed is not done again
    _assert_same_store(store, reference)


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch, tmp_path):
    from vismerch.errors import UsageError

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees when it is missing
    cat = generate_catalog(tmp_path / "cat", n=4, seed=1, corrupt=False, flawed=False, duplicates=False)
    with pytest.raises(UsageError) as err:
        ingest(cat.manifest_path, tmp_path / "store", progress=False,
               settings=_settings(distributor="ray"))
    assert "vismerch[ray]" in err.value.hint


def test_neural_backends_run_in_encoder_actors_and_match_the_local_run(cluster, tmp_path):
    """Decode tasks hand pixels to an encoder actor (one model load) through the object store;
    its CLIP vectors are the local run's."""
    import numpy as np

    from vismerch.testing.models import save_tiny_clip

    model = save_tiny_clip(tmp_path / "clip")
    cat = generate_catalog(tmp_path / "cat", n=12, seed=4, duplicates=False)
    options = {"clip": {"model": str(model), "precision": "fp32"}}
    for name, extra in (("local", {}), ("ray", {"distributor": "ray"})):
        ingest(cat.manifest_path, tmp_path / name, backends=["clip"], backend_options=options,
               settings=_settings(**extra), workers=1, progress=False)
    with Store.open(tmp_path / "local") as a, Store.open(tmp_path / "ray") as b:
        one, two = a.load_features("clip"), b.load_features("clip")
        assert one.ids == two.ids and len(one.ids) > 0
        np.testing.assert_allclose(one.vectors, two.vectors, atol=2e-3)
    assert _tags_json(tmp_path / "ray") == _tags_json(tmp_path / "local")
