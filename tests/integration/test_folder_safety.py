"""A folder source holds only regular image files inside it: symbolic links leading out
of the folder, FIFOs, devices and files over ``max_image_bytes`` are refused by name with
a stable reason (never read, never hashed, never hanging the run), and the good images
of the same batch are ingested."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from vismerch.catalog.reading import FileRefused, read_image_file
from vismerch.catalog.store import Store
from vismerch.config import load_settings
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog

CAP = 1_000_000


@pytest.fixture
def folder(tmp_path):
    cat = small_catalog(tmp_path / "cat", n=6, seed=6, corrupt=False, flawed=False, duplicates=False)
    root = tmp_path / "shop"
    shutil.copytree(cat.root / "images", root)
    good = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.*"))
    assert len(good) == 6 and all((root / p).stat().st_size < CAP for p in good)
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"password=hunter2\n")
    os.symlink(outside, root / "secret.jpg")
    os.symlink("/etc/passwd", root / "passwd.jpg")
    os.symlink("/dev/zero", root / "zero.jpg")
    os.mkfifo(root / "pipe.jpg")
    (root / "huge.jpg").write_bytes(os.urandom(CAP + 1))
    os.symlink(root / good[0], root / "inside-link.jpg")  # a link that stays inside is fine
    return root, good


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 2])
def test_links_out_fifos_devices_and_huge_files_are_refused_by_name(folder, tmp_path, workers):
    root, good = folder
    settings = load_settings(overrides={"max_image_bytes": CAP})
    summary = ingest(root, tmp_path / "store", workers=workers, progress=False, settings=settings)
    with Store.open(tmp_path / "store") as store:
        errors = {e["product_id"]: (e["reason"], e["detail"]) for e in store.errors()}
        ok = {p.id for p in store.products()}
        hashes = {r[0] for r in store.db.execute("SELECT sha256 FROM products") if r[0]}
    assert {k: v[0] for k, v in errors.items()} == {
        "secret.jpg": "outside-folder", "passwd.jpg": "outside-folder", "zero.jpg": "outside-folder",
        "pipe.jpg": "not-a-file", "huge.jpg": "too-large",
    }
    assert "/dev/zero" in errors["zero.jpg"][1] and "FIFO" in errors["pipe.jpg"][1]
    assert ok == set(good) | {"inside-link.jpg"}
    assert summary.ingested == len(ok) and summary.failed == 5
    import hashlib

    assert hashlib.sha256(b"password=hunter2\n").hexdigest() not in hashes


@pytest.mark.timeout(30)
def test_the_reader_never_reads_without_a_bound(tmp_path):
    with pytest.raises(FileRefused) as info:
        read_image_file("/dev/zero", CAP)
    assert info.value.reason == "not-a-file"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(FileRefused) as info:  # opened non-blocking: no writer, no hang
        read_image_file(tmp_path / "fifo", CAP)
    assert info.value.reason == "not-a-file"
    (tmp_path / "big").write_bytes(b"x" * (CAP + 1))
    with pytest.raises(FileRefused) as info:
        read_image_file(tmp_path / "big", CAP)
    assert info.value.reason == "too-large"
    (tmp_path / "ok").write_bytes(b"x" * CAP)
    assert len(read_image_file(tmp_path / "ok", CAP)) == CAP


def test_folder_guard_finds_the_same_real_location_as_realpath(tmp_path):
    """The planner's cached check agrees with os.path.realpath on links to files, to
    folders, chains of links, '..' through a link, and plain files."""
    import os

    from vismerch.catalog.reading import FolderGuard

    root, outside = tmp_path / "cat", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "x.jpg").write_bytes(b"x")
    (root / "sub" / "a.jpg").write_bytes(b"a")
    (root / "plain.jpg").write_bytes(b"p")
    os.symlink(outside, root / "dirlink")
    os.symlink(outside / "x.jpg", root / "filelink.jpg")
    os.symlink(root / "filelink.jpg", root / "chain.jpg")
    os.symlink(root / "sub" / "a.jpg", root / "inside.jpg")
    guard = FolderGuard(root)
    paths = [root / "plain.jpg", root / "sub" / "a.jpg", root / "dirlink" / "x.jpg",
             root / "filelink.jpg", root / "chain.jpg", root / "inside.jpg",
             f"{root}/dirlink/../cat/plain.jpg", f"{root}/sub/../plain.jpg", root / "missing.jpg"]
    for path in paths:
        assert guard.real(path) == Path(os.path.realpath(path)), path
    assert guard.outside(root / "plain.jpg") is None and guard.outside(root / "inside.jpg") is None
    for path in (root / "dirlink" / "x.jpg", root / "chain.jpg", f"{root}/dirlink/../x.jpg"):
        assert guard.outside(path).reason == "outside-folder", path
