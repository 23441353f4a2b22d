"""Neural encoders on tiny random CLIP/SigLIP models saved to disk and loaded through the
real transformers loading code (no network)."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageCms

from vismerch.accel.precision import PreparedModel
from vismerch.errors import UsageError, VismerchError
from vismerch.features.base import FeatureBackend, create_backend
from vismerch.features.neural import (
    Preprocess,
    backend_from_fingerprint,
    build_backend,
    calibration_images,
    folder_digest,
    vit_flops,
)
from vismerch.features.neural_load import _image_processor_config, _split_ref
from vismerch.imaging.gpu_decode import (
    DevicePrefetcher,
    gpu_decode_eligible,
    gpu_jpeg_decoder,
    pinned_batch,
)
from vismerch.testing.catalog import adobe_rgb_icc
from vismerch.testing.models import save_tiny_clip, save_tiny_siglip

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("tiny-models")
    return {"clip": save_tiny_clip(base / "clip"), "siglip": save_tiny_siglip(base / "siglip")}


@pytest.fixture(scope="module")
def clip(models):
    return build_backend("clip", model=str(models["clip"]))


@pytest.fixture(scope="module")
def siglip(models):
    return build_backend("siglip", model=str(models["siglip"]))


def images(n: int = 6, h: int = 64, w: int = 48, seed: int = 3) -> torch.Tensor:
    return calibration_images(n, max(h, w), seed=seed)[:, :h, :w].contiguous()


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_tiny_model_loads_through_the_real_code_and_encodes(kind, models, request):
    backend = request.getfixturevalue(kind)
    assert isinstance(backend, FeatureBackend)
    out = backend.encode_images(images())
    assert out.vectors.dtype == np.float32 and out.vectors.shape == (6, backend.dim)
    np.testing.assert_allclose(np.linalg.norm(out.vectors, axis=1), 1.0, atol=1e-5)
    # deterministic, and different images give different vectors
    again = backend.encode_images(images())
    np.testing.assert_allclose(out.vectors, again.vectors, atol=1e-6)
    assert np.abs(out.vectors[0] - out.vectors[1]).max() > 1e-4
    texts = backend.encode_texts(["red floral summer dress", "blue denim jeans"])
    assert texts.shape == (2, backend.dim)
    np.testing.assert_allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-5)
    assert np.abs(texts[0] - texts[1]).max() > 1e-4


def test_fingerprint_has_every_axis(clip, models):
    fp = clip.fingerprint
    assert fp["backend"] == "clip"
    assert fp["model"] == str(models["clip"].resolve())
    assert fp["revision"].startswith("sha256:")
    assert fp["precision"] == "fp32"
    assert "resize=shortest:32x32:bicubic" in fp["preprocess"] and "crop=32x32" in fp["preprocess"]
    assert fp["dim"] == clip.dim and fp["version"] >= 1


def test_different_weights_give_a_different_fingerprint(tmp_path, models):
    other = save_tiny_clip(tmp_path / "clip-seed1", seed=1)
    assert folder_digest(other) != folder_digest(models["clip"])


def test_precision_is_in_the_fingerprint(models, clip):
    bf16 = build_backend("clip", model=str(models["clip"]), precision="bf16")
    assert bf16.fingerprint["precision"] == "bf16"
    assert bf16.fingerprint != clip.fingerprint
    a = clip.encode_images(images()).vectors
    b = bf16.encode_images(images()).vectors
    assert float(np.mean(np.sum(a * b, axis=1))) >= 0.995


def test_damaged_precision_path_is_rejected_by_the_backend(models):
    def damaged(module, info):
        module = module.to(torch.bfloat16)
        with torch.no_grad():
            for p in module.parameters():
                p.mul_(-1.0).add_(0.5)
        return PreparedModel(module, "bf16", torch.bfloat16)

    backend = build_backend(
        "clip", model=str(models["clip"]), precision="bf16", precision_paths={"bf16": damaged}
    )
    assert backend.precision == "fp32"
    assert backend.fingerprint["precision"] == "fp32"
    assert "bf16:no" in backend.precision_report


def test_registry_builds_neural_backends_like_the_pipeline(models):
    backend = create_backend(
        "siglip", settings=None, device="cpu", model=str(models["siglip"]), precision="auto"
    )
    assert backend.name == "siglip" and backend.precision == "fp32"


def test_wrong_architecture_is_a_usage_error(models):
    with pytest.raises(UsageError, match="siglip"):
        build_backend("clip", model=str(models["siglip"]))


def test_missing_model_gives_a_hint_not_a_traceback(tmp_path):
    with pytest.raises(VismerchError) as err:
        build_backend("clip", model="no-such-org/no-such-model-xyz")
    assert err.value.hint and "--model" in err.value.hint


def test_openclip_without_the_extra_says_what_to_install():
    if importlib.util.find_spec("open_clip") is not None:
        pytest.skip("open_clip is installed")
    with pytest.raises(UsageError) as err:
        build_backend("openclip", model="ViT-B-32")
    assert "vismerch[openclip]" in err.value.hint


def test_model_reference_schemes(tmp_path):
    assert _split_ref("hf-hub:org/name") == ("org/name", False)
    assert _split_ref(f"local-dir:{tmp_path}") == (str(tmp_path.resolve()), True)
    assert _split_ref(str(tmp_path)) == (str(tmp_path.resolve()), True)
    assert _split_ref("org/name") == ("org/name", False)


def test_encode_images_accepts_numpy_and_rejects_floats(clip):
    batch = images(2).numpy()
    assert clip.encode_images(batch).vectors.shape == (2, clip.dim)
    with pytest.raises(UsageError, match="uint8"):
        clip.encode_images(batch.astype(np.float32))
    assert clip.encode_images(np.zeros((0, 32, 32, 3), np.uint8)).vectors.shape == (0, clip.dim)


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_preprocessing_matches_the_models_own_image_processor(kind, models, request):
    """Torch preprocessing from the config vs transformers' reference PIL processor."""
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    cfg = dict(_image_processor_config(str(models[kind]), None))
    cfg.pop("image_processor_type")
    processor = (CLIPImageProcessorPil if kind == "clip" else SiglipImageProcessorPil)(**cfg)
    batch = images(4, 80, 60)
    reference = processor([Image.fromarray(im.numpy()) for im in batch], return_tensors="pt")["pixel_values"]
    ours = Preprocess.from_hf(cfg)(batch)
    assert ours.shape == reference.shape
    assert float((ours - reference).abs().mean()) < 0.02
    backend = request.getfixturevalue(kind)
    module = backend.prepared.module
    with torch.inference_mode():
        a = torch.nn.functional.normalize(backend.loaded.image_fn(module, ours), dim=-1)
        b = torch.nn.functional.normalize(backend.loaded.image_fn(module, reference), dim=-1)
    assert float((a * b).sum(-1).mean()) >= 0.999


