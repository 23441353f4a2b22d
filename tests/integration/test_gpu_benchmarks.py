"""The prepared GPU session (``benchmarks/gpu_session.py``) and the streaming-ingest benchmark
it runs, on CPU with tiny models: the same code a GPU session runs, in under a few minutes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vismerch.testing import write_bad_files

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_gpu_session_dry_run_on_cpu_writes_every_figure(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/gpu_session.py", "--device", "cpu", "--tiny",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert done.returncode == 0, summary
    assert summary["steps"]["tests"]["status"] == "skipped"
    assert {summary["steps"][s]["status"] for s in ("gpu", "ingest", "plan")} == {"ok"}
    assert summary["torch"] and summary["card"] == "cpu"

    report = json.loads((tmp_path / "gpu-ingest-cpu.json").read_text())
    assert {"device", "driver", "torch", "flop_convention"} <= report.keys()
    parts = report["parts"]
    assert report["ceiling_img_s"] == min(parts["decode_img_s"], parts["encoder_img_s"]) > 0
    assert report["startup_s"] > 0 and report["steady_img_s"] > 0
    probe, main = report["results"]
    assert probe["kernel"] == main["kernel"] == "ingest" and probe["images"] < main["images"]
    expected = {}
    for reason in write_bad_files(tmp_path / "bad").values():
        expected[reason] = expected.get(reason, 0) + 1
    assert report["runs"]["main"]["refused"] == expected
    assert report["agreement"]["same_refusals"] and report["agreement"]["missing"] == 0
    assert report["prediction"]["measured_s"] == main["to_last_commit_s"]

    gpu = json.loads((tmp_path / "gpu-cpu.json").read_text())
    skipped = {s["what"]: s["why"] for s in gpu["skipped"]}
    assert "sm89" in skipped["tiny fp8"]  # FP8 skipped on CPU, with the reason
    assert any(r.get("compiled") for r in gpu["results"] if "model" in r)
    assert '"calibration"' in (tmp_path / "plan.log").read_text()  # the planner read both files
