"""Shared fixtures. Every test makes its own data; nothing touches the network."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# ingests in tests use the hand-made style vectors even where vismerch[style] is installed:
# tests that need the EfficientNet encoder build a tiny one (tests/unit/test_style.py)
os.environ.setdefault("VISMERCH_STYLE_ENCODER", "shape")


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="torch device for device-parametrised tests")


@pytest.fixture
def device(request) -> str:
    return request.config.getoption("--device")


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs CUDA (no GPU on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
