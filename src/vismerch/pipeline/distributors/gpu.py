"""Device distributor: CPU decode workers feed one consumer thread per GPU.

Decode (read, hash, safe decode, thumbnails) runs in a spawn process pool, so the GPU
never waits on Pillow; when torchvision's nvJPEG decoder is there, plain upright JPEGs are
only header-checked in the pool and decoded on the GPU by the consumer (the rest still
take the safe CPU decoder); each device has one consumer thread that owns its own backends
(data-parallel inference: every GPU holds a full model replica) and runs
``encode_task``, whose ``encode_stream`` overlaps the next batch's pinned host-to-device
copy with the current batch's compute. The same code runs with ``devices=["cpu"]``,
which is how CI covers it.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor

from vismerch.pipeline.runner import DecodedTask, decode_task, encode_task, gpu_decode
from vismerch.pipeline.tasks import IngestSpec, Task, TaskResult
from vismerch.pipeline.worker import backends_for
from vismerch.pipeline.worker_setup import init_worker, worker_environment

_STOP = object()


def devices_for(device: str) -> list[str]:
    """``cuda`` means every visible GPU; ``cuda:N`` (or ``cpu``) just that one."""
    if device == "cuda":
        from vismerch.accel.device import cuda_devices

        found = [str(d) for d in cuda_devices()]
        return found or ["cuda:0"]
    return [device]


def _decode(task: Task, spec: IngestSpec, defer_jpeg: bool) -> DecodedTask | TaskResult:
    try:
        return decode_task(task, spec, defer_jpeg=defer_jpeg)
    except Exception as exc:  # the driver retries or records it
        return TaskResult(index=task.index, error=f"{type(exc).__name__}: {exc}")


def _consume(device: str, spec: IngestSpec, work: queue.Queue, results: queue.Queue) -> None:
    """One device's consumer: nvJPEG decode and encode each decoded task until _STOP."""
    local = dataclasses.replace(spec, device=device)
    while (item := work.get()) is not _STOP:
        if isinstance(item, TaskResult):  # decode failed: pass it on
            results.put(item)
            continue
        try:
            item = gpu_decode(item, local, device)
            if item.needs:
                results.put(encode_task(item, local, backends_for(local)))
            else:
                results.put(item.result)
        except Exception as exc:
            results.put(TaskResult(index=item.result.index, error=f"{type(exc).__name__}: {exc}"))


def _feed(pool: ProcessPoolExecutor, tasks: list[Task], spec: IngestSpec, defer: bool,
          work: queue.Queue, results: queue.Queue, n_consumers: int) -> None:
    """Decode the tasks in the pool, in order, onto the consumers' queue; then stop them."""
    try:
        for decoded in pool.map(_decode, tasks, [spec] * len(tasks), [defer] * len(tasks)):
            work.put(decoded)
    except Exception as exc:  # a dead decode worker fails the tasks not yet fed
        for task in tasks:
            results.put(TaskResult(index=task.index, error=f"decode pool failed: {exc}"))
    finally:
        for _ in range(n_consumers):
            work.put(_STOP)


class DeviceDistributor:
    def __init__(self, workers: int = 1, devices: list[str] | None = None,
                 defer_jpeg: bool | None = None):
        self.workers = max(1, int(workers))
        self.devices = devices
        self.defer_jpeg = defer_jpeg  # None: when the first device has an nvJPEG decoder

    def run(self, tasks: Iterable[Task], spec: IngestSpec) -> Iterator[TaskResult]:
        tasks = list(tasks)
        if not tasks:
            return
        devices, defer = devices_and_defer(self.devices, self.defer_jpeg, spec)
        work: queue.Queue = queue.Queue(maxsize=2 * len(devices))
        results: queue.Queue = queue.Queue()

        consumers = [threading.Thread(target=_consume, args=(d, spec, work, results), daemon=True)
                     for d in devices]
        for thread in consumers:
            thread.start()
        worker_environment()
        with ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker
        ) as pool:
            feeder = threading.Thread(target=_feed, args=(pool, tasks, spec, defer, work, results,
                                                          len(devices)), daemon=True)
            feeder.start()
            seen: set[int] = set()
            while len(seen) < len(tasks):
                result = results.get()
                if result.index in seen:  # duplicate failure report after a pool crash
                    continue
                seen.add(result.index)
                yield result
            feeder.join()
        for thread in consumers:
            thread.join()

    def close(self) -> None:
        return None


def devices_and_defer(devices: list[str] | None, defer_jpeg: bool | None,
                      spec: IngestSpec) -> tuple[list[str], bool]:
    """The devices to encode on (default: every one ``spec.device`` names) and whether JPEGs
    are left for the GPU's nvJPEG (default: when the first device has it)."""
    devices = devices or devices_for(spec.device)
    if defer_jpeg is None:
        from vismerch.imaging.gpu_decode import gpu_jpeg_decoder

        defer_jpeg = gpu_jpeg_decoder(devices[0]) is not None
    return devices, defer_jpeg
