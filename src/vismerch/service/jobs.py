"""Ingest jobs: start one in the background, poll its progress, list past ones.

A job runs in its own process (``python -m vismerch.service.job_worker STORE JOB``), not a
thread of the server: decoding and hashing would otherwise hold the server's GIL and slow
every request, and a job keeps running when the server stops or restarts. The child takes
the store's writer lock (``catalog.lock``) like any ``vismerch ingest`` and writes its
status and progress to the ``jobs`` table, so any server process reads them. One writer at
a time: a second job while one runs, or while a CLI ingest holds the lock, is ``Busy``
(HTTP 409).

Sources must lie inside ``serve_source_root``, after following every ``..`` and symlink,
and may neither be the store nor contain it. The setting has no default: until an operator
names the folder, jobs are refused (Conflict, 409), since a default (the store's parent
folder was one) would open to every admin key folders nobody chose.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from vismerch.catalog import jobs as job_rows
from vismerch.catalog.lock import writer_holder
from vismerch.catalog.sources import MANIFEST_SUFFIXES
from vismerch.catalog.store import Store
from vismerch.config import setting
from vismerch.errors import Busy, Conflict, InvalidInput, NotFound
from vismerch.service.paging import Page, decode_key, encode_key
from vismerch.service.workspace import Workspace

log = logging.getLogger("vismerch.jobs")
MAX_WORKERS = 64
REFUSED_SHOWN = 1000  # a job's refused files listed in full up to this many
LOG_DIR = "jobs"  # <store>/jobs/<id>.log: the job process's stdout and stderr


class RefusedFile(BaseModel):
    path: str
    reason: str = Field(description="Stable code: missing-file, truncated, not-an-image, ...")
    product: str | None = None
    detail: str | None = None


class JobInfo(BaseModel):
    id: int
    kind: str = "ingest"
    status: str = Field(description="queued | running | done | failed")
    done: int = Field(description="Products accounted for so far (skipped, refused or ingested)")
    total: int = Field(description="Products in the source (0 until it has been read)")
    source: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    by: str | None = None
    summary: dict[str, Any] | None = Field(None, description="The ingest summary once done")
    error: str | None = None
    refused: list[RefusedFile] = Field(default_factory=list,
                                       description=f"Files refused, with reasons (first {REFUSED_SHOWN})")


def source_root(ws: Workspace) -> Path:
    root = str(setting(ws.settings, "serve_source_root") or "").strip()
    if not root:
        raise Conflict("ingest jobs are off on this server: no folder is named for them to read",
                       hint="set serve_source_root (VISMERCH_SERVE_SOURCE_ROOT) to the folder whose "
                            "catalogs jobs may ingest, or run vismerch ingest on the host")
    return Path(root).expanduser().resolve()


def resolve_source(ws: Workspace, source: str) -> Path:
    """``source`` (absolute, or relative to the source root) as a real path inside the root;
    InvalidInput naming ``source`` otherwise."""
    if not isinstance(source, str) or not source.strip() or "\x00" in source:
        raise InvalidInput("source", "source must be a folder or manifest path")
    root = source_root(ws)
    path = Path(source).expanduser()
    real = (path if path.is_absolute() else root / path).resolve()  # follows .. and symlinks
    if not real.is_relative_to(root):
        raise InvalidInput("source", f"source {source!r} is outside the directory ingest jobs may read",
                           hint="give a path inside serve_source_root")
    if not real.exists():
        raise InvalidInput("source", f"source {source!r} does not exist")
    store = ws.path.resolve()
    if real == store or real.is_relative_to(store) or (real.is_dir() and store.is_relative_to(real)):
        raise InvalidInput("source", f"source {source!r} is, holds or lies inside the store itself",
                           hint="point at the folder of images or the manifest, next to the store")
    if real.is_file() and real.suffix.lower() not in MANIFEST_SUFFIXES:
        raise InvalidInput("source", f"source {source!r} is neither a folder nor a manifest "
                                     f"({', '.join(MANIFEST_SUFFIXES)})")
    if not real.is_dir() and not real.is_file():
        raise InvalidInput("source", f"source {source!r} is not a folder or a regular file")
    return real


def _check_backend(backend: str | None) -> list[str]:
    if backend is None or backend == "colour":
        return ["colour"]
    from vismerch.features.base import BACKENDS

    if backend not in BACKENDS:
        raise InvalidInput("backend", f"unknown backend {backend!r}",
                           hint="one of: " + ", ".join(BACKENDS.names()))
    return ["colour", backend]


class JobRunner:
    """The jobs one server process started; ``ws.jobs`` (made by ``runner(ws)``)."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._job_id: int | None = None
        self._watcher: threading.Thread | None = None
        if writer_holder(ws.path) is None:  # nobody writes: rows still "running" are dead
            job_rows.orphaned_jobs(ws.store)

    def submit(self, source: str, *, backend: str | None = None, workers: int | None = None,
               by: str | None = None) -> JobInfo:
        """Start an ingest of ``source``; Busy when a job or another writer holds the store."""
        real = resolve_source(self.ws, source)
        backends = _check_backend(backend)
        if workers is not None and (isinstance(workers, bool) or not 1 <= int(workers) <= MAX_WORKERS):
            raise InvalidInput("workers", f"workers must be 1..{MAX_WORKERS}, got {workers!r}")
        with self._lock:
            if self._live_job() is not None:
                raise Busy(f"ingest job {self._job_id} is still running", job_id=self._job_id,
                           hint=f"poll GET /api/v1/jobs/{self._job_id} and start the next when it is done")
            holder = writer_holder(self.ws.path)
            if holder is not None:
                raise Busy(f"the store is being written by another vismerch process (pid {holder})",
                           hint="one ingest writes a store at a time; try again when it has finished")
            job_rows.orphaned_jobs(self.ws.store)  # nobody writes: a row still "running" is dead
            params = {"source": str(real), "backends": backends, "workers": workers or 1}
            job_id = job_rows.create_job(self.ws.store, "ingest", params, by)
            log_dir = self.ws.path / LOG_DIR
            log_dir.mkdir(exist_ok=True)
            with open(log_dir / f"{job_id}.log", "ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "vismerch.service.job_worker", str(self.ws.path), str(job_id)],
                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,  # a signal to the server's terminal leaves it running
                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
            try:  # the server's resolved settings (TOML, env, flags), so the job judges alike
                proc.stdin.write(json.dumps(self.ws.settings.as_dict(), default=str).encode())
                proc.stdin.close()
            except OSError:
                pass  # the child died at once; the watcher records why
            self._proc, self._job_id = proc, job_id
            self._watcher = threading.Thread(target=self._watch, args=(proc, job_id),
                                             name=f"vismerch-job-{job_id}", daemon=True)
            self._watcher.start()
        return self.get(job_id)

    def _live_job(self) -> int | None:
        """The job this runner started, while it runs. Once its row says done or failed the
        child has let go of the writer lock, even if the process is still exiting."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        row = job_rows.get_job(self.ws.store, self._job_id)
        return self._job_id if row is not None and row["status"] in ("queued", "running") else None

    def _watch(self, proc: subprocess.Popen, job_id: int) -> None:
        """When the job process ends without recording an outcome (killed, crashed), say so."""
        code = proc.wait()
        try:
            store = Store.open(self.ws.path)  # this thread's own connection
        except Exception:
            log.exception("job %s: cannot open the store to record its end", job_id)
            return
        try:
            row = job_rows.get_job(store, job_id)
            if row is not None and row["status"] in ("queued", "running"):
                tail = _log_tail(self.ws.path / LOG_DIR / f"{job_id}.log")
                why = f"the job process stopped (exit code {code})" + (f": {tail}" if tail else "")
                job_rows.finish_job(store, job_id, row["summary"], why)
        finally:
            store.close()

    def get(self, job_id: int) -> JobInfo:
        row = job_rows.get_job(self.ws.store, job_id)
        if row is None:
            raise NotFound("job", job_id, hint="list jobs with GET /api/v1/jobs")
        return _info(self.ws, row)

    def list(self, limit: int = 50, before: int | None = None) -> list[JobInfo]:
        return [_info(self.ws, row, with_refused=False)
                for row in job_rows.list_jobs(self.ws.store, limit, before)]

    def running(self) -> bool:
        with self._lock:
            return self._live_job() is not None

    def detach(self) -> None:
        """Stop waiting for the running job (the server is stopping): its process runs on in
        its own session and records its outcome itself; a later runner marks it failed if
        it died without doing so."""
        self._watcher = None

    def wait(self, timeout: float | None = None) -> None:
        """Until the job this runner started has finished and its outcome is recorded."""
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout)


def _log_tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _info(ws: Workspace, row: dict[str, Any], with_refused: bool = True) -> JobInfo:
    summary = row.get("summary") or None
    refused: list[dict[str, Any]] = []
    if with_refused and summary:
        if "refused" in summary:  # snapshot taken when the job finished
            refused = summary["refused"]
        elif summary.get("run_id") is not None:
            refused = job_rows.refused_in_run(ws.store, int(summary["run_id"]), REFUSED_SHOWN)
    return JobInfo(id=row["id"], kind=row["kind"], status=row["status"], done=row["done"] or 0,
                   total=row["total"] or 0, source=row["params"].get("source"),
                   created_at=row["created_at"], started_at=row["started_at"],
                   finished_at=row["finished_at"], by=row["by"],
                   summary={k: v for k, v in summary.items() if k != "refused"} if summary else None,
                   error=row["error"], refused=[RefusedFile(**r) for r in refused])


_runner_lock = threading.Lock()


def runner(ws: Workspace) -> JobRunner:
    """The workspace's job runner (made on first use; ``ws.close()`` waits for its job)."""
    with _runner_lock:
        if ws.jobs is None:
            ws.jobs = JobRunner(ws)
        return ws.jobs


def start_ingest(ws: Workspace, source: str, *, backend: str | None = None, workers: int | None = None,
                 by: str | None = None) -> JobInfo:
    return runner(ws).submit(source, backend=backend, workers=workers, by=by)


def get_job(ws: Workspace, job_id: int) -> JobInfo:
    return runner(ws).get(job_id)


def jobs_page(ws: Workspace, cursor: str | None, limit: int) -> Page[JobInfo]:
    """A page of jobs, newest first (keyset on the id, in SQL)."""
    before = decode_key(cursor)
    if before is not None and not isinstance(before, int):
        raise InvalidInput("cursor", "cursor: not a cursor of the job list")
    rows = runner(ws).list(limit + 1, before)
    more = len(rows) > limit
    return Page[JobInfo](items=rows[:limit], next_cursor=encode_key(rows[limit - 1].id) if more else None)