def test_preprocess_shortest_edge_and_crop_geometry():
    pre = Preprocess("shortest", (32, 32), (32, 32), (0.5,) * 3, (0.5,) * 3)
    out = pre(torch.full((2, 40, 80, 3), 255, dtype=torch.uint8))
    assert out.shape == (2, 3, 32, 32)
    assert torch.allclose(out, torch.ones_like(out), atol=1e-5)  # (1 - 0.5) / 0.5
    small = pre(torch.zeros((1, 10, 10, 3), dtype=torch.uint8))
    assert small.shape == (1, 3, 32, 32)


def test_query_encoder_is_rebuilt_from_the_fingerprint(clip, models, tmp_path):
    encoder = backend_from_fingerprint(json.dumps(clip.fingerprint))
    np.testing.assert_allclose(
        encoder.encode_texts(["striped shirt"]), clip.encode_texts(["striped shirt"]), atol=1e-5
    )
    moved = save_tiny_clip(tmp_path / "changed", seed=5)
    stale = dict(clip.fingerprint, model=str(moved.resolve()))
    with pytest.raises(VismerchError, match="changed"):
        backend_from_fingerprint(stale)


def test_openclip_local_folder_fingerprint_is_checked_like_the_others(models, tmp_path):
    """openclip stores its local model as ``local-dir:PATH``: the folder check must look at
    PATH (it used to test the prefixed string, so every such store read as 'gone')."""
    if importlib.util.find_spec("open_clip") is not None:
        pytest.skip("open_clip is installed: loading would go further than the checks")
    folder = models["clip"]
    fingerprint = {"backend": "openclip", "model": f"local-dir:{folder}",
                   "revision": folder_digest(folder), "dim": 32}
    with pytest.raises(VismerchError) as err:  # present and unchanged: on to loading it
        backend_from_fingerprint(fingerprint)
    assert "gone" not in err.value.message and "changed" not in err.value.message
    with pytest.raises(VismerchError, match="changed"):
        backend_from_fingerprint(dict(fingerprint, revision="sha256:0000000000000000"))
    with pytest.raises(VismerchError, match="gone"):
        backend_from_fingerprint(dict(fingerprint, model=f"local-dir:{tmp_path / 'nowhere'}"))


