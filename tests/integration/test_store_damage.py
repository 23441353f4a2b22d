"""A read-only store answers every read; read commands never write; a damaged
store.sqlite (empty, garbage, truncated) is refused with exit 2 naming the file and the
fix, and is never silently replaced by a new empty store."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from vismerch.cli import main
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("damage")
    cat = small_catalog(root / "cat", n=8, seed=7, corrupt=False, flawed=False, duplicates=False)
    store = root / "store"
    ingest(cat.manifest_path, store, workers=1, progress=False)
    assert main(["arrange", str(store), "--collection", "dress", "--save", "v1", "--json"]) in (0, 2)
    return cat, store


def _reads(store: str, tmp: str) -> list[list[str]]:
    return [["tags", store, "--json"], ["quality", store, "--json"], ["errors", store, "--json"],
            ["dupes", store, "--json"], ["audit", store, "--json"], ["collections", store, "--json"],
            ["search", store, "--colour", "red", "--json"], ["versions", "list", store, "--json"],
            ["search", store, "red trousers", "--json"], ["rules", "list", store, "--json"],
            ["report", store, "-o", os.path.join(tmp, "r.html")]]


def _snapshot(path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and not p.name.endswith("-shm")}


def test_read_commands_never_write(built, tmp_path, capsys):
    _, original = built
    store = tmp_path / "store"
    shutil.copytree(original, store)
    before = _snapshot(store)
    for args in _reads(str(store), str(tmp_path)):
        assert main(args) == 0, (args, capsys.readouterr())
    assert _snapshot(store) == before  # search used to append a text shard


_READ_ONLY_RUN = """
import sys
from vismerch.cli import main
store, out = sys.argv[1], sys.argv[2]
for args in {reads!r}:
    rc = main(args)
    if rc != 0:
        sys.exit(f"{{args}} exited {{rc}}")
rc = main(["rules", "add", store, "bury", "--where", "stock == 0"])
sys.exit(0 if rc == 2 else f"a write on a read-only store exited {{rc}}, not 2")
"""


@pytest.mark.timeout(300)
def test_a_read_only_store_answers_reads(built, tmp_path):
    _, original = built
    store = tmp_path / "ro-store"
    if os.geteuid() == 0:  # root ignores permissions: a real read-only mount instead
        store.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "none", str(store)]).returncode != 0:
            pytest.skip("running as root without the right to mount a read-only tmpfs")
        try:
            shutil.copytree(original, store, dirs_exist_ok=True)
            subprocess.run(["mount", "-o", "remount,ro", str(store)], check=True)
            _run_reads(store, tmp_path)
        finally:
            subprocess.run(["umount", str(store)])
    else:
        shutil.copytree(original, store)
        for p in [store, *store.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        try:
            _run_reads(store, tmp_path)
        finally:
            for p in [store, *store.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)


def _run_reads(store, tmp_path):
    script = _READ_ONLY_RUN.format(reads=_reads(str(store), str(tmp_path)))
    done = subprocess.run([sys.executable, "-c", script, str(store), str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize("damage", ["empty", "garbage", "truncated"])
def test_a_damaged_database_is_refused_and_kept(built, tmp_path, capsys, damage):
    cat, original = built
    store = tmp_path / "store"
    shutil.copytree(original, store)
    db = store / "store.sqlite"
    data = db.read_bytes()
    db.write_bytes({"empty": b"", "garbage": os.urandom(8192),
                    "truncated": data[: len(data) // 2]}[damage])
    damaged = db.read_bytes()
    for args in (["tags", str(store)], ["versions", "list", str(store)],
                 ["ingest", str(cat.manifest_path), "--store", str(store), "--workers", "1"]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert "store.sqlite" in err and "damaged" in err and "backup" in err, err
    assert db.read_bytes() == damaged  # nothing recreated over it
