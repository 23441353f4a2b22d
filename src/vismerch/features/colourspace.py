"""Colour science in torch: sRGB <-> CIELAB (D65, 2° observer), CIEDE2000, hex parsing.

Everything is vectorised over leading dimensions and runs on whatever device the input
tensor lives on. ``srgb_to_lab`` takes uint8 RGB (the decoder's output) through a
256-entry linearisation table, so converting a batch costs one gather, one 3x3 matrix
product and one cube root per pixel.
"""

from __future__ import annotations

import math
import re

import numpy as np
import torch

from vismerch.features.cpumath import cbrt, matmul, power

# sRGB (IEC 61966-2-1) primaries -> XYZ, D65 white, rows pre-divided by the white point
# (Xn=0.95047, Yn=1, Zn=1.08883) so that XYZ/white comes out of one matrix product.
_RGB_TO_XYZ = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ],
    dtype=np.float64,
)
_WHITE = np.array([0.95047, 1.0, 1.08883], dtype=np.float64)
_RGB_TO_XYZN = _RGB_TO_XYZ / _WHITE[:, None]
_XYZN_TO_RGB = np.linalg.inv(_RGB_TO_XYZN)

_EPS = (6.0 / 29.0) ** 3  # CIE: below this the cube root is replaced by a line
_KAPPA = 1.0 / (3.0 * (6.0 / 29.0) ** 2)

_HEX_RE = re.compile(r"^#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})$")

