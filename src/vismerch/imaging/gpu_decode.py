"""The GPU side of decoding: nvJPEG through ``torchvision.io.decode_jpeg`` on CUDA, and
pinned-memory batches with a prefetcher that overlaps host-to-device copies with compute.

GPU decode is used only for what it handles exactly like the safe CPU decoder: plain
baseline/progressive JPEGs in RGB or greyscale, upright (EXIF orientation 1), under the
pixel limit. The header is read with Pillow (no pixels decoded), so a decompression bomb
is still refused before anything is decoded; everything else goes to the CPU decoder.
Without torchvision or CUDA, ``gpu_jpeg_decoder`` returns None and callers use CPU decode
workers feeding ``pinned_batch``.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

GPU_HINT = "install vismerch[gpu] (torchvision) for GPU JPEG decode"
_ORIENTATION = 0x0112
_EOI = b"\xff\xd9"  # end-of-image marker: a JPEG cut short lacks it


def torchvision_io():
    """``torchvision.io`` or None when torchvision is not installed."""
    try:
        import torchvision.io as tvio
    except ImportError:
        return None
    return tvio


def gpu_decode_eligible(data: bytes, max_pixels: int = 40_000_000) -> tuple[int, int] | None:
    """The JPEG's (width, height) when the GPU decoder would give the same result as the
    safe CPU decoder, else None (the header is read once, for both answers)."""
    from PIL import Image

    from vismerch.imaging.decode import srgb_transform

    if not data.rstrip(b"\x00").endswith(_EOI):
        return None  # truncated (or trailing bytes): nvJPEG decodes what is there, the CPU says why
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format != "JPEG" or im.mode not in ("RGB", "L"):
                return None
            if im.width * im.height > max_pixels:
                return None
            icc = im.info.get("icc_profile")
            if icc and srgb_transform(icc, im.mode) is not None:
                return None  # nvJPEG ignores colour profiles: the CPU path converts to sRGB
            upright = int(im.getexif().get(_ORIENTATION, 1)) == 1
            return (im.width, im.height) if upright else None
    except Exception:  # anything odd is the CPU decoder's job (it gives the reason)
        return None


def gpu_jpeg_decoder(device: str | torch.device) -> Callable[..., list[torch.Tensor | None]] | None:
    """A batched nvJPEG decoder for ``device``, or None (no torchvision, or not CUDA)."""
    dev = torch.device(device)
    tvio = torchvision_io()
    if tvio is None or dev.type != "cuda" or not torch.cuda.is_available():
        return None

    def decode(datas: Sequence[bytes]) -> list[torch.Tensor | None]:
        """JPEG bytes -> (3, H, W) uint8 tensors on the device; None where decode failed."""
        encoded = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
        if not encoded:
            return []
        try:
            return list(tvio.decode_jpeg(encoded, mode=tvio.ImageReadMode.RGB, device=dev))
        except RuntimeError:  # one bad file fails the batch: retry one by one
            out: list[torch.Tensor | None] = []
            for data in encoded:
                try:
                    out.append(tvio.decode_jpeg(data, mode=tvio.ImageReadMode.RGB, device=dev))
                except RuntimeError:
                    out.append(None)
            return out

    return decode


def resize_square(images: Sequence[torch.Tensor], size: int) -> torch.Tensor:
    """(3, H, W) uint8 tensors of any sizes -> (B, size, size, 3) uint8, antialiased,
    aspect not preserved (the same working-size convention as the CPU decoder)."""
    out = []
    for img in images:
        x = img.unsqueeze(0).float()
        if x.shape[-2:] != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
        out.append(x.clamp_(0, 255).round_().to(torch.uint8))
    if not out:
        return torch.zeros((0, size, size, 3), dtype=torch.uint8)
    return torch.cat(out).permute(0, 2, 3, 1).contiguous()


def decode_jpegs_gpu(
    datas: Sequence[bytes], device: str | torch.device, size: int = 256,
    max_pixels: int = 40_000_000, checked: bool = False,
) -> tuple[torch.Tensor | None, list[int]]:
    """Decode what the GPU can; return ``(batch on device or None, indices it decoded)``.

    Indices not returned are left for the CPU decoder (not eligible, or failed on GPU).
    ``checked``: every item already passed ``gpu_decode_eligible`` (the ingest pipeline's
    CPU workers check before deferring), so the headers are not read again here.
    """
    decoder = gpu_jpeg_decoder(device)
    if decoder is None:
        return None, []
    eligible = [i for i, d in enumerate(datas) if checked or gpu_decode_eligible(d, max_pixels)]
    decoded = decoder([datas[i] for i in eligible])
    done = [i for i, img in zip(eligible, decoded, strict=True) if img is not None]
    images = [img for img in decoded if img is not None]
    if not images:
        return None, []
    return resize_square(images, size), done


def pinned_batch(arrays: Sequence[np.ndarray] | np.ndarray) -> torch.Tensor:
    """Stack (H, W, 3) uint8 arrays into one tensor in page-locked memory (when CUDA is
    present), so the host-to-device copy can run asynchronously."""
    if not torch.cuda.is_available():
        stacked = arrays if isinstance(arrays, np.ndarray) else np.stack(arrays)
        return torch.from_numpy(np.ascontiguousarray(stacked))
    first = np.asarray(arrays[0])
    # stack straight into page-locked memory: one copy, not a stack and then a pin
    pinned = torch.empty((len(arrays), *first.shape), dtype=torch.uint8, pin_memory=True)
    np.stack([np.asarray(a, dtype=np.uint8) for a in arrays], out=pinned.numpy())
    return pinned


class DevicePrefetcher:
    """Iterate CPU batches as device tensors, copying batch i+1 on a side CUDA stream while
    the caller computes on batch i. On CPU it simply passes batches through."""

    def __init__(self, batches: Iterable[torch.Tensor], device: str | torch.device):
        self.batches = batches
        self.device = torch.device(device)

    def __iter__(self) -> Iterator[torch.Tensor]:
        if self.device.type != "cuda":
            yield from self.batches
            return
        stream = torch.cuda.Stream(device=self.device)
        it = iter(self.batches)

        def start(batch: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event]:
            # nvJPEG batches are on the device already: nothing to pin (pinning one raises)
            host = batch if batch.is_cuda or batch.is_pinned() else batch.pin_memory()
            with torch.cuda.stream(stream):
                moved = host.to(self.device, non_blocking=True)
                ready = torch.cuda.Event()
                ready.record(stream)
            return moved, ready

        pending = None
        for batch in it:
            nxt = start(batch)
            if pending is not None:
                yield self._wait(pending)
            pending = nxt
        if pending is not None:
            yield self._wait(pending)

    def _wait(self, pending: tuple[torch.Tensor, torch.cuda.Event]) -> torch.Tensor:
        tensor, ready = pending
        torch.cuda.current_stream(self.device).wait_event(ready)
        tensor.record_stream(torch.cuda.current_stream(self.device))
        return tensor
