"""Ingest through the real pipeline: bad files are refused with their own reason and
recorded, good and awkward files are ingested, and the process-pool path agrees with
the in-process one."""

from __future__ import annotations

import io

import pytest

from vismerch.catalog.store import Store
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog, write_bad_files, write_tricky_files


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("catalog")
    small_catalog(root / "good", n=16, seed=2, corrupt=False)
    bad = write_bad_files(root / "bad")
    tricky = write_tricky_files(root / "tricky")
    return root, bad, tricky


def test_bad_files_refused_with_reasons_and_the_rest_ingested(folder, tmp_path):
    root, bad, tricky = folder
    summary = ingest(root, tmp_path / "store", workers=1, progress=False)
    with Store.open(tmp_path / "store") as store:
        errors = {e["product_id"]: e["reason"] for e in store.errors()}
        ok = {p.id for p in store.products()}
        tags = {t["id"]: t for t in store.tags()}
    assert errors == {f"bad/{name}": reason for name, reason in bad.items()}
    assert {f"tricky/{name}" for name in tricky} <= ok
    good = {pid for pid in ok if pid.startswith("good/")}
    assert len(good) == 16
    assert summary.failed == len(bad) and summary.ingested == len(ok)
    assert sum(summary.failed_by_reason.values()) == len(bad)
    # every ingested product has colours and a measured value for each quality metric
    assert all(tags[pid]["colours"] for pid in ok)


def test_missing_file_in_a_manifest_is_recorded_not_fatal(tmp_path):
    cat = small_catalog(tmp_path / "cat", n=6, seed=1, corrupt=False, flawed=False, duplicates=False)
    lines = cat.manifest_path.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[1].split(",")
    row[header.index("id")] = "ghost"
    row[header.index("image")] = "images/does-not-exist.jpg"
    cat.manifest_path.write_text("\n".join([*lines, ",".join(row)]) + "\n")
    summary = ingest(cat.manifest_path, tmp_path / "store", workers=1, progress=False)
    assert summary.failed_by_reason == {"missing-file": 1}
    with Store.open(tmp_path / "store") as store:
        assert store.product("ghost").status == "failed"
        assert {e["product_id"]: e["reason"] for e in store.errors()} == {"ghost": "missing-file"}


def _assert_same_tags_and_groups(one, two) -> None:
    with Store.open(one) as a, Store.open(two) as b:
        assert a.tags() == b.tags()
        assert a.dup_groups() == b.dup_groups()


@pytest.mark.slow
def test_process_pool_matches_in_process(folder, tmp_path):
    root, _, _ = folder
    one = ingest(root / "good", tmp_path / "one", workers=1, progress=False)
    two = ingest(root / "good", tmp_path / "two", workers=2, progress=False)
    assert one.ingested == two.ingested == 16
    _assert_same_tags_and_groups(tmp_path / "one", tmp_path / "two")


@pytest.mark.slow
def test_device_distributor_on_cpu_matches_local(folder, tmp_path):
    """The GPU path (decode workers -> one consumer per device) is the same code on CPU."""
    from vismerch.pipeline.distributors.gpu import DeviceDistributor

    root, _, _ = folder
    local = ingest(root / "good", tmp_path / "local", workers=1, progress=False)
    two_consumers = DeviceDistributor(workers=2, devices=["cpu", "cpu"])
    device = ingest(root / "good", tmp_path / "device", workers=2, progress=False,
                    distributor=two_consumers)
    assert local.ingested == device.ingested == 16
    _assert_same_tags_and_groups(tmp_path / "local", tmp_path / "device")


@pytest.mark.slow
def test_deferred_gpu_jpeg_path_falls_back_to_cpu_decode(folder, tmp_path):
    """With nvJPEG deferral forced on a machine without it, every deferred JPEG takes the
    safe CPU decoder in the consumer, and the store is the same as the plain path."""
    from vismerch.pipeline.distributors.gpu import DeviceDistributor

    root, bad, _ = folder
    plain = ingest(root, tmp_path / "plain", workers=1, progress=False)
    deferred = ingest(root, tmp_path / "deferred", workers=1, progress=False,
                      distributor=DeviceDistributor(workers=1, devices=["cpu"], defer_jpeg=True))
    assert deferred.ingested == plain.ingested and deferred.failed_by_reason == plain.failed_by_reason
    with Store.open(tmp_path / "plain") as a, Store.open(tmp_path / "deferred") as b:
        assert a.tags() == b.tags()
        assert a.errors() == b.errors()
        assert [p.width for p in a.products()] == [p.width for p in b.products()]
        assert all(b.has_thumbnail(p.id) for p in b.products())
        assert all(b.thumbnail(p.id).data == a.thumbnail(p.id).data for p in b.products())


