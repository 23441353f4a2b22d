"""The stages of one task: read -> hash -> decode -> encode -> write, timed per phase.

``decode_task`` needs only the CPU; ``encode_task`` runs the backends on their device
and writes the shards. ``worker.run_task`` chains both in one process; a GPU
distributor may run decode in CPU workers and encode next to the GPU.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vismerch.catalog.fetch import Fetched, FetchPolicy, fetch, in_order, url_scheme
from vismerch.catalog.reading import read_image_file
from vismerch.catalog.shards import shard_columns, write_shard
from vismerch.catalog.store import THUMB_FORMATS
from vismerch.catalog.thumbs import write_pack
from vismerch.config import Settings, setting
from vismerch.errors import DecodeError
from vismerch.features.base import fingerprint_key
from vismerch.imaging.decode import decode_image
from vismerch.pipeline.tasks import IngestSpec, ItemResult, ShardResult, Task, TaskItem, TaskResult


@dataclass
class DecodedTask:
    result: TaskResult
    # images still to encode: sha256 -> pixels, and which backend keys each one needs
    pixels: dict[str, Any] = field(default_factory=dict)  # numpy (S, S, 3) or a device tensor
    needs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    # JPEG bytes left for the GPU decoder (decode_task(..., defer_jpeg=True))
    raw: dict[str, bytes] = field(default_factory=dict)
    # thumbnails made while decoding, encoded and written together once the task's images
    # are decoded (sha256, (h, w, 3) array)
    thumbs: list[tuple[str, Any]] = field(default_factory=list)
    return_columns: bool = False  # Task.return_columns


class PhaseTimer:
    def __init__(self, timings: dict[str, float]):
        self.timings = timings

    def add(self, phase: str, start: float) -> float:
        now = time.perf_counter()
        self.timings[phase] = self.timings.get(phase, 0.0) + now - start
        return now


def encode_thumb(thumb: Any, fmt: str) -> bytes:
    """A thumbnail ((h, w, 3) uint8 array or Pillow image) as ``fmt`` bytes. JPEG from an
    array goes through simplejpeg (libjpeg-turbo, same settings: quality, 4:2:0), which
    skips Pillow's copy into its own pixel layout."""
    import io

    from PIL import Image

    pillow_format, options = THUMB_FORMATS[fmt]
    if isinstance(thumb, np.ndarray):
        if fmt == "jpeg":
            import simplejpeg

            return simplejpeg.encode_jpeg(np.ascontiguousarray(thumb), options["quality"], "RGB", "420")
        thumb = Image.fromarray(thumb)
    buf = io.BytesIO()
    thumb.save(buf, pillow_format, **options)
    return buf.getvalue()


THUMB_THREADS = 4  # Pillow and simplejpeg release the GIL while encoding


def write_thumbs(out: DecodedTask, store_path: Path, fmt: str, timer: PhaseTimer,
                 threads: int = 1) -> None:
    """Encode the thumbnails ``out`` collected and write them as one pack
    (catalog/thumbs.py); where each lies goes into the task's result for the driver to
    commit. Run once the task's images are decoded: interleaved with the decodes, each
    encode cost ~15% more (one thread, measured). ``threads``: the device consumer
    encodes a whole batch at once on a few threads so that the GPU is not held back (a
    CPU worker has its one core)."""
    if not out.thumbs:
        return
    t = time.perf_counter()
    jobs = out.thumbs
    if threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(min(threads, len(jobs))) as pool:
            blobs = list(pool.map(lambda job: encode_thumb(job[1], fmt), jobs))
    else:
        blobs = [encode_thumb(thumb, fmt) for _, thumb in jobs]
    named = [(sha, data) for (sha, _), data in zip(jobs, blobs, strict=True)]
    out.result.thumbs.extend(write_pack(store_path, named, fmt, sync=False))  # the driver syncs
    out.thumbs = []
    timer.add("thumbs", t)


