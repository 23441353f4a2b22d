"""The streaming pipeline (the path ``--device cuda`` takes) run on CPU: the same store as
the plain path on a catalog with broken files, bounded queues, failures per task, and a
kill then resume."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from vismerch.catalog.store import Store
from vismerch.pipeline.distributors.stream import StreamDistributor
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog, write_bad_files


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream-catalog")
    small_catalog(root / "good", n=14, seed=4, corrupt=False)
    bad = write_bad_files(root / "bad")
    return root, bad


def _same_store(one, two) -> None:
    with Store.open(one) as a, Store.open(two) as b:
        assert a.tags() == b.tags()
        assert a.errors() == b.errors()
        assert a.dup_groups() == b.dup_groups()
        assert [(p.id, p.sha256, p.width, p.status) for p in a.products(status=None)] == \
            [(p.id, p.sha256, p.width, p.status) for p in b.products(status=None)]
        assert all(b.thumbnail(p.id).data == a.thumbnail(p.id).data for p in b.products())
        fa, fb = a.load_features("colour"), b.load_features("colour")
        assert sorted(fa.ids) == sorted(fb.ids)


def test_stream_on_cpu_makes_the_same_store_as_the_plain_path(folder, tmp_path, monkeypatch):
    root, bad = folder
    monkeypatch.setenv("VISMERCH_TASK_SIZE", "4")  # several tasks in flight at once
    plain = ingest(root, tmp_path / "plain", workers=1, progress=False)
    stream = ingest(root, tmp_path / "stream", workers=1, progress=False,
                    distributor=StreamDistributor(workers=1, devices=["cpu", "cpu"], depth=1))
    assert stream.ingested == plain.ingested
    assert stream.failed_by_reason == plain.failed_by_reason
    assert sum(stream.failed_by_reason.values()) == len(bad)
    _same_store(tmp_path / "plain", tmp_path / "stream")


def test_the_setting_selects_it_and_deferred_jpegs_fall_back_to_the_cpu_decoder(folder, tmp_path,
                                                                               monkeypatch):
    """``distributor = stream`` is what ingest uses; with nvJPEG deferral forced on a machine
    without it every deferred JPEG takes the safe CPU decoder in the stage thread."""
    from vismerch.pipeline import ingest as ingest_module

    root, _ = folder
    made = []
    real = StreamDistributor.__init__

    def spy(self, *args, defer_jpeg=None, **kwargs):
        made.append(self)
        real(self, *args, defer_jpeg=True, **kwargs)

    monkeypatch.setattr(StreamDistributor, "__init__", spy)
    monkeypatch.setenv("VISMERCH_DISTRIBUTOR", "stream")
    monkeypatch.setenv("VISMERCH_TASK_SIZE", "5")
    plain = ingest(root / "good", tmp_path / "plain", workers=1, progress=False,
                   distributor=ingest_module._make_distributor(
                       ingest_module.load_settings().replace(distributor="local"), 1, 1))
    stream = ingest(root / "good", tmp_path / "stream", workers=1, progress=False)
    assert len(made) == 1 and made[0].defer_jpeg is True
    assert stream.ingested == plain.ingested == 14
    _same_store(tmp_path / "plain", tmp_path / "stream")


def test_a_task_that_fails_in_a_stage_is_retried_and_the_rest_flow_on(folder, tmp_path, monkeypatch):
    from vismerch.pipeline.distributors import stream as stream_module

    root, _ = folder
    monkeypatch.setenv("VISMERCH_TASK_SIZE", "3")
    real = stream_module.write_outputs
    failures = []

    def flaky(decoded, spec, encoded):
        if decoded.result.index == 1 and not failures:
            failures.append(1)
            raise OSError("shard write failed once")
        return real(decoded, spec, encoded)

    monkeypatch.setattr(stream_module, "write_outputs", flaky)
    summary = ingest(root / "good", tmp_path / "store", workers=1, progress=False,
                     distributor=StreamDistributor(workers=1, devices=["cpu"]))
    assert failures == [1]
    assert summary.ingested == 14 and summary.failed == 0


def test_queues_are_bounded_so_decoded_images_do_not_pile_up(folder, tmp_path, monkeypatch):
    """With the encoder held, decode stops a few tasks ahead (backpressure)."""
    from vismerch.pipeline.distributors import stream as stream_module

    root, _ = folder
    monkeypatch.setenv("VISMERCH_TASK_SIZE", "1")
    gate = threading.Event()
    decoded: list[int] = []
    real_decode, real_encode = stream_module.decode_task, stream_module.encode_outputs

    def counting(task, spec, defer_jpeg=False):
        decoded.append(task.index)
        return real_decode(task, spec, defer_jpeg=defer_jpeg)

    def held(*args, **kwargs):
        gate.wait(10)
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(stream_module, "decode_task", counting)
    monkeypatch.setattr(stream_module, "encode_outputs", held)
    ahead: list[int] = []
    timer = threading.Timer(2.0, lambda: (ahead.append(len(decoded)), gate.set()))
    timer.start()
    summary = ingest(root / "good", tmp_path / "store", workers=1, progress=False,
                     distributor=StreamDistributor(workers=1, devices=["cpu"], depth=1))
    timer.join()
    assert summary.ingested == 14
    # one in the encoder, one staged, one in each bounded queue, one decoding: never all 14
    assert ahead and ahead[0] <= 6


@pytest.mark.slow
def test_sigkill_mid_stream_run_then_resume_equals_uninterrupted(tmp_path):
    from vismerch.sample import generate_catalog
    from vismerch.testing.kill import kill_after_shards

    catalog = generate_catalog(tmp_path / "cat", n=40, seed=3)
    env = dict(os.environ, VISMERCH_TASK_SIZE="4", VISMERCH_DISTRIBUTOR="stream")

    def cmd(store):
        return [sys.executable, "-m", "vismerch.cli", "ingest", str(catalog.manifest_path),
                "--store", str(store), "--workers", "1", "--json"]

    done = subprocess.run(cmd(tmp_path / "reference"), env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen(cmd(tmp_path / "killed"), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    kill_after_shards(proc, tmp_path / "killed", 3)
    with Store.open(tmp_path / "killed") as store:
        assert 0 < store.counts().get("ok", 0) < 40
    resumed = subprocess.run(cmd(tmp_path / "killed"), env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    _same_store(tmp_path / "reference", tmp_path / "killed")
    with Store.open(tmp_path / "killed") as store:
        named = {r[0] for r in store.db.execute("SELECT path FROM shards")}
    killed = tmp_path / "killed"
    on_disk = {p.relative_to(killed).as_posix() for p in (killed / "features").rglob("*") if p.is_file()}
    assert on_disk == named


@pytest.mark.gpu
def test_stream_on_cuda_refuses_the_same_files_and_agrees_with_the_cpu_store(folder, tmp_path):
    """nvJPEG for plain JPEGs, the CPU decoder for the rest, pinned copies on a side stream,
    the colour backend on the GPU: the same refusals and nearly the same colour names."""
    root, bad = folder
    plain = ingest(root, tmp_path / "plain", workers=1, progress=False)
    cuda = ingest(root, tmp_path / "cuda", workers=2, device="cuda", progress=False,
                  distributor=StreamDistributor(workers=2, devices=["cuda:0"]))
    assert cuda.ingested == plain.ingested and cuda.failed_by_reason == plain.failed_by_reason
    with Store.open(tmp_path / "plain") as a, Store.open(tmp_path / "cuda") as b:
        assert a.errors() == b.errors()
        ta, tb = {t["id"]: t for t in a.tags()}, {t["id"]: t for t in b.tags()}
        assert ta.keys() == tb.keys()
        same = sum(ta[i]["colours"][0]["name"] == tb[i]["colours"][0]["name"] for i in ta)
        assert same >= 0.9 * len(ta)
        assert all(b.has_thumbnail(p.id) for p in b.products())
