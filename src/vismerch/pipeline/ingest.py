"""The ingest driver: read the source, plan, distribute, commit, derive.

Each finished task is committed in one SQLite transaction (its shard rows, features,
images, colours, quality, product rows, errors), after its shard files were renamed
into place. A run killed at any moment therefore leaves only whole, committed tasks
(plus at most some unnamed shard files, deleted on the next open), and running the
same command again plans only what is missing.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vismerch.catalog.lock import writer_lock
from vismerch.catalog.shards import (
    drop_broken_shards,
    read_shard_or_none,
    record_shard,
    remove_orphans,
    sync_file,
)
from vismerch.catalog.sources import ProductRecord, read_source
from vismerch.catalog.store import THUMB_FORMATS, Store, utc_timestamp, write_descriptions
from vismerch.catalog.thumbs import forget_missing_packs, record_thumbs, remove_orphan_packs
from vismerch.config import Settings, load_settings
from vismerch.errors import JobFailed, StoreError, UsageError
from vismerch.pipeline.plan import plan_tasks
from vismerch.pipeline.tasks import BackendSpec, IngestSpec, ItemResult, Task, TaskResult

MAX_TASK_ATTEMPTS = 2
PREREAD_MAX_ROWS = 200_000  # feature rows the driver keeps read ahead for derive (~1 GB at most)
log = logging.getLogger("vismerch.ingest")


@dataclass
class IngestSummary:
    store: str
    run_id: int
    total: int
    ingested: int
    skipped: int
    failed: int
    failed_by_reason: dict[str, int]
    seconds: float
    images_per_s: float
    phases: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_UPSERT_PRODUCT = """INSERT INTO products (id, image_path, sha256, status, title, description,
               category, brand, price, stock, sales, created_at, attributes, file_size, file_mtime,
               updated_run)
           VALUES (:id, :image_path, :sha256, :status, :title, :description, :category, :brand,
               :price, :stock, :sales, :created_at, :attributes, :file_size, :file_mtime, :run)
           ON CONFLICT(id) DO UPDATE SET image_path=excluded.image_path, sha256=excluded.sha256,
               status=excluded.status, title=excluded.title, description=excluded.description,
               category=excluded.category, brand=excluded.brand, price=excluded.price,
               stock=excluded.stock, sales=excluded.sales, created_at=excluded.created_at,
               attributes=excluded.attributes, file_size=excluded.file_size,
               file_mtime=excluded.file_mtime, updated_run=excluded.updated_run"""


def _product_row(record: ProductRecord, run_id: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": record.id, "image_path": record.location, "title": record.title,
        "description": record.description, "category": record.category, "brand": record.brand,
        "price": record.price, "stock": record.stock, "sales": record.sales,
        "created_at": record.created_at,
        "attributes": json.dumps(record.attributes, sort_keys=True, default=str),
        "run": run_id, **fields,
    }


def _upsert_product(con, record: ProductRecord, run_id: int, **fields: Any) -> None:
    con.execute(_UPSERT_PRODUCT, _product_row(record, run_id, **fields))


_METADATA = "title, description, category, brand, price, stock, sales, created_at, attributes"


def _update_metadata(con, records: list[ProductRecord]) -> None:
    """Metadata of images that were skipped may still have changed; only rows that did
    change are written (an unchanged catalog of a million products rewrites nothing)."""
    con.executemany(
        f"UPDATE products SET ({_METADATA}) = (?,?,?,?,?,?,?,?,?) "
        f"WHERE id = ? AND ({_METADATA}) IS NOT (?,?,?,?,?,?,?,?,?)",
        [(*values, record.id, *values) for record in records
         for values in [(record.title, record.description, record.category, record.brand,
                         record.price, record.stock, record.sales, record.created_at,
                         json.dumps(record.attributes, sort_keys=True, default=str))]],
    )


def _commit_task(store: Store, result: TaskResult, records: dict[str, ProductRecord], run_id: int) -> None:
    """One task in one transaction, a few statements per table (executemany), not per image."""
    images, cleared, errors, products, validators = [], [], [], [], []
    for item in result.items:
        record = records[item.product_id]
        if record.image_url is not None and item.sha256 and item.reason is None:
            validators.append((record.image_url, item))
        if item.unchanged:  # 304: the image row and features from its last download hold
            cleared.append((item.product_id,))
            products.append(_product_row(record, run_id, sha256=item.sha256, status="ok",
                                         file_size=None, file_mtime=None))
        elif item.reason is None:
            images.append((item.sha256, item.width, item.height, item.nbytes, item.format))
            cleared.append((item.product_id,))
            products.append(_product_row(record, run_id, sha256=item.sha256, status="ok",
                                         file_size=item.file_size, file_mtime=item.file_mtime))
        else:
            errors.append((item.product_id, record.location, item.sha256, item.reason,
                           item.detail, run_id))
            products.append(_product_row(record, run_id, sha256=item.sha256, status="failed",
                                         file_size=item.file_size, file_mtime=item.file_mtime))
    # the worker wrote its shards and thumbnail pack without waiting on the disk: their
    # bytes are made durable here, before the transaction that names them
    for rel in [shard.path for shard in result.shards] + sorted({t.pack for t in result.thumbs}):
        sync_file(store.path / rel)
    with store.transaction() as con:
        for shard in result.shards:
            record_shard(con, shard.backend, shard.fingerprint, shard.spec_key, shard.path,
                         shard.sha256, run_id)
        write_descriptions(con, [(sha, colours, result.quality.get(sha, []),
                                  result.multicolour.get(sha, False))
                                 for sha, colours in result.colours.items()])
        record_thumbs(con, result.thumbs)
        for url, item in validators:
            _record_validators(con, url, item, run_id)
        con.executemany("INSERT OR REPLACE INTO images (sha256, width, height, bytes, format) "
                        "VALUES (?,?,?,?,?)", images)
        con.executemany("DELETE FROM errors WHERE product_id = ?", cleared)
        con.executemany("INSERT OR REPLACE INTO errors (product_id, image_path, sha256, reason, "
                        "detail, run_id) VALUES (?,?,?,?,?,?)", errors)
        con.executemany(_UPSERT_PRODUCT, products)


def _record_validators(con, url: str, item: ItemResult, run_id: int) -> None:
    """Keep what the server said identifies this version (or forget stale validators), in
    the task's transaction: a killed run never keeps validators for uncommitted work."""
    if item.etag or item.last_modified:
        con.execute(
            "INSERT OR REPLACE INTO remote_images (url, sha256, etag, last_modified, run_id) "
            "VALUES (?,?,?,?,?)", (url, item.sha256, item.etag, item.last_modified, run_id))
    else:
        con.execute("DELETE FROM remote_images WHERE url = ?", (url,))


