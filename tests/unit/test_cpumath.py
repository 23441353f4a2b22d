"""features/cpumath: torch's matrix product and powers, computed by numpy for CPU float tensors."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from vismerch.features.cpumath import cbrt, matmul, power

SHAPES = [  # the colour backend's products
    ((4, 16, 16, 3), (3, 3)),  # pixels by a colour matrix
    ((4, 16, 16, 3), (3,)),  # pixels by the luma weights
    ((6, 100, 3), (6, 3, 5)),  # k-means samples by centres
    ((5, 1, 32, 128), (5, 3, 128, 128)),  # resampling rows by a grid (broadcast)
    ((5, 3, 32, 128), (5, 1, 128, 32)),  # ... by columns
]


@pytest.mark.parametrize(("left", "right"), SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matmul_is_torchs_product(left, right, dtype):
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(left, generator=gen, dtype=dtype) * 255
    b = torch.rand(right, generator=gen, dtype=dtype)
    got, want = matmul(a, b), a @ b
    assert got.dtype == dtype and got.device.type == "cpu" and got.shape == want.shape
    assert torch.allclose(got, want, rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=0)


def test_matmul_on_views_and_in_inference_mode():
    """Transposed (non-contiguous) operands, as k-means passes its centres, and inference
    tensors, as the colour backend runs."""
    a = torch.rand(3, 50, 3)
    c = torch.rand(3, 5, 3)
    with torch.inference_mode():
        got = matmul(a, c.transpose(1, 2))
    assert torch.allclose(got, a @ c.transpose(1, 2), rtol=1e-6)


def test_autograd_integers_and_bfloat16_stay_with_torch():
    a = torch.rand(4, 3, requires_grad=True)
    out = matmul(a, torch.rand(3, 2))
    assert out.requires_grad  # torch's product: gradients still flow
    out.sum().backward()
    assert a.grad is not None
    ints = torch.arange(12).reshape(4, 3)
    assert torch.equal(matmul(ints, torch.eye(3, dtype=torch.int64)), ints)
    half = torch.rand(4, 3, dtype=torch.bfloat16)  # numpy has no bfloat16
    assert matmul(half, torch.eye(3, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert power(half, 2.4).dtype == torch.bfloat16 and cbrt(half).dtype == torch.bfloat16


def test_ingest_workers_run_one_blas_thread():
    """N workers on N cores: each worker's BLAS (numpy's, which runs the products) is
    limited to its share, like its torch threads."""
    code = ("from vismerch.pipeline.worker_setup import init_worker; init_worker(1); "
            "from threadpoolctl import threadpool_info; "
            "print(sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[1]"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_powers_are_torchs(dtype):
    """The sRGB gamma and the CIELAB cube root over [0, 1], as srgb_to_lab raises them."""
    t = torch.linspace(0, 1, 10_001, dtype=dtype).reshape(1, 10_001)
    tol = 1e-6 if dtype == torch.float32 else 1e-13
    assert power(t, 2.4).dtype == dtype and cbrt(t).dtype == dtype
    assert torch.allclose(power(t, 2.4), t.pow(2.4), rtol=tol, atol=0)
    assert torch.allclose(cbrt(t), t.pow(1.0 / 3.0), rtol=tol, atol=0)
    assert torch.allclose(cbrt(t[:, ::7]), t[:, ::7].pow(1.0 / 3.0), rtol=tol, atol=0)  # a view


def test_powers_leave_autograd_to_torch():
    t = torch.rand(5, requires_grad=True)
    (power(t, 2.4).sum() + cbrt(t + 0.1).sum()).backward()
    assert t.grad is not None and torch.isfinite(t.grad).all()
