"""What every ingest worker process runs first (``init_worker``, the pools' initialiser),
and what a driver sets before it spawns them (``worker_environment``).

Kept apart from ``worker.py``, whose imports are heavy: a spawned worker imports the
initialiser's module before it runs it.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time

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
    that keeps freed memory (``keep_freed_memory``) and, where it does, Arrow buffers from
    that malloc too, and a watcher that ends the worker when its parent is gone."""
    global _watching
    import multiprocessing

    parent = multiprocessing.parent_process()  # its real pid, even if it died already
    if parent is not None and not _watching:  # first, before the slow torch import
        _watching = True
        threading.Thread(target=_exit_with_parent, args=(parent.pid,), daemon=True,
                         name="vismerch-parent-watch").start()
    if keep_freed_memory():
        # a worker spawned without worker_environment() (not by our distributors) sets it
        # itself, before anything imports pyarrow; if something already has, pyarrow's
        # own default pool can still change (the Parquet writer's C++ pool cannot)
        worker_environment()
        if os.environ.get("ARROW_DEFAULT_MEMORY_POOL") == "system" and "pyarrow" in sys.modules:
            import pyarrow as pa

            pa.set_memory_pool(pa.system_memory_pool())
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(max(1, threads))
    threadpool_limits(max(1, threads), user_api="blas")


def worker_environment() -> None:
    """Called by a distributor before it spawns workers: on glibc (where ``init_worker``
    makes malloc keep freed memory) the workers take Arrow buffers from malloc, not from
    pyarrow's default pool (mimalloc), which hands freed pages back within milliseconds,
    so that each task's shard (MBs of Arrow buffers, a second apart) faulted them in again:
    a 2,000-image ingest's shard writes took 2-4x their steady time. Arrow's C++ pool (the
    Parquet writer's) is chosen by ARROW_DEFAULT_MEMORY_POOL when pyarrow is first
    imported, which in a spawned worker can come before its initialiser (its parent's
    ``__main__`` is imported again), hence the environment it inherits. A value the user
    set is kept; this process's own pool is long chosen and does not change."""
    if platform.libc_ver()[0] == "glibc":
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

