"""Matrix products of the colour backend's shapes, on CPU through numpy's BLAS.

The backend multiplies many pixels by small matrices: RGB by a 3x3 colour matrix or the
three luma weights, Lab samples by five k-means centres, 128-cell grids by 32x128
resampling weights. torch's CPU wheels run those through MKL, which on AMD processors is
several times slower for such skinny shapes than the OpenBLAS that numpy ships
(``benchmarks/ingest.py`` prints both, ``matmul_ms``); numpy's values agree with torch's
within float rounding. GPU tensors, and tensors that need gradients, keep torch's product.
"""

from __future__ import annotations

import numpy as np
import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` (numpy broadcasting rules, which are torch's); CPU float tensors go through
    numpy without copies (the result is a new CPU tensor)."""
    if (a.device.type != "cpu" or b.device.type != "cpu" or a.requires_grad or b.requires_grad
            or a.dtype != b.dtype or not a.dtype.is_floating_point):
        return a @ b
    return torch.from_numpy(np.asarray(np.matmul(a.numpy(), b.numpy())))
