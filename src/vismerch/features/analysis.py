"""The always-on image analysis the colour backend runs before its embedding: one pass
over the full-size pixels (blur, a grid of area means), then on that grid in CIELAB the
backdrop, exposure, the product mask and its geometry.

- Backdrop: the per-channel median of a border ring of the grid (``BORDER`` cells:
  1/32 of the frame at the default 64 grid; quality.background_stats).
- Mask: every cell more than ``delta`` (CIEDE2000) from the backdrop, minus specks
  (fewer than 3 cells in a 3x3 window), plus narrow enclosed holes: background cells not
  reached from the border whose row or column run is at most ``HOLE_MAX_SHARE`` of the
  frame (white stripes or lettering on a garment, narrow all along; not the large hole
  inside a necklace or a bag handle). Its geometry gives fill, extent and centre offset
  (quality.mask_geometry).

Sizes are parameters (``grid``, ``border``, ``chunk``); the module constants are the
backend's defaults. Nothing here changes its arguments, except ``grid_means``, which
fills the ``planes`` buffer it is given for that.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from vismerch.features import kernels, quality
from vismerch.features.colourspace import ciede2000, srgb_to_lab, srgb_to_lab_quantised
from vismerch.features.hashing import luma

GRID = 64  # mask, histogram-sample cells and layout resolution
BORDER = 2  # border ring width in grid cells
CPU_CHUNK = 8  # images per chunk of full-size work on CPU (bounded temporaries)
HOLE_MAX_SHARE = 0.1  # enclosed holes this narrow (share of the frame) are product
REACH_SWEEPS = 3  # row + column sweeps that decide what background the border reaches
SPECK_CELLS = 2.5  # a foreground cell with fewer set cells in its 3x3 window is a speck
WHITE = (100.0, 0.0, 0.0)


def shrink(x: torch.Tensor, size: int) -> torch.Tensor:
    """(B, C, H, W) float -> (B, C, size, size) by area averaging."""
    h, w = x.shape[-2:]
    if h % size == 0 and w % size == 0:
        return F.avg_pool2d(x, (h // size, w // size))
    return F.interpolate(x, size=(size, size), mode="area")


def grid_levels(h: int, w: int, grid: int = GRID) -> int | None:
    """How many pixels each grid cell mean of an h x w image averages when ``grid_means``
    takes them as exact integer sums (square, a multiple of ``grid``); None when it
    resamples instead."""
    return (h // grid) ** 2 if h == w and h % grid == 0 else None


def grid_means(x: torch.Tensor, grid: int = GRID, planes: torch.Tensor | None = None
               ) -> torch.Tensor:
    """uint8 (b, S, S, 3) -> channels-last (b, grid, grid, 3) float sRGB area means
    (``reference.grid_means``). ``planes`` (b, 3, G, G), when given (S a multiple of G
    and G of ``grid``), is filled with the G x G means first and the grid taken as their
    means: one pass over the pixels serves both."""
    h, w = x.shape[1:3]
    b = x.shape[0]
    if grid_levels(h, w, grid) is None:  # no whole cells: area resampling
        xf = x.to(torch.float32).permute(0, 3, 1, 2)
        return shrink(xf, grid).permute(0, 2, 3, 1).contiguous()
    if planes is None:
        return quality.cell_mean(x, h // grid)
    g = planes.shape[-1]
    quality.cell_mean_planes(x, h // g, planes)
    rgb = quality.cell_mean(planes.reshape(b * 3, g, g), g // grid)
    return rgb.view(b, 3, grid, grid).permute(0, 2, 3, 1).contiguous()


def scan(x: torch.Tensor, lattice: torch.Tensor, grid: int = GRID, box_grid: int | None = None,
         chunk: int = CPU_CHUNK) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The work that reads every pixel, in chunks of ``chunk`` images on CPU (a whole
    batch's full-size temporaries would be tens of MB; on a GPU the batch goes at once).

    uint8 (B, S, S, 3) -> (blur (B,), grid means (B, grid, grid, 3), the pixels at the
    flat indices ``lattice`` (B, len(lattice), 3) uint8, the box_grid x box_grid means on
    channel planes (B, 3, box_grid, box_grid) or None). The planes are made when S is a
    multiple of ``box_grid`` and ``box_grid`` of ``grid``."""
    b, h, w = x.shape[:3]
    step = b if x.device.type != "cpu" else chunk
    planes = None
    if (box_grid and grid_levels(h, w, grid) is not None and h % box_grid == 0
            and box_grid % grid == 0):
        planes = torch.empty(b, 3, box_grid, box_grid, device=x.device)
    blur, rgb, gathered = [], [], []
    for i in range(0, b, step):
        part = x[i : i + step]
        # the lattice pixels are gathered while the chunk is in cache
        gathered.append(part.reshape(len(part), -1, 3).index_select(1, lattice))
        rgb.append(grid_means(part, grid, None if planes is None else planes[i : i + step]))
        blur.append(quality.blur_metric(luma(part)))
    return torch.cat(blur), torch.cat(rgb), torch.cat(gathered), planes


def grid_lab(rgb: torch.Tensor, levels: int | None) -> torch.Tensor:
    """Grid sRGB means -> CIELAB. ``levels``: the pixels each mean averages, when every
    mean is an exact k / levels (``grid_levels``): then a table of those values serves."""
    if levels is None:
        return srgb_to_lab(rgb)
    return srgb_to_lab_quantised(rgb, levels)


def backdrop(lab: torch.Tensor, border: int = BORDER) -> dict[str, torch.Tensor]:
    """Lab grid (B, G, G, 3) -> background_lab (B, 3), background_delta (from white),
    background_clutter, and the exposure metrics (brightness, highlights, shadows)."""
    background, clutter = quality.background_stats(lab, border)
    white = torch.tensor(WHITE, device=lab.device, dtype=lab.dtype)
    out = {
        "background_lab": background,
        "background_delta": ciede2000(background, white),
        "background_clutter": clutter,
    }
    out.update(quality.exposure_stats(lab[..., 0].reshape(lab.shape[0], -1)))
    return out


def foreground_mask(lab: torch.Tensor, background: torch.Tensor, delta: float
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Lab grid (B, G, G, 3), background (B, 3) -> (foreground mask, the enclosed holes
    it took in), both bool (B, G, G)."""
    fg = kernels.far_from(lab, background, delta)
    fg = fg & (kernels.box_count(fg.to(torch.float32)) >= SPECK_CELLS)
    max_run = int(lab.shape[1] * HOLE_MAX_SHARE)
    filled = kernels.fill_narrow_holes(fg, max_run, REACH_SWEEPS)
    return filled, filled & ~fg


def analyse_grid(rgb: torch.Tensor, levels: int | None, delta: float, border: int = BORDER,
                 clock: Callable[[str], None] | None = None
                 ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Grid sRGB means (B, G, G, 3) -> (metrics: backdrop, exposure and mask geometry
    columns, the Lab grid, the mask, its filled holes). ``clock(stage)`` marks stages."""
    clock = clock or (lambda stage: None)
    lab = grid_lab(rgb, levels)
    metrics = backdrop(lab, border)
    clock("grid: lab, background, exposure")
    mask, holes = foreground_mask(lab, metrics["background_lab"], delta)
    metrics.update(quality.mask_geometry(mask))
    clock("mask: foreground, holes, geometry")
    return metrics, lab, mask, holes
