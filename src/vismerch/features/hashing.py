"""Batched 64-bit DCT perceptual hash (the imagehash.phash construction) and Hamming distance.

Construction (as ``imagehash.phash(hash_size=8, highfreq_factor=4)``): greyscale with the
ITU-R 601 luma weights PIL uses for mode ``L``, shrink to 32x32, 2-D DCT-II, keep the
top-left 8x8 low frequencies, set a bit where a coefficient exceeds their median.
Bits are packed row-major, first coefficient in the most significant bit, so
``int(str(imagehash.phash(img)), 16)`` and our ``uint64`` agree bit for bit when the
32x32 images agree. We shrink by area averaging (PIL uses Lanczos), so hashes of the
same image typically differ by a few bits, not zero.

The DCT is two matrix products with a cached 8x32 basis, so a batch costs ~20 KFLOP
per image after the shrink (8x32x32 + 8x8x32 multiply-adds).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from vismerch.features import kernels
from vismerch.features.cpumath import matmul

HASH_SIZE = 8
HASH_INPUT = 32  # hash_size * highfreq_factor
LUMA = (0.299, 0.587, 0.114)  # PIL convert("L") weights


def _shrink(grey: torch.Tensor) -> torch.Tensor:
    """(B, H, W) -> (B, HASH_INPUT, HASH_INPUT) area means (exact cell means when H and W
    are multiples of HASH_INPUT)."""
    b, h, w = grey.shape
    if h == w == HASH_INPUT:
        return grey
    if h == w == 2 * HASH_INPUT:  # 2x2 cells: the mean below, bit for bit, without its reduction
        return kernels.mean_2x2(grey)
    if h % HASH_INPUT == 0 and w % HASH_INPUT == 0:
        kh, kw = h // HASH_INPUT, w // HASH_INPUT
        return grey.reshape(b, HASH_INPUT, kh, HASH_INPUT, kw).mean(dim=(2, 4))
    return F.interpolate(grey[:, None], size=(HASH_INPUT, HASH_INPUT), mode="area")[:, 0]


_bases: dict[tuple[str, torch.dtype], torch.Tensor] = {}


def _dct_basis(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """First HASH_SIZE rows of the (unnormalised) DCT-II matrix of size HASH_INPUT."""
    key = (str(device), dtype)
    if key not in _bases:
        n = torch.arange(HASH_INPUT, dtype=torch.float64)
        k = torch.arange(HASH_SIZE, dtype=torch.float64)[:, None]
        basis = 2.0 * torch.cos(math.pi * k * (2.0 * n + 1.0) / (2.0 * HASH_INPUT))
        _bases[key] = basis.to(device=device, dtype=dtype)
    return _bases[key]


_LUMA_WEIGHTS = np.array(LUMA, np.float32)


def luma(images: torch.Tensor) -> torch.Tensor:
    """uint8/float (B, H, W, 3) RGB -> float32 (B, H, W) luma in [0, 255]."""
    if images.dtype == torch.uint8 and images.device.type == "cpu":
        return kernels.weigh_channels(images, _LUMA_WEIGHTS)
    x = images.to(torch.float32)
    return matmul(x, torch.tensor(LUMA, dtype=torch.float32, device=x.device))


def phash_bits(grey: torch.Tensor) -> torch.Tensor:
    """Greyscale (B, H, W) float -> bool (B, 64) hash bits (row-major low frequencies)."""
    b = grey.shape[0]
    small = _shrink(grey).to(torch.float64)  # the median split is sensitive to rounding
    basis = _dct_basis(small.device, small.dtype)
    low = basis @ small @ basis.T  # (B, 8, 8)
    flat = low.reshape(b, HASH_SIZE * HASH_SIZE)
    ordered = flat.sort(dim=1).values
    median = 0.5 * (ordered[:, 31] + ordered[:, 32])  # numpy.median of 64 values
    return flat > median[:, None]


def pack_bits(bits: torch.Tensor | np.ndarray) -> np.ndarray:
    """bool (B, 64), most significant bit first -> uint64 (B,)."""
    arr = np.asarray(bits.cpu() if isinstance(bits, torch.Tensor) else bits, dtype=bool)
    packed = np.packbits(arr, axis=1)  # (B, 8) big-endian bytes
    return packed.view(">u8").reshape(-1).astype(np.uint64)


def phash(images: torch.Tensor) -> np.ndarray:
    """uint8 (B, H, W, 3) RGB -> uint64 (B,) perceptual hashes."""
    return pack_bits(phash_bits(luma(images)))


def hamming(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """Elementwise (broadcasting) Hamming distance between uint64 hashes."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))
    return np.bitwise_count(x).astype(np.int64)


def hamming_matrix(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """All-pairs Hamming distances (len(a), len(b)) as int64."""
    a = np.asarray(a, dtype=np.uint64)
    b = a if b is None else np.asarray(b, dtype=np.uint64)
    return hamming(a[:, None], b[None, :])
