"""Automatic precision and its accuracy guard (CPU; FP8/FP4 only where the hardware has them)."""

from __future__ import annotations

import importlib.util
import logging

import pytest
import torch
from torch import nn

from vismerch.accel.device import DeviceInfo, device_info, gpu_key
from vismerch.accel.precision import (
    PrecisionUnavailable,
    PreparedModel,
    auto_precision,
    check_precision,
    choose_precision,
    ladder,
    mean_cosine,
    prepare_module,
    running,
)
from vismerch.errors import UsageError

HAS_TORCHAO = importlib.util.find_spec("torchao") is not None


def fake_info(sm: int | None) -> DeviceInfo:
    if sm is None:
        return DeviceInfo("cpu", "cpu", "cpu", None, None, None, True, True, False, False)
    return DeviceInfo(
        "cuda:0",
        "cuda",
        f"fake sm{sm}",
        (sm // 10, sm % 10),
        80 << 30,
        100,
        bf16=sm >= 80,
        fp16=True,
        fp8=sm >= 89,
        fp4=sm >= 100,
    )


def toy_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 32)).eval()


CALIB = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))


def guard(requested: str, info: DeviceInfo, paths=None, min_cosine: float = 0.995, device="cpu",
          seconds=None):
    model = toy_model().to(device)
    calib = CALIB.to(device)

    def prepare(p: str) -> PreparedModel:
        return prepare_module(model, p, info, paths, copy_module=p != "fp32")

    def embed(prepared: PreparedModel) -> torch.Tensor:
        with running(prepared):
            return prepared.module(calib.to(prepared.input_dtype)).float()

    return choose_precision(requested, info, prepare=prepare, embed=embed, min_cosine=min_cosine,
                            seconds=seconds)


def damaged_bf16(module: nn.Module, info: DeviceInfo) -> PreparedModel:
    """A deliberately broken low-precision path: bf16 plus large weight corruption."""
    module = module.to(torch.bfloat16)
    with torch.no_grad():
        g = torch.Generator().manual_seed(7)
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g).to(p.dtype) * p.float().std().to(p.dtype) * 3)
    return PreparedModel(module, "bf16", torch.bfloat16)


@pytest.mark.parametrize(
    "sm, expected",
    [(None, "fp32"), (75, "fp16"), (80, "bf16"), (86, "bf16"), (89, "fp8"), (90, "fp8"), (100, "fp4")],
)
def test_auto_picks_by_capability(sm, expected):
    assert auto_precision(fake_info(sm)) == expected


def test_ladder_steps_down_one_level_at_a_time():
    assert ladder("fp4") == ["fp4", "fp8", "bf16", "fp32"]
    assert ladder("fp16") == ["fp16", "fp32"]
    assert ladder("fp32") == ["fp32"]


def test_unknown_precision_is_a_usage_error():
    with pytest.raises(UsageError, match="int3"):
        check_precision("int3")
    assert check_precision("BF16") == "bf16"


def test_auto_on_cpu_is_fp32_without_a_guard_run():
    choice = guard("auto", fake_info(None))
    assert choice.precision == "fp32"
    assert [s.precision for s in choice.steps] == ["fp32"]


def test_bf16_passes_the_guard_on_a_healthy_path():
    choice = guard("bf16", fake_info(None))
    assert choice.precision == "bf16"
    assert choice.cosine is not None and 0.995 <= choice.cosine <= 1.0
    assert next(choice.candidate.module.parameters()).dtype == torch.bfloat16


def test_damaged_low_precision_path_fails_the_guard_and_steps_down(caplog):
    with caplog.at_level(logging.WARNING, logger="vismerch.precision"):
        choice = guard("bf16", fake_info(None), paths={"bf16": damaged_bf16})
    assert choice.precision == "fp32"
    failed = choice.steps[0]
    assert failed.precision == "bf16" and not failed.accepted
    assert failed.cosine is not None and failed.cosine < 0.995
    assert "below 0.995" in failed.reason
    assert any("failed the guard" in r.getMessage() for r in caplog.records)
    # the fp32 model that is kept was not touched by the damaged copy
    assert next(choice.candidate.module.parameters()).dtype == torch.float32


def test_threshold_is_configurable():
    assert guard("bf16", fake_info(None), min_cosine=1.5).precision == "fp32"
    assert guard("bf16", fake_info(None), min_cosine=0.5).precision == "bf16"


def healthy_fp8(module: nn.Module, info: DeviceInfo) -> PreparedModel:
    """A stand-in FP8 path that runs on the CPU (bf16 under the fp8 name): accurate enough."""
    return PreparedModel(module.to(torch.bfloat16), "fp8", torch.bfloat16)


def fake_seconds(times: dict[str, float]):
    return lambda prepared: times[prepared.precision]


