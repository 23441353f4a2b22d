"""Neural image/text encoders: ``clip`` and ``siglip`` through transformers, ``openclip``
through open_clip (optional extra). Loading is ``neural_load``, preprocessing ``preprocess``.

Three separate axes, as in open_clip: the architecture and weights come from ``model``
(a hub id, ``hf-hub:`` id or local folder, pinned by ``revision``); the precision comes
from ``accel.precision`` (auto-chosen and verified); preprocessing comes from the model's
own image-processor config and runs in torch on the device from uint8 ``(B, H, W, 3)``.
All of them are in the fingerprint stored with every shard.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vismerch.accel.device import DeviceInfo, auto_batch_size, device_info, resolve_device
from vismerch.accel.precision import (
    PrecisionChoice,
    PrecisionPath,
    PreparedModel,
    check_precision,
    choose_precision,
    prepare_module,
    running,
)
from vismerch.config import Settings, setting
from vismerch.errors import UsageError, VismerchError
from vismerch.features.base import FeatureBatch, folder_digest
from vismerch.features.neural_load import (
    DEFAULT_MODELS,
    Loaded,
    _split_ref,
    check_model,
    load_hf,
    load_openclip,
)
from vismerch.features.preprocess import Preprocess, calibration_images

log = logging.getLogger("vismerch.neural")

VERSION = 1

CALIBRATION_TEXTS = (
    "a red floral summer dress",
    "blue denim jeans",
    "a black leather handbag",
    "white cotton t-shirt with short sleeves",
    "a striped wool jumper",
    "brown suede ankle boots",
    "a green silk scarf with a paisley print",
    "navy blazer for the office",
)


# --------------------------------------------------------------------------- the backend


class NeuralBackend:
    """A loaded encoder at a verified precision: ``encode_images`` and ``encode_texts``."""

    def __init__(
        self,
        kind: str,
        loaded: Loaded,
        choice: PrecisionChoice,
        device: torch.device,
        info: DeviceInfo,
        batch_size: int | None = None,
        compile: bool = False,
        default_batch: int = 64,
    ):
        self.name = kind
        self.device = device
        self.info = info
        self.loaded = loaded
        self.prepared = prepared = choice.candidate
        self.precision = prepared.precision
        self.precision_choice = choice
        self.logit_scale = loaded.logit_scale
        self.logit_bias = loaded.logit_bias
        self.preprocess = loaded.preprocess
        self._batch_size = batch_size
        self._default_batch = default_batch
        self.compiled = compile_towers(prepared.module) if compile else []
        self._image_forward = self._image_call
        self.dim = int(self._encode(calibration_images(1, max(self.preprocess.output_size))).shape[1])

    # the fingerprint: architecture/weights, precision and preprocessing are separate axes
    @property
    def fingerprint(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.loaded.model,
            "revision": self.loaded.revision,
            "precision": self.precision,
            "preprocess": self.preprocess.key(),
            "dim": self.dim,
            "version": VERSION,
        }

    @property
    def precision_report(self) -> str:
        return self.precision_choice.summary() if self.precision_choice else self.precision

    @property
    def batch_size(self) -> int:
        """Explicit, else the largest CUDA batch that still speeds up, else the setting."""
        if self._batch_size is None:
            if self.device.type == "cuda":
                self._batch_size = auto_batch_size(self._time_batch, self.device)
            else:
                self._batch_size = self._default_batch
        return self._batch_size

    def _image_call(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.loaded.image_fn(self.prepared.module, pixels)

    def _encode(self, images: torch.Tensor) -> torch.Tensor:
        with running(self.prepared):
            pixels = self.preprocess(images.to(self.device, non_blocking=True), self.prepared.input_dtype)
            out = self._image_forward(pixels)
        return F.normalize(out.float(), dim=-1)

    def _time_batch(self, n: int) -> float:
        h, w = self.preprocess.output_size
        batch = torch.randint(0, 256, (n, h, w, 3), dtype=torch.uint8, device=self.device)
        self._encode(batch)  # warm-up
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        self._encode(batch)
        torch.cuda.synchronize(self.device)
        return time.perf_counter() - t0

    def encode_images(self, images: Any) -> FeatureBatch:
        """uint8 ``(B, H, W, 3)`` tensor/array (any device) -> L2-normalised float32 vectors."""
        batch = torch.as_tensor(images) if not isinstance(images, torch.Tensor) else images
        if batch.dtype != torch.uint8:
            raise UsageError(f"encode_images expects uint8 images, got {batch.dtype}")
        if len(batch) == 0:
            return FeatureBatch(np.zeros((0, self.dim), dtype=np.float32))
        step = self._batch_size or len(batch)  # the caller's batch unless a cap was set
        parts = [self._encode(batch[i : i + step]).cpu() for i in range(0, len(batch), step)]
        return FeatureBatch(torch.cat(parts).numpy().astype(np.float32, copy=False))

    def encode_stream(self, batches: Iterable[Any]) -> Iterator[FeatureBatch]:
        """Encode many uint8 batches in order. On CUDA the next batch is pinned and copied to
        the device on a side stream while the current one computes (copy/compute overlap)."""
        from vismerch.imaging.gpu_decode import DevicePrefetcher, pinned_batch

        def host(items: Iterable[Any]) -> Iterator[torch.Tensor]:
            for b in items:
                if isinstance(b, torch.Tensor):
                    yield b
                elif self.device.type == "cuda":
                    yield pinned_batch(np.asarray(b))
                else:
                    yield torch.from_numpy(np.asarray(b))

        for batch in DevicePrefetcher(host(batches), self.device):
            yield self.encode_images(batch)

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Texts through the model's text tower -> L2-normalised float32 ``(N, dim)``."""
        if self.loaded.text_fn is None:
            raise UsageError(f"backend {self.name} has no text tower")
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        with running(self.prepared):
            for i in range(0, len(texts), batch_size):
                emb = self.loaded.text_fn(self.prepared.module, texts[i : i + batch_size], self.device)
                out.append(F.normalize(emb.float(), dim=-1).cpu())
        return torch.cat(out).numpy()

    def __repr__(self) -> str:
        return f"NeuralBackend({self.name}, {self.loaded.model!r}, {self.precision}, {self.device})"


