"""``run_task(task, spec)``: the one function every distributor runs. It builds the
backends once per process from the spec and never raises: failures come back in the
result for the driver to retry or record."""

from __future__ import annotations

import traceback
from typing import Any

from vismerch.pipeline.runner import decode_task, encode_task
from vismerch.pipeline.tasks import IngestSpec, Task, TaskResult
from vismerch.pipeline.worker_setup import init_worker  # noqa: F401  (ingest.py benchmark: old commits too)

_BACKENDS: dict[tuple, dict[str, Any]] = {}


def backends_for(spec: IngestSpec) -> dict[str, Any]:
    """Backends built from the spec, cached for the life of the process."""
    from vismerch.features.base import create_backend

    cache_key = (spec.backends, spec.device, spec.settings)
    if cache_key not in _BACKENDS:
        _BACKENDS[cache_key] = {
            b.key: create_backend(b.name, settings=spec.settings, device=spec.device, **b.kwargs())
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
