"""Local distributor: in-process for one worker, a spawn process pool for more."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from vismerch.pipeline.tasks import IngestSpec, Task, TaskResult
from vismerch.pipeline.worker import run_task
from vismerch.pipeline.worker_setup import init_worker, worker_environment


class LocalDistributor:
    """Runs tasks in ``workers`` processes (spawned: no forked torch/OpenMP state).

    The pool is created on first use and kept until ``close()``, so a caller that ingests
    several times (the benchmark) pays the start-up once.
    """

    def __init__(self, workers: int = 1, threads_per_worker: int = 1):
        self.workers = max(1, int(workers))
        self.threads_per_worker = threads_per_worker
        self._pool: ProcessPoolExecutor | None = None

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            worker_environment()
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=init_worker,
                initargs=(self.threads_per_worker,),
            )
        return self._pool

    def warm_up(self) -> None:
        """Start every worker process now (imports torch etc.) instead of on the first task."""
        if self.workers > 1:
            pool = self._ensure_pool()
            list(pool.map(init_worker, [self.threads_per_worker] * self.workers))

    def run(self, tasks: Iterable[Task], spec: IngestSpec) -> Iterator[TaskResult]:
        if self.workers == 1:
            for task in tasks:
                yield run_task(task, spec)
            return
        pool = self._ensure_pool()
        pending = {}
        queue = list(tasks)
        # keep a bounded number in flight so results stream back (and commit) steadily
        limit = self.workers * 2
        while queue or pending:
            while queue and len(pending) < limit:
                task = queue.pop(0)
                pending[pool.submit(run_task, task, spec)] = task
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                try:
                    yield future.result()
                except BrokenProcessPool:
                    # a worker died (e.g. a decoder crash): report the task, start a new pool
                    self._pool = None
                    yield TaskResult(index=task.index, error="worker process died")
                    for other in list(pending):
                        queue.insert(0, pending.pop(other))
                    pool = self._ensure_pool()
                except Exception as exc:  # pickling errors and the like
                    yield TaskResult(index=task.index, error=f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
