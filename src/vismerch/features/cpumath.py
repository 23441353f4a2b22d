"""The colour backend's hot arithmetic on CPU through numpy: matrix products and powers.

The backend multiplies many pixels by small matrices (RGB by a 3x3 colour matrix or the
three luma weights, Lab samples by five k-means centres, 128-cell grids by 32x128
resampling weights) and raises every cell of its grids to the sRGB gamma and to the
CIELAB cube root. torch's CPU wheels run such products through MKL, which on AMD
processors is slow for these skinny shapes next to the OpenBLAS numpy ships, and its
float32 ``pow`` is slower than numpy's ``power`` and ``cbrt`` (``benchmarks/ingest.py``
prints both, ``cpumath_ms``). numpy's values agree with torch's within float rounding.
GPU tensors, tensors that need gradients and other dtypes than float32 and float64 keep
torch's own operations.
"""

from __future__ import annotations

import numpy as np
import torch

_NUMPY_DTYPES = (torch.float32, torch.float64)  # bfloat16 has no numpy twin


def _numpy_ok(*tensors: torch.Tensor) -> bool:
    first = tensors[0]
    return all(t.device.type == "cpu" and not t.requires_grad and t.dtype == first.dtype
               and t.dtype in _NUMPY_DTYPES for t in tensors)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` (numpy's broadcasting rules are torch's); CPU float tensors go through
    numpy without copies (the result is a new CPU tensor)."""
    if not _numpy_ok(a, b):
        return a @ b
    return torch.from_numpy(np.asarray(np.matmul(a.numpy(), b.numpy())))


def power(t: torch.Tensor, exponent: float) -> torch.Tensor:
    """``t ** exponent`` for a scalar exponent."""
    if not _numpy_ok(t):
        return t.pow(exponent)
    array = t.numpy()
    return torch.from_numpy(np.asarray(np.power(array, array.dtype.type(exponent))))


def cbrt(t: torch.Tensor) -> torch.Tensor:
    """The real cube root (``t ** (1/3)`` for t >= 0)."""
    if not _numpy_ok(t):
        return t.pow(1.0 / 3.0)
    return torch.from_numpy(np.asarray(np.cbrt(t.numpy())))
