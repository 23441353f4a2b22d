"""Neural image/text encoders: ``clip`` and ``siglip`` through transformers, ``openclip``
through open_clip (optional extra).

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
import re
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
from vismerch.config import setting
from vismerch.errors import UsageError, VismerchError
from vismerch.features.base import FeatureBatch, folder_digest, quiet_progress

log = logging.getLogger("vismerch.neural")

VERSION = 1
DEFAULT_MODELS = {
    "clip": "openai/clip-vit-base-patch16",
    "siglip": "google/siglip-base-patch16-224",
    "openclip": "ViT-B-16:laion2b_s34b_b88k",
}
_MODEL_TYPES = {"clip": {"clip"}, "siglip": {"siglip"}}
_RESAMPLE = {0: "nearest", 1: "bicubic", 2: "bilinear", 3: "bicubic", 4: "bilinear", 5: "bicubic"}

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


# --------------------------------------------------------------------------- preprocessing


@dataclass(frozen=True)
class Preprocess:
    """Resize, crop and normalise as the model's own config says, in torch, on any device."""

    resize: str  # "shortest" (short side to size[0]) | "exact" (to size) | "longest" (+ pad) | "none"
    size: tuple[int, int]
    crop: tuple[int, int] | None
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bicubic"
    rescale: float = 1 / 255

    @classmethod
    def from_hf(cls, cfg: dict[str, Any]) -> Preprocess:
        """From a transformers ``preprocessor_config.json`` (CLIP, SigLIP and friends)."""
        size = cfg.get("size", {"shortest_edge": 224})
        if isinstance(size, int):
            size = {"shortest_edge": size}
        if not cfg.get("do_resize", True):
            resize, hw = "none", (0, 0)
        elif "shortest_edge" in size:
            resize, hw = "shortest", (int(size["shortest_edge"]),) * 2
        else:
            resize, hw = "exact", (int(size["height"]), int(size["width"]))
        crop = None
        if cfg.get("do_center_crop", False):
            cs = cfg.get("crop_size", {"height": hw[0], "width": hw[1]})
            crop = (cs, cs) if isinstance(cs, int) else (int(cs["height"]), int(cs["width"]))
        normalise = cfg.get("do_normalize", True)
        mean = tuple(cfg.get("image_mean", (0.0, 0.0, 0.0))) if normalise else (0.0, 0.0, 0.0)
        std = tuple(cfg.get("image_std", (1.0, 1.0, 1.0))) if normalise else (1.0, 1.0, 1.0)
        rescale = float(cfg.get("rescale_factor", 1 / 255)) if cfg.get("do_rescale", True) else 1.0
        resample = cfg.get("resample", 3)
        interp = _RESAMPLE.get(resample, "bicubic") if isinstance(resample, int) else str(resample)
        return cls(resize, hw, crop, mean, std, interp, rescale)  # type: ignore[arg-type]

    @classmethod
    def from_openclip(cls, cfg: dict[str, Any]) -> Preprocess:
        """From open_clip's ``model.visual.preprocess_cfg``."""
        size = cfg.get("size", 224)
        hw = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
        mode = cfg.get("resize_mode", "shortest")
        resize = {"shortest": "shortest", "squash": "exact", "longest": "longest"}.get(mode, mode)
        crop = hw if resize == "shortest" else None
        return cls(
            resize,
            hw,
            crop,
            tuple(cfg.get("mean", (0.48145466, 0.4578275, 0.40821073))),  # type: ignore[arg-type]
            tuple(cfg.get("std", (0.26862954, 0.26130258, 0.27577711))),  # type: ignore[arg-type]
            str(cfg.get("interpolation", "bicubic")),
        )

    @property
    def output_size(self) -> tuple[int, int]:
        return self.crop or self.size

    def key(self) -> str:
        """Short stable description for the fingerprint."""
        crop = "none" if self.crop is None else f"{self.crop[0]}x{self.crop[1]}"
        mean = ",".join(f"{v:.4f}" for v in self.mean)
        std = ",".join(f"{v:.4f}" for v in self.std)
        return (
            f"resize={self.resize}:{self.size[0]}x{self.size[1]}:{self.interpolation};"
            f"crop={crop};mean={mean};std={std};scale={self.rescale:.6f}"
        )

    def _target(self, h: int, w: int) -> tuple[int, int]:
        if self.resize == "shortest":
            short, long = (h, w) if h <= w else (w, h)
            s = self.size[0]
            new_long = int(s * long / short)
            return (s, new_long) if h <= w else (new_long, s)
        if self.resize == "longest":
            scale = min(self.size[0] / h, self.size[1] / w)
            return max(1, round(h * scale)), max(1, round(w * scale))
        if self.resize == "exact":
            return self.size
        return h, w

    def __call__(self, images: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """uint8 ``(B, H, W, 3)`` (or ``(B, 3, H, W)``) -> normalised ``(B, 3, h, w)``."""
        if images.ndim != 4:
            raise UsageError(f"expected a (B, H, W, 3) image batch, got shape {tuple(images.shape)}")
        x = images.permute(0, 3, 1, 2) if images.shape[-1] == 3 else images
        x = x.float()
        h, w = x.shape[-2:]
        th, tw = self._target(h, w)
        if (th, tw) != (h, w):
            mode = self.interpolation if self.interpolation in ("bilinear", "bicubic") else "nearest"
            kwargs = {} if mode == "nearest" else {"align_corners": False, "antialias": True}
            x = F.interpolate(x, size=(th, tw), mode=mode, **kwargs)
            # processors resize to uint8 images: clamp and round the same way
            x = x.clamp_(0, 255).round_()
        if self.resize == "longest":
            ph, pw = self.size[0] - th, self.size[1] - tw
            x = F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2), value=0.0)
        if self.crop is not None:
            x = _center_crop(x, self.crop)
        mean = torch.tensor(self.mean, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=x.device).view(1, 3, 1, 1)
        return ((x * self.rescale - mean) / std).to(dtype)