def _cpu_decode(data: bytes, sha: str, res: ItemResult, needs: tuple[str, ...], out: DecodedTask,
                settings: Settings, timer: PhaseTimer) -> None:
    """Safe CPU decode of one image into ``out``; a refusal is recorded on ``res``."""
    t = time.perf_counter()
    try:
        decoded = decode_image(
            data,
            working_size=settings.working_size,
            max_pixels=settings.max_pixels,
            thumb_size=settings.thumb_size,
        )
    except DecodeError as exc:
        res.reason, res.detail = exc.reason, exc.message
        timer.add("decode", t)
        return
    except Exception as exc:  # a decoder bug must not stop the run
        res.reason, res.detail = "decode-error", f"{type(exc).__name__}: {exc}"
        timer.add("decode", t)
        return
    res.width, res.height, res.format = decoded.width, decoded.height, decoded.format
    timer.add("decode", t)
    if decoded.thumb is not None:
        out.thumbs.append((sha, decoded.thumb))
    if needs:
        out.pixels[sha] = decoded.pixels
        out.needs[sha] = needs
        out.sizes[sha] = (decoded.width, decoded.height)


def _copy_outcome(item: ItemResult, first: ItemResult) -> None:
    """A copy of the same bytes gets the first one's size, format and refusal."""
    item.width, item.height, item.format = first.width, first.height, first.format
    item.reason, item.detail = first.reason, first.detail


def decode_task(task: Task, spec: IngestSpec, defer_jpeg: bool = False) -> DecodedTask:
    """Read, hash and decode every item; refused images are recorded, never raised.

    With ``defer_jpeg`` (a GPU consumer has nvJPEG), upright baseline RGB/grey JPEGs under
    the pixel limit are only header-checked here and left in ``raw`` for ``gpu_decode``.
    """
    settings = spec.settings
    store_path = Path(spec.store_path)
    result = TaskResult(index=task.index)
    out = DecodedTask(result=result, return_columns=task.return_columns)
    timer = PhaseTimer(result.timings)
    run = _Decoding(task, tuple(b.key for b in spec.backends), defer_jpeg, out, settings, timer)
    t = time.perf_counter()
    for item, got in _read_items(task.items, settings):
        # URLs download on threads ahead of this loop: "fetch" is the time spent waiting
        t = timer.add("fetch" if url_scheme(item.path) else "read", t)
        res = ItemResult(item.product_id, item.file_size, item.file_mtime)
        result.items.append(res)
        data = _take(item, got, res)
        if data is not None:
            _hash_and_decode(data, res, run)
        t = time.perf_counter()
    write_thumbs(out, store_path, settings.thumb_format, timer)
    return out


def _read_one(item: TaskItem, settings: Settings, policy: FetchPolicy | None) -> bytes | Fetched:
    """The bytes of a local file, or a URL's download (Fetched); raises on refusal."""
    if policy is None or url_scheme(item.path) is None:
        return read_image_file(item.path, setting(settings, "max_image_bytes"))
    return fetch(item.path, policy, item.etag, item.last_modified)


def _read_items(items: list[TaskItem], settings: Settings):
    """(item, bytes | Fetched | the exception) in order. A task with URLs downloads them on
    ``fetch_concurrency`` threads, a bounded window ahead; local files are read in turn."""
    policy = FetchPolicy.from_settings(settings.as_dict()) if any(url_scheme(i.path) for i in items) else None

    def read(item: TaskItem):
        try:
            return _read_one(item, settings, policy)
        except (DecodeError, OSError) as exc:
            return exc

    if policy is None:
        return ((item, read(item)) for item in items)
    return in_order(items, read, policy.concurrency)


def _take(item: TaskItem, got: Any, res: ItemResult) -> bytes | None:
    """The bytes to hash and decode, or None when the item is refused (reason on ``res``)
    or unchanged since its last download (``res.unchanged``)."""
    if isinstance(got, DecodeError):  # FileRefused, FetchFailed, AddressRefused
        res.reason, res.detail = got.reason, got.message
        return None
    if isinstance(got, FileNotFoundError):
        res.reason, res.detail = "missing-file", f"{item.path} does not exist"
        return None
    if isinstance(got, OSError):
        res.reason, res.detail = "unreadable", f"cannot read {item.path}: {got.strerror or got}"
        return None
    if isinstance(got, Exception):  # a bug in a download must not stop the run
        res.reason, res.detail = "fetch-error", f"{type(got).__name__}: {got}"
        return None
    if isinstance(got, Fetched):
        res.etag, res.last_modified = got.etag, got.last_modified
        if got.not_modified:  # the planner sent validators only for a fully featured hash
            res.sha256, res.unchanged = item.sha256, True
            return None
        return got.take()  # gives back its share of the download budget
    return got