def test_cuda_without_a_gpu_is_a_usage_error_before_any_work(tmp_path):
    import torch

    from vismerch.errors import UsageError

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(UsageError, match="no CUDA device"):
        ingest(tmp_path, tmp_path / "store", device="cuda", progress=False)
    assert not (tmp_path / "store").exists()


def test_a_new_colour_feature_version_refeatures_the_store(folder, tmp_path, monkeypatch):
    """After an upgrade that changes the colour features, the next ingest redoes them."""
    import vismerch.features.base as base

    root, _, _ = folder
    first = ingest(root / "good", tmp_path / "store", workers=1, progress=False)
    same = ingest(root / "good", tmp_path / "store", workers=1, progress=False)
    assert same.skipped == first.ingested and same.ingested == 0
    monkeypatch.setattr(base, "COLOUR_VERSION", base.COLOUR_VERSION + 1)
    upgraded = ingest(root / "good", tmp_path / "store", workers=1, progress=False)
    assert upgraded.ingested == first.ingested and upgraded.skipped == 0


def test_thumbnails_are_jpeg_by_default_and_webp_on_request(tmp_path):
    from PIL import Image

    from vismerch.config import load_settings
    from vismerch.errors import UsageError

    cat = small_catalog(tmp_path / "cat", n=4, seed=3, corrupt=False, flawed=False, duplicates=False)
    ingest(cat.manifest_path, tmp_path / "jpeg", workers=1, progress=False)
    webp = load_settings().replace(thumb_format="webp")
    ingest(cat.manifest_path, tmp_path / "webp", workers=1, progress=False, settings=webp)
    for name, fmt in (("webp", "WEBP"), ("jpeg", "JPEG")):
        with Store.open(tmp_path / name) as store:
            thumbs = [store.thumbnail(p.id) for p in store.products()]
            products = {p.id: p for p in store.products()}
        assert len(thumbs) == 4 and all(thumbs)
        for pid, thumb in zip(products, thumbs, strict=True):
            assert thumb.format == name and thumb.media_type == f"image/{name}"
            with Image.open(io.BytesIO(thumb.data)) as im:
                assert im.format == fmt and max(im.size) <= load_settings().thumb_size
                # aspect of the original kept (portrait shots stay portrait)
                p = products[pid]
                assert abs(im.width / im.height - p.width / p.height) < 0.02
    with pytest.raises(UsageError, match="thumb_format must be one of jpeg, webp"):
        ingest(cat.manifest_path, tmp_path / "bad", progress=False,
               settings=load_settings().replace(thumb_format="png"))
    assert not (tmp_path / "bad").exists()


def test_changed_thresholds_rejudge_stored_images_on_the_next_ingest(tmp_path):
    """Quality thresholds and the multicolour share live in settings: after a change, the
    next ingest re-judges unchanged images from their stored metrics (nothing decoded)."""
    import json

    from vismerch.config import load_settings

    cat = small_catalog(tmp_path / "cat", n=6, seed=5, corrupt=False, flawed=False, duplicates=False)
    store_dir = tmp_path / "store"
    ingest(cat.manifest_path, store_dir, workers=1, progress=False)

    def flagged():
        with Store.open(store_dir) as store:
            derived = json.loads(store.get_meta("derived"))
            return ({pid: {f["name"] for f in flags} for pid, flags in store.quality().items()},
                    {t["id"]: ([c["name"] for c in t["colours"]], t["multicolour"])
                     for t in store.tags()},
                    derived["redescribed"])

    before, colours_before, redescribed = flagged()
    assert redescribed == 0  # judged by the workers with the same rules
    assert not any("low-resolution" in f for f in before.values())
    strict = load_settings().replace(quality_min_side=5000, multicolour_max_weight=1.0)
    summary = ingest(cat.manifest_path, store_dir, workers=1, progress=False, settings=strict)
    assert summary.ingested == 0 and summary.skipped == 6  # nothing decoded again
    after, colours_after, redescribed = flagged()
    assert redescribed == 6
    assert len(after) == 6 and all("low-resolution" in f for f in after.values())
    # a single name must now cover the whole product: every item of 2+ colours is multicolour,
    # a verdict of its own; the colour list itself is unchanged
    for pid, (names, multi) in colours_after.items():
        assert names == colours_before[pid][0]
        assert multi == (len(names) > 1)
    assert any(multi for _, multi in colours_after.values())
    ingest(cat.manifest_path, store_dir, workers=1, progress=False, settings=strict)
    assert flagged()[2] == 0  # same rules: nothing to re-judge