def test_vit_flops_matches_the_published_vit_b16_figure():
    # ViT-B/16 at 224 px: 17.6 GMACs per image (timm), i.e. ~35.1 GFLOPs
    assert vit_flops(224, 16, 768, 3072, 12) / 2 == pytest.approx(17.6e9, rel=0.02)


def test_one_flop_convention_for_benchmarks_and_the_planner():
    """The H200's 9,112 img/s ViT-B/16 bf16 is MFU 0.32 against the datasheet 989 TFLOP/s
    (the 0.41 once quoted divided by a measured matmul peak instead)."""
    from vismerch.plan.hardware import Catalog
    from vismerch.plan.workloads import PRESETS, model_flops_utilisation

    b16 = PRESETS["vit-b-16"]
    assert vit_flops(224, 16, 768, 3072, 12, projection=512) == b16.forward_flops()
    peak = Catalog.load().get("h200").peak_flops("bf16")
    assert model_flops_utilisation(b16.forward_flops(), 9112, peak) == pytest.approx(0.32, abs=0.005)


def test_gpu_decoder_is_absent_without_cuda_or_torchvision():
    if torch.cuda.is_available() and importlib.util.find_spec("torchvision") is not None:
        pytest.skip("this machine can decode on the GPU")
    assert gpu_jpeg_decoder("cpu") is None


