"""Kills, races and faults: save-and-publish is one step (and a re-run finishes an old
half state), one writer per store, workers die with their parent, a full disk says the
store is consistent, deep nesting is a parse error, CSV exports are spreadsheet-safe."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vismerch.catalog.grids import read_grid
from vismerch.catalog.lock import LOCK_NAME, writer_lock
from vismerch.catalog.store import Store
from vismerch.cli import main
from vismerch.errors import StoreError, UsageError
from vismerch.merch.expr import parse
from vismerch.pipeline.ingest import ingest
from vismerch.service import versions
from vismerch.service.workspace import Workspace
from vismerch.testing import small_catalog


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return small_catalog(tmp_path_factory.mktemp("atomic") / "cat", n=8, seed=9, corrupt=False,
                         flawed=False, duplicates=False)


@pytest.fixture
def store(cat, tmp_path):
    path = tmp_path / "store"
    ingest(cat.manifest_path, path, workers=1, progress=False)
    return path


def _collection(store) -> str:
    from vismerch.merch.collections import list_collections

    with Store.open(store) as s:
        return max(list_collections(s), key=lambda c: c["size"])["name"]


def test_a_save_left_unpublished_by_a_kill_is_finished_by_the_rerun(store, capsys):
    name = _collection(store)
    # the state a kill between save and publish left: saved, never published
    assert main(["arrange", str(store), "--collection", name, "--save", "spring"]) == 0
    assert main(["arrange", str(store), "--collection", name, "--save", "spring", "--publish"]) == 0
    with Workspace.open(store) as ws:
        assert versions.published_version(ws, name).name == "spring"
    with Store.open(store) as s:  # and the storefront shows it
        assert read_grid(s, name)["version_name"] == "spring"
    # saving a new name with --publish: the version and its publication land together
    assert main(["arrange", str(store), "--collection", name, "--save", "summer", "--publish"]) == 0
    with Workspace.open(store) as ws:
        assert versions.published_version(ws, name).name == "summer"
    with Store.open(store) as s:
        assert read_grid(s, name)["version_name"] == "summer"
    # a published name is still immutable
    assert main(["arrange", str(store), "--collection", name, "--save", "summer", "--publish"]) == 2
    capsys.readouterr()


def test_a_second_writer_gets_a_lock_error_naming_the_holder(store, cat):
    with writer_lock(store), pytest.raises(StoreError) as info:
        ingest(cat.manifest_path, store, workers=1, progress=False)
    assert info.value.exit_code == 2
    assert str(store) in info.value.message and f"pid {os.getpid()}" in info.value.message
    # a lock file left by a dead process is taken over
    (store / LOCK_NAME).write_text("999999999\n")
    assert ingest(cat.manifest_path, store, workers=1, progress=False).skipped == 8


def test_an_ingest_into_a_busy_store_is_refused_before_its_manifest_is_read(store, cat, monkeypatch):
    """A CLI ingest started while a job holds the store stops on the lock at once, not after
    reading (and checking) a manifest that may be millions of rows."""
    from vismerch.pipeline import ingest as driver

    reads = []
    monkeypatch.setattr(driver, "read_source", lambda *a, **k: reads.append(a) or [])
    with writer_lock(store), pytest.raises(StoreError, match="being written"):
        ingest(cat.manifest_path, store, workers=1, progress=False)
    assert reads == []


def test_deep_nesting_is_a_parse_error_not_a_recursion_error():
    for text in ("(" * 199 + "price < 1" + ")" * 199, "not " * 500 + "price < 1",
                 "[" * 300 + "1"):
        with pytest.raises(UsageError):
            parse(text)
    assert parse("(" * 20 + "price < 1" + ")" * 20)({"price": 0})


def test_csv_exports_neutralise_formula_cells_unless_raw(store, tmp_path, capsys):
    name = _collection(store)
    ids = ["=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tTAB", "\rCR", "plain"]
    with Workspace.open(store) as ws:
        versions.save_order(ws, name, "hostile", ids)
    out = tmp_path / "safe.csv"
    assert main(["versions", "export", str(store), name, "hostile", "-o", str(out)]) == 0
    import csv

    cells = [row[1] for row in csv.reader(out.open(newline=""))][1:]
    assert cells == ["'" + i for i in ids[:-1]] + ["plain"]
    raw = tmp_path / "raw.csv"
    assert main(["versions", "export", str(store), name, "hostile", "--raw", "-o", str(raw)]) == 0
    assert [row[1] for row in csv.reader(raw.open(newline=""))][1:] == ids
    capsys.readouterr()


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


@pytest.mark.timeout(180)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_workers_exit_when_their_parent_is_killed(tmp_path):
    cat = small_catalog(tmp_path / "cat", n=40, seed=10, corrupt=False, flawed=False, duplicates=False)
    env = {**os.environ, "VISMERCH_TASK_SIZE": "2"}
    parent = subprocess.Popen([sys.executable, "-m", "vismerch.cli", "ingest", str(cat.manifest_path),
                               "--store", str(tmp_path / "store"), "--workers", "2", "--json"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(workers) < 2 and parent.poll() is None:
        workers = {p for p in _children(parent.pid)
                   if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()}
        time.sleep(0.2)
    assert len(workers) >= 2, "the ingest never started its workers"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in workers):
        time.sleep(0.2)
    alive = [p for p in workers if Path(f"/proc/{p}").exists()
             and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]]
    for p in alive:  # leave nothing behind even when the test fails
        os.kill(p, signal.SIGKILL)
    assert not alive, f"workers {alive} outlived their killed parent"


@contextlib.contextmanager
def _small_disk(tmp_path: Path, size: str):
    """A tmpfs of ``size`` mounted for the block (root only; the test skips elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs as a full disk")
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "none", str(mount)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)])