def test_auto_keeps_a_low_precision_only_when_it_is_faster():
    # FP8 passed the guard on an H200 but ran at 0.41x bf16: auto must measure, not assume
    slow = guard("auto", fake_info(90), paths={"fp8": healthy_fp8},
                 seconds=fake_seconds({"fp8": 0.020, "bf16": 0.008}))
    assert slow.precision == "bf16"
    steps = [(st.precision, st.accepted) for st in slow.steps]
    assert steps == [("fp8", True), ("bf16", True), ("fp8", False)]
    assert "slower than bf16 here (20.0 vs 8.0 ms" in slow.steps[-1].reason
    fast = guard("auto", fake_info(90), paths={"fp8": healthy_fp8},
                 seconds=fake_seconds({"fp8": 0.004, "bf16": 0.008}))
    assert fast.precision == "fp8"
    assert next(fast.candidate.module.parameters()).dtype == torch.bfloat16
    # an explicit request is honoured whatever its speed
    asked = guard("fp8", fake_info(90), paths={"fp8": healthy_fp8},
                  seconds=fake_seconds({"fp8": 0.020, "bf16": 0.008}))
    assert asked.precision == "fp8"


def test_auto_on_ampere_times_nothing():
    def never(prepared):
        raise AssertionError("bf16 has only fp32 below it: no race to run")

    assert guard("auto", fake_info(80), seconds=never).precision == "bf16"


@pytest.mark.skipif(HAS_TORCHAO, reason="checks the step-down when torchao is absent")
def test_auto_on_hopper_without_fp8_library_steps_down_to_bf16():
    choice = guard("auto", fake_info(90))
    assert choice.requested == "auto" and choice.precision == "bf16"
    assert choice.steps[0].precision == "fp8" and "torchao" in choice.steps[0].reason


@pytest.mark.skipif(HAS_TORCHAO, reason="checks the step-down when torchao is absent")
def test_auto_on_blackwell_without_libraries_steps_fp4_fp8_bf16():
    choice = guard("auto", fake_info(100))
    assert [s.precision for s in choice.steps] == ["fp4", "fp8", "bf16"]
    assert choice.precision == "bf16"


def test_fp8_requested_on_cpu_is_refused_with_the_reason():
    choice = guard("fp8", fake_info(None))
    assert choice.precision == "bf16"
    assert "sm89" in choice.steps[0].reason


def test_fp4_path_unavailable_below_sm100():
    with pytest.raises(PrecisionUnavailable, match="sm100"):
        prepare_module(toy_model(), "fp4", fake_info(90))


def test_nan_embeddings_never_pass():
    def nan_path(module: nn.Module, info: DeviceInfo) -> PreparedModel:
        module = module.to(torch.bfloat16)
        with torch.no_grad():
            next(module.parameters()).fill_(float("nan"))
        return PreparedModel(module, "bf16", torch.bfloat16)

    assert guard("bf16", fake_info(None), paths={"bf16": nan_path}).precision == "fp32"


def test_mean_cosine():
    a = torch.randn(8, 16)
    assert mean_cosine(a, a) == pytest.approx(1.0, abs=1e-6)
    assert mean_cosine(a, -a) == pytest.approx(-1.0, abs=1e-6)


def test_device_info_and_gpu_keys():
    info = device_info("cpu")
    assert info.type == "cpu" and info.sm is None and info.gpu is None and not info.fp8
    assert gpu_key("NVIDIA H200") == "h200"
    assert gpu_key("NVIDIA A100-SXM4-80GB") == "a100"
    assert gpu_key("NVIDIA L40S") == "l40s"
    assert gpu_key("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert gpu_key("Mystery Accelerator") is None


def test_cuda_device_without_cuda_is_a_usage_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(UsageError, match="CUDA"):
        device_info("cuda")


def _gpu_with(fmt: str, needs: str) -> DeviceInfo:
    """The CUDA device; skips unless torchao is installed and the card runs ``fmt`` natively."""
    pytest.importorskip("torchao", reason=f"{fmt.upper()} needs torchao (vismerch[gpu])")
    info = device_info("cuda")
    if not getattr(info, fmt):
        pytest.skip(f"{info.name} has no {fmt.upper()} tensor cores (needs {needs})")
    return info


@pytest.mark.gpu
def test_fp8_on_real_hardware_passes_the_guard():
    choice = guard("fp8", _gpu_with("fp8", "sm89+"), device="cuda")
    assert choice.steps[0].precision == "fp8"
    assert choice.steps[0].cosine is not None


@pytest.mark.gpu
def test_fp4_on_real_hardware():
    info = _gpu_with("fp4", "sm100+")
    prepared = prepare_module(toy_model().cuda(), "fp4", info)
    with running(prepared):
        out = prepared.module(CALIB.cuda().to(prepared.input_dtype))
    assert out.shape == (32, 32)