def _record_unread(store: Store, missing: list[tuple[ProductRecord, str, str]], run_id: int) -> None:
    """Products refused before any read: (record, reason, detail)."""
    with store.transaction() as con:
        for record, reason, detail in missing:
            con.execute(
                "INSERT OR REPLACE INTO errors (product_id, image_path, sha256, reason, detail, run_id) "
                "VALUES (?,?,NULL,?,?,?)",
                (record.id, record.location, reason, detail, run_id),
            )
            _upsert_product(con, record, run_id, sha256=None, status="failed",
                            file_size=None, file_mtime=None)


def _failed_task_result(task: Task, error: str) -> TaskResult:
    first_line = error.splitlines()[0] if error else "unknown error"
    return TaskResult(
        index=task.index,
        items=[
            ItemResult(i.product_id, i.file_size, i.file_mtime, reason="worker-error", detail=first_line)
            for i in task.items
        ],
    )


def _identity(name: str, options: dict[str, Any]) -> str:
    """What the options do not say: the colour features' version, a local model's digest."""
    if name == "colour":
        from vismerch.features.base import COLOUR_VERSION

        return f"v{COLOUR_VERSION}"
    model = options.get("model")
    if model and Path(str(model)).is_dir():
        from vismerch.features.base import folder_digest

        return folder_digest(model)
    return ""


def backend_specs(backends: list[str] | tuple[str, ...], options: dict[str, dict[str, Any]] | None) -> tuple:
    """The colour backend always runs (tags, quality, duplicates come from it)."""
    names = ["colour"] + [b for b in backends if b != "colour"]
    options = options or {}
    specs = []
    for name in names:
        given = {k: v for k, v in options.get(name, {}).items() if v is not None}
        specs.append(BackendSpec(name, tuple(sorted(given.items())), identity=_identity(name, given)))
    return tuple(specs)


def _disk_full(message: str) -> bool:
    return "No space left on device" in message or "database or disk is full" in message


MAX_WORKERS_PER_CORE = 4  # decode is CPU-bound: more processes than this only add memory


def check_workers(workers: int) -> int:
    """Worker processes for ``--workers`` (0 = one per core); negative or absurd counts are
    refused rather than quietly bent."""
    cores = os.cpu_count() or 1
    cap = MAX_WORKERS_PER_CORE * cores
    if workers < 0 or workers > cap:
        raise UsageError(f"--workers {workers}: give 0 (one per core) or 1 to {cap} "
                         f"({MAX_WORKERS_PER_CORE} per core on this machine's {cores})")
    return workers or cores


