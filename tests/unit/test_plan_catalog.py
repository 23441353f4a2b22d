"""Hardware catalog (sources, overrides, device names) and benchmark calibration."""

from __future__ import annotations

import json

import pytest

from vismerch.errors import UnknownName, UsageError
from vismerch.plan.assumptions import Assumptions
from vismerch.plan.calibrate import load_calibration
from vismerch.plan.hardware import Catalog
from vismerch.plan.planner import make_plan
from vismerch.plan.workloads import PRESETS

REQUIRED_GPUS = ("a100", "h100", "h200", "b200", "b300", "l40s", "l4")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load()


def test_catalog_has_required_gpus_and_fields(catalog):
    assert set(REQUIRED_GPUS) <= set(catalog.names())
    for gpu in catalog:
        assert gpu.tflops["bf16"] > 0 and gpu.tflops["fp32"] > 0 and gpu.tflops["tf32"] > 0
        assert gpu.memory_gb > 0 and gpu.hbm_tb_s > 0 and gpu.tdp_w > 0
        assert gpu.rent_usd_per_h > 0 and gpu.purchase_usd > 0
        low, high = gpu.rent_range_usd_per_h
        assert low <= gpu.rent_usd_per_h <= high


def test_every_catalog_figure_has_a_source(catalog):
    for gpu in catalog:
        for figure in gpu.figures():
            source = gpu.source_of(figure)
            assert source and len(source) > 10, f"{gpu.key}.{figure} has no source"


def test_precision_support_by_architecture(catalog):
    assert not catalog.get("a100").supports("fp8")
    assert catalog.get("h100").supports("fp8") and not catalog.get("h100").supports("fp4")
    assert catalog.get("l40s").supports("fp8") and not catalog.get("l4").supports("fp4")
    assert catalog.get("b200").supports("fp4") and catalog.get("b300").supports("fp4")


def test_dense_not_sparse_peaks(catalog):
    # datasheets quote 2:4 sparse figures (H100 FP8 3,958); the catalog keeps dense ones
    assert catalog.get("h100").tflops["fp8"] == pytest.approx(1979)
    assert catalog.get("h100").tflops["bf16"] == pytest.approx(989)
    assert catalog.get("h200").hbm_tb_s / catalog.get("h100").hbm_tb_s == pytest.approx(1.43, abs=0.01)


@pytest.mark.parametrize(
    ("device", "key"),
    [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"), ("NVIDIA L40S", "l40s"),
     ("NVIDIA L4", "l4"), ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA B200", "b200"),
     ("Tesla T4", None), ("NVIDIA GH200 480GB", None)],
)
def test_match_device_names(catalog, device, key):
    assert catalog.match_device(device) == key


def test_aliases_and_unknown(catalog):
    assert catalog.get("H100-SXM").key == "h100"
    with pytest.raises(UnknownName) as err:
        catalog.get("h900")
    assert "h100" in err.value.hint


def test_user_file_overrides_and_adds(tmp_path):
    user = tmp_path / "mine.toml"
    user.write_text(
        '[gpu.h100]\nrent_usd_per_h = 1.5\n\n'
        '[gpu.rtx6000]\nname = "RTX PRO 6000"\narch = "blackwell"\nmemory_gb = 96\n'
        'hbm_tb_s = 1.8\ntdp_w = 600\nrent_usd_per_h = 1.2\npurchase_usd = 8500\n'
        '[gpu.rtx6000.tflops]\nbf16 = 500\nfp4 = 2000\n'
        '[gpu.rtx6000.source]\nmemory_gb = "vendor sheet"\n'
    )
    catalog = Catalog.load(user)
    h100 = catalog.get("h100")
    assert h100.rent_usd_per_h == 1.5 and h100.memory_gb == 80  # other fields kept
    assert str(user) in h100.source_of("rent_usd_per_h")
    new = catalog.get("rtx6000")
    assert new.supports("fp4") and new.source_of("memory_gb") == "vendor sheet"
    assert str(user) in new.source_of("tflops.bf16")
    plan = make_plan("embed", images="1M", gpus=["h100", "rtx6000"], catalog=catalog)
    assert {o.gpu for o in plan.options} == {"h100", "rtx6000"}


