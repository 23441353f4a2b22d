"""Ingest from a manifest of URLs, served by a real HTTP server on 127.0.0.1 that the test
starts: the same tags as the same images from a folder, a re-run that downloads nothing
unchanged, every failure recorded with its reason while the run goes on, and every URL
refused when loopback is not allow-listed."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from vismerch.catalog.store import Store
from vismerch.config import load_settings
from vismerch.errors import JobFailed, SourceError
from vismerch.pipeline.ingest import ingest
from vismerch.sample import generate_catalog
from vismerch.testing.image_server import ImageServer
from vismerch.testing.kill import kill_after_shards

FAST = {"fetch_backoff": 0.01, "fetch_timeout": 2.0}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    cat = generate_catalog(tmp_path_factory.mktemp("cat"), n=14, seed=5, corrupt=False,
                           size_range=(520, 600))
    images = {p.relative_to(cat.images_dir).as_posix(): p.read_bytes()
              for p in sorted(cat.images_dir.rglob("*")) if p.is_file()}
    return cat, images


def _manifest(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _settings(allow: str, **more):
    return load_settings(overrides={"fetch_allow_hosts": allow, **FAST, **more})


def _routes(names: list[str]) -> dict[str, str]:
    """Most images straight, a few through redirects, a 500-then-200, Last-Modified only."""
    routes = {name: f"/img/{name}" for name in names}
    routes[names[0]] = f"/redirect/3/{names[0]}"
    routes[names[1]] = f"/redirect/1/{names[1]}"
    routes[names[2]] = f"/flaky/{names[2]}"
    routes[names[3]] = f"/lm/{names[3]}"
    return routes


def test_url_manifest_tags_like_the_folder_and_a_rerun_downloads_nothing(catalog, tmp_path):
    cat, images = catalog
    names = sorted(images)
    with ImageServer(images) as server:
        routes = _routes(names)
        manifest = _manifest(tmp_path / "urls.csv", [
            {"id": name, "image": server.url(routes[name])} for name in names])
        store = tmp_path / "from-urls"
        first = ingest(manifest, store, workers=1, progress=False, settings=_settings("127.0.0.1"))
        assert first.ingested == len(names) and first.failed == 0
        assert server.downloads() == len(names)
        assert server.hits[f"/flaky/{names[2]}"] == 2  # the 500 was retried
        assert "fetch" in first.phases

        folder = ingest(cat.images_dir, tmp_path / "from-folder", workers=1, progress=False)
        assert folder.ingested == len(names)
        with Store.open(store) as a, Store.open(tmp_path / "from-folder") as b:
            assert a.tags() == b.tags()
            assert a.dup_groups() == b.dup_groups()
            assert a.product(names[5]).image_path == server.url(routes[names[5]])

        # a re-run: every request is conditional and answered 304; nothing is downloaded
        server.reset_counts()
        again = ingest(manifest, store, workers=1, progress=False, settings=_settings("127.0.0.1"))
        assert server.downloads() == 0
        assert sum(server.not_modified.values()) == len(names)
        assert again.skipped == len(names) and again.ingested == 0 and again.failed == 0

        # one image changes on the server: only it is downloaded and re-tagged
        changed = names[6]
        server.images[changed] = images[names[7]]
        server.reset_counts()
        third = ingest(manifest, store, workers=1, progress=False, settings=_settings("127.0.0.1"))
        assert dict(server.bodies) == {changed: 1}
        assert third.ingested == 1 and third.skipped == len(names) - 1
        with Store.open(store) as s:
            tags = {t["id"]: t for t in s.tags()}
            assert s.product(changed).sha256 == s.product(names[7]).sha256
        assert tags[changed]["colours"] == tags[names[7]]["colours"]


def test_each_failure_is_recorded_with_its_reason_and_the_run_goes_on(catalog, tmp_path):
    _, images = catalog
    names = sorted(images)[:3]
    with ImageServer(images, slow_s=1.5, big_bytes=3 << 20) as server:
        rows = {
            "good": server.url(f"/img/{names[0]}"),
            "three-hops": server.url(f"/redirect/3/{names[1]}"),
            "missing": server.url("/img/no-such.jpg"),
            "broken": server.url("/error"),
            "slow": server.url(f"/slow/{names[2]}"),
            "big": server.url("/big"),
            "big-stream": server.url("/big-stream"),
            "four-hops": server.url(f"/redirect/4/{names[1]}"),
            "to-private": server.url("/to?url=" + quote("http://192.168.0.10/a.jpg")),
            "to-metadata": server.url("/to?url=" + quote("http://169.254.169.254/latest/")),
            "to-file": server.url("/to?url=" + quote("file:///etc/passwd")),
            "not-an-image": server.url("/to?url=" + quote(server.url("/plain/text.txt"))),
        }
        server.images["text.txt"] = b"plain text, not an image"
        manifest = _manifest(tmp_path / "urls.csv", [{"id": k, "image": v} for k, v in rows.items()])
        settings = _settings("127.0.0.1", fetch_timeout=0.4, fetch_retries=1,
                             max_image_bytes=2 << 20)
        summary = ingest(manifest, tmp_path / "store", workers=1, progress=False, settings=settings)
        assert server.hits["/error"] == 2 and server.hits[f"/slow/{names[2]}"] == 2
    with Store.open(tmp_path / "store") as store:
        errors = {e["product_id"]: e["reason"] for e in store.errors()}
        ok = {p.id for p in store.products()}
    assert ok == {"good", "three-hops"}
    assert errors == {
        "missing": "fetch-http-404", "broken": "fetch-http-500", "slow": "fetch-timeout",
        "big": "fetch-too-large", "big-stream": "fetch-too-large",
        "four-hops": "fetch-too-many-redirects", "to-private": "fetch-refused-address",
        "to-metadata": "fetch-refused-address", "to-file": "fetch-bad-redirect",
        "not-an-image": "not-an-image",
    }
    assert summary.failed_by_reason["fetch-too-large"] == 2 and summary.ingested == 2


def test_without_the_allow_list_every_loopback_url_is_refused(catalog, tmp_path):
    """Through the CLI, as a user runs it: exit 1 (nothing ingested), every URL refused
    with fetch-refused-address, and the server never asked."""
    _, images = catalog
    names = sorted(images)[:4]
    with ImageServer(images) as server:
        manifest = _manifest(tmp_path / "urls.csv", [
            {"id": name, "image": server.url(f"/img/{name}")} for name in names])
        run = subprocess.run(
            [sys.executable, "-m", "vismerch.cli", "ingest", str(manifest), "--store",
             str(tmp_path / "store"), "--workers", "1", "--json"],
            capture_output=True, text=True, timeout=300,
            env=_env(fetch_allow_hosts=""))
        assert sum(server.hits.values()) == 0
    assert run.returncode == 1, run.stderr
    errors = subprocess.run(
        [sys.executable, "-m", "vismerch.cli", "errors", str(tmp_path / "store"), "--json"],
        capture_output=True, text=True, timeout=120, env=_env())
    listed = json.loads(errors.stdout)
    assert {e["product_id"]: e["reason"] for e in listed} == dict.fromkeys(names, "fetch-refused-address")


def test_allow_list_admits_loopback_only_when_named(catalog, tmp_path):
    _, images = catalog
    name = sorted(images)[0]
    with ImageServer(images) as server:
        manifest = _manifest(tmp_path / "urls.csv", [{"id": "a", "image": server.url(f"/img/{name}")}])
        with pytest.raises(JobFailed):
            ingest(manifest, tmp_path / "s1", workers=1, progress=False,
                   settings=_settings("127.0.0.2, 10.0.0.0/8"))
        assert ingest(manifest, tmp_path / "s2", workers=1, progress=False,
                      settings=_settings("127.0.0.0/8")).ingested == 1


def test_file_urls_ingest_like_paths_and_may_not_leave_the_folder(catalog, tmp_path):
    cat, images = catalog
    names = sorted(images)[:5]
    manifest = _manifest(cat.root / "file-urls.csv", [
        {"id": name, "image": (cat.images_dir / name).as_uri()} for name in names])
    paths = _manifest(cat.root / "paths.csv", [
        {"id": name, "image": f"images/{name}"} for name in names])
    a = ingest(manifest, tmp_path / "a", workers=1, progress=False)
    b = ingest(paths, tmp_path / "b", workers=1, progress=False)
    assert a.ingested == b.ingested == 5
    with Store.open(tmp_path / "a") as sa, Store.open(tmp_path / "b") as sb:
        assert sa.tags() == sb.tags()
    outside = _manifest(cat.root / "outside.csv", [{"id": "x", "image": "file:///etc/hostname"}])
    with pytest.raises(SourceError, match="outside the manifest's folder"):
        ingest(outside, tmp_path / "c", workers=1, progress=False)


def test_a_malformed_allow_list_stops_the_run_before_it_starts(catalog, tmp_path):
    from vismerch.errors import UsageError

    cat, _ = catalog
    with pytest.raises(UsageError, match="fetch_allow_hosts"):
        ingest(cat.manifest_path, tmp_path / "s", workers=1, progress=False,
               settings=_settings("10.0.0.0/40"))
    assert not (tmp_path / "s").exists()


def _env(**settings) -> dict[str, str]:
    import os

    return {**os.environ, **{f"VISMERCH_{k.upper()}": str(v) for k, v in settings.items()}}


def _snapshot(path: Path) -> dict:
    with Store.open(path) as store:
        return {"products": [(p.id, p.sha256, p.status) for p in store.products(status=None)],
                "tags": store.tags(), "groups": store.dup_groups(),
                "errors": [(e["product_id"], e["reason"]) for e in store.errors()]}


@pytest.mark.slow
def test_sigkill_mid_run_resumes_and_downloads_only_what_was_not_committed(tmp_path):

    cat = generate_catalog(tmp_path / "cat", n=40, seed=8, corrupt=False, size_range=(520, 600))
    images = {p.name: p.read_bytes() for p in sorted(cat.images_dir.rglob("*")) if p.is_file()}
    env = _env(fetch_allow_hosts="127.0.0.1", task_size=4, batch_size=4)
    with ImageServer(images, slow_s=0.05) as server:
        manifest = _manifest(tmp_path / "urls.csv", [
            {"id": name, "image": server.url(f"/slow/{name}")} for name in images])

        def cmd(store):
            return [sys.executable, "-m", "vismerch.cli", "ingest", str(manifest), "--store",
                    str(store), "--workers", "1", "--json"]

        done = subprocess.run(cmd(tmp_path / "reference"), env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        proc = subprocess.Popen(cmd(tmp_path / "killed"), env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        kill_after_shards(proc, tmp_path / "killed", 3)
        with Store.open(tmp_path / "killed") as store:
            partial = store.counts().get("ok", 0)
        assert 0 < partial < len(images)

        server.wait_idle()  # the killed run's last requests are answered (and counted) first
        server.reset_counts()
        resumed = subprocess.run(cmd(tmp_path / "killed"), env=env, capture_output=True, text=True,
                                 timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        # what was committed is asked for conditionally (304); the rest is downloaded once
        assert server.downloads() == len(images) - partial
        assert sum(server.not_modified.values()) == partial
    assert _snapshot(tmp_path / "killed") == _snapshot(tmp_path / "reference")


@pytest.mark.ray
@pytest.mark.slow
def test_ray_workers_download_urls_like_the_local_run(catalog, tmp_path):
    """Downloads happen in Ray's decode tasks: the same tags as the local run, and a
    re-run on Ray asks only conditionally (no body downloaded)."""
    ray = pytest.importorskip("ray")
    _, images = catalog
    names = sorted(images)
    with ImageServer(images) as server:
        manifest = _manifest(tmp_path / "urls.csv", [
            {"id": name, "image": server.url(f"/img/{name}")} for name in names])
        local = ingest(manifest, tmp_path / "local", workers=1, progress=False,
                       settings=_settings("127.0.0.1", task_size=4))
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="warning")
        try:
            on_ray = ingest(manifest, tmp_path / "ray", progress=False,
                            settings=_settings("127.0.0.1", task_size=4, distributor="ray"))
            server.reset_counts()
            again = ingest(manifest, tmp_path / "ray", progress=False,
                           settings=_settings("127.0.0.1", task_size=4, distributor="ray"))
        finally:
            ray.shutdown()
        assert server.downloads() == 0 and again.skipped == len(names)
    assert local.ingested == on_ray.ingested == len(names)
    with Store.open(tmp_path / "local") as a, Store.open(tmp_path / "ray") as b:
        assert a.tags() == b.tags()
        assert a.dup_groups() == b.dup_groups()