@pytest.mark.parametrize("fmt", ["webp", "jpeg"])
def test_a_batch_of_thumbnails_encoded_on_threads_matches_one_by_one(tmp_path, fmt):
    """The device consumer encodes a batch's thumbnails on a few threads: the same bytes
    as one at a time, each packed whole at its own byte range, no temp file left."""
    import numpy as np

    from vismerch.catalog.thumbs import read_packed
    from vismerch.pipeline.runner import DecodedTask, PhaseTimer, write_thumbs
    from vismerch.pipeline.tasks import TaskResult

    rng = np.random.default_rng(0)
    arrays = [(f"{i:064x}", (rng.random((64, 48, 3)) * 255).astype(np.uint8)) for i in range(9)]
    blobs = {}
    for name, threads in (("threads", 4), ("serial", 1)):
        out = DecodedTask(result=TaskResult(index=0), thumbs=list(arrays))
        write_thumbs(out, tmp_path / name, fmt, PhaseTimer({}), threads=threads)
        assert out.thumbs == [] and len(out.result.thumbs) == 9
        assert [t.sha256 for t in out.result.thumbs] == [sha for sha, _ in arrays]
        assert [p.name for p in (tmp_path / name / "thumbs" / "packs").iterdir()] == [
            out.result.thumbs[0].pack.split("/")[-1]]  # one pack, no temp file
        blobs[name] = [read_packed(tmp_path / name, t.pack, t.start, t.length)
                       for t in out.result.thumbs]
    assert blobs["threads"] == blobs["serial"] and all(blobs["serial"])
    assert len(set(blobs["serial"])) == 9


def test_changed_metadata_of_an_unchanged_image_is_updated_on_the_next_run(tmp_path):
    """A skipped image's manifest row still updates the product (values to other values,
    to empty and from empty); rows that did not change stay as they were."""
    cat = small_catalog(tmp_path / "cat", n=4, seed=6, corrupt=False, flawed=False, duplicates=False)
    ingest(cat.manifest_path, tmp_path / "store", workers=1, progress=False)
    lines = cat.manifest_path.read_text().splitlines()
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    with Store.open(tmp_path / "store") as store:
        before = {p.id: p for p in store.products()}
    rows[0][header.index("title")] = "Renamed"
    rows[1][header.index("brand")] = ""
    rows[2][header.index("price")] = "12.5"
    cat.manifest_path.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    summary = ingest(cat.manifest_path, tmp_path / "store", workers=1, progress=False)
    assert summary.skipped == 4 and summary.ingested == 0
    with Store.open(tmp_path / "store") as store:
        after = {p.id: p for p in store.products()}
    ids = [r[header.index("id")] for r in rows]
    assert after[ids[0]].title == "Renamed"
    assert after[ids[1]].brand is None and before[ids[1]].brand
    assert after[ids[2]].price == 12.5
    assert after[ids[3]] == before[ids[3]]