def _check_models(specs: tuple[BackendSpec, ...]) -> None:
    """A neural model that cannot load stops the run here, once, with the reason and a
    hint, before the store is touched or any task starts (a worker that failed to load it
    would refuse every image with the same error)."""
    from vismerch.features.base import BACKENDS, backend_info

    for spec in specs:
        info = backend_info(spec.name) if spec.name in BACKENDS else None
        if info is not None and info.check is not None:
            options = spec.kwargs()
            info.check(spec.name, options.get("model"), options.get("revision"))


def _check_fetch_settings(settings: Settings) -> None:
    """A malformed allow-list stops the run before it starts, not in every worker."""
    from vismerch.catalog.fetch import FetchPolicy

    try:
        FetchPolicy.from_settings(settings.as_dict())
    except ValueError as exc:
        raise UsageError(str(exc), hint="fetch_allow_hosts takes host names, IP addresses and "
                         "CIDR networks separated by commas") from None


def _check_cuda(device: str) -> None:
    """Fail before any work when CUDA was asked for and is not there."""
    import torch

    if not torch.cuda.is_available():
        raise UsageError(
            f"--device {device}: no CUDA device is available (torch {torch.__version__})",
            hint="use --device cpu, or install a CUDA build of torch on a machine with a GPU",
        )
    index = device.partition(":")[2]
    if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
        raise UsageError(f"--device {device}: this machine has {torch.cuda.device_count()} GPU(s)")


def _make_distributor(settings: Settings, n_workers: int, n_tasks: int):
    """The distributor the settings name; ``auto``: on a GPU, the streaming pipeline
    (decode, device staging, encode and shard writes overlapped, bounded), on CPU each
    worker runs whole tasks."""
    from vismerch.pipeline.distributors import DISTRIBUTORS

    kind = settings.distributor
    if kind == "auto":
        kind = "stream" if settings.device.startswith("cuda") else "local"
    factory = DISTRIBUTORS.get(kind)
    if kind == "ray":  # the cluster's CPUs, not this machine's, unless workers is set
        return factory(workers=settings.workers, address=settings.ray_address)
    return factory(workers=min(n_workers, max(1, n_tasks)))


def _task_size(settings: Settings) -> int:
    """Images per task: on a CUDA device a task is one large batch through each encoder."""
    if settings.device.startswith("cuda"):
        return max(settings.task_size, settings.gpu_task_size)
    return settings.task_size


class _ReadAhead:
    """Feature shards kept for derive as their tasks commit, so that derive need not read
    every shard after the last task: at most ``max_rows`` rows (derive reads the rest).
    The first tasks up to that many images send their columns back with the result
    (``Task.return_columns``: unpickling them costs a tenth of decoding the Parquet file);
    a shard that came without them is read here, while the driver mostly waits on the
    workers and the file is page-cache hot, on one pyarrow thread (the workers have the
    cores)."""

    def __init__(self, store_path: Path, max_rows: int):
        self.store_path, self.max_rows = store_path, max_rows
        self.shards: dict[str, dict] = {}  # path relative to the store -> read_shard columns
        self.rows = 0

    def ask(self, tasks: list[Task]) -> None:
        """Have the first tasks, up to ``max_rows`` images, send their columns back."""
        asked = 0
        for task in tasks:
            asked += len(task.items)
            if asked > self.max_rows:
                break
            task.return_columns = True

    def add(self, shards: list) -> None:
        for shard in shards:
            if self.rows + len(shard.sha256) > self.max_rows:
                continue
            data = shard.columns
            if data is None:
                data = read_shard_or_none(self.store_path / shard.path, threads=False)
            if data is not None:
                self.shards[shard.path] = data
                self.rows += len(shard.sha256)


DERIVE_MODULES = (  # what derive imports on first use (FAISS with the search modules)
    "vismerch.indexes.vector", "vismerch.merch.dedup", "vismerch.merch.dupfind",
    "vismerch.merch.collections", "vismerch.catalog.dupstate", "vismerch.catalog.reviews",
    "vismerch.features.describe", "vismerch.merch.derive", "vismerch.indexes.catalog",
)


