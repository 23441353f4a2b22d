"""The FeatureBackend protocol and the backend registry.

A backend turns a batch of decoded images (uint8 tensor ``(B, H, W, 3)``, RGB, on any
device) into a ``FeatureBatch``: one L2-normalised vector per image plus optional extra
per-image columns (palette, hash, metrics) that go into the same Parquet shard.
Its ``fingerprint`` (backend, model, revision, precision, version) is stored with every
shard so that vectors of different fingerprints never mix in one index.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from vismerch.config import Settings
from vismerch.errors import VismerchError
from vismerch.registry import Registry

log = logging.getLogger("vismerch.features")


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
COLOUR_VERSION = 10  # 3: the palette leaves out thin dark outlines; 4: anti-aliased duplicate
#                      signatures, small boxes resampled from the pixels (dupes/signature.py);
#                      5: duplicate boxes from product mass in proportion to cell coverage;
#                      6: photos without a backdrop boxed by the frame less its bars, and
#                      no white balance by a backdrop that a lighter product would clip at;
#                      7: the palette of a scene photo from its product (features/foreground.py)
#                      8: a scene's product mask seeded at the frame's centre (foreground.py)
#                      9: the duplicate box's a*b* at 32x32 (``dup_chroma``, dupes/signature.py)
#                      10: a busy border with the mask along the edge is a scene; smaller
#                          scene products kept (foreground.py)

@dataclass(frozen=True)
class BackendInfo:
    """A registered backend: its factory and what it can do (the registry's metadata).

    ``visual``: its vectors describe images ("more like this", look-alike neighbours in an
    arrangement). ``neural``: a learned image model: it takes ``--model``/``--revision``/
    ``--precision``/``--compile``, runs on the encoders (device, Ray actors), and its index
    joins duplicate candidates and answers search by image. ``text_tower``: it also embeds
    query text into its image space (text search, zero-shot tags). ``rank``: preference
    among a store's backends, lowest first. ``whiten``: its vectors are also indexed in the
    catalog's own whitened space (indexes/whiten.py), which answers "same style"; only for
    vectors that nothing outside the catalog queries (never a text tower's image space).
    ``check(name, model, revision)`` runs once
    before an ingest; ``query_encoder(fingerprint, device)`` rebuilds the encoder that made
    stored vectors (default: the factory with the fingerprint's ``model`` and ``revision``,
    refused when its fingerprint differs).
    """

    name: str
    factory: Callable[..., FeatureBackend]
    visual: bool = True
    neural: bool = True
    text_tower: bool = False
    rank: int = 50
    whiten: bool = False
    check: Callable[[str, str | None, str | None], None] | None = None
    query_encoder: Callable[[dict[str, Any], str], Any] | None = None

    def create(self, settings: Settings | None = None, device: str = "cpu", **options: Any) -> FeatureBackend:
        return self.factory(settings=settings, device=device, **options)


# name -> BackendInfo; a ``vismerch.backends`` entry point names a BackendInfo (or a bare
# factory, taken as a neural image backend without a text tower)
BACKENDS: Registry = Registry("backends")


def backend_info(name: str) -> BackendInfo:
    """The registered backend ``name``; UnknownName (with the known names) otherwise."""
    item = BACKENDS.get(name)
    return item if isinstance(item, BackendInfo) else BackendInfo(name, item)


def list_backends(*, visual: bool | None = None, neural: bool | None = None,
                  text_tower: bool | None = None) -> list[str]:
    """Registered backend names with the capabilities asked for (None: either), in order of
    preference (``rank``, then name), like timm's ``list_models(pretrained=True)``. A plugin
    whose entry point fails to load is left out with a warning."""
    wanted = {"visual": visual, "neural": neural, "text_tower": text_tower}
    found = []
    for name in BACKENDS.names():
        try:
            info = backend_info(name)
        except Exception as exc:  # a broken plugin must not stop the built-ins
            log.warning("backend %r cannot be loaded: %s", name, exc)
            continue
        if all(want is None or getattr(info, key) == want for key, want in wanted.items()):
            found.append(info)
    return [info.name for info in sorted(found, key=lambda i: (i.rank, i.name))]


def has_capability(name: str, capability: str) -> bool:
    """Whether backend ``name`` is registered and has ``capability`` (visual, neural,
    text_tower); False for a name no longer registered (a store made with a removed plugin)."""
    return name in list_backends(**{capability: True})


def _lazy(target: str) -> Callable[..., Any]:
    """``module:function``, imported on first call: the built-in backends import this module
    (their base classes), so this module reaches them by name and never imports them."""
    module, _, attr = target.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attr)(*args, **kwargs)

    return call


def _register_builtins() -> None:
    colour = _lazy("vismerch.features.colour:ColourBackend")
    build = _lazy("vismerch.features.neural:build_backend")
    check_model = _lazy("vismerch.features.neural:check_model")
    from_fingerprint = _lazy("vismerch.features.neural:backend_from_fingerprint")

    def neural(kind: str):
        def factory(settings: Settings | None = None, device: str = "cpu", **options: Any):
            return build(kind, settings=settings, device=device, **options)

        return factory

    def check(kind: str, model: str | None, revision: str | None) -> None:
        check_model(kind, model, revision)

    def query_encoder(fingerprint: dict[str, Any], device: str):
        return from_fingerprint(fingerprint, device=device)

    BACKENDS.register("colour", BackendInfo("colour", colour, neural=False, rank=90))
    for rank, kind in enumerate(("siglip", "clip", "openclip"), start=1):
        BACKENDS.register(kind, BackendInfo(kind, neural(kind), text_tower=True, rank=10 * rank,
                                            check=check, query_encoder=query_encoder))
    # the product's kind (shape, structure) for "same style": after colour, so an unnamed
    # "more like this" keeps colour's vectors where the store has no neural ones
    BACKENDS.register("style", BackendInfo("style", _lazy("vismerch.features.style:StyleBackend"),
                                           neural=False, rank=92, whiten=True))
    # product titles' vectors for text search: not an image backend
    BACKENDS.register("text", BackendInfo("text", _lazy("vismerch.features.text:TextBackend"),
                                          visual=False, neural=False, rank=95))


_register_builtins()


def create_backend(name: str, settings: Settings | None = None, device: str = "cpu",
                   **options: Any) -> FeatureBackend:
    """Build a backend by registered name; unknown names raise with the known list."""
    return backend_info(name).create(settings=settings, device=device, **options)


def encoder_for(fingerprint: str | dict[str, Any], device: str = "cpu") -> Any:
    """The encoder that produced stored vectors (their fingerprint), to embed queries: the
    backend's ``query_encoder``, else its factory with the fingerprint's model and revision,
    refused when that no longer makes the same vectors (precision may differ)."""
    fp = json.loads(fingerprint) if isinstance(fingerprint, str) else dict(fingerprint)
    info = backend_info(str(fp.get("backend")))
    if info.query_encoder is not None:
        return info.query_encoder(fp, device)
    encoder = info.create(device=device, **{k: fp[k] for k in ("model", "revision") if fp.get(k)})

    def same(f: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in f.items() if k != "precision"}

    if same(json.loads(fingerprint_key(encoder.fingerprint))) != same(fp):
        raise VismerchError(f"the {info.name} backend no longer makes the store's vectors",
                            hint="re-ingest the store with it (vismerch ingest ... --backend "
                                 f"{info.name})")
    return encoder


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """Hide transformers' model-loading bars ("Loading weights") unless stderr is a terminal:
    a command's output (``--json`` above all) and logs must hold no bar."""
    if sys.stderr is not None and sys.stderr.isatty():
        yield
        return
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


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
