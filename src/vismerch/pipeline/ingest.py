"""The ingest driver: read the source, plan, distribute, commit, derive.

Each finished task is committed in one SQLite transaction (``pipeline/commit.py``: its
shard rows, features, images, colours, quality, product rows, errors), after its shard
files were renamed into place. A run killed at any moment therefore leaves only whole, committed tasks
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
from functools import cached_property
from pathlib import Path
from typing import Any

from vismerch.catalog.dbfile import disk_full
from vismerch.catalog.lock import writer_lock
from vismerch.catalog.shards import drop_broken_shards, read_shard_or_none, remove_orphans
from vismerch.catalog.sources import ProductRecord, read_source
from vismerch.catalog.store import Store, utc_timestamp
from vismerch.catalog.thumbs import forget_missing_packs, remove_orphan_packs
from vismerch.config import Settings, load_settings
from vismerch.errors import JobFailed, StoreError
from vismerch.features.style import with_style
from vismerch.pipeline.commit import commit_task, failed_task_result, record_unread, update_metadata
from vismerch.pipeline.plan import plan_tasks
from vismerch.pipeline.preflight import check_settings, check_sources
from vismerch.pipeline.tasks import BackendSpec, IngestSpec, Task, TaskResult

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
    "vismerch.indexes.vector", "vismerch.dupes.refresh",
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


@dataclass(frozen=True)
class _Run:
    """What one ingest run was asked to do, once its settings are resolved and checked."""

    source: str | os.PathLike
    records: list[ProductRecord]
    settings: Settings
    n_workers: int
    specs: tuple[BackendSpec, ...]
    distributor: Any
    progress: bool
    derive: bool
    started: float
    on_progress: Callable[[int, int, int], None] | None

    @cached_property
    def by_id(self) -> dict[str, ProductRecord]:
        return {r.id: r for r in self.records}

    def report(self, run_id: int, done: int) -> None:
        if self.on_progress is not None:
            self.on_progress(run_id, done, len(self.records))


@dataclass
class _Tally:
    """The run's accounting as task results come in."""

    accounted: int
    reasons: Counter
    phases: Counter = field(default_factory=Counter)
    ingested: int = 0
    unchanged: int = 0

    def add(self, result: TaskResult, n_items: int) -> None:
        """A committed task's result (``n_items``: the products the task was given)."""
        self.phases.update(result.timings)
        for item in result.items:
            if item.unchanged:  # a URL answered 304: nothing downloaded
                self.unchanged += 1
            elif item.reason is None:
                self.ingested += 1
            else:
                self.reasons[item.reason] += 1
        self.accounted += n_items


@dataclass(frozen=True)
class IngestOptions:
    """How ``ingest`` runs, besides what and with which backends and settings.

    ``workers``/``device`` override those settings; ``distributor``: one to use (and not
    close) instead of the one the settings name; ``progress``: a progress bar; ``derive``:
    rebuild derived data after the run; ``on_progress(run_id, done, total)`` is called once
    planning is done and after every committed task (``done`` counts products accounted
    for: skipped, refused or processed)."""

    workers: int | None = None
    device: str | None = None
    distributor: Any = None
    progress: bool = True
    derive: bool = True
    on_progress: Callable[[int, int, int], None] | None = None


def ingest(
    source: str | os.PathLike,
    store_path: str | os.PathLike,
    *,
    backends: list[str] | tuple[str, ...] = ("colour",),
    backend_options: dict[str, dict[str, Any]] | None = None,
    settings: Settings | None = None,
    **options: Any,
) -> IngestSummary:
    """Ingest a folder or manifest into a store; returns the run's summary. ``options``:
    the fields of ``IngestOptions``.

    Raises JobFailed when the source has images but none could be ingested.
    """
    opts = IngestOptions(**options)
    settings = settings or load_settings()
    overrides = {"workers": opts.workers, "device": opts.device}
    settings = settings.replace(**{k: v for k, v in overrides.items() if v is not None})
    n_workers = check_settings(settings)
    started = time.perf_counter()
    specs = backend_specs(*with_style(backends, backend_options, settings))  # before any write
    check_sources(settings, specs)

    existing = Path(store_path).is_dir()
    with contextlib.ExitStack() as locked:
        if existing:  # a store that may be busy (a job): refused on its lock before the source is read
            locked.enter_context(writer_lock(store_path))
        records = read_source(source, max_id_chars=settings.manifest_max_id_chars,
                              max_text_chars=settings.manifest_max_text_chars)
        run = _Run(source, records, settings, n_workers, specs, opts.distributor, opts.progress,
                   opts.derive, started, opts.on_progress)
        store = Store.open(store_path, create=True)  # only now: a bad manifest makes no store
        try:
            if not existing:  # a new store: nobody else can know it yet
                locked.enter_context(writer_lock(store.path))
            return _ingest_locked(store, run)
        except (OSError, sqlite3.OperationalError) as exc:
            if not disk_full(exc):
                raise
            raise StoreError(
                f"the disk holding {store.path} is full ({exc}); the store stays consistent: every "
                "task committed so far is whole and nothing half-written is counted",
                hint="free some space and run the same command again: it resumes where it stopped",
            ) from exc
        finally:
            store.close()


