"""Where a download's bytes wait: memory, under one byte budget for the whole process, or
a temporary file.

Every download of a process draws on one ``ByteBudget`` (``fetch_memory_bytes``); a
download that grows past ``fetch_spool_bytes``, or that the budget cannot grant, moves to
an unlinked temporary file and is handed on as a read-only ``mmap`` of it (page cache,
which the kernel can drop, not the worker's heap). So eight endless URLs on sixteen
threads hold at most the budget in memory, not ``fetch_concurrency x max_image_bytes``.
A download held in memory keeps its share of the budget until its consumer takes it
(``Spooled.take``).
"""

from __future__ import annotations

import mmap
import tempfile
import threading
from dataclasses import dataclass
from typing import IO


class ByteBudget:
    """Bytes the downloads of a process may hold in memory at once; never blocks."""

    def __init__(self, capacity: int):
        self.capacity = max(0, int(capacity))
        self.held = 0
        self.peak = 0  # the most ever held (tests read it)
        self._lock = threading.Lock()

    def try_take(self, n: int) -> bool:
        with self._lock:
            if self.held + n > self.capacity:
                return False
            self.held += n
            self.peak = max(self.peak, self.held)
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.held = max(0, self.held - n)


_BUDGETS: dict[int, ByteBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def budget_for(capacity: int) -> ByteBudget:
    """The process's budget (one per configured capacity: in practice one)."""
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault(int(capacity), ByteBudget(capacity))


@dataclass
class Spooled:
    """A finished download: bytes in memory (holding ``held`` of the budget) or a mapped file."""

    data: bytes | mmap.mmap
    budget: ByteBudget | None = None
    held: int = 0

    @property
    def on_disk(self) -> bool:
        return isinstance(self.data, mmap.mmap)

    def take(self) -> bytes:
        """The bytes, giving back the budget; a spooled file is read in once, here, by the
        consumer (one image at a time), never while it waits in the download window."""
        data = self.data
        if isinstance(data, mmap.mmap):
            out = data[:]
            data.close()
        else:
            out = data
        if self.budget is not None and self.held:
            self.budget.give(self.held)
            self.held = 0
        return out


class Spool:
    """Collects one download's chunks in memory while the budget allows and it stays under
    ``threshold`` bytes; past either, in a temporary file."""

    def __init__(self, budget: ByteBudget, threshold: int):
        self.budget, self.threshold = budget, max(0, int(threshold))
        self.size = 0
        self._chunks: list[bytes] = []
        self._file: IO[bytes] | None = None

    def write(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._file is None and (self.size + len(chunk) > self.threshold
                                   or not self.budget.try_take(len(chunk))):
            self._to_disk()
        if self._file is not None:
            self._file.write(chunk)
        else:
            self._chunks.append(chunk)
        self.size += len(chunk)

    def _to_disk(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="vismerch-fetch-")  # noqa: SIM115 (closed in finish/discard)
        held = sum(len(c) for c in self._chunks)
        for c in self._chunks:
            self._file.write(c)
        self._chunks = []
        self.budget.give(held)

    def finish(self) -> Spooled:
        if self._file is None:
            return Spooled(b"".join(self._chunks), self.budget, self.size)
        self._file.flush()
        try:
            if self.size == 0:
                return Spooled(b"")
            return Spooled(mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ))
        finally:
            self._file.close()  # the mapping keeps the (unlinked) file's pages

    def discard(self) -> None:
        """A download that failed: its memory goes back to the budget, its file away."""
        if self._file is not None:
            self._file.close()
        else:
            self.budget.give(sum(len(c) for c in self._chunks))
        self._chunks = []
