"""``plan --calibrate`` with a measured streaming ingest: start-up and the pipeline's share
of its slower part predict a run from another run's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vismerch.plan.calibrate import load_calibration, predict_ingest_seconds
from vismerch.plan.hardware import Catalog
from vismerch.plan.planner import make_plan

RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu-ingest-cpu-tiny.json"


def _calibration(tmp_path: Path, records: list[dict], device: str = "cpu"):
    path = tmp_path / "ingest.json"
    path.write_text(json.dumps({"device": device, "results": records}))
    return load_calibration([path], Catalog.load())


def test_the_probe_run_predicts_the_recorded_main_run_within_15_percent(tmp_path):
    """benchmarks/gpu_ingest.py recorded a probe and a main run on one machine; read through
    the planner's calibration, the probe alone predicts the main run's time."""
    report = json.loads(RECORDED.read_text())
    probe, main = report["results"]
    assert probe["images"] < main["images"]
    cal = _calibration(tmp_path, [probe])
    (figures,) = cal.ingest.values()
    assert figures.startup_s == probe["startup_s"] and figures.ceiling_img_s == probe["ceiling_img_s"]
    predicted = predict_ingest_seconds(figures, main["images"])
    assert predicted == pytest.approx(main["to_last_commit_s"], rel=0.15)


def test_an_embed_plan_on_the_measured_card_uses_start_up_and_the_measured_share(tmp_path):
    record = {"kernel": "ingest", "model": "vit-b-16", "precision": "bf16", "images": 20000,
              "startup_s": 30.0, "steady_img_s": 4000.0, "decode_img_s": 15000.0,
              "encoder_img_s": 8000.0}
    cal = _calibration(tmp_path, [record], device="NVIDIA H200")
    figures = cal.ingest_figures("h200", "vit-b-16", "bf16")
    assert figures.pipeline_eff == pytest.approx(0.5)
    plan = make_plan("embed", images=100_000, gpus=["h200"], precision="bf16", calibration=cal)
    option = plan.options[0]
    assert option.rate_per_gpu == pytest.approx(4000.0)
    assert option.hours * 3600 == pytest.approx(30.0 + 100_000 / 4000.0)
    assert any("measured ingest: start-up 30.0 s" in n for n in option.notes)
    # a record that lacks a figure is named in the notes, not used
    broken = _calibration(tmp_path, [{k: v for k, v in record.items() if k != "startup_s"}], "NVIDIA H200")
    assert not broken.ingest and any("ingest without startup_s" in n for n in broken.notes)
