"""Streaming distributor: one overlapped, bounded pipeline per device, started once.

Four stages run at the same time, joined by bounded queues (backpressure: a slow stage
stops the ones before it instead of letting decoded images pile up in memory):

1. decode: CPU workers (a spawn pool kept until ``close``; one thread in-process for one
   worker) read, hash and decode at most ``depth`` tasks per worker ahead, in completion
   order; on CUDA with nvJPEG, plain upright JPEGs are only header-checked here;
2. stage (one thread per device): nvJPEG decode of the deferred JPEGs (the CPU decoder
   takes what nvJPEG refuses) and the host-to-device copy of the CPU-decoded pixels
   through one pinned buffer on a side CUDA stream, while the device computes the task
   before;
3. encode (one thread per device, which owns its backends: each model is loaded once
   per device for the distributor's life): every backend over the task, in large batches;
4. write (one thread): the shards and the colour names, off the device's thread.

The driver (``pipeline/ingest.py``) commits each result as with every distributor, so a
run keeps ingest's guarantees: whole tasks per transaction, refused files recorded with
their reason, shards renamed into place before the commit names them, resumable. The
same code runs with ``devices=["cpu"]``, which is how CI covers it.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from typing import Any

from vismerch.pipeline.distributors.gpu import devices_and_defer, devices_for
from vismerch.pipeline.runner import DecodedTask, decode_task, encode_outputs, gpu_decode, write_outputs
from vismerch.pipeline.tasks import IngestSpec, Task, TaskResult
from vismerch.pipeline.worker import backends_for
from vismerch.pipeline.worker_setup import init_worker, worker_environment

_STOP = object()
POLL_S = 0.1  # how often a blocked stage looks whether the run was abandoned


def _failed(index: int, exc: BaseException) -> TaskResult:
    return TaskResult(index=index, error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}")


def _decode(task: Task, spec: IngestSpec, defer_jpeg: bool) -> DecodedTask | TaskResult:
    try:
        return decode_task(task, spec, defer_jpeg=defer_jpeg)
    except Exception as exc:  # the driver retries or records it
        return _failed(task.index, exc)


def stage_on_device(decoded: DecodedTask, device: str, stream: Any) -> Any:
    """Copy the task's CPU-decoded pixels to ``device`` through one pinned buffer on the
    side ``stream`` (where nvJPEG decoded the rest); returns the event the computing
    stream must wait for, None on CPU."""
    import numpy as np
    import torch

    from vismerch.imaging.gpu_decode import pinned_batch

    if stream is None:
        return None
    host = [sha for sha, px in decoded.pixels.items() if isinstance(px, np.ndarray)]
    with torch.cuda.stream(stream):
        if host:
            moved = pinned_batch([decoded.pixels[sha] for sha in host]).to(device, non_blocking=True)
            for row, sha in enumerate(host):
                decoded.pixels[sha] = moved[row]
        ready = torch.cuda.Event()
        ready.record(stream)
    return ready


class _Run:
    """The threads and queues of one ``run``; ``stop`` abandons it (the driver failed)."""

    def __init__(self, n_devices: int, depth: int):
        self.decoded: queue.Queue = queue.Queue(maxsize=depth * n_devices)
        self.staged: queue.Queue = queue.Queue(maxsize=depth * n_devices)
        self.encoded: queue.Queue = queue.Queue(maxsize=depth * n_devices)
        self.results: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def put(self, q: queue.Queue, item: Any) -> bool:
        """Put with backpressure; False when the run was abandoned meanwhile."""
        while not self.stop.is_set():
            try:
                q.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def get(self, q: queue.Queue) -> Any:
        while not self.stop.is_set():
            try:
                return q.get(timeout=POLL_S)
            except queue.Empty:
                continue
        return _STOP

    def start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name=f"vismerch-stream-{target.__name__}")
        thread.start()
        self.threads.append(thread)


class StreamDistributor:
    """See the module docstring. ``depth``: tasks each stage may hold ahead per device
    (and decode ahead per worker)."""

    def __init__(self, workers: int = 1, devices: list[str] | None = None,
                 defer_jpeg: bool | None = None, depth: int = 2):
        self.workers = max(1, int(workers))
        self.devices = devices
        self.defer_jpeg = defer_jpeg  # None: when the first device has an nvJPEG decoder
        self.depth = max(1, int(depth))
        self._pool: ProcessPoolExecutor | ThreadPoolExecutor | None = None

    def _ensure_pool(self) -> ProcessPoolExecutor | ThreadPoolExecutor:
        if self._pool is None:
            if self.workers == 1:  # in-process: no spawn start-up for a single decoder
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="vismerch-decode")
            else:
                worker_environment()
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context("spawn"),
                    initializer=init_worker)
        return self._pool

    def warm_up(self, spec: IngestSpec | None = None) -> None:
        """Start the decode workers now, and load the backends on every device when
        ``spec`` is given, instead of on the first task."""
        pool = self._ensure_pool()
        if isinstance(pool, ProcessPoolExecutor):
            list(pool.map(init_worker, [1] * self.workers))
        if spec is not None:
            for device in self.devices or devices_for(spec.device):
                backends_for(self._device_spec(spec, device))

    @staticmethod
    def _device_spec(spec: IngestSpec, device: str) -> IngestSpec:
        return dataclasses.replace(spec, device=device)

    def run(self, tasks: Iterable[Task], spec: IngestSpec) -> Iterator[TaskResult]:
        tasks = list(tasks)
        if not tasks:
            return
        devices, defer = devices_and_defer(self.devices, self.defer_jpeg, spec)
        state = _Run(len(devices), self.depth)
        state.start(self._feed, state, tasks, spec, defer, len(devices))
        for device in devices:
            state.start(self._stage, state, self._device_spec(spec, device), device)
            state.start(self._encode, state, self._device_spec(spec, device))
        state.start(self._write, state, spec, len(devices))
        try:
            seen: set[int] = set()
            while len(seen) < len(tasks):
                result = state.results.get()
                if result.index in seen:
                    continue
                seen.add(result.index)
                yield result
        finally:
            state.stop.set()
            for thread in state.threads:
                thread.join()

    def _feed(self, state: _Run, tasks: list[Task], spec: IngestSpec, defer: bool,
              n_devices: int) -> None:
        """Decode with at most ``depth`` tasks per worker in flight; pass on in completion order."""
        pool = self._ensure_pool()
        todo = list(reversed(tasks))
        pending: dict[Future, Task] = {}
        try:
            while (todo or pending) and not state.stop.is_set():
                while todo and len(pending) < self.workers * self.depth:
                    task = todo.pop()
                    pending[pool.submit(_decode, task, spec, defer)] = task
                done, _ = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
                for future in done:
                    task = pending.pop(future)
                    try:
                        item = future.result()
                    except Exception as exc:  # a dead decode worker: this task fails, the pool restarts
                        item = TaskResult(index=task.index, error=f"decode worker failed: {exc}")
                        self._restart_pool()
                        pool = self._ensure_pool()
                    if isinstance(item, TaskResult):  # refused as a whole: straight to the driver
                        state.results.put(item)
                    elif not state.put(state.decoded, item):
                        return
        finally:
            for _ in range(n_devices):
                state.put(state.decoded, _STOP)

    def _restart_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _stage(self, state: _Run, spec: IngestSpec, device: str) -> None:
        """nvJPEG decode and the host-to-device copy, a task ahead of the encoder."""
        stream = None
        if device.startswith("cuda"):
            import torch

            stream = torch.cuda.Stream(device=device)
        while (item := state.get(state.decoded)) is not _STOP:
            try:
                if stream is not None:
                    import torch

                    with torch.cuda.stream(stream):
                        item = gpu_decode(item, spec, device)
                    ready = stage_on_device(item, device, stream)
                else:
                    item, ready = gpu_decode(item, spec, device), None
            except Exception as exc:
                state.results.put(_failed(item.result.index, exc))
                continue
            if not state.put(state.staged, (item, ready)):
                return
        state.put(state.staged, _STOP)

    def _encode(self, state: _Run, spec: IngestSpec) -> None:
        """The device's own thread: backends built once, every task through them."""
        batch = None
        backends: dict[str, Any] | None = None
        while (item := state.get(state.staged)) is not _STOP:
            decoded, ready = item
            try:
                if ready is not None:
                    _wait_on(ready, decoded, spec.device)
                if not decoded.needs:
                    state.results.put(decoded.result)
                    continue
                if backends is None:
                    backends = backends_for(spec)
                    batch = _device_batch(spec)
                encoded = encode_outputs(decoded, spec, backends, batch)
            except Exception as exc:
                state.results.put(_failed(decoded.result.index, exc))
                continue
            decoded.pixels.clear()  # the device memory goes back before the write
            if not state.put(state.encoded, (decoded, encoded)):
                return
        state.put(state.encoded, _STOP)

    def _write(self, state: _Run, spec: IngestSpec, n_devices: int) -> None:
        stopped = 0
        while stopped < n_devices:
            item = state.get(state.encoded)
            if item is _STOP:
                if state.stop.is_set():
                    return
                stopped += 1
                continue
            decoded, encoded = item
            try:
                state.results.put(write_outputs(decoded, spec, encoded))
            except Exception as exc:
                state.results.put(_failed(decoded.result.index, exc))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _wait_on(ready: Any, decoded: DecodedTask, device: str) -> None:
    """Make the computing stream wait for the staged copy, and keep the copied tensors
    alive for it (they were allocated on the side stream)."""
    import torch

    current = torch.cuda.current_stream(torch.device(device))
    current.wait_event(ready)
    for px in decoded.pixels.values():
        if isinstance(px, torch.Tensor) and px.is_cuda:
            px.record_stream(current)


def _device_batch(spec: IngestSpec) -> int:
    """Images per batch for backends without their own batch size: a whole task on a GPU
    (a large batch keeps it busy), the ``batch_size`` setting on CPU."""
    settings = spec.settings
    if spec.device.startswith("cuda"):
        return max(int(settings.batch_size), int(getattr(settings, "task_size", 0)),
                   int(getattr(settings, "gpu_task_size", 0)))
    return int(settings.batch_size)