@dataclass
class _Decoding:
    """One task's decode: what it wants, where it goes, the hashes seen so far."""

    task: Task
    wanted: tuple[str, ...]  # backend keys
    defer_jpeg: bool
    out: DecodedTask
    settings: Settings
    timer: PhaseTimer
    seen: dict[str, ItemResult] = field(default_factory=dict)


def _hash_and_decode(data: bytes, res: ItemResult, run: _Decoding) -> None:
    task, seen, out, settings, timer = run.task, run.seen, run.out, run.settings, run.timer
    t = time.perf_counter()
    sha = hashlib.sha256(data).hexdigest()
    res.sha256, res.nbytes = sha, len(data)
    timer.add("hash", t)
    if sha in seen:  # the same bytes twice in one task: decode once
        _copy_outcome(res, seen[sha])
        return
    seen[sha] = res
    needs = tuple(k for k in run.wanted if k not in task.featured.get(sha, ()))
    if run.defer_jpeg and needs and _defer(data, settings, res):
        out.raw[sha], out.needs[sha] = data, needs
        out.sizes[sha] = (res.width, res.height)
        return
    _cpu_decode(data, sha, res, needs, out, settings, timer)


def _defer(data: bytes, settings: Settings, res: ItemResult) -> bool:
    from vismerch.imaging.gpu_decode import gpu_decode_eligible

    size = gpu_decode_eligible(data, settings.max_pixels)
    if size is None:
        return False
    (res.width, res.height), res.format = size, "JPEG"
    return True


def gpu_decode(decoded: DecodedTask, spec: IngestSpec, device: str) -> DecodedTask:
    """Decode the deferred JPEGs on ``device`` (nvJPEG), make their thumbnails there, and
    fall back to the safe CPU decoder for any the GPU could not decode."""
    if not decoded.raw:
        return decoded

    from vismerch.imaging.decode import thumbnail
    from vismerch.imaging.gpu_decode import decode_jpegs_gpu

    settings = spec.settings
    store_path = Path(spec.store_path)
    timer = PhaseTimer(decoded.result.timings)
    shas = list(decoded.raw)
    datas = [decoded.raw[s] for s in shas]
    t = time.perf_counter()
    batch, done = decode_jpegs_gpu(datas, device, settings.working_size, settings.max_pixels,
                                   checked=True)
    t = timer.add("decode:gpu", t)
    by_sha = {item.sha256: item for item in decoded.result.items if item.sha256 in decoded.raw}
    for row, i in enumerate(done):
        decoded.pixels[shas[i]] = batch[row]
    if settings.thumb_size and done:
        host = batch.cpu().numpy()  # one device-to-host copy for the whole batch
        decoded.thumbs.extend(
            (shas[i], thumbnail(host[row], *decoded.sizes[shas[i]], settings.thumb_size))
            for row, i in enumerate(done))
    timer.add("thumbs", t)
    for i in sorted(set(range(len(shas))) - set(done)):
        sha = shas[i]
        needs = decoded.needs.pop(sha)
        _cpu_decode(datas[i], sha, by_sha[sha], needs, decoded, settings, timer)
    write_thumbs(decoded, store_path, settings.thumb_format, timer, threads=THUMB_THREADS)
    for item in decoded.result.items:  # copies of the same bytes share the outcome
        first = by_sha.get(item.sha256)
        if first is not None and item is not first:
            _copy_outcome(item, first)
    decoded.raw.clear()
    return decoded