def test_bad_user_files(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("[gpu.x\n")
    with pytest.raises(UsageError):
        Catalog.load(broken)
    incomplete = tmp_path / "incomplete.toml"
    incomplete.write_text('[gpu.x]\nname = "X"\n')
    with pytest.raises(UsageError) as err:
        Catalog.load(incomplete)
    assert "lacks" in err.value.message
    with pytest.raises(UsageError):
        Catalog.load(tmp_path / "missing.toml")


def test_set_gpu_field(catalog):
    changed = catalog.with_fields({"h100": {"rent_usd_per_h": "2", "tflops.bf16": "900"}})
    assert changed.get("h100").rent_usd_per_h == 2 and changed.get("h100").tflops["bf16"] == 900
    assert changed.get("h100").source_of("rent_usd_per_h") == "command line --set"
    with pytest.raises(UsageError):
        catalog.with_fields({"h100": {"colour": "1"}})
    # a typo in a precision must not silently add a throughput nothing reads
    with pytest.raises(UsageError, match="unknown precision 'bf61'"):
        catalog.with_fields({"h100": {"tflops.bf61": "900"}})


# --- calibration -------------------------------------------------------------------------


def _write(tmp_path, doc, name="bench.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_calibration_replaces_efficiency_and_changes_the_answer(tmp_path, catalog):
    a = Assumptions({"decode_per_core": 0})
    bench = _write(tmp_path, {
        "schema": "vismerch.bench/1", "device": "NVIDIA H100 80GB HBM3", "date": "2026-05-01",
        "results": [{"model": "vit-b-16", "precision": "bf16", "images_per_s": 7000,
                     "batch_size": 256, "mfu": 0.25}],
    })
    cal = load_calibration([bench], catalog, a)
    kw = dict(images="50M", gpus=["h100"], precision="bf16", assumptions=a, catalog=catalog)
    before = make_plan(model="vit-b-16", **kw).options[0]
    after = make_plan(model="vit-b-16", calibration=cal, **kw).options[0]
    assert after.rate_per_gpu == pytest.approx(7000)  # exact model: measured rate used
    assert after.hours == pytest.approx(50e6 / 7000 / 3600, rel=1e-3)
    assert after.hours > before.hours and after.efficiency.source.startswith("calibrated")
    # a different model on the same GPU and precision inherits the measured efficiency
    expected_eff = PRESETS["vit-b-16"].forward_flops() * 7000 / 989e12
    large = make_plan(model="vit-l-14", calibration=cal, **kw).options[0]
    assert large.efficiency.compute == pytest.approx(expected_eff, rel=1e-3)
    large_default = make_plan(model="vit-l-14", **kw).options[0]
    assert large.hours / large_default.hours == pytest.approx(0.5 / expected_eff, rel=0.01)
    # other GPUs keep their defaults
    other = make_plan(model="vit-b-16", calibration=cal, **{**kw, "gpus": ["h200"]}).options[0]
    assert other.efficiency.source == "default"


def test_auto_takes_the_measured_faster_precision(tmp_path, catalog):
    """FP8 through torchao ran ViT-B/16 at 0.41x bf16 on an H200 (benchmarks/HISTORY.md):
    auto plans FP8 only where a measurement shows it faster, as ingest's own race would pick."""
    a = Assumptions({"decode_per_core": 0})
    kw = dict(model="vit-b-16", images="50M", gpus=["h200"], assumptions=a, catalog=catalog)
    # the roofline alone would pick fp8; with no measurement of it on the card, auto keeps bf16
    assert make_plan(**kw).options[0].precision == "bf16"
    bench = _write(tmp_path, {
        "device": "NVIDIA H200", "date": "2026-12-04",
        "results": [{"model": "vit-b-16", "precision": "bf16", "images_per_s": 9111.9, "batch": 256},
                    {"model": "vit-b-16", "precision": "fp8", "images_per_s": 3730.5, "batch": 256}],
    })
    cal = load_calibration([bench], catalog, a)
    best = make_plan(calibration=cal, **kw).options[0]
    assert best.precision == "bf16" and best.rate_per_gpu == pytest.approx(9111.9)
    assert any("bf16 is used" in n for n in best.notes)
    # asked for explicitly, fp8 is planned at its measured rate
    asked = make_plan(calibration=cal, precision="fp8", **kw).options[0]
    assert asked.precision == "fp8" and asked.rate_per_gpu == pytest.approx(3730.5)


def test_calibration_kernels(tmp_path, catalog):
    bench = _write(tmp_path, [{
        "gpu": "h200", "runs": [
            {"kernel": "scan", "gb_per_s": 2400},  # half of 4.8 TB/s
            {"kernel": "matmul", "dtype": "bfloat16", "tflops": 692.3},
            {"kernel": "allreduce", "gpus": 8, "busbw_gb_per_s": 225},
            {"kernel": "decode", "images_per_s": 3000, "cores": 10},
        ]}])
    cal = load_calibration([bench], catalog)
    eff = cal.efficiency("h200", "bf16", Assumptions())
    assert eff.memory == pytest.approx(0.5) and eff.compute == pytest.approx(0.7, rel=1e-3)
    assert eff.comm == pytest.approx(0.5) and cal.decode_per_core == pytest.approx(300)
    # memory-bound search gets slower by default_memory_eff / measured = 0.8 / 0.5
    a = Assumptions({"query_batch": 1})
    kw = dict(workload="search", vectors=10e6, dim=768, queries=1e4, gpus=["h200"], assumptions=a,
              catalog=catalog)
    base = make_plan(**kw).options[0]
    slow = make_plan(calibration=cal, **kw).options[0]
    assert slow.hours / base.hours == pytest.approx(0.8 / 0.5, rel=1e-3)
    # measured decode speed replaces the default and is labelled as measured
    embed = make_plan(images="1M", gpus=["h200"], catalog=catalog, calibration=cal)
    assert embed.options[0].rate_per_gpu == pytest.approx(300 * 12)
    assert "measured" in embed.to_dict()["assumptions"]["decode_per_core"]["why"]


def test_calibration_is_tolerant(tmp_path, catalog):
    bench = _write(tmp_path, {"device": "NVIDIA H100 PCIe", "results": [
        {"model": "mystery-net", "precision": "bf16", "images_per_s": 5},
        {"kernel": "matmul", "precision": "fp4", "tflops": 100},
        {"kernel": "warp-drive", "precision": "bf16"},
        {"model": "vit-b-16", "precision": "bf16", "images_per_s": 100, "includes_decode": True},
        "nonsense",
    ]})
    cal = load_calibration([bench], catalog)
    assert len(cal.notes) >= 6
    assert any("PCIe part" in n for n in cal.notes)
    assert cal.efficiency("h100", "bf16", Assumptions()).source == "default"
    unknown_gpu = _write(tmp_path, {"device": "Tesla T4", "results": [
        {"kernel": "scan", "gb_per_s": 250}]}, "t4.json")
    assert any("not in the catalog" in n for n in load_calibration([unknown_gpu], catalog).notes)


def test_calibration_bad_files(tmp_path, catalog):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError):
        load_calibration([bad], catalog)
    with pytest.raises(UsageError):
        load_calibration([tmp_path / "absent.json"], catalog)


def test_docs_cover_every_assumption_and_preset():
    from pathlib import Path

    from vismerch.plan.assumptions import ASSUMPTIONS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "planner.md").read_text()
    missing = [a.name for a in ASSUMPTIONS if f"`{a.name}`" not in doc]
    missing += [name for name in PRESETS if f"`{name}`" not in doc]
    assert not missing, f"docs/planner.md does not document {missing}"