def _center_crop(x: torch.Tensor, crop: tuple[int, int]) -> torch.Tensor:
    ch, cw = crop
    h, w = x.shape[-2:]
    if h < ch or w < cw:  # pad small images like the processors do
        ph, pw = max(0, ch - h), max(0, cw - w)
        x = F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2), value=0.0)
        h, w = x.shape[-2:]
    top, left = (h - ch) // 2, (w - cw) // 2
    return x[..., top : top + ch, left : left + cw]


# --------------------------------------------------------------------------- calibration


def calibration_images(n: int = 16, size: int = 224, seed: int = 0) -> torch.Tensor:
    """A deterministic uint8 ``(n, size, size, 3)`` batch: smooth colour fields, a product-like
    block on a light background, and fine texture, so that every layer sees varied input."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 3, 4, 4, generator=g) * 255
    x = F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=False)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for i in range(n):
        if i % 2:  # half of them: an object on a near-white background
            cy, cx = torch.randint(size // 4, 3 * size // 4, (2,), generator=g).tolist()
            r = int(torch.randint(size // 8, size // 3, (1,), generator=g))
            mask = ((yy - cy).abs() < r) & ((xx - cx).abs() < r * 2 // 3)
            bg = torch.full((3, size, size), 245.0)
            x[i] = torch.where(mask, x[i], bg)
    x += torch.randn(x.shape, generator=g) * 12
    return x.clamp(0, 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous()


# --------------------------------------------------------------------------- model adapters


def _pooled(out: Any) -> torch.Tensor:
    """transformers 4.x returns a tensor, 5.x a model output whose pooler_output is the
    projected embedding; tuples carry it second."""
    if isinstance(out, torch.Tensor):
        return out
    pooled = getattr(out, "pooler_output", None)
    if pooled is not None:
        return pooled
    if isinstance(out, (tuple, list)):
        return out[1] if len(out) > 1 else out[0]
    raise TypeError(f"cannot find the embedding in {type(out).__name__}")


@dataclass
class Loaded:
    """What a loader returns: the fp32 model and the callables that drive it."""

    module: torch.nn.Module
    image_fn: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]
    text_fn: Callable[[torch.nn.Module, Sequence[str], torch.device], torch.Tensor] | None
    preprocess: Preprocess
    model: str  # what goes into the fingerprint as the model
    revision: str | None  # pinned commit, or a content digest for local folders
    logit_scale: float
    logit_bias: float | None


def _split_ref(model: str) -> tuple[str, bool]:
    """``local-dir:PATH`` / ``hf-hub:ID`` / bare path or id -> (reference, is_local)."""
    if model.startswith("local-dir:"):
        return str(Path(model[len("local-dir:") :]).expanduser().resolve()), True
    if model.startswith("hf-hub:"):
        return model[len("hf-hub:") :], False
    path = Path(model).expanduser()
    if path.exists():
        return str(path.resolve()), True
    return model, False


def _logit_params(module: torch.nn.Module) -> tuple[float, float | None]:
    """(logit scale, logit bias or None) of a CLIP/SigLIP-style model, as plain floats."""
    bias = getattr(module, "logit_bias", None)
    return (
        float(module.logit_scale.detach().exp().item()),
        None if bias is None else float(bias.detach().reshape(-1)[0].item()),
    )


def _load_failed(ref: str, exc: Exception) -> VismerchError:
    return VismerchError(
        f"cannot load model {ref!r}: {exc}",
        hint="pass a local folder saved with save_pretrained (--model PATH), or a hub id while "
        "online; pin it with --revision",
    )


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


@dataclass
class _HFParts:
    """Everything of a transformers model but its weights (cheap to resolve)."""

    ref: str
    local: bool
    tokenizer: Any
    preprocess: Preprocess
    pinned: str | None


def _image_processor_config(ref: str, revision: str | None) -> dict[str, Any]:
    """The image-processor settings in either layout: ``preprocessor_config.json``, or
    ``processor_config.json`` with a nested ``image_processor`` (what transformers 5's
    ``Processor.save_pretrained`` writes). transformers' own resolver reads both."""
    from transformers.image_processing_base import ImageProcessingMixin

    config, _ = ImageProcessingMixin.get_image_processor_dict(ref, revision=revision)
    return config