@pytest.mark.timeout(180)
def test_a_full_disk_says_the_store_stays_consistent(cat, tmp_path):
    with _small_disk(tmp_path, "4m") as mount:
        Store.open(mount / "store", create=True).close()  # the schema fits; the products do not
        free = shutil.disk_usage(mount).free
        (mount / "filler").write_bytes(bytes(max(0, free - 96 * 1024)))
        with pytest.raises(StoreError) as info:
            ingest(cat.manifest_path, mount / "store", workers=1, progress=False)
        message = str(info.value)
        assert "full" in message and "consistent" in message and "again" in message
        with Store.open(mount / "store") as s:  # still opens; committed products are whole
            ok = s.products()
            assert all(s.product(p.id).sha256 for p in ok)


@pytest.mark.timeout(60)
def test_a_disk_too_full_for_the_schema_is_called_full_not_damaged(tmp_path):
    with _small_disk(tmp_path, "64k") as mount, pytest.raises(StoreError) as info:
        Store.open(mount / "store", create=True)
    message = str(info.value)
    assert "full" in message and "damaged" not in message and "again" in info.value.hint


def test_cli_writes_to_rules_collections_and_versions_are_audited_with_the_os_user(store, capsys):
    """One row per writing command, in the write's own transaction (a refused write leaves
    none), naming the OS user and the command line; reads leave none."""
    import getpass

    from vismerch.catalog import access

    def rows() -> list[dict]:
        with Store.open(store) as s:
            return [r for r in access.audit_entries(s, limit=10_000) if r["role"] == "cli"]

    name = _collection(store)
    assert main(["rules", "add", str(store), "boost", "--where", "price < 50"]) == 0
    assert main(["rules", "add", str(store), "boost", "--where", "price <"]) == 2  # refused: no row
    assert main(["rules", "list", str(store)]) == 0
    assert main(["collections", str(store), "--create", "cheap", "--where", "price < 50"]) == 0
    assert main(["arrange", str(store), "--collection", name, "--save", "audited", "--publish"]) == 0
    got = rows()
    assert [r["action"] for r in got] == ["vismerch rules add", "vismerch collections", "vismerch arrange"]
    assert {r["actor"] for r in got} == {f"os:{getpass.getuser()}"}
    assert got[0]["detail"]["argv"][:4] == ["rules", "add", str(store), "boost"]
    capsys.readouterr()