def _ingest_locked(store: Store, run: _Run) -> IngestSummary:
    """The run itself, under the store's writer lock."""
    _tidy_store(store, run.settings)
    run_id = _start_run(store, run)
    plan, unread = _plan(store, run, run_id)
    tally = _Tally(accounted=len(run.records) - plan.n_items,
                   reasons=Counter(reason for _, reason, _ in unread))
    run.report(run_id, tally.accounted)
    read_ahead = _ReadAhead(store.path, PREREAD_MAX_ROWS) if run.derive else None
    ahead = _run_tasks(store, run, run_id, plan, tally, read_ahead)
    if run.derive:
        t = time.perf_counter()
        if ahead is not None:
            ahead.join()  # long done after a run of any size; derive's imports then find them
        from vismerch.merch.derive import refresh_derived

        with gc_paused():
            refresh_derived(store, run.settings, read_ahead.shards)
        tally.phases["derive"] += time.perf_counter() - t
    return _finish(store, run, run_id, len(plan.skipped), tally)


def _tidy_store(store: Store, settings: Settings) -> None:
    """Repair what a killed run or a damaged store left, before planning."""
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


def _start_run(store: Store, run: _Run) -> int:
    with store.transaction() as con:
        return con.execute(
            "INSERT INTO runs (started_at, source, settings) VALUES (?,?,?)",
            (utc_timestamp(), str(Path(run.source).resolve()),
             json.dumps(run.settings.as_dict(), sort_keys=True)),
        ).lastrowid


def _plan(store: Store, run: _Run, run_id: int) -> tuple[Any, list[tuple[ProductRecord, str, str]]]:
    """The tasks still to do; skipped products' metadata and unreadable products recorded."""
    root = Path(run.source).resolve()
    plan = plan_tasks(run.records, store, [b.key for b in run.specs], _task_size(run.settings),
                      root=root if root.is_dir() else root.parent,
                      max_bytes=run.settings.max_image_bytes, workers=run.n_workers)
    with store.transaction() as con:
        update_metadata(con, plan.skipped)
    unread = [(r, "missing-file", f"{r.image_path} does not exist") for r in plan.missing]
    unread += [(r, refusal.reason, refusal.message) for r, refusal in plan.refused]
    if unread:
        record_unread(store, unread, run_id)
    return plan, unread


def _run_tasks(store: Store, run: _Run, run_id: int, plan: Any, tally: _Tally,
               read_ahead: _ReadAhead | None) -> threading.Thread | None:
    """Every task through the distributor, each result committed as it comes, a failed task
    retried once; the thread importing derive's modules meanwhile (or None)."""
    spec = IngestSpec(
        store_path=str(store.path.resolve()),
        backends=run.specs,
        settings=run.settings,
        device=run.settings.device,
        run_id=run_id,
    )
    distributor = run.distributor
    if distributor is None:
        distributor = _make_distributor(run.settings, run.n_workers, len(plan.tasks))
    if read_ahead is not None:
        read_ahead.ask(plan.tasks)
    tasks_by_index = {t.index: t for t in plan.tasks}
    ahead: threading.Thread | None = None
    attempts: Counter = Counter()
    try:
        with _progress(run.progress, plan.n_items) as advance:
            if run.derive and plan.tasks:
                ahead = _import_ahead(DERIVE_MODULES)
            todo = list(plan.tasks)
            while todo:
                retry: list[Task] = []
                for result in distributor.run(todo, spec):
                    task = tasks_by_index[result.index]
                    if result.error is not None:
                        result = _failed(task, result.error, attempts)
                        if result is None:
                            retry.append(task)
                            continue
                    commit_task(store, result, run.by_id, run_id)
                    if read_ahead is not None:
                        read_ahead.add(result.shards)
                    tally.add(result, len(task.items))
                    advance(len(task.items))
                    run.report(run_id, tally.accounted)
                todo = retry
    finally:
        if run.distributor is None:
            distributor.close()
    return ahead


def _failed(task: Task, error: str, attempts: Counter) -> TaskResult | None:
    """None: try the task again; else the result that refuses its every image."""
    if disk_full(error):  # retrying or recording would not help
        raise OSError(errno.ENOSPC, error.splitlines()[0])
    attempts[task.index] += 1
    if attempts[task.index] < MAX_TASK_ATTEMPTS:
        return None
    return failed_task_result(task, error)


def _finish(store: Store, run: _Run, run_id: int, skipped: int, tally: _Tally) -> IngestSummary:
    """The summary, written to the run's row; JobFailed when nothing could be ingested."""
    seconds = time.perf_counter() - run.started
    failed = sum(tally.reasons.values())
    summary = IngestSummary(
        store=str(store.path),
        run_id=run_id,
        total=len(run.records),
        ingested=tally.ingested,
        skipped=skipped + tally.unchanged,
        failed=failed,
        failed_by_reason=dict(sorted(tally.reasons.items())),
        seconds=round(seconds, 3),
        images_per_s=round(tally.ingested / seconds, 2) if seconds > 0 else 0.0,
        phases={k: round(v, 3) for k, v in sorted(tally.phases.items())},
    )
    with store.transaction() as con:
        con.execute(
            "UPDATE runs SET finished_at = ?, summary = ? WHERE id = ?",
            (utc_timestamp(), json.dumps(summary.as_dict()), run_id),
        )
    if run.records and tally.ingested == 0 and summary.skipped == 0:
        raise JobFailed(
            f"no image could be ingested from {run.source} ({failed} refused)",
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
