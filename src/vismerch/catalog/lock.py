"""One writer per store: ``writer_lock(store_path)`` holds an exclusive ``flock`` on
``<store>/writer.lock`` (holding the writer's pid) for the whole of an ingest.

The kernel drops the lock when its process dies, however it dies, so a lock file left by
a killed run is simply taken over; a live holder gets a clear error naming the store and
its pid instead of two runs interleaving shards.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vismerch.errors import StoreError

LOCK_NAME = "writer.lock"


@contextmanager
def writer_lock(store_path: str | os.PathLike) -> Iterator[None]:
    """Hold the store's writer lock, or raise StoreError (exit 2) naming the holder."""
    path = Path(store_path) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise StoreError(
                f"{store_path} is being written by another vismerch process (pid {holder})",
                hint="wait for it to finish; one ingest writes a store at a time",
                exit_code=2,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock


def writer_holder(store_path: str | os.PathLike) -> str | None:
    """The pid (as text) of the process holding the store's writer lock, or None when it is
    free. A probe: the lock is taken and let go at once (a holder in this very process
    counts too: flock locks belong to open files, not processes)."""
    path = Path(store_path) / LOCK_NAME
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        return None
    finally:
        os.close(fd)  # releases a probe's lock
