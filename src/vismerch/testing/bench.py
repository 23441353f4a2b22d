"""Support for the GPU benchmarks (``benchmarks/gpu_ingest.py``): catalogs of many distinct
JPEGs made fast, the CPU decode measured in a worker pool, and the host's GPU stack named.

Kept in the package so that spawned worker processes can import the functions they run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np


def unique_copy(jpeg: bytes, tag: int) -> bytes:
    """The same JPEG with a comment segment naming ``tag`` after its start marker: other
    bytes (another SHA-256, so every copy is decoded and stored), the same pixels and the
    same decode cost."""
    text = f"vismerch-{tag}".encode()
    return jpeg[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + jpeg[2:]


def resized_jpegs(shots: list[Path], size: int, quality: int = 90) -> list[bytes]:
    """Each shot as a ``size`` x ``size`` JPEG (the catalog generator draws 520 px and up)."""
    import io

    from PIL import Image

    out = []
    for path in shots:
        with Image.open(path) as im:
            buf = io.BytesIO()
            shot = im.convert("RGB").resize((size, size), Image.Resampling.LANCZOS)
            shot.save(buf, "JPEG", quality=quality)
            out.append(buf.getvalue())
    return out


def write_copies(data: list[bytes], folder: Path, n: int, start: int = 0) -> list[Path]:
    """``n`` distinct JPEGs in ``folder``, cycling through the JPEGs ``data`` (each copy tagged)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        path = folder / f"{start + i:06d}.jpg"
        path.write_bytes(unique_copy(data[i % len(data)], start + i))
        out.append(path)
    return out


def decode_files(paths: list[str], working_size: int) -> int:
    """Read and safely decode ``paths`` as ingest's CPU workers do; how many decoded."""
    from vismerch.errors import DecodeError
    from vismerch.imaging.decode import decode_image

    done = 0
    for path in paths:
        try:
            decode_image(Path(path).read_bytes(), working_size=working_size)
            done += 1
        except DecodeError:
            pass
    return done


def chunks(items: list, parts: int) -> list[list]:
    return [list(c) for c in np.array_split(np.array(items, dtype=object), max(1, parts)) if len(c)]


def gpu_stack() -> dict[str, str | None]:
    """Versions and driver of what ran: torch, CUDA, torchvision, torchao, NVIDIA driver."""
    import torch

    def version(module: str) -> str | None:
        try:
            return __import__(module).__version__
        except Exception:  # not installed, or broken: the record says so
            return None

    driver = None
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=False)
            driver = out.stdout.strip().splitlines()[0] if out.stdout.strip() else None
        except (OSError, subprocess.SubprocessError):
            driver = None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "torchvision": version("torchvision"),
            "torchao": version("torchao"), "driver": driver, "cpu_cores": str(os.cpu_count())}


class LabelledSet:
    """An evaluation set being written: each image a JPEG (quality drawn from ``rng`` in
    85-95) under ``out/images`` named PREFIX + a running number, with its truth in
    ``products`` (benchmarks/dup_eval.py, benchmarks/realphoto_eval.py)."""

    def __init__(self, out: Path, prefix: str, rng: np.random.Generator):
        self.out, self.prefix, self.rng = out, prefix, rng
        self.products: dict[str, dict] = {}
        (out / "images").mkdir(parents=True, exist_ok=True)

    def save(self, img, info: dict) -> str:
        """Write a PIL image with its truth ``info``; its product id."""
        import io

        pid = f"{self.prefix}{len(self.products) + 1:05d}"
        buf = io.BytesIO()
        img.convert("RGB").save(buf, "JPEG", quality=int(self.rng.integers(85, 96)))
        (self.out / "images" / f"{pid}.jpg").write_bytes(buf.getvalue())
        self.products[pid] = {**info, "image": f"images/{pid}.jpg"}
        return pid


def report(result: dict, json_path: Path | None) -> dict:
    """Print a benchmark's result as JSON, and write it to ``json_path`` when given."""
    import json

    text = json.dumps(result, indent=1)
    print(text)
    if json_path:
        Path(json_path).write_text(text + "\n")
    return result