def _encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def test_gpu_decode_takes_only_what_it_decodes_like_the_cpu_decoder():
    im = Image.new("RGB", (64, 48), (200, 30, 40))
    assert gpu_decode_eligible(_encode(im, "JPEG"))
    assert not gpu_decode_eligible(_encode(im, "PNG"))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated: the CPU decoder applies it
    assert not gpu_decode_eligible(_encode(im, "JPEG", exif=exif))
    assert not gpu_decode_eligible(_encode(im, "JPEG"), max_pixels=100)
    assert not gpu_decode_eligible(b"not an image")
    assert not gpu_decode_eligible(_encode(im, "JPEG", icc_profile=adobe_rgb_icc()))  # needs CMS
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    assert gpu_decode_eligible(_encode(im, "JPEG", icc_profile=srgb))  # sRGB: nothing to convert
    # nvJPEG decodes a JPEG cut short without an error (seen on an H200): the CPU must refuse it
    whole = _encode(Image.effect_noise((256, 256), 60).convert("RGB"), "JPEG")
    assert gpu_decode_eligible(whole + b"\x00\x00")  # zero padding after the end marker is fine
    assert not gpu_decode_eligible(whole[: len(whole) * 2 // 3])


def test_pinned_batch_and_prefetcher_on_cpu():
    arrays = [np.full((8, 8, 3), i, np.uint8) for i in range(3)]
    batch = pinned_batch(arrays)
    assert batch.shape == (3, 8, 8, 3) and batch.dtype == torch.uint8
    out = list(DevicePrefetcher([batch, batch[:1]], "cpu"))
    assert [len(b) for b in out] == [3, 1]
    assert [int(b[0, 0, 0, 0]) for b in out] == [0, 0] and int(batch[2, 7, 7, 2]) == 2


@pytest.mark.gpu
def test_pinned_batch_and_prefetcher_on_cuda():
    arrays = np.stack([np.full((8, 8, 3), i, np.uint8) for i in range(3)])
    batch = pinned_batch(arrays)
    assert batch.is_pinned() and torch.equal(batch, torch.from_numpy(arrays))
    out = list(DevicePrefetcher([batch, pinned_batch(arrays[:1])], "cuda"))
    assert all(b.is_cuda for b in out) and torch.equal(out[0].cpu(), batch)


@pytest.mark.gpu
def test_prefetcher_takes_batches_already_on_the_device():
    """nvJPEG hands the neural encoder device tensors; pinning one raised on every image of a
    --device cuda --backend clip ingest (seen on an H200, 2026-12-04)."""
    arrays = np.stack([np.full((8, 8, 3), i, np.uint8) for i in range(3)])
    on_device = torch.from_numpy(arrays).cuda()
    out = list(DevicePrefetcher([on_device, pinned_batch(arrays)], "cuda"))
    assert [b.is_cuda for b in out] == [True, True]
    assert torch.equal(out[0].cpu(), out[1].cpu())


@pytest.mark.gpu
def test_gpu_and_cpu_embeddings_agree(models, clip):
    gpu = build_backend("clip", model=str(models["clip"]), device="cuda", precision="fp32")
    a = clip.encode_images(images()).vectors
    b = gpu.encode_images(images()).vectors
    assert float(np.mean(np.sum(a * b, axis=1))) >= 0.999
    low = build_backend("clip", model=str(models["clip"]), device="cuda", precision="auto")
    c = low.encode_images(images()).vectors
    assert float(np.mean(np.sum(a * c, axis=1))) >= 0.995


def test_gpu_benchmark_dry_run_on_cpu(tmp_path):
    """The H200 benchmark script's CPU dry-run finishes and writes the calibration JSON."""
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "gpu.json"
    assert module.main(["--device", "cpu", "--tiny", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["device"] and data["gpu"] is None and len(data["date"]) == 10
    kinds = {r.get("kernel") or r.get("model") for r in data["results"]}
    assert {"matmul", "scan", "jpeg_decode"} <= kinds
    models_run = [r for r in data["results"] if "model" in r]
    assert models_run and all(r["images_per_s"] > 0 for r in models_run)
    assert all(a["passed"] for a in data["agreement"])


def test_encode_stream_matches_encode_images(clip):
    batches = [images(3, seed=1).numpy(), images(2, seed=2)]
    streamed = [fb.vectors for fb in clip.encode_stream(batches)]
    direct = [clip.encode_images(b).vectors for b in batches]
    assert len(streamed) == 2
    for a, b in zip(streamed, direct, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.gpu
def test_gpu_jpeg_decode_matches_the_cpu_decoder():
    pytest.importorskip("torchvision", reason="GPU decode needs torchvision (vismerch[gpu])")
    from vismerch.imaging.decode import decode_image
    from vismerch.imaging.gpu_decode import decode_jpegs_gpu

    jpegs = [_encode(Image.fromarray(im.numpy()), "JPEG", quality=95) for im in calibration_images(4, 300)]
    jpegs.append(_encode(Image.new("RGB", (40, 40), (0, 0, 255)), "PNG"))  # left for the CPU
    batch, done = decode_jpegs_gpu(jpegs, "cuda", size=128)
    assert done == [0, 1, 2, 3] and batch.shape == (4, 128, 128, 3) and batch.is_cuda
    cpu = np.stack([decode_image(j, working_size=128, thumb_size=None).pixels for j in jpegs[:4]])
    assert np.abs(batch.cpu().numpy().astype(int) - cpu.astype(int)).mean() < 6


def test_batch_size_on_cpu_is_the_setting(models):
    from vismerch.config import load_settings

    backend = build_backend(
        "clip", settings=load_settings(overrides={"batch_size": 24}), model=str(models["clip"])
    )
    assert backend.batch_size == 24


@pytest.mark.gpu
def test_auto_batch_size_on_cuda(models):
    backend = build_backend("clip", model=str(models["clip"]), device="cuda")
    n = backend.batch_size
    assert n >= 16 and n & (n - 1) == 0  # a power of two from the doubling search


def test_compiled_towers_give_the_eager_embeddings(models, clip, monkeypatch):
    """``compile=True`` compiles the image and the text tower; vectors stay the eager ones.
    Traced by dynamo with its eager backend here (inductor's C++ build takes minutes on a
    CI core; benchmarks/gpu.py --compile runs inductor on the GPU)."""
    from vismerch.features import neural

    monkeypatch.setattr(neural, "COMPILE_BACKEND", "eager")
    compiled = build_backend("clip", model=str(models["clip"]), compile=True)
    assert compiled.compiled == ["get_image_features", "get_text_features"]
    batch = images(5)
    np.testing.assert_allclose(compiled.encode_images(batch).vectors, clip.encode_images(batch).vectors,
                               atol=2e-4)
    texts = ["a red dress", "blue jeans with a longer description"]
    np.testing.assert_allclose(compiled.encode_texts(texts), clip.encode_texts(texts), atol=2e-4)


def test_fp8_variants_are_refused_on_cpu_with_the_reason():
    from vismerch.accel.device import device_info
    from vismerch.accel.precision import PrecisionUnavailable, fp8_path

    for granularity in ("row", "tensor"):
        with pytest.raises(PrecisionUnavailable, match="sm89"):
            fp8_path(granularity)(torch.nn.Linear(32, 32), device_info("cpu"))
    with pytest.raises(UsageError, match="granularity"):
        fp8_path("block")
