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


# glibc's malloc serves blocks over its (adaptive) mmap threshold with fresh mmaps and
# trims the heap top when it frees; the colour backend's per-batch temporaries (a few MB)
# then come back as zeroed pages every batch (page faults and kernel time for each). A
# worker keeps what it freed instead (its footprint stays at its peak, tens of MB).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
KEEP_FREED_BYTES = 512 << 20


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to reuse freed memory rather than return it to the kernel. True
    when set; False where there is no glibc ``mallopt`` (macOS, musl): nothing changes."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # the mmap threshold's maximum on 64-bit glibc is 32 MiB; larger blocks still mmap
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(
        mallopt(_M_TRIM_THRESHOLD, KEEP_FREED_BYTES))


def init_worker(threads: int = 1) -> None:
    """Process initialiser: one torch thread and one BLAS thread per worker so N workers
    use N cores (the colour backend's matrix products run in numpy's BLAS on CPU), malloc
    that keeps freed memory (``keep_freed_memory``), and a watcher that ends the worker
    when its parent is gone."""
    global _watching
    import multiprocessing

    parent = multiprocessing.parent_process()  # its real pid, even if it died already
    if parent is not None and not _watching:  # first, before the slow torch import
        _watching = True
        threading.Thread(target=_exit_with_parent, args=(parent.pid,), daemon=True,
                         name="vismerch-parent-watch").start()
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(max(1, threads))
    threadpool_limits(max(1, threads), user_api="blas")
    keep_freed_memory()


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
