"""What is checked before an ingest touches the store or starts a task: worker count,
thumbnail format, CUDA, the fetch allow-list and every neural model (each refused once,
with a hint, rather than in every worker)."""

from __future__ import annotations

import os

from vismerch.catalog.store import THUMB_FORMATS
from vismerch.config import Settings
from vismerch.errors import UsageError
from vismerch.pipeline.tasks import BackendSpec

MAX_WORKERS_PER_CORE = 4  # decode is CPU-bound: more processes than this only add memory


def check_workers(workers: int) -> int:
    """Worker processes for ``--workers`` (0 = one per core); negative or absurd counts are
    refused rather than quietly bent."""
    cores = os.cpu_count() or 1
    cap = MAX_WORKERS_PER_CORE * cores
    if workers < 0 or workers > cap:
        raise UsageError(f"--workers {workers}: give 0 (one per core) or 1 to {cap} "
                         f"({MAX_WORKERS_PER_CORE} per core on this machine's {cores})")
    return workers or cores


def _check_models(specs: tuple[BackendSpec, ...]) -> None:
    """A neural model that cannot load stops the run here, once, with the reason and a
    hint, before the store is touched or any task starts (a worker that failed to load it
    would refuse every image with the same error)."""
    from vismerch.features.base import BACKENDS, backend_info

    for spec in specs:
        info = backend_info(spec.name) if spec.name in BACKENDS else None
        if info is not None and info.check is not None:
            options = spec.kwargs()
            info.check(spec.name, options.get("model"), options.get("revision"))


def _check_fetch_settings(settings: Settings) -> None:
    """A malformed allow-list stops the run before it starts, not in every worker."""
    from vismerch.catalog.fetch import FetchPolicy

    try:
        FetchPolicy.from_settings(settings.as_dict())
    except ValueError as exc:
        raise UsageError(str(exc), hint="fetch_allow_hosts takes host names, IP addresses and "
                         "CIDR networks separated by commas") from None


def _check_cuda(device: str) -> None:
    """Fail before any work when CUDA was asked for and is not there."""
    import torch

    if not torch.cuda.is_available():
        raise UsageError(
            f"--device {device}: no CUDA device is available (torch {torch.__version__})",
            hint="use --device cpu, or install a CUDA build of torch on a machine with a GPU",
        )
    index = device.partition(":")[2]
    if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
        raise UsageError(f"--device {device}: this machine has {torch.cuda.device_count()} GPU(s)")




def check_settings(settings: Settings) -> int:
    """Settings that would fail every task (workers, thumbnail format, CUDA); the worker count."""
    n_workers = check_workers(settings.workers)
    if settings.thumb_format not in THUMB_FORMATS:
        raise UsageError(f"thumb_format must be one of {', '.join(THUMB_FORMATS)}, "
                         f"not {settings.thumb_format!r}")
    if settings.device.startswith("cuda"):
        _check_cuda(settings.device)
    return n_workers


def check_sources(settings: Settings, specs: tuple[BackendSpec, ...]) -> None:
    """What the images and models come from: the fetch allow-list and each neural model."""
    _check_fetch_settings(settings)
    _check_models(specs)
