"""Distributors decide only *where* ``run_task`` runs: in-process, a local process pool,
CPU decode workers feeding one consumer per GPU, one overlapped bounded pipeline per
device (stream), or a Ray cluster running the same
stages. They yield TaskResults in completion order and never interpret them."""

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


def _device(workers: int = 1, devices: list[str] | None = None, **_):
    from vismerch.pipeline.distributors.gpu import DeviceDistributor

    return DeviceDistributor(workers=workers, devices=devices)


def _stream(workers: int = 1, devices: list[str] | None = None, **_):
    from vismerch.pipeline.distributors.stream import StreamDistributor

    return StreamDistributor(workers=workers, devices=devices)


def _ray(workers: int = 0, address: str = "local", **_):
    from vismerch.pipeline.distributors.ray_cluster import RayDistributor

    return RayDistributor(address=address, workers=workers)


DISTRIBUTORS.register("local", _local)
DISTRIBUTORS.register("device", _device)
DISTRIBUTORS.register("stream", _stream)
DISTRIBUTORS.register("ray", _ray)
