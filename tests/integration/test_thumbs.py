"""Thumbnails packed one file per ingest task: every product's thumbnail reads back whole
and decodes, a killed run's uncommitted pack is removed by the next ingest, a damaged
pack costs only its thumbnails, and stores written before packs still serve theirs."""

from __future__ import annotations

import io
import logging

import pytest
from PIL import Image

from vismerch.catalog.store import Store
from vismerch.catalog.thumbs import write_pack
from vismerch.config import load_settings
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("thumbs")
    cat = small_catalog(root / "cat", n=10, seed=4, corrupt=False, flawed=False, duplicates=False)
    settings = load_settings().replace(task_size=4)  # three tasks: three packs
    ingest(cat.manifest_path, root / "store", settings=settings, workers=1, progress=False)
    return cat, root / "store", settings


def test_one_pack_per_task_and_every_thumbnail_decodes(packed):
    _, path, settings = packed
    files = sorted(p.name for p in (path / "thumbs" / "packs").iterdir())
    assert [p.name for p in (path / "thumbs").iterdir()] == ["packs"]
    assert len(files) == 3 and all(name.endswith(".pack") for name in files)
    with Store.open(path) as store:
        assert store.thumb_packs() == {f"thumbs/packs/{name}" for name in files}
        products = store.products()
        assert len(products) == 10
        for p in products:
            thumb = store.thumbnail(p.id)
            assert store.has_thumbnail(p.id) and thumb.media_type == "image/jpeg"
            with Image.open(io.BytesIO(thumb.data)) as im:
                im.load()  # the whole stream, not just the header
                assert im.format == "JPEG" and max(im.size) <= settings.thumb_size
                assert abs(im.width / im.height - p.width / p.height) < 0.02


def test_the_next_ingest_removes_a_killed_runs_pack_and_keeps_the_rest(packed, tmp_path):
    import shutil

    cat, path, settings = packed
    store_path = tmp_path / "store"
    shutil.copytree(path, store_path)
    # what a task killed between writing its pack and committing leaves behind
    orphan = write_pack(store_path, [("f" * 64, b"\xff\xd8 not committed")], "jpeg")[0].pack
    (store_path / "thumbs" / "packs" / ".half.pack.tmp").write_bytes(b"partial")
    with Store.open(store_path) as store:
        before = {p.id: store.thumbnail(p.id).data for p in store.products()}
    ingest(cat.manifest_path, store_path, settings=settings, workers=1, progress=False)
    assert not (store_path / orphan).exists()
    assert not (store_path / "thumbs" / "packs" / ".half.pack.tmp").exists()
    with Store.open(store_path) as store:
        assert {p.id: store.thumbnail(p.id).data for p in store.products()} == before


def test_a_damaged_pack_costs_only_its_own_thumbnails(packed, tmp_path, caplog):
    import shutil

    _, path, _ = packed
    store_path = tmp_path / "store"
    shutil.copytree(path, store_path)
    with Store.open(store_path) as store:
        victim = sorted(store.thumb_packs())[0]
        on_victim = {r[0] for r in store.db.execute(
            "SELECT p.id FROM products p JOIN thumbs t ON t.sha256 = p.sha256 WHERE t.pack = ?",
            (victim,))}
        (store_path / victim).write_bytes(b"")  # truncated to nothing
        with caplog.at_level(logging.WARNING, logger="vismerch.thumbs"):
            got = {p.id: store.thumbnail(p.id) for p in store.products()}
    assert on_victim and all(got[pid] is None for pid in on_victim)
    assert all(thumb is not None for pid, thumb in got.items() if pid not in on_victim)
    assert victim in caplog.text


def test_a_store_from_before_packs_serves_its_thumbnail_files(packed, tmp_path):
    """Stores written before packs have thumbs/<sha256>.jpg or .webp and no thumbs rows."""
    import shutil

    _, path, _ = packed
    store_path = tmp_path / "store"
    shutil.copytree(path, store_path)
    with Store.open(store_path) as store:
        products = store.products()
        packed_bytes = {p.id: store.thumbnail(p.id).data for p in products}
        with store.transaction() as con:
            con.execute("DELETE FROM thumbs")
        for p in products[:2]:
            assert store.thumbnail(p.id) is None and not store.has_thumbnail(p.id)
        first, second = products[0], products[1]
        (store_path / "thumbs" / f"{first.sha256}.jpg").write_bytes(packed_bytes[first.id])
        webp = io.BytesIO()
        Image.new("RGB", (8, 6), (200, 30, 30)).save(webp, "WEBP")
        (store_path / "thumbs" / f"{second.sha256}.webp").write_bytes(webp.getvalue())
        legacy = store.thumbnail(first.id)
        assert legacy.data == packed_bytes[first.id] and legacy.media_type == "image/jpeg"
        assert store.thumbnail(second.id).media_type == "image/webp"
        assert store.has_thumbnail(first.id) and store.has_thumbnail(second.id)


def test_a_deleted_pack_is_forgotten_by_the_next_ingest(packed, tmp_path):
    import shutil

    cat, path, settings = packed
    store_path = tmp_path / "store"
    shutil.copytree(path, store_path)
    with Store.open(store_path) as store:
        victim = sorted(store.thumb_packs())[0]  # a random name: any of the three tasks'
        on_victim = {r[0] for r in store.db.execute(
            "SELECT p.id FROM products p JOIN thumbs t ON t.sha256 = p.sha256 WHERE t.pack = ?",
            (victim,))}
    (store_path / victim).unlink()
    ingest(cat.manifest_path, store_path, settings=settings, workers=1, progress=False)
    with Store.open(store_path) as store:
        assert victim not in store.thumb_packs() and len(store.thumb_packs()) == 2
        missing = {p.id for p in store.products() if not store.has_thumbnail(p.id)}
        assert missing == on_victim and len(missing) in (2, 4)  # its task's images: no row
        assert all(store.thumbnail(pid) is None for pid in missing)