def _import_ahead(modules: tuple[str, ...]) -> threading.Thread:
    """Import ``modules`` on a thread while the driver waits on the workers: the first
    import of FAISS and the search modules would otherwise run after the last task, when
    nothing else does (derive of 2,000 images 0.22 -> 0.16 s). A failing import is left
    for its first real use to report."""
    def run() -> None:
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="vismerch-import-ahead", daemon=True)
    thread.start()
    return thread


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic garbage collection inside: derive builds O(images) dicts and lists
    (no cycles), and each full collection they set off re-walked every object of the
    driver (torch's and FAISS's included): ~90 ms apiece, two per 2,000-image derive."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def ingest(
    source: str | os.PathLike,
    store_path: str | os.PathLike,
    *,
    backends: list[str] | tuple[str, ...] = ("colour",),
    backend_options: dict[str, dict[str, Any]] | None = None,
    settings: Settings | None = None,
    workers: int | None = None,
    device: str | None = None,
    distributor: Any = None,
    progress: bool = True,
    derive: bool = True,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> IngestSummary:
    """Ingest a folder or manifest into a store; returns the run's summary.

    ``on_progress(run_id, done, total)`` is called once planning is done and after every
    committed task (``done`` counts products accounted for: skipped, refused or processed).

    Raises JobFailed when the source has images but none could be ingested.
    """
    settings = settings or load_settings()
    overrides = {"workers": workers, "device": device}
    settings = settings.replace(**{k: v for k, v in overrides.items() if v is not None})
    n_workers = check_workers(settings.workers)
    if settings.thumb_format not in THUMB_FORMATS:
        raise UsageError(f"thumb_format must be one of {', '.join(THUMB_FORMATS)}, "
                         f"not {settings.thumb_format!r}")
    if settings.device.startswith("cuda"):
        _check_cuda(settings.device)
    started = time.perf_counter()
    _check_fetch_settings(settings)
    _check_models(backend_specs(backends, backend_options))

    existing = Path(store_path).is_dir()
    with contextlib.ExitStack() as locked:
        if existing:  # a store that may be busy (a job): refused on its lock before the source is read
            locked.enter_context(writer_lock(store_path))
        records = read_source(source, max_id_chars=settings.manifest_max_id_chars,
                              max_text_chars=settings.manifest_max_text_chars)
        store = Store.open(store_path, create=True)  # only now: a bad manifest makes no store
        try:
            if not existing:  # a new store: nobody else can know it yet
                locked.enter_context(writer_lock(store.path))
            return _ingest_locked(store, source, records, {r.id: r for r in records}, settings,
                                  n_workers, backends, backend_options, distributor, progress,
                                  derive, started, on_progress)
        except (OSError, sqlite3.OperationalError) as exc:
            if not _disk_full(str(exc)) and getattr(exc, "errno", None) != errno.ENOSPC:
                raise
            raise StoreError(
                f"the disk holding {store.path} is full ({exc}); the store stays consistent: every "
                "task committed so far is whole and nothing half-written is counted",
                hint="free some space and run the same command again: it resumes where it stopped",
            ) from exc
        finally:
            store.close()


