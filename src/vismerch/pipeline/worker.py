"""``run_task(task, spec)``: the one function every distributor runs. It builds the
backends once per process from the spec and never raises: failures come back in the
result for the driver to retry or record."""

from __future__ import annotations

import os
import threading
import time
import traceback
from typing import Any

from vismerch.pipeline.runner import decode_task, encode_task
from vismerch.pipeline.tasks import IngestSpec, Task, TaskResult

_BACKENDS: dict[tuple, dict[str, Any]] = {}


PARENT_POLL_S = 1.0
_watching = False


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent died (kill -9 of ``vismerch ingest``) exits within a second
    instead of running on with nobody to commit its work."""
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            os._exit(1)


def init_worker(threads: int = 1) -> None:
    """Process initialiser: one torch thread per worker so N workers use N cores, and a
    watcher that ends the worker when its parent is gone."""
    global _watching
    import multiprocessing

    parent = multiprocessing.parent_process()  # its real pid, even if it died already
    if parent is not None and not _watching:  # first, before the slow torch import
        _watching = True
        threading.Thread(target=_exit_with_parent, args=(parent.pid,), daemon=True,
                         name="vismerch-parent-watch").start()
    import torch

    torch.set_num_threads(max(1, threads))


def backends_for(spec: IngestSpec) -> dict[str, Any]:
    """Backends built from the spec, cached for the life of the process."""
    from vismerch.config import load_settings
    from vismerch.features.base import create_backend

    cache_key = (spec.backends, spec.device, spec.settings)
    if cache_key not in _BACKENDS:
        settings = load_settings(base=spec.settings_dict())
        _BACKENDS[cache_key] = {
            b.key: create_backend(b.name, settings=settings, device=spec.device, **b.kwargs())
            for b in spec.backends
        }
    return _BACKENDS[cache_key]


def run_task(task: Task, spec: IngestSpec) -> TaskResult:
    try:
        decoded = decode_task(task, spec)
        if not decoded.needs:
            return decoded.result
        return encode_task(decoded, spec, backends_for(spec))
    except BaseException as exc:  # noqa: BLE001 - the driver decides what a failure means
        if isinstance(exc, KeyboardInterrupt):
            raise
        return TaskResult(
            index=task.index,
            error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}",
        )