# the tower entry points of transformers' CLIP/SigLIP and of open_clip models
TOWER_METHODS = ("get_image_features", "get_text_features", "encode_image", "encode_text")
COMPILE_BACKEND = "inductor"  # torch.compile's backend (tests trace with "eager": no C++ build)


def compile_towers(module: torch.nn.Module) -> list[str]:
    """``torch.compile`` the image and text towers of ``module`` in place (each entry point
    becomes a compiled function on the instance; the text tower with dynamic shapes, since
    padded lengths vary); returns what was compiled. Idempotent."""
    done = getattr(module, "_vismerch_compiled", None)
    if done is not None:
        return done
    done = []
    for name in TOWER_METHODS:
        method = getattr(module, name, None)
        if callable(method):
            dynamic = True if "text" in name else None
            setattr(module, name, torch.compile(method, dynamic=dynamic, backend=COMPILE_BACKEND))
            done.append(name)
    module._vismerch_compiled = done  # type: ignore[attr-defined]
    return done


@dataclass(frozen=True)
class BuildOptions:
    """What ``build_backend`` takes besides kind, settings and device. The first five are an
    ingest's backend options (their names are in stored spec keys); ``precision_paths``
    overrides entries of ``accel.precision.PRECISION_PATHS`` (tests inject a damaged path
    this way) and ``calibration`` replaces the synthetic guard batch."""

    model: str | None = None
    revision: str | None = None
    precision: str | None = "auto"
    compile: bool = False
    batch_size: int | None = None
    min_cosine: float | None = None
    precision_paths: dict[str, PrecisionPath] | None = None
    calibration: torch.Tensor | None = None


def build_backend(kind: str, settings: Settings | None = None, device: str = "cpu",
                  **options: Any) -> NeuralBackend:
    """Load the model for ``kind`` (clip | siglip | openclip), choose and verify the precision;
    ``options`` are the fields of ``BuildOptions``."""
    opts = BuildOptions(**options)
    if kind not in DEFAULT_MODELS:
        raise UsageError(f"unknown neural backend {kind!r}", hint="choose clip, siglip or openclip")
    precision = check_precision(opts.precision or setting(settings, "precision"))
    dev = resolve_device(device)
    info = device_info(dev)
    model = opts.model or DEFAULT_MODELS[kind]
    loaded = (load_openclip(model, opts.revision, dev) if kind == "openclip"
              else load_hf(kind, model, opts.revision, dev))
    threshold = float(opts.min_cosine if opts.min_cosine is not None
                      else setting(settings, "precision_min_cosine"))
    choice = _choose_precision(loaded, precision, info, dev, opts, threshold)
    if choice.precision != "fp32":
        loaded.module = None  # type: ignore[assignment]  # free the fp32 reference
    log.info("%s %s on %s: precision %s", kind, loaded.model, dev, choice.summary())
    default_batch = int(setting(settings, "batch_size"))
    return NeuralBackend(kind, loaded, choice, dev, info, opts.batch_size, opts.compile, default_batch)


