"""Ingest jobs over HTTP (progress, refusals with reasons, one writer: 409, sources only inside
the source root), concurrent reads while a job writes, POST /plan, and cursors that are
either ours or a 422."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from tests.server.conftest import auth

from vismerch.catalog import access
from vismerch.catalog.lock import writer_lock
from vismerch.config import load_settings
from vismerch.serve.app import API_PREFIX, create_app
from vismerch.service.workspace import Workspace
from vismerch.testing.catalog import small_catalog

JOBS = f"{API_PREFIX}/jobs"
JOB_TIMEOUT_S = 150


@pytest.fixture(scope="module")
def env(store_template, tmp_path_factory):
    """A source root holding a store (a copy of the 40-product template, one collection
    published) and two catalog folders a job may ingest, served in-process."""
    from vismerch.merch.collections import list_collections, members
    from vismerch.service import versions

    root = tmp_path_factory.mktemp("root")
    shutil.copytree(store_template, root / "store")
    first = _flat(small_catalog(tmp_path_factory.mktemp("cat1"), n=24, seed=21), root / "first")
    (first / "zz_planted.jpg").write_bytes(b"<html>not an image</html>\n")
    second = _flat(small_catalog(tmp_path_factory.mktemp("cat2"), n=30, seed=22, corrupt=False),
                   root / "second")
    settings = load_settings(overrides={"serve_rate_limit": 0, "task_size": 6,
                                        "serve_source_root": str(root)})
    ws = Workspace.open(root / "store", settings)
    name = max(list_collections(ws.store), key=lambda c: c["size"])["name"]
    versions.save_order(ws, name, "live", members(ws.store, name))
    versions.publish(ws, name, "live")
    keys = {kind: access.create_key(ws.store, kind)[0] for kind in access.KEY_KINDS}
    # entered, so every request shares one event loop and its thread pool, as under uvicorn
    with TestClient(create_app(ws, settings), raise_server_exceptions=False) as client:
        yield {"client": client, "ws": ws, "keys": keys, "root": root, "first": first, "second": second,
               "collection": name}
    ws.close()


def _flat(catalog, folder):
    """The catalog's images in one folder (folder-source ids are then plain file names; the
    product routes take no "/" in an id)."""
    folder.mkdir()
    for image in catalog.images_dir.rglob("*.*"):
        shutil.copy2(image, folder / f"{folder.name}_{image.parent.name}_{image.name}")
    return folder


def _admin(env) -> dict[str, str]:
    return auth(env["keys"]["admin"])


def _wait(env, job_id: int, seen: list[dict] | None = None) -> dict:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        r = env["client"].get(f"{JOBS}/{job_id}", headers=_admin(env))
        assert r.status_code == 200, r.text
        job = r.json()
        if seen is not None:
            seen.append(job)
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish in {JOB_TIMEOUT_S}s")


def _files(folder) -> int:
    return sum(1 for p in folder.iterdir() if p.is_file())  # _flat folders: no subfolders


def test_job_shows_progress_then_done_with_refused_files_and_a_second_job_is_409(env):
    client, ws = env["client"], env["ws"]
    n_files = _files(env["first"])
    r = client.post(JOBS, json={"source": "first"}, headers=_admin(env))
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["status"] in ("queued", "running") and set(job) >= {"id", "status", "done", "total"}
    again = client.post(JOBS, json={"source": "second"}, headers=_admin(env))
    assert again.status_code == 409, again.text
    assert again.json()["error"]["code"] == "busy" and str(job["id"]) in again.json()["error"]["message"]
    seen: list[dict] = []
    final = _wait(env, job["id"], seen)
    assert final["status"] == "done", final
    assert final["total"] == n_files and final["done"] == n_files
    # progress was visible before the end: a running job with some but not all products done
    assert any(s["status"] == "running" and 0 < s["done"] < s["total"] for s in seen), seen
    dones = [s["done"] for s in seen]
    assert dones == sorted(dones)
    summary = final["summary"]
    assert summary["total"] == n_files and summary["ingested"] + summary["failed"] == n_files
    reasons = {f["path"].rsplit("/", 1)[-1]: f["reason"] for f in final["refused"]}
    assert reasons["zz_planted.jpg"] == "not-an-image"
    assert "truncated" in reasons.values()  # the sample catalog's own corrupt file
    assert len(reasons) == summary["failed"] >= 2
    assert summary["failed_by_reason"]["not-an-image"] >= 1
    assert final["finished_at"] and final["started_at"] and final["source"].endswith("/first")
    listed = client.get(JOBS, headers=_admin(env)).json()["items"]
    assert listed[0]["id"] == job["id"] and listed[0]["status"] == "done"
    # the job's products are in the catalog, readable one by one
    ok = [p for p in ws.store.db.execute("SELECT id FROM products WHERE updated_run = ?",
                                         (summary["run_id"],)).fetchall()]
    assert len(ok) == n_files
    pid = next(p[0] for p in ok if p[0] not in reasons)
    assert client.get(f"{API_PREFIX}/products/{quote(pid, safe='')}",
                      headers=auth(env["keys"]["viewer"])).status_code == 200


def test_an_ingest_holding_the_writer_lock_makes_a_job_409(env):
    client, ws = env["client"], env["ws"]
    before = len(client.get(JOBS, headers=_admin(env)).json()["items"])
    with writer_lock(ws.path):  # what `vismerch ingest` holds for its whole run
        r = client.post(JOBS, json={"source": "second"}, headers=_admin(env))
    assert r.status_code == 409, r.text
    assert f"pid {os.getpid()}" in r.json()["error"]["message"]
    assert len(client.get(JOBS, headers=_admin(env)).json()["items"]) == before  # no job was made


def test_sources_outside_the_root_are_refused_naming_source(env, tmp_path):
    client, root = env["client"], env["root"]
    outside = tmp_path / "outside"
    small_catalog(outside, n=12, seed=5)
    (root / "link_out").symlink_to(outside, target_is_directory=True)
    (root / "notes.txt").write_text("not a manifest")
    before = len(client.get(JOBS, headers=_admin(env)).json()["items"])
    for source in ("../outside", "first/../../outside", str(outside), str(outside / "manifest.csv"),
                   "link_out", "link_out/images", "first/../store", "/etc", "store", "store/thumbs",
                   ".", "nope", "notes.txt", "first\x00"):
        r = client.post(JOBS, json={"source": source}, headers=_admin(env))
        assert r.status_code == 422, (source, r.text)
        assert r.json()["error"]["field"] == "source", (source, r.json())
    for body, field in (({"source": "second", "workers": 0}, "workers"),
                        ({"source": "second", "backend": "no-such"}, "backend"),
                        ({}, "source")):
        r = client.post(JOBS, json=body, headers=_admin(env))
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (body, r.text)
    assert len(client.get(JOBS, headers=_admin(env)).json()["items"]) == before
    assert client.get(f"{JOBS}/999999", headers=_admin(env)).status_code == 404
    assert client.post(JOBS, json={"source": "second"},
                       headers=auth(env["keys"]["publisher"])).status_code == 403


class _Readers:
    """What a storefront and the workbench read while a job writes, each until ``stop``:
    whole product scans, colour searches, a storefront page; what went wrong in ``problems``."""

    def __init__(self, client, viewer: dict, shop: dict, sf_url: str, grid: dict, start_total: int):
        self.client, self.viewer, self.shop, self.sf_url = client, viewer, shop, sf_url
        self.grid, self.start_total = grid, start_total
        self.problems: list[str] = []
        self.counts = {"products": 0, "colour": 0, "storefront": 0}
        self.stop = threading.Event()

    def pages(self) -> None:
        seen: set[str] = set()
        last_total = self.start_total
        while not self.stop.is_set():
            scan = _scan_products(self.client, self.viewer, last_total, self.problems)
            if scan is None:
                return
            ids, last_total = scan
            self.counts["products"] += 1
            if len(ids) != len(set(ids)):
                self.problems.append("a product twice in one scan")
            if seen - set(ids):
                self.problems.append(f"products disappeared: {sorted(seen - set(ids))[:3]}")
            seen |= set(ids)

    def colours(self) -> None:
        for colour in ["red", "navy", "#20a040", "black", "white"] * 1000:
            if self.stop.is_set():
                return
            r = self.client.get(f"{API_PREFIX}/search/colour?colour={quote(colour)}&k=10",
                                headers=self.viewer)
            if r.status_code != 200:
                self.problems.append(f"colour {r.status_code} {r.text[:200]}")
                return
            self.counts["colour"] += 1

    def storefront(self) -> None:
        while not self.stop.is_set():
            r = self.client.get(self.sf_url, headers=self.shop)
            if r.status_code != 200 or r.json()["items"] != self.grid["items"]:
                self.problems.append(f"storefront {r.status_code} {r.text[:200]}")
                return
            self.counts["storefront"] += 1


def _scan_products(client, headers: dict, last_total: int, problems: list[str]
                   ) -> tuple[list[str], int] | None:
    """Every product id, page by page, and the last total seen; a total that shrinks is a
    problem; None (a problem recorded) on an answer other than 200."""
    ids, cursor = [], None
    while True:
        url = f"{API_PREFIX}/products?limit=25" + (f"&cursor={cursor}" if cursor else "")
        r = client.get(url, headers=headers)
        if r.status_code != 200:
            problems.append(f"products {r.status_code} {r.text[:200]}")
            return None
        page = r.json()
        if page["total"] < last_total:
            problems.append(f"total shrank {last_total} -> {page['total']}")
        last_total = page["total"]
        ids += [p["id"] for p in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            return ids, last_total


def test_concurrent_reads_while_a_job_writes_lose_nothing(env):
    """Threads page /products, search by colour and read the storefront while a job ingests
    40 more products: every answer is a 200, no product once seen disappears, totals never
    shrink, and at the end the counts match the job's summary."""
    client, keys = env["client"], env["keys"]
    viewer, shop = auth(keys["viewer"]), auth(keys["storefront"])
    start_total = client.get(f"{API_PREFIX}/products?limit=1", headers=viewer).json()["total"]
    sf_url = f"{API_PREFIX}/storefront/collections/{quote(env['collection'], safe='')}?columns=4&limit=24"
    grid = client.get(sf_url, headers=shop).json()
    readers = _Readers(client, viewer, shop, sf_url, grid, start_total)
    problems, counts, stop = readers.problems, readers.counts, readers.stop
    threads = [threading.Thread(target=f, daemon=True)
               for f in (readers.pages, readers.pages, readers.colours, readers.storefront)]
    r = client.post(JOBS, json={"source": "second"}, headers=_admin(env))
    assert r.status_code == 202, r.text
    for t in threads:
        t.start()
    try:
        final = _wait(env, r.json()["id"])
    finally:
        time.sleep(0.3)  # a few reads after the job's last commit
        stop.set()
        for t in threads:
            t.join(30)
    assert not problems, problems[:5]
    assert final["status"] == "done", final
    assert all(n > 0 for n in counts.values()), counts
    summary = final["summary"]
    assert summary["ingested"] == _files(env["second"]) and summary["failed"] == 0
    end = client.get(f"{API_PREFIX}/products?limit=1", headers=viewer).json()["total"]
    assert end == start_total + summary["ingested"]
    for image in env["second"].iterdir():  # folder ids are paths inside the folder
        r = client.get(f"{API_PREFIX}/products/{quote(image.name, safe='')}?similar=0", headers=viewer)
        assert r.status_code == 200, (image.name, r.text)