def test_multicolour_is_its_own_field_in_tags_api_filters_and_migrated_stores(tmp_path):
    """multicolour is a verdict beside the colour list (tags, the API's product models, the
    colour filter and facets), and a store written with the old pseudo-colour (rank 0,
    weight 1.0, empty hex) is migrated to the same answer on open."""
    import sqlite3

    from vismerch.config import load_settings
    from vismerch.service import catalog as service_catalog
    from vismerch.service.workspace import Workspace

    cat = small_catalog(tmp_path / "cat", n=8, seed=5, corrupt=False, flawed=False, duplicates=False)
    store_dir = tmp_path / "store"
    every_two_colour_item = load_settings().replace(multicolour_max_weight=0.98)
    ingest(cat.manifest_path, store_dir, workers=1, progress=False, settings=every_two_colour_item)
    with Store.open(store_dir) as store:
        tags = {t["id"]: t for t in store.tags()}
    multi = {pid for pid, t in tags.items() if t["multicolour"]}
    assert multi and multi != set(tags)  # the sample has plain and patterned items
    for t in tags.values():
        assert all(c["name"] != "multicolour" and c["hex"] for c in t["colours"])
        assert t["multicolour"] == (t["colours"][0]["weight"] < 0.98)

    with Workspace.open(store_dir, every_two_colour_item) as ws:
        page = service_catalog.list_products(ws, limit=100)
        assert {p.id for p in page.items if p.multicolour} == multi
        assert all(p.colour == tags[p.id]["colours"][0]["name"] for p in page.items)
        only = service_catalog.list_products(ws, colour="multicolour", limit=100)
        assert {p.id for p in only.items} == multi
        facets = {f.value: f.count for f in service_catalog.facets(ws).colour}
        assert facets["multicolour"] == len(multi)
        pid = sorted(multi)[0]
        assert service_catalog.product_detail(ws, pid, similar_k=0).multicolour
        assert [t.multicolour for t in service_catalog.tags(ws)] == [tags[i]["multicolour"]
                                                                   for i in sorted(tags)]

    # an older store: the verdict as a rank-0 pseudo-colour and no multicolour table; then
    # the migration that moves it (found by what it creates, whatever its number at merge)
    from vismerch.catalog.schema import MIGRATIONS

    migration = next(m for m in MIGRATIONS if "CREATE TABLE multicolour" in m)
    con = sqlite3.connect(store_dir / "store.sqlite")
    shas = [r[0] for r in con.execute("SELECT sha256 FROM multicolour")]
    for sha in shas:
        con.execute("UPDATE colours SET rank = rank + 100 WHERE sha256 = ?", (sha,))
        con.execute("UPDATE colours SET rank = rank - 99 WHERE sha256 = ?", (sha,))
        con.execute("INSERT INTO colours VALUES (?, 0, 'multicolour', '', 1.0)", (sha,))
    con.execute("DROP TABLE multicolour")
    for statement in migration.split(";"):
        if statement.strip():
            con.execute(statement)
    con.commit()
    con.close()
    with Store.open(store_dir) as store:
        assert {t["id"]: t for t in store.tags()} == tags


def test_workers_keep_freed_memory_where_glibc_allows():
    """A worker asks glibc's malloc to keep freed memory (no zeroed pages per batch); where
    there is no glibc mallopt nothing changes and ingest runs the same."""
    import platform

    from vismerch.pipeline.worker_setup import keep_freed_memory

    assert keep_freed_memory() is (platform.libc_ver()[0] == "glibc")


def test_derive_from_shards_read_during_the_run_equals_derive_from_disk(folder, tmp_path,
                                                                        monkeypatch):
    """The driver keeps each task's features as it commits (up to PREREAD_MAX_ROWS rows:
    sent back with the result by the first tasks, read from the shard for any other) so
    that derive need not read them: the same features, groups and index as a derive that
    reads every shard itself, whether all, some or none were kept."""
    import numpy as np

    import vismerch.pipeline.ingest as ingest_module
    from vismerch.catalog.shards import read_shard
    from vismerch.config import load_settings
    from vismerch.merch.derive import refresh_derived

    root, _, _ = folder
    # colour's shards only (the style backend's would double every count below)
    settings = load_settings().replace(task_size=5, style_encoder="off")
    import vismerch.catalog.shards as shards_module

    stores, derive_reads, driver_reads = {}, {}, {}
    real_read = shards_module.read_shard_or_none
    for cap in (10_000, 7, 0):  # all shards, the first one only, none
        monkeypatch.setattr(ingest_module, "PREREAD_MAX_ROWS", cap)
        reads, own = [], []  # what Store.load_features reads, and the driver during the run
        monkeypatch.setattr(shards_module, "read_shard_or_none",
                            lambda path, *a, reads=reads, **k: reads.append(path) or real_read(path, *a, **k))
        monkeypatch.setattr(ingest_module, "read_shard_or_none",
                            lambda path, *a, own=own, **k: own.append(path) or real_read(path, *a, **k))
        stores[cap] = tmp_path / f"cap{cap}"
        ingest(root / "good", stores[cap], settings=settings, workers=1, progress=False)
        derive_reads[cap], driver_reads[cap] = len(reads), len(own)
    monkeypatch.setattr(shards_module, "read_shard_or_none", real_read)
    # 16 images in tasks of 5, 5, 5, 1: every task sends its columns back under a cap of
    # 10,000 rows; under 7 the first does and the last one's shard is read as it commits
    assert derive_reads[10_000] == 0 and derive_reads[0] == 4 and derive_reads[7] == 2
    assert driver_reads == {10_000: 0, 7: 1, 0: 0}
    views = []
    for path in stores.values():
        with Store.open(path) as store:
            features = store.load_features("colour")
            views.append((features.ids, features.vectors, store.dup_groups(), store.tags()))
    for other in views[1:]:
        assert other[0] == views[0][0] and other[2:] == views[0][2:]
        np.testing.assert_array_equal(other[1], views[0][1])
    # load_features takes the shards it is handed (and only those it needs) out of the dict
    with Store.open(stores[0]) as store:
        shards = [r[0] for r in store.db.execute("SELECT path FROM shards ORDER BY id")]
        preread = {rel: read_shard(stores[0] / rel) for rel in shards[:2]}
        preread["features/colour/not-a-shard.parquet"] = {}
        features = store.load_features("colour", preread=preread)
        assert list(preread) == ["features/colour/not-a-shard.parquet"]
        np.testing.assert_array_equal(features.vectors, views[0][1])
        refresh_derived(store, settings, {})
        assert store.dup_groups() == views[0][2]


