"""The image side of a neural encoder before the model: resize, crop and normalise as the
model's own config says, in torch on any device, from uint8 ``(B, H, W, 3)``; and the
synthetic calibration batch the precision guard compares fp32 against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from vismerch.errors import UsageError

_RESAMPLE = {0: "nearest", 1: "bicubic", 2: "bilinear", 3: "bicubic", 4: "bilinear", 5: "bicubic"}


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