def _choose_precision(loaded: Loaded, precision: str, info: DeviceInfo, dev: torch.device,
                      opts: BuildOptions, threshold: float) -> PrecisionChoice:
    """The fastest precision whose image and text embeddings stay within ``threshold`` of
    fp32's on the calibration batch (``accel.precision.choose_precision``)."""
    h, w = loaded.preprocess.output_size
    images = opts.calibration if opts.calibration is not None else calibration_images(16, max(h, w))

    def prepare(p: str) -> PreparedModel:
        # fp32 is the loaded model itself; every other level converts a copy
        return prepare_module(loaded.module, p, info, opts.precision_paths, copy_module=p != "fp32")

    def embed(prepared: PreparedModel) -> torch.Tensor:
        with running(prepared):
            pixels = loaded.preprocess(images.to(dev), prepared.input_dtype)
            parts = [F.normalize(loaded.image_fn(prepared.module, pixels).float(), dim=-1)]
            if loaded.text_fn is not None:
                txt = loaded.text_fn(prepared.module, CALIBRATION_TEXTS, dev)
                parts.append(F.normalize(txt.float(), dim=-1))
        return torch.cat(parts)

    def seconds(prepared: PreparedModel) -> float:
        # the race times what ingest will run: compiled towers when asked for (a fused
        # FP8 can only win compiled)
        if opts.compile:
            compile_towers(prepared.module)
        return _forward_seconds(lambda: embed(prepared), dev)

    return choose_precision(precision, info, prepare=prepare, embed=embed, min_cosine=threshold,
                            seconds=seconds)


def _forward_seconds(forward: Callable[[], Any], device: torch.device, repeats: int = 3) -> float:
    """Best-of-``repeats`` wall time of ``forward`` after one warm-up, synchronised on CUDA."""
    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    forward()
    sync()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        forward()
        sync()
        best = min(best, time.perf_counter() - started)
    return best


@functools.lru_cache(maxsize=4)
def _query_encoder(kind: str, model: str, revision: str | None, device: str) -> NeuralBackend:
    return build_backend(kind, device=device, model=model, revision=revision, precision="fp32")


def backend_from_fingerprint(fingerprint: str | dict[str, Any], device: str = "cpu") -> NeuralBackend:
    """The encoder that produced stored vectors, rebuilt at fp32 to embed queries and prompts.

    Refuses a local model folder whose content changed since the vectors were made: its
    text embeddings would not live in the same space as the stored image vectors.
    """
    fp = json.loads(fingerprint) if isinstance(fingerprint, str) else dict(fingerprint)
    kind, model, revision = fp.get("backend"), fp.get("model"), fp.get("revision")
    if kind not in DEFAULT_MODELS or not model:
        raise UsageError(f"vectors of backend {kind!r} have no text tower to query")
    local = isinstance(revision, str) and revision.startswith("sha256:")
    if local:
        folder, _ = _split_ref(model)  # openclip stores "local-dir:PATH"
        if not Path(folder).is_dir():
            raise VismerchError(
                f"the model folder {folder} that made these vectors is gone",
                hint="restore it, or re-ingest with --model pointing at the model to use",
            )
        if folder_digest(folder) != revision:
            raise VismerchError(
                f"the model folder {folder} changed since the store's vectors were made",
                hint="re-ingest the store with the current model (vismerch ingest ... --model PATH)",
            )
    pinned = None if local else revision
    encoder = _query_encoder(kind, model, pinned, device)
    if encoder.dim != fp.get("dim", encoder.dim):
        raise VismerchError(f"model {model} gives {encoder.dim}-d vectors, the store has {fp['dim']}-d")
    return encoder


def vit_flops(image: int, patch: int, hidden: int, mlp: int, layers: int, cls: bool = True,
              projection: int = 0) -> float:
    """Forward FLOPs of a ViT image tower under the project's one convention
    (``plan.workloads.FLOP_CONVENTION``: 2 x multiply-accumulates of the matrix products)."""
    from vismerch.plan.workloads import ViTConfig

    pool = "cls" if cls else "none"
    return ViTConfig("vit", hidden, layers, patch, image, mlp_dim=mlp, pool=pool,
                     embed_dim=projection).forward_flops()


__all__ = [
    "NeuralBackend",
    "Preprocess",
    "build_backend",
    "calibration_images",
    "backend_from_fingerprint",
    "check_model",
    "folder_digest",
    "vit_flops",
]