def test_cpu_decode_rate_from_the_ingest_benchmark_needs_no_gpu(tmp_path, catalog):
    """benchmarks/ingest.py writes a GPU-less decode record; it still calibrates the plan."""
    bench = _write(tmp_path, {
        "schema": "vismerch.bench/1", "date": "2026-12-02",
        "results": [{"kernel": "decode", "images_per_s_per_core": 450.0}],
    })
    a = Assumptions({})
    cal = load_calibration([bench], catalog, a)
    assert cal.decode_per_core == pytest.approx(450.0)
    kw = dict(images="50M", gpus=["h100"], assumptions=a, catalog=catalog)
    before = make_plan(model="vit-b-16", **kw).options[0]
    after = make_plan(model="vit-b-16", calibration=cal, **kw).options[0]
    assert before.bound == after.bound == "decode"
    assert after.hours == pytest.approx(before.hours * 150.0 / 450.0, rel=1e-3)


def test_scaling_efficiency_from_a_ray_ingest_run_slows_the_data_parallel_plan(tmp_path, catalog):
    """benchmarks/ray_ingest.py's dp_scaling record: 2 workers at 80% is an Amdahl serial share
    of 0.25, so n GPUs take (0.25 + 0.75/n) of one GPU's time, and a deadline needs more GPUs."""
    bench = _write(tmp_path, {
        "schema": "vismerch.bench/1", "date": "2026-12-03",
        "results": [{"kernel": "dp_scaling", "workers": 2, "images_per_s": 64.0,
                     "baseline_images_per_s": 40.0}],
    })
    a = Assumptions({})
    cal = load_calibration([bench], catalog, a)
    assert cal.dp_serial[0] == pytest.approx(0.25)
    kw = dict(images="50M", gpus=["h100"], assumptions=a, catalog=catalog, deadline="3h")
    before = make_plan(model="vit-b-16", **kw).options[0]
    after = make_plan(model="vit-b-16", calibration=cal, **kw).options[0]
    one_gpu_h = before.hours * before.gpus  # linear before calibration
    assert after.hours == pytest.approx(one_gpu_h * (0.25 + 0.75 / after.gpus), rel=1e-3)
    assert after.gpus > before.gpus and after.hours <= 3
    assert make_plan(model="vit-b-16", calibration=cal, **kw).assumptions.dp_serial_fraction == 0.25
