"""pipeline/plan.task_step: tasks no larger than task_size, spread so workers finish together."""

from __future__ import annotations

import pytest

from vismerch.pipeline.plan import task_step


@pytest.mark.parametrize(("n", "size", "workers", "step"), [
    (2000, 256, 2, 250),  # 8 even tasks, not 7 of 256 and a short one
    (2300, 256, 2, 230),  # 9 tasks of 256 would leave one worker the last alone: 10
    (16, 256, 2, 8),  # a small ingest still uses both workers
    (1000, 256, 1, 256),  # one worker: tasks as configured
    (5, 256, 8, 1),
    (0, 256, 2, 256),
])
def test_task_step(n, size, workers, step):
    assert task_step(n, size, workers) == step


def _busiest(n: int, step: int, workers: int) -> int:
    """Images on the busiest worker when workers take the tasks in turn."""
    loads = [0] * workers
    for i, start in enumerate(range(0, n, step)):
        loads[i % workers] += min(step, n - start)
    return max(loads)


@pytest.mark.parametrize("workers", [2, 3, 4, 16])
def test_tasks_never_exceed_the_setting_nor_load_a_worker_more_than_full_tasks_did(workers):
    for n in range(1, 3000, 37):
        step = task_step(n, 256, workers)
        assert 1 <= step <= 256
        assert _busiest(n, step, workers) <= _busiest(n, 256, workers)