def _ingest_locked(store: Store, source, records, by_id, settings: Settings, n_workers: int,
                   backends, backend_options, distributor, progress: bool, derive: bool,
                   started: float, on_progress=None) -> IngestSummary:
    """The run itself, under the store's writer lock."""
    with store.transaction() as con:  # a deleted or damaged shard: re-feature its images
        repaired = drop_broken_shards(store.path, con)
    for rel, problem in repaired:
        log.warning("feature shard %s is %s: its images are featured again", rel, problem)
    known_shards = {row[0] for row in store.db.execute("SELECT path FROM shards").fetchall()}
    remove_orphans(store.path, known_shards)
    with store.transaction() as con:
        forget_missing_packs(con, store.path)
    remove_orphan_packs(store.path, store.thumb_packs())
    if store.db.execute("SELECT 1 FROM colours LIMIT 1").fetchone() is None:
        # nothing judged yet: this run's workers judge with these rules and settings,
        # so derive need not re-judge (it does when an older store's key differs)
        from vismerch.features.describe import describe_key
        from vismerch.merch.derive import DESCRIBE_KEY

        store.set_meta(DESCRIBE_KEY, describe_key(settings))
    with store.transaction() as con:
        run_id = con.execute(
            "INSERT INTO runs (started_at, source, settings) VALUES (?,?,?)",
            (utc_timestamp(), str(Path(source).resolve()),
             json.dumps(settings.as_dict(), sort_keys=True)),
        ).lastrowid
    from vismerch.features.style import with_style

    specs = backend_specs(*with_style(backends, backend_options, settings))
    root = Path(source).resolve()
    plan = plan_tasks(records, store, [b.key for b in specs], _task_size(settings),
                      root=root if root.is_dir() else root.parent,
                      max_bytes=settings.max_image_bytes, workers=n_workers)
    with store.transaction() as con:
        _update_metadata(con, plan.skipped)
    unread = [(r, "missing-file", f"{r.image_path} does not exist") for r in plan.missing]
    unread += [(r, refusal.reason, refusal.message) for r, refusal in plan.refused]
    if unread:
        _record_unread(store, unread, run_id)
    report = on_progress or (lambda run, done, total: None)
    accounted = len(records) - plan.n_items
    report(run_id, accounted, len(records))

    spec = IngestSpec(
        store_path=str(store.path.resolve()),
        backends=specs,
        settings=tuple(sorted(settings.as_dict().items())),
        device=settings.device,
        run_id=run_id,
    )
    own_distributor = distributor is None
    if own_distributor:
        distributor = _make_distributor(settings, n_workers, len(plan.tasks))
    phases: Counter = Counter()
    reasons: Counter = Counter(reason for _, reason, _ in unread)
    ingested = unchanged = 0
    tasks_by_index = {t.index: t for t in plan.tasks}
    read_ahead = _ReadAhead(store.path, PREREAD_MAX_ROWS) if derive else None
    if read_ahead is not None:
        read_ahead.ask(plan.tasks)
    ahead: threading.Thread | None = None
    attempts: Counter = Counter()
    try:
        with _progress(progress, plan.n_items) as advance:
            if derive and plan.tasks:
                ahead = _import_ahead(DERIVE_MODULES)
            todo = list(plan.tasks)
            while todo:
                retry: list[Task] = []
                for result in distributor.run(todo, spec):
                    task = tasks_by_index[result.index]
                    if result.error is not None:
                        if _disk_full(result.error):  # retrying or recording would not help
                            raise OSError(errno.ENOSPC, result.error.splitlines()[0])
                        attempts[task.index] += 1
                        if attempts[task.index] < MAX_TASK_ATTEMPTS:
                            retry.append(task)
                            continue
                        result = _failed_task_result(task, result.error)
                    _commit_task(store, result, by_id, run_id)
                    if read_ahead is not None:
                        read_ahead.add(result.shards)
                    phases.update(result.timings)
                    for item in result.items:
                        if item.unchanged:  # a URL answered 304: nothing downloaded
                            unchanged += 1
                        elif item.reason is None:
                            ingested += 1
                        else:
                            reasons[item.reason] += 1
                    advance(len(task.items))
                    accounted += len(task.items)
                    report(run_id, accounted, len(records))
                todo = retry
    finally:
        if own_distributor:
            distributor.close()

    if derive:
        t = time.perf_counter()
        if ahead is not None:
            ahead.join()  # long done after a run of any size; derive's imports then find them
        from vismerch.merch.derive import refresh_derived

        with gc_paused():
            refresh_derived(store, settings, read_ahead.shards)
        phases["derive"] += time.perf_counter() - t

    seconds = time.perf_counter() - started
    failed = sum(reasons.values())
    summary = IngestSummary(
        store=str(store.path),
        run_id=run_id,
        total=len(records),
        ingested=ingested,
        skipped=len(plan.skipped) + unchanged,
        failed=failed,
        failed_by_reason=dict(sorted(reasons.items())),
        seconds=round(seconds, 3),
        images_per_s=round(ingested / seconds, 2) if seconds > 0 else 0.0,
        phases={k: round(v, 3) for k, v in sorted(phases.items())},
    )
    with store.transaction() as con:
        con.execute(
            "UPDATE runs SET finished_at = ?, summary = ? WHERE id = ?",
            (utc_timestamp(), json.dumps(summary.as_dict()), run_id),
        )
    if records and ingested == 0 and summary.skipped == 0:
        raise JobFailed(
            f"no image could be ingested from {source} ({failed} refused)",
            hint="see the reasons above: vismerch errors " + str(store.path),
        )
    return summary


class _progress:
    """A rich progress bar (images, rate, ETA) or nothing."""

    def __init__(self, enabled: bool, total: int):
        self.enabled = enabled and total > 0
        self.total = total

    def __enter__(self):
        if not self.enabled:
            return lambda n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        rate = TextColumn("{task.fields[rate]}")
        self._progress = Progress(
            TextColumn("[bold]ingest"), BarColumn(), MofNCompleteColumn(), rate, TimeRemainingColumn()
        )
        self._progress.start()
        self._started = time.perf_counter()
        task_id = self._progress.add_task("ingest", total=self.total, rate="")
        done = [0]

        def advance(n: int) -> None:
            done[0] += n
            per_s = done[0] / max(time.perf_counter() - self._started, 1e-9)
            self._progress.update(task_id, advance=n, rate=f"{per_s:,.0f} img/s")

        return advance

    def __exit__(self, *exc):
        if self.enabled:
            self._progress.stop()
