"""Neural models from their references: ``clip``/``siglip`` through transformers, ``openclip``
through open_clip (optional extra). A hub id, ``hf-hub:`` id or local folder (``local-dir:``),
pinned by revision or, for a folder, by a digest of its content; ``check_model`` resolves
everything but the weights, so a bad reference fails once before an ingest."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vismerch.errors import UsageError, VismerchError
from vismerch.features.base import folder_digest, quiet_progress
from vismerch.features.preprocess import Preprocess

DEFAULT_MODELS = {
    "clip": "openai/clip-vit-base-patch16",
    "siglip": "google/siglip-base-patch16-224",
    "openclip": "ViT-B-16:laion2b_s34b_b88k",
}
_MODEL_TYPES = {"clip": {"clip"}, "siglip": {"siglip"}}


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


def load_hf(kind: str, model: str, revision: str | None, device: torch.device) -> Loaded:
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


def load_openclip(model: str, revision: str | None, device: torch.device) -> Loaded:
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
