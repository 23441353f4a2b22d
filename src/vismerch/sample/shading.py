"""Realistic shading for sample products (``generate_catalog(..., shading=True)``).

Flat-filled silhouettes are easy to name; real product renders and photos are not. This
module turns a flat product cut-out into something closer to a 3D render, each effect
with its own random strength per item:

- **volume**: the silhouette becomes a soft height field (the blurred mask); its surface
  normals give Lambertian shading from a random light direction, so one side of the
  product is lit and the far edges fall into shadow (down to ~35% of the flat colour);
- **gradient light**: a linear ramp across the frame (a key light to one side);
- **specular highlights**: Blinn-Phong glints added towards white where the surface faces
  the half-vector (a glossy or satin finish), on some items only;
- **thin dark outlines**: a 1-3 px near-black contour around the product, as cel-shaded
  renders and illustrations draw it, on some items only.

Shading works in linear light (the way light mixes) and returns sRGB. The product's
truth colour does not change: a person names a shaded navy jacket "navy".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter


@dataclass(frozen=True)
class Shading:
    """The strengths drawn for one item (recorded in truth.json for analysis)."""

    light_azimuth: float  # degrees, where the key light comes from (image plane)
    light_elevation: float  # degrees above the image plane
    relief: float  # how strongly the silhouette bulges (0 = flat)
    ambient: float  # share of the light that reaches every point
    ramp: float  # gradient light across the product: 1 +- ramp
    specular: float  # highlight strength (0 = matte)
    shininess: float  # Blinn-Phong exponent: higher = smaller glints
    outline_px: int  # width of the dark contour (0 = none)
    outline_level: int  # its grey level (near-black)

    def as_dict(self) -> dict:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def draw_shading(rng: np.random.Generator) -> Shading:
    """Random strengths for one item: every item gets volume and a light ramp; about half
    get glossy highlights, about 40% a dark outline."""
    return Shading(
        light_azimuth=float(rng.uniform(0, 360)),
        light_elevation=float(rng.uniform(35, 65)),
        relief=float(rng.uniform(0.6, 1.6)),
        ambient=float(rng.uniform(0.22, 0.4)),
        ramp=float(rng.uniform(0.05, 0.25)),
        specular=float(rng.uniform(0.35, 0.8)) if rng.random() < 0.5 else 0.0,
        shininess=float(rng.uniform(60, 200)),  # tight glints: a flat front stays unlit by it
        outline_px=int(rng.integers(1, 4)) if rng.random() < 0.4 else 0,
        outline_level=int(rng.integers(10, 50)),
    )


def _linear(v: np.ndarray) -> np.ndarray:
    v = v / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def _srgb(v: np.ndarray) -> np.ndarray:
    v = np.clip(v, 0.0, 1.0)
    return np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1 / 2.4) - 0.055) * 255.0


def shade(product: Image.Image, mask: Image.Image, s: Shading) -> Image.Image:
    """Shade a flat product cut-out (RGB box image and its L mask, as ``paint`` returns)."""
    h, w = mask.height, mask.width
    m = np.asarray(mask, np.float32) / 255.0
    # height field: the mask blurred at two scales (a broad bulge plus rounded edges)
    r = max(2.0, 0.1 * min(w, h))
    broad = np.asarray(mask.filter(ImageFilter.GaussianBlur(r)), np.float32) / 255.0
    edge = np.asarray(mask.filter(ImageFilter.GaussianBlur(r / 4)), np.float32) / 255.0
    height = (0.7 * broad + 0.3 * edge) * s.relief * r
    gy, gx = np.gradient(height)
    normal = np.stack([-gx, -gy, np.ones_like(gx)], axis=-1)
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    az, el = np.radians(s.light_azimuth), np.radians(s.light_elevation)
    light = np.array([np.cos(az) * np.cos(el), np.sin(az) * np.cos(el), np.sin(el)], np.float32)
    diffuse = np.clip(normal @ light, 0.0, 1.0) / max(float(np.sin(el)), 1e-3)  # flat = 1
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    along = ((xx / max(w - 1, 1) - 0.5) * np.cos(az) + (yy / max(h - 1, 1) - 0.5) * np.sin(az))
    ramp = 1.0 + 2.0 * s.ramp * along
    lit = (s.ambient + (1.0 - s.ambient) * diffuse) * ramp
    rgb = _linear(np.asarray(product, np.float32)) * lit[..., None]
    if s.specular > 0:
        half = light + np.array([0.0, 0.0, 1.0], np.float32)
        half /= np.linalg.norm(half)
        glint = s.specular * np.clip(normal @ half, 0.0, 1.0) ** s.shininess
        rgb = rgb + (1.0 - rgb) * glint[..., None]
    out = _srgb(rgb)
    if s.outline_px:
        size = 2 * s.outline_px + 1
        inner = mask.filter(ImageFilter.MinFilter(size))
        ring = (m - np.asarray(inner, np.float32) / 255.0).clip(0, 1)[..., None]
        out = out * (1 - ring) + s.outline_level * ring
    return Image.fromarray(np.clip(out + 0.5, 0, 255).astype(np.uint8), "RGB")