def test_derive_runs_without_automatic_gc_and_leaves_the_callers_setting_as_it_was():
    import gc

    from vismerch.pipeline.ingest import gc_paused

    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("derive failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_the_driver_fsyncs_every_shard_and_pack_before_its_commit_names_it(folder, tmp_path,
                                                                           monkeypatch):
    """Workers write shards and thumbnail packs without waiting on the disk; the driver
    fsyncs each one before the transaction that names it (so a committed row never points
    at bytes a power cut could lose)."""
    import vismerch.pipeline.commit as commit_module
    from vismerch.catalog.shards import sync_file
    from vismerch.config import load_settings

    root, _, _ = folder
    synced, named_at_sync = [], []

    def recording_sync(path):
        with Store.open(tmp_path / "store") as store:  # what is committed at that moment
            named_at_sync.append({r[0] for r in store.db.execute("SELECT path FROM shards")}
                                 | store.thumb_packs())
        synced.append(path.relative_to(tmp_path / "store").as_posix())
        sync_file(path)

    monkeypatch.setattr(commit_module, "sync_file", recording_sync)
    ingest(root / "good", tmp_path / "store", settings=load_settings().replace(task_size=6),
           workers=1, progress=False)
    with Store.open(tmp_path / "store") as store:
        committed = {r[0] for r in store.db.execute("SELECT path FROM shards")} | store.thumb_packs()
    # 3 tasks: 3 colour shards, 3 style shards, 3 packs
    assert len(committed) == 9 and set(synced) == committed
    assert all(path not in named for path, named in zip(synced, named_at_sync, strict=True))


def test_derive_modules_are_imported_ahead_on_a_thread_and_a_failing_one_is_left_alone():
    """While the driver waits on the workers it imports what derive will need (FAISS and
    the search modules); a module that fails to import is skipped there (its first real
    use reports it). In a fresh interpreter, where none of them is loaded yet."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from vismerch.pipeline.ingest import DERIVE_MODULES, _import_ahead\n"
        "assert 'faiss' not in sys.modules and 'vismerch.merch.derive' not in sys.modules\n"
        "t = _import_ahead(('vismerch.no_such_module', *DERIVE_MODULES))\n"
        "t.join(60)\n"
        "assert t.daemon and not t.is_alive()\n"
        "assert 'faiss' in sys.modules and all(m in sys.modules for m in DERIVE_MODULES)\n"
        "assert 'vismerch.no_such_module' not in sys.modules\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_workers_take_arrow_buffers_from_the_malloc_that_keeps_freed_memory(monkeypatch):
    """Where glibc keeps freed memory for a worker, its Arrow buffers (the shard it writes
    each task, the Parquet writer's included) come from that malloc, not from a pool that
    returns pages between tasks; a value the user set is kept."""
    import platform

    from vismerch.pipeline.distributors.local import LocalDistributor

    probe = ("(__import__('os').environ.get('ARROW_DEFAULT_MEMORY_POOL'), "
             "__import__('pyarrow').default_memory_pool().backend_name)")
    for preset in (None, "jemalloc"):
        if preset is None:
            monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
        else:
            monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", preset)
        distributor = LocalDistributor(workers=2)
        try:
            distributor.warm_up()
            # the variable Arrow's C++ pool (the Parquet writer's) was chosen by when the
            # worker imported pyarrow, and pyarrow's default pool
            chosen, backend = distributor._pool.submit(eval, probe).result(timeout=120)
        finally:
            distributor.close()
        if platform.libc_ver()[0] != "glibc":
            assert chosen == preset
        else:
            assert (chosen, backend) == (preset or "system", preset or "system")