def test_a_job_that_ingests_nothing_fails_with_reasons(env):
    bad = env["root"] / "all_bad"
    bad.mkdir()
    (bad / "a.jpg").write_bytes(b"")
    (bad / "b.png").write_bytes(b"plain text")
    r = env["client"].post(JOBS, json={"source": "all_bad"}, headers=_admin(env))
    assert r.status_code == 202, r.text
    final = _wait(env, r.json()["id"])
    assert final["status"] == "failed" and "no image could be ingested" in final["error"]
    assert {f["path"].rsplit("/", 1)[-1]: f["reason"] for f in final["refused"]} == {
        "a.jpg": "empty-file", "b.png": "not-an-image"}


def test_a_job_whose_process_dies_is_failed_and_frees_the_store(env):
    folder = env["root"] / "third"
    folder.mkdir()
    for image in sorted(env["second"].iterdir())[:6]:
        shutil.copy2(image, folder / f"third_{image.name}")
    r = env["client"].post(JOBS, json={"source": "third"}, headers=_admin(env))
    assert r.status_code == 202, r.text
    env["ws"].jobs._proc.kill()  # the job's own process, as an OOM kill would
    final = _wait(env, r.json()["id"])
    assert final["status"] == "failed" and "exit code -9" in final["error"], final
    again = env["client"].post(JOBS, json={"source": "third"}, headers=_admin(env))
    assert again.status_code == 202, again.text
    assert _wait(env, again.json()["id"])["status"] == "done"