def _resolve_hf(kind: str, model: str, revision: str | None) -> _HFParts:
    """Config, model type, tokenizer and image processor of ``model``; raises a
    VismerchError naming what is missing and how to fix it."""
    from transformers import AutoConfig, AutoTokenizer
    from transformers.utils import cached_file

    ref, local = _split_ref(model)
    try:
        config = AutoConfig.from_pretrained(ref, revision=revision)
    except (OSError, ValueError) as exc:
        raise _load_failed(ref, exc) from exc
    if config.model_type not in _MODEL_TYPES[kind]:
        raise UsageError(
            f"model {ref!r} is a {config.model_type!r} model, not {kind}",
            hint=f"use --backend {config.model_type} if vismerch supports it, or another model",
        )
    if local and not any((Path(ref) / name).is_file() for name in WEIGHT_FILES):
        raise VismerchError(
            f"cannot load model {ref!r}: the folder has no weights ({' or '.join(WEIGHT_FILES[::2])})",
            hint="save the model into it with model.save_pretrained(folder)",
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(ref, revision=revision)
    except ImportError as exc:  # e.g. SiglipTokenizer needs sentencepiece
        raise VismerchError(
            f"model {ref!r} needs a package that is not installed: {exc}",
            hint="pip install sentencepiece protobuf (SigLIP's tokenizer)",
        ) from exc
    except (OSError, ValueError) as exc:
        raise _load_failed(ref, exc) from exc
    try:
        preprocess = Preprocess.from_hf(_image_processor_config(ref, revision))
    except (OSError, ValueError) as exc:
        raise VismerchError(
            f"cannot load model {ref!r}: no image-processor config (neither preprocessor_config.json "
            "nor processor_config.json with an image_processor)",
            hint="save the model's processor into the folder: "
            "AutoProcessor.from_pretrained(ORIGINAL).save_pretrained(folder)",
        ) from exc
    if local:
        pinned = folder_digest(ref)
    else:
        config_path = cached_file(ref, "config.json", revision=revision)
        match = re.search(r"snapshots/([0-9a-f]{40})/", str(config_path))
        pinned = match.group(1) if match else revision
    return _HFParts(ref, local, tokenizer, preprocess, pinned)


def check_model(kind: str, model: str | None = None, revision: str | None = None) -> None:
    """Fail fast, before an ingest starts any task, when ``model`` cannot be loaded for
    ``kind``: everything but the weights themselves is resolved (and local weights must
    exist), so a bad folder or id is one clear error instead of one per image."""
    if kind not in DEFAULT_MODELS:
        raise UsageError(f"unknown neural backend {kind!r}", hint="choose clip, siglip or openclip")
    model = model or DEFAULT_MODELS[kind]
    if kind == "openclip":
        try:
            import open_clip  # noqa: F401
        except ImportError as exc:
            raise UsageError("the openclip backend needs open_clip",
                             hint="install vismerch[openclip]") from exc
        if model.startswith("local-dir:") and not Path(_split_ref(model)[0]).is_dir():
            raise VismerchError(f"cannot load model {model!r}: no such folder",
                                hint="pass local-dir:PATH of a folder open_clip saved")
        return
    _resolve_hf(kind, model, revision)


def _load_hf(kind: str, model: str, revision: str | None, device: torch.device) -> Loaded:
    from transformers import AutoModel

    parts = _resolve_hf(kind, model, revision)
    ref, tokenizer, preprocess, pinned = parts.ref, parts.tokenizer, parts.preprocess, parts.pinned
    try:
        with quiet_progress():
            module = AutoModel.from_pretrained(ref, revision=revision, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise _load_failed(ref, exc) from exc
    module = module.eval().to(device)
    text_cfg = module.config.text_config
    max_len = int(getattr(text_cfg, "max_position_embeddings", 77))
    # SigLIP was trained on max-length padding and pools the last token
    padding: str | bool = "max_length" if kind == "siglip" else True

    def image_fn(m: torch.nn.Module, pixels: torch.Tensor) -> torch.Tensor:
        return _pooled(m.get_image_features(pixel_values=pixels))

    def text_fn(m: torch.nn.Module, texts: Sequence[str], dev: torch.device) -> torch.Tensor:
        enc = tokenizer(
            list(texts), padding=padding, truncation=True, max_length=max_len, return_tensors="pt"
        )
        enc = {k: v.to(dev) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        if kind == "siglip":
            enc.pop("attention_mask", None)  # SigLIP attends to padding, as trained
        return _pooled(m.get_text_features(**enc))

    return Loaded(module, image_fn, text_fn, preprocess, ref, pinned, *_logit_params(module))


def _load_openclip(model: str, revision: str | None, device: torch.device) -> Loaded:
    try:
        import open_clip
    except ImportError as exc:
        raise UsageError("the openclip backend needs open_clip", hint="install vismerch[openclip]") from exc
    # "ARCH:TAG", "hf-hub:org/name" or "local-dir:PATH" (open_clip's own schemes)
    if model.startswith(("hf-hub:", "local-dir:")):
        name, pretrained = model, None
    else:
        name, _, pretrained = model.partition(":")
        pretrained = pretrained or None
    try:
        module = open_clip.create_model(name, pretrained=pretrained, device=device)
        tokenizer = open_clip.get_tokenizer(name)
    except Exception as exc:  # open_clip raises RuntimeError/ValueError/OSError
        raise _load_failed(model, exc) from exc
    cfg = getattr(module.visual, "preprocess_cfg", None) or {}
    preprocess = Preprocess.from_openclip(dict(cfg))
    module = module.eval()

    def image_fn(m: torch.nn.Module, pixels: torch.Tensor) -> torch.Tensor:
        return m.encode_image(pixels)

    def text_fn(m: torch.nn.Module, texts: Sequence[str], dev: torch.device) -> torch.Tensor:
        return m.encode_text(tokenizer(list(texts)).to(dev))

    pinned = revision or (folder_digest(model[10:]) if model.startswith("local-dir:") else None)
    return Loaded(module, image_fn, text_fn, preprocess, model, pinned, *_logit_params(module))


# --------------------------------------------------------------------------- the backend


class NeuralBackend:
    """A loaded encoder at a verified precision: ``encode_images`` and ``encode_texts``."""

    def __init__(
        self,
        kind: str,
        loaded: Loaded,
        prepared: PreparedModel,
        choice: PrecisionChoice | None,
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
        self.prepared = prepared
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


def build_backend(
    kind: str,
    settings: Any = None,
    device: str = "cpu",
    model: str | None = None,
    revision: str | None = None,
    precision: str | None = "auto",
    compile: bool = False,
    batch_size: int | None = None,
    *,
    min_cosine: float | None = None,
    precision_paths: dict[str, PrecisionPath] | None = None,
    calibration: torch.Tensor | None = None,
) -> NeuralBackend:
    """Load ``model`` for ``kind`` (clip | siglip | openclip), choose and verify the precision.

    ``precision_paths`` overrides entries of ``accel.precision.PRECISION_PATHS`` (tests
    inject a damaged path this way); ``calibration`` replaces the synthetic guard batch.
    """
    if kind not in DEFAULT_MODELS:
        raise UsageError(f"unknown neural backend {kind!r}", hint="choose clip, siglip or openclip")
    precision = check_precision(precision or setting(settings, "precision"))
    dev = resolve_device(device)
    info = device_info(dev)
    model = model or DEFAULT_MODELS[kind]
    loaded = (
        _load_openclip(model, revision, dev) if kind == "openclip" else _load_hf(kind, model, revision, dev)
    )
    threshold = float(
        min_cosine
        if min_cosine is not None
        else setting(settings, "precision_min_cosine")
    )
    h, w = loaded.preprocess.output_size
    images = calibration if calibration is not None else calibration_images(16, max(h, w))

    def prepare(p: str) -> PreparedModel:
        # fp32 is the loaded model itself; every other level converts a copy
        return prepare_module(loaded.module, p, info, precision_paths, copy_module=p != "fp32")

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
        if compile:
            compile_towers(prepared.module)
        return _forward_seconds(lambda: embed(prepared), dev)

    choice = choose_precision(precision, info, prepare=prepare, embed=embed, min_cosine=threshold,
                              seconds=seconds)
    if choice.precision != "fp32":
        loaded.module = None  # type: ignore[assignment]  # free the fp32 reference
    log.info("%s %s on %s: precision %s", kind, loaded.model, dev, choice.summary())
    default_batch = int(setting(settings, "batch_size"))
    return NeuralBackend(
        kind, loaded, choice.candidate, choice, dev, info, batch_size, compile, default_batch
    )


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