def _describe_colour(columns: dict[str, np.ndarray], shas: list[str], sizes, settings, result) -> None:
    """Colour names and quality flags per image, from the colour backend's columns."""
    from vismerch.features.describe import describe

    colours, multi, flags = describe(columns, [sizes[sha] for sha in shas], settings)
    for sha, named, mixed, judged in zip(shas, colours, multi, flags, strict=True):
        result.colours[sha] = named
        result.multicolour[sha] = mixed
        result.quality[sha] = judged


def _stack(images: list[Any]) -> Any:
    """One batch from numpy images (CPU decode) and/or device tensors (GPU decode)."""
    import torch

    if all(isinstance(x, np.ndarray) for x in images):
        return np.stack(images)
    device = next(x.device for x in images if isinstance(x, torch.Tensor))
    return torch.stack([torch.as_tensor(x).to(device) for x in images])


@dataclass
class Encoded:
    """One backend's outputs for a task, computed and not yet written."""

    bspec: Any  # BackendSpec
    fingerprint: str
    shas: list[str]
    vectors: np.ndarray
    columns: dict[str, np.ndarray]


def encode_outputs(decoded: DecodedTask, spec: IngestSpec, backends: dict[str, Any],
                   batch_size: int | None = None) -> list[Encoded]:
    """Run each backend over the decoded images in batches (``batch_size``: images per
    batch for backends without their own, else the setting); nothing is written."""
    import torch

    timer = PhaseTimer(decoded.result.timings)
    settings = spec.settings
    batch_size = max(1, int(batch_size or settings.batch_size))
    encoded: list[Encoded] = []
    for bspec in spec.backends:
        shas = [sha for sha, needs in decoded.needs.items() if bspec.key in needs]
        if not shas:
            continue
        backend = backends[bspec.key]
        vectors: list[np.ndarray] = []
        columns: dict[str, list[np.ndarray]] = defaultdict(list)
        t = time.perf_counter()
        size = int(getattr(backend, "batch_size", None) or batch_size)
        batches = (_stack([decoded.pixels[s] for s in shas[start:start + size]])
                   for start in range(0, len(shas), size))
        # a backend with encode_stream overlaps the next batch's host-to-device copy
        # with the current batch's compute; others take one batch at a time
        if hasattr(backend, "encode_stream"):
            outputs = backend.encode_stream(batches)
        else:
            outputs = (backend.encode_images(torch.as_tensor(b)) for b in batches)
        for out in outputs:
            vectors.append(np.asarray(out.vectors, dtype=np.float32))
            for key, value in out.columns.items():
                columns[key].append(np.asarray(value))
        timer.add(f"encode:{bspec.name}", t)
        encoded.append(Encoded(bspec, fingerprint_key(backend.fingerprint), shas,
                               np.concatenate(vectors),
                               {k: np.concatenate(v) for k, v in columns.items()}))
    return encoded


def write_outputs(decoded: DecodedTask, spec: IngestSpec, encoded: list[Encoded]) -> TaskResult:
    """One shard per backend (not yet fsynced: the driver does before its commit), and the
    colour names and quality flags from the colour backend's columns."""
    result = decoded.result
    timer = PhaseTimer(result.timings)
    settings = spec.settings
    for out in encoded:
        t = time.perf_counter()
        name = f"part-{spec.run_id:05d}-{result.index:05d}"
        path = write_shard(Path(spec.store_path), out.bspec.name, name, out.shas, out.vectors,
                           out.columns, sync=False)
        result.shards.append(ShardResult(
            out.bspec.name, out.bspec.key, out.fingerprint, path, out.shas,
            shard_columns(out.shas, out.vectors, out.columns) if decoded.return_columns else None))
        t = timer.add("write", t)
        if out.bspec.name == "colour":
            _describe_colour(out.columns, out.shas, decoded.sizes, settings, result)
            timer.add("describe", t)
    return result


def encode_task(decoded: DecodedTask, spec: IngestSpec, backends: dict[str, Any]) -> TaskResult:
    """Run each backend over the decoded images in batches and write one shard per backend."""
    return write_outputs(decoded, spec, encode_outputs(decoded, spec, backends))
