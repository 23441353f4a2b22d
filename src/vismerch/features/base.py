"""The FeatureBackend protocol and the backend registry.

A backend turns a batch of decoded images (uint8 tensor ``(B, H, W, 3)``, RGB, on any
device) into a ``FeatureBatch``: one L2-normalised vector per image plus optional extra
per-image columns (palette, hash, metrics) that go into the same Parquet shard.
Its ``fingerprint`` (backend, model, revision, precision, version) is stored with every
shard so that vectors of different fingerprints never mix in one index.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from vismerch.registry import Registry


@dataclass
class FeatureBatch:
    """Per-image outputs of a backend for one batch (all arrays share the first axis)."""

    vectors: np.ndarray  # (B, dim) float32, L2-normalised
    columns: dict[str, np.ndarray] = field(default_factory=dict)  # extra per-image arrays

    def __len__(self) -> int:
        return int(self.vectors.shape[0])


@runtime_checkable
class FeatureBackend(Protocol):
    name: str
    dim: int

    @property
    def fingerprint(self) -> dict[str, Any]: ...

    def encode_images(self, images: Any) -> FeatureBatch: ...


def fingerprint_key(fingerprint: dict[str, Any]) -> str:
    """A stable string for a fingerprint (stored beside shards, compared on load)."""
    return json.dumps(fingerprint, sort_keys=True, separators=(",", ":"))


# Version of the built-in colour backend's features, here (not in colour.py, which imports
# torch) so the ingest planner can tell old features from new without loading the backend:
# bump it whenever the colour features change and stores re-feature on their next ingest.
COLOUR_VERSION = 6  # 3: the palette leaves out thin dark outlines; 4: anti-aliased duplicate
#                      signatures, small boxes resampled from the pixels (features/dupsig.py);
#                      5: duplicate boxes from product mass in proportion to cell coverage;
#                      6: photos without a backdrop boxed by the frame less its bars, and
#                      no white balance by a backdrop that a lighter product would clip at

# name -> factory(settings, **options) -> FeatureBackend
BACKENDS: Registry = Registry("backends")


def _register_builtins() -> None:
    def colour(settings=None, device: str = "cpu", **options):
        from vismerch.features.colour import ColourBackend

        return ColourBackend(device=device, settings=settings, **options)

    def neural(kind: str):
        def factory(settings=None, device: str = "cpu", **options):
            from vismerch.features.neural import build_backend

            return build_backend(kind, settings=settings, device=device, **options)

        return factory

    def text(settings=None, device: str = "cpu", **options):
        from vismerch.features.text import TextBackend

        return TextBackend(device=device, settings=settings, **options)

    BACKENDS.register("colour", colour)
    for kind in ("clip", "siglip", "openclip"):
        BACKENDS.register(kind, neural(kind))
    BACKENDS.register("text", text)


_register_builtins()


def create_backend(name: str, settings=None, device: str = "cpu", **options) -> FeatureBackend:
    """Build a backend by registered name; unknown names raise with the known list."""
    factory = BACKENDS.get(name)
    return factory(settings=settings, device=device, **options)


def folder_digest(folder: str | Path) -> str:
    """A cheap content digest of a local model folder: configs in full, weight files by
    size plus their first and last MiB (different random weights -> different digest)."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        h.update(path.relative_to(folder).as_posix().encode())
        size = path.stat().st_size
        h.update(str(size).encode())
        with path.open("rb") as fh:
            if size <= 2 << 20:
                h.update(fh.read())
            else:
                h.update(fh.read(1 << 20))
                fh.seek(-(1 << 20), 2)
                h.update(fh.read())
    return "sha256:" + h.hexdigest()[:16]
