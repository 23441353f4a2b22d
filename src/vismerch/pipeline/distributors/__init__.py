"""Distributors decide only *where* ``run_task`` runs: in-process, a local process pool,
or Ray. They yield TaskResults in completion order and never interpret them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from vismerch.pipeline.tasks import IngestSpec, Task, TaskResult
from vismerch.registry import Registry


class Distributor(Protocol):
    def run(self, tasks: Iterable[Task], spec: IngestSpec) -> Iterator[TaskResult]: ...

    def close(self) -> None: ...


DISTRIBUTORS: Registry = Registry("distributors")


def _local(workers: int = 1, **_):
    from vismerch.pipeline.distributors.local import LocalDistributor

    return LocalDistributor(workers=workers)


def _ray(workers: int = 1, **options):
    from vismerch.pipeline.distributors.ray import RayDistributor

    return RayDistributor(workers=workers, **options)


def _device(workers: int = 1, devices: list[str] | None = None, **_):
    from vismerch.pipeline.distributors.gpu import DeviceDistributor

    return DeviceDistributor(workers=workers, devices=devices)


DISTRIBUTORS.register("local", _local)
DISTRIBUTORS.register("device", _device)
DISTRIBUTORS.register("ray", _ray)