def test_plan_endpoint_returns_the_cli_plan(env, capsys):
    from vismerch.cli import main

    client, viewer = env["client"], auth(env["keys"]["viewer"])
    body = {"workload": "embed", "images": "20M", "deadline": "12h", "gpus": ["h100", "l40s"],
            "set": {"utilisation": 0.8}}
    r = client.post(f"{API_PREFIX}/plan", json=body, headers=viewer)
    assert r.status_code == 200, r.text
    capsys.readouterr()
    assert main(["plan", "--workload", "embed", "--images", "20M", "--deadline", "12h",
                 "--gpus", "h100,l40s", "--set", "utilisation=0.8", "--json"]) == 0
    assert r.json() == json.loads(capsys.readouterr().out)
    plan = r.json()
    assert {o["gpu"] for o in plan["options"]} == {"h100", "l40s"}
    assert plan["assumptions"]["utilisation"]["value"] == 0.8
    search = client.post(f"{API_PREFIX}/plan", json={"workload": "search", "vectors": 1e8, "queries": "10M"},
                         headers=viewer)
    assert search.status_code == 200 and search.json()["workload"]["kind"] == "search"


@pytest.mark.parametrize(("body", "field"), [
    ({"workload": "embed"}, "images"),
    ({"workload": "embed", "images": "lots"}, "images"),
    ({"workload": "embed", "images": -5}, "images"),
    ({"workload": "render", "images": "1M"}, "workload"),
    ({"workload": "embed", "images": "1M", "model": "vit-zz"}, "model"),
    ({"workload": "embed", "images": "1M", "model": "vit:width=99999999,depth=2,patch=2,resolution=4"},
     "model"),
    ({"workload": "embed", "images": "1M", "gpus": ["h100", "tpu9"]}, "gpus"),
    ({"workload": "embed", "images": "1M", "deadline": "soon"}, "deadline"),
    ({"workload": "embed", "images": "1M", "precision": "fp7"}, "precision"),
    ({"workload": "embed", "images": "1M", "set": {"utilisation": "high"}}, "set.utilisation"),
    ({"workload": "embed", "images": "1M", "set": {"h100.nope": 1}}, "set.h100.nope"),
    ({"workload": "search", "vectors": "1M"}, "queries"),
    ({"workload": "finetune", "images": "1M", "epochs": 0}, "epochs"),
    ({"workload": "search", "vectors": "1M", "queries": "1M", "dim": 0}, "dim"),
    ({"workload": "embed", "images": "1M", "colour": "red"}, "colour"),
])
def test_plan_bad_fields_are_422_naming_the_field(env, body, field):
    r = env["client"].post(f"{API_PREFIX}/plan", json=body, headers=auth(env["keys"]["viewer"]))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.json()


def test_a_garbage_cursor_is_422_naming_cursor_and_a_given_one_pages_on(env):
    client, viewer = env["client"], auth(env["keys"]["viewer"])
    first = client.get(f"{API_PREFIX}/products?limit=3", headers=viewer).json()
    cursor = first["next_cursor"]
    second = client.get(f"{API_PREFIX}/products?limit=3&cursor={cursor}", headers=viewer)
    assert second.status_code == 200
    assert not {p["id"] for p in first["items"]} & {p["id"] for p in second.json()["items"]}
    tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    for bad in ("garbage", "MQ", "zzzz", "!!", tampered, cursor + "x", "a" * 50):
        r = client.get(f"{API_PREFIX}/products?cursor={quote(bad)}", headers=viewer)
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["error"]["field"] == "cursor"