_tables: dict[tuple[str, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}


def _srgb_decode(v: np.ndarray) -> np.ndarray:
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def _device_tables(device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(linearisation LUT (256,), RGB->XYZ/white matrix transposed (3,3)) cached per device."""
    key = (str(device), dtype)
    if key not in _tables:
        lut = _srgb_decode(np.arange(256, dtype=np.float64) / 255.0)
        _tables[key] = (
            torch.tensor(lut, dtype=dtype, device=device),
            torch.tensor(_RGB_TO_XYZN.T, dtype=dtype, device=device),
        )
    return _tables[key]


def _lab_f(t: torch.Tensor) -> torch.Tensor:
    return torch.where(t > _EPS, cbrt(t.clamp_min(_EPS)), t * _KAPPA + 4.0 / 29.0)


def xyzn_to_lab(xyzn: torch.Tensor) -> torch.Tensor:
    """XYZ already divided by the white point (..., 3) -> CIELAB (..., 3)."""
    f = _lab_f(xyzn)
    fx, fy, fz = f.unbind(-1)
    # L* = 116 fy - 16, a* = 500 (fx - fy), b* = 200 (fy - fz), each written straight into
    # its channel rather than stacked from three new planes (the same values)
    lab = torch.empty_like(f)
    big_l, a, b = lab.unbind(-1)
    torch.mul(fy, 116.0, out=big_l).sub_(16.0)
    torch.sub(fx, fy, out=a).mul_(500.0)
    torch.sub(fy, fz, out=b).mul_(200.0)
    return lab


def srgb_to_lab(rgb: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """sRGB (..., 3) -> CIELAB D65 (..., 3).

    uint8 input goes through the exact 256-entry linearisation table; float input is
    taken as sRGB in [0, 255] (e.g. box-averaged uint8 pixels) and linearised directly.
    """
    lut, m = _device_tables(rgb.device, dtype)
    if rgb.dtype == torch.uint8:
        # index_select on int32 indices: the cheapest of torch's table look-ups
        linear = lut.index_select(0, rgb.reshape(-1).to(torch.int32)).view(rgb.shape)
    else:
        linear = _linearise(rgb.to(dtype))
    return _linear_to_lab(linear, m)


def srgb_to_lab_quantised(rgb: torch.Tensor, levels: int, dtype: torch.dtype = torch.float32
                          ) -> torch.Tensor:
    """Float sRGB (..., 3) in [0, 255] -> CIELAB, each value first ROUNDED to the nearest
    multiple of 1 / ``levels``, then converted through a table of the 255 * levels + 1
    values that leaves. For means of ``levels`` uint8 pixels (the colour backend's grid
    cells) this changes nothing, since they are such multiples up to float rounding, and
    gives ``srgb_to_lab``'s values exactly; any other value moves by up to 1 / (2 levels)."""
    index = (rgb.to(dtype) * levels).round_().to(torch.int32)
    linear = _mean_table(levels, rgb.device, dtype).index_select(0, index.reshape(-1))
    return _linear_to_lab(linear.view(rgb.shape), _device_tables(rgb.device, dtype)[1])


def _linear_to_lab(linear: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    # one (N, 3) x (3, 3) product rather than a loop over every leading index
    return xyzn_to_lab(matmul(linear.reshape(-1, 3), m).view(linear.shape))


def _linearise(rgb: torch.Tensor) -> torch.Tensor:
    """sRGB values in [0, 255] (float) -> linear light in [0, 1]."""
    v = (rgb / 255.0).clamp(0.0, 1.0)
    return torch.where(v <= 0.04045, v / 12.92, power((v + 0.055) / 1.055, 2.4))


_mean_tables: dict[tuple[int, str, torch.dtype], torch.Tensor] = {}


def _mean_table(levels: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``_linearise`` of k / levels for k = 0 .. 255 * levels, cached."""
    key = (levels, str(device), dtype)
    if key not in _mean_tables:
        k = torch.arange(255 * levels + 1, dtype=dtype, device=device)
        _mean_tables[key] = _linearise(k / levels)
    return _mean_tables[key]


def lab_to_srgb(lab: torch.Tensor) -> torch.Tensor:
    """CIELAB (..., 3) -> sRGB floats in [0, 1] (clipped to the gamut)."""
    lab = lab.to(torch.float64)
    fy = (lab[..., 0] + 16.0) / 116.0
    fx = fy + lab[..., 1] / 500.0
    fz = fy - lab[..., 2] / 200.0
    f = torch.stack((fx, fy, fz), dim=-1)
    xyzn = torch.where(f > 6.0 / 29.0, f**3, (f - 4.0 / 29.0) / _KAPPA)
    m = torch.tensor(_XYZN_TO_RGB.T, dtype=torch.float64, device=lab.device)
    linear = (xyzn @ m).clamp(0.0, 1.0)
    return torch.where(
        linear <= 0.0031308, linear * 12.92, 1.055 * linear.pow(1.0 / 2.4) - 0.055
    ).clamp(0.0, 1.0)


def lab_to_hex(lab: torch.Tensor | np.ndarray) -> list[str]:
    """CIELAB (..., 3) -> flat list of ``#rrggbb`` strings (gamut-clipped)."""
    rgb = lab_to_srgb(torch.as_tensor(np.asarray(lab, dtype=np.float64)).reshape(-1, 3))
    ints = (rgb * 255.0).round().to(torch.int64).tolist()
    return ["#{:02x}{:02x}{:02x}".format(*px) for px in ints]


def parse_hex(text: str) -> tuple[int, int, int] | None:
    """``#rrggbb`` or ``#rgb`` -> (r, g, b) ints; anything else -> None."""
    match = _HEX_RE.match(text.strip())
    if not match:
        return None
    digits = match.group(1)
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)


def hex_to_lab(text: str) -> np.ndarray:
    """``#rrggbb``/``#rgb`` -> CIELAB float64 (3,); ValueError on a malformed string."""
    rgb = parse_hex(text)
    if rgb is None:
        raise ValueError(f"not a #rrggbb or #rgb colour: {text!r}")
    lab = srgb_to_lab(torch.tensor(rgb, dtype=torch.uint8), dtype=torch.float64)
    return lab.numpy()


def _pow7(x: torch.Tensor) -> torch.Tensor:
    x2 = x * x
    return x2 * x2 * x2 * x  # cheaper than pow(7), which goes through exp/log


def ciede2000(lab1: torch.Tensor, lab2: torch.Tensor) -> torch.Tensor:
    """CIEDE2000 colour difference (kL = kC = kH = 1) of broadcastable (..., 3) tensors.

    Follows Sharma, Wu & Dalal (2005), including their conventions for zero chroma
    (hue 0, hue difference 0, mean hue = sum) and the hue-mean wrap-around.
    """
    lab1, lab2 = torch.broadcast_tensors(lab1, lab2)
    l1, a1, b1 = lab1.unbind(-1)
    l2, a2, b2 = lab2.unbind(-1)
    c_mean = 0.5 * (torch.hypot(a1, b1) + torch.hypot(a2, b2))
    c7 = _pow7(c_mean)
    g = 0.5 * (1.0 - torch.sqrt(c7 / (c7 + 25.0**7)))
    a1p, a2p = a1 * (1.0 + g), a2 * (1.0 + g)
    c1p, c2p = torch.hypot(a1p, b1), torch.hypot(a2p, b2)
    h1p = torch.remainder(torch.rad2deg(torch.atan2(b1, a1p)), 360.0)
    h2p = torch.remainder(torch.rad2deg(torch.atan2(b2, a2p)), 360.0)
    # atan2(0, 0) is 0 in torch, which is Sharma's convention for achromatic colours.

    dl = l2 - l1
    dc = c2p - c1p
    chroma_zero = (c1p * c2p) == 0
    dh = h2p - h1p
    dh = torch.where(dh > 180.0, dh - 360.0, torch.where(dh < -180.0, dh + 360.0, dh))
    dh = torch.where(chroma_zero, torch.zeros_like(dh), dh)
    dhh = 2.0 * torch.sqrt(c1p * c2p) * torch.sin(torch.deg2rad(dh) / 2.0)

    l_mean = 0.5 * (l1 + l2)
    cp_mean = 0.5 * (c1p + c2p)
    h_sum = h1p + h2p
    far = (h1p - h2p).abs() > 180.0
    h_mean = torch.where(
        far, torch.where(h_sum < 360.0, h_sum + 360.0, h_sum - 360.0), h_sum
    ) / 2.0
    h_mean = torch.where(chroma_zero, h_sum, h_mean)

    rad = math.pi / 180.0
    t = (
        1.0
        - 0.17 * torch.cos((h_mean - 30.0) * rad)
        + 0.24 * torch.cos(2.0 * h_mean * rad)
        + 0.32 * torch.cos((3.0 * h_mean + 6.0) * rad)
        - 0.20 * torch.cos((4.0 * h_mean - 63.0) * rad)
    )
    d_theta = 30.0 * torch.exp(-(((h_mean - 275.0) / 25.0) ** 2))
    cp7 = _pow7(cp_mean)
    r_c = 2.0 * torch.sqrt(cp7 / (cp7 + 25.0**7))
    lm50 = (l_mean - 50.0) ** 2
    s_l = 1.0 + 0.015 * lm50 / torch.sqrt(20.0 + lm50)
    s_c = 1.0 + 0.045 * cp_mean
    s_h = 1.0 + 0.015 * cp_mean * t
    r_t = -torch.sin(2.0 * d_theta * rad) * r_c
    tl, tc, th = dl / s_l, dc / s_c, dhh / s_h
    return torch.sqrt((tl * tl + tc * tc + th * th + r_t * tc * th).clamp_min(0.0))


def ciede2000_np(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """CIEDE2000 on numpy arrays (float64), for small look-ups outside a batch."""
    out = ciede2000(
        torch.as_tensor(np.asarray(lab1, dtype=np.float64)),
        torch.as_tensor(np.asarray(lab2, dtype=np.float64)),
    )
    return out.numpy()
