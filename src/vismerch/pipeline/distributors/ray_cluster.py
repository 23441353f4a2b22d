"""Ray distributor: the same stages as the local one, placed on a Ray cluster.

- Ray tasks (one CPU each) run ``decode_task`` and the CPU feature backends (colour):
  read, hash, safe decode, thumbnails, the colour shard;
- encoder actors run the neural backends with ``encode_task``: one model load per actor,
  ``num_gpus=1`` each on CUDA (one actor per GPU in the cluster), one CPU actor otherwise.
  Decoded pixels go from the task to the actor through Ray's object store, not the driver;
- at most ``2 x workers`` tasks are in flight (decoding or encoding), so memory stays
  bounded whatever the catalog size (backpressure);
- a task whose worker dies is re-run by Ray (``max_retries``), an actor that dies is
  restarted and its call re-run; the driver sees one result per task, and commits it in
  one transaction exactly as with the local distributor. A re-run rewrites the same shard
  name atomically and only the result the driver receives is ever committed.

Workers write shards and thumbnails into the store directly, so on more than one machine
the store (and the images) must be on storage every node mounts at the same path
(docs/multinode.md); the distributor checks that on every node before the first task.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from typing import Any

from vismerch.errors import UsageError
from vismerch.pipeline.runner import DecodedTask, decode_task, encode_task
from vismerch.pipeline.tasks import IngestSpec, Task, TaskResult
from vismerch.pipeline.worker import backends_for
from vismerch.pipeline.worker_setup import init_worker

TASK_RETRIES = 3  # Ray re-runs a task whose worker process or node died
ACTOR_RESTARTS = 3


def import_ray():
    """Ray, or a usage error that says how to get it."""
    try:
        import ray
    except ImportError as exc:
        raise UsageError(
            "--distributor ray needs Ray, which is not installed",
            hint="install vismerch[ray] (pip install 'vismerch[ray]') on the driver and every node",
        ) from exc
    return ray


def split_spec(spec: IngestSpec) -> tuple[IngestSpec, IngestSpec | None]:
    """(the CPU stage's spec, the encoder actors' spec or None when no backend needs one)."""
    from vismerch.features.base import has_capability

    # a model is loaded once per encoder actor; the rest (colour) is cheap to build and
    # runs in every decode task
    neural = tuple(b for b in spec.backends if has_capability(b.name, "neural"))
    cpu = tuple(b for b in spec.backends if b not in neural)
    cpu_spec = dataclasses.replace(spec, backends=cpu, device="cpu")
    return cpu_spec, (dataclasses.replace(spec, backends=neural) if neural else None)


def _error(task_index: int, exc: BaseException) -> TaskResult:
    return TaskResult(index=task_index, error=f"{type(exc).__name__}: {exc}")


def cpu_stage(task: Task, spec: IngestSpec) -> tuple[bool, DecodedTask | TaskResult]:
    """Decode and CPU features of one task; (whether an encoder must finish it, payload).
    Never raises: a failure comes back as a TaskResult for the driver to retry or record."""
    init_worker(1)
    try:
        cpu_spec, neural_spec = split_spec(spec)
        decoded = decode_task(task, spec)
        if cpu_spec.backends and decoded.needs:
            encode_task(decoded, cpu_spec, backends_for(cpu_spec))
        actor_keys = {b.key for b in neural_spec.backends} if neural_spec else set()
        # ship only the pixels an encoder still needs
        decoded.needs = {sha: n for sha, n in decoded.needs.items() if actor_keys.intersection(n)}
        decoded.pixels = {sha: p for sha, p in decoded.pixels.items() if sha in decoded.needs}
        if not decoded.needs:
            return False, decoded.result
        return True, decoded
    except Exception as exc:
        return False, _error(task.index, exc)


class Encoder:
    """A Ray actor holding one copy of the neural backends (loaded once, on its GPU)."""

    def __init__(self, spec: IngestSpec):
        import ray

        if spec.device.startswith("cuda") and ray.get_gpu_ids():
            # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU: it is cuda:0 here
            spec = dataclasses.replace(spec, device="cuda:0")
        init_worker(1 if spec.device == "cpu" else max(1, (os.cpu_count() or 2) // 2))
        self.spec = spec
        self.backends = backends_for(spec)

    def encode(self, decoded: DecodedTask) -> TaskResult:
        try:
            return encode_task(decoded, self.spec, self.backends)
        except Exception as exc:
            return _error(decoded.result.index, exc)


def _node_check(paths: list[str]) -> list[str]:
    return [p for p in paths if not os.path.exists(p)]


class RayDistributor:
    """Runs ingest tasks on a Ray cluster; see the module docstring.

    ``address``: ``local`` starts a Ray runtime on this machine for the run (stopped by
    ``close()``), ``auto`` joins the cluster this node belongs to, ``HOST:PORT`` that head.
    When Ray is already initialised in this process, that runtime is used as it is.
    ``workers`` bounds tasks in flight (two per worker); 0 means the cluster's CPUs.
    """

    def __init__(self, address: str = "local", workers: int = 0, encoders: int | None = None):
        self.address = address or "local"
        self.workers = max(0, int(workers or 0))
        self.encoders = encoders
        self._started = False

    def _connect(self):
        ray = import_ray()
        if ray.is_initialized():
            return ray
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                   "logging_level": "warning"}
        if self.address == "local" and self.workers:
            options["num_cpus"] = self.workers
        try:
            ray.init(address=self.address, **options)
        except ConnectionError as exc:
            raise UsageError(
                f"--ray-address {self.address}: no Ray cluster to join ({exc})",
                hint="start one with `ray start --head` (and `ray start --address HEAD:6379` on "
                     "each worker node), or use --ray-address local",
            ) from exc
        self._started = True
        return ray

    def _check_nodes(self, ray, tasks: list[Task], spec: IngestSpec) -> None:
        """Every node must see the store and the images at the driver's paths."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from vismerch.catalog.fetch import url_scheme

        local = next((i.path for t in tasks for i in t.items if url_scheme(i.path) is None), None)
        paths = [spec.store_path] + ([local] if local else [])  # URLs are downloaded, not shared
        check = ray.remote(num_cpus=0)(_node_check)
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU")]
        refs = {n["NodeManagerAddress"]: check.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
                ).remote(paths) for n in nodes}
        for node, missing in zip(refs, ray.get(list(refs.values())), strict=True):
            if missing:
                raise UsageError(
                    f"Ray node {node} cannot see {', '.join(missing)}",
                    hint="put the store and the images on storage every node mounts at the same "
                         "path (docs/multinode.md)",
                )

    def _start_encoders(self, ray, spec: IngestSpec) -> list:
        cuda = spec.device.startswith("cuda")
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if cuda and gpus == 0:
            raise UsageError(f"--device {spec.device} with Ray: the cluster has no GPUs",
                             hint="start the worker nodes with GPUs, or use --device cpu")
        count = self.encoders or (gpus if cuda else 1)
        actor = ray.remote(Encoder).options(
            num_gpus=1 if cuda else 0, max_restarts=ACTOR_RESTARTS, max_task_retries=ACTOR_RESTARTS)
        return [actor.remote(spec) for _ in range(count)]

    def run(self, tasks: Iterable[Task], spec: IngestSpec) -> Iterator[TaskResult]:
        queue = list(tasks)
        if not queue:
            return
        ray = self._connect()
        self._check_nodes(ray, queue, spec)
        _, neural_spec = split_spec(spec)
        encoders = self._start_encoders(ray, neural_spec) if neural_spec else []
        busy = [0] * len(encoders)
        slots = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        limit = 2 * slots
        stage = ray.remote(num_cpus=1, num_returns=2, max_retries=TASK_RETRIES)(cpu_stage)
        queue.reverse()  # pop() from the end keeps the plan's order
        pending: dict[Any, tuple[Task, Any, int | None]] = {}  # wait ref -> (task, payload, encoder)
        yielded: set[int] = set()
        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    task = queue.pop()
                    more, payload = stage.remote(task, spec)
                    pending[more] = (task, payload, None)
                [ready], _ = ray.wait(list(pending), num_returns=1)
                task, payload, encoder = pending.pop(ready)
                try:
                    if encoder is None and ray.get(ready):  # decoded: an encoder finishes it
                        pick = min(range(len(busy)), key=busy.__getitem__)
                        busy[pick] += 1
                        pending[encoders[pick].encode.remote(payload)] = (task, None, pick)
                        continue
                    result = ray.get(ready if encoder is not None else payload)
                except ray.exceptions.RayError as exc:  # retries used up, node or actor lost
                    result = _error(task.index, exc)
                if encoder is not None:
                    busy[encoder] -= 1
                if task.index not in yielded:  # one result per task reaches the driver
                    yielded.add(task.index)
                    yield result
        finally:  # the caller stopped early (an error, Ctrl-C): stop what is still queued
            for ref, (_, _, encoder) in pending.items():
                if encoder is None:
                    ray.cancel(ref)
            for actor in encoders:
                ray.kill(actor)

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False
