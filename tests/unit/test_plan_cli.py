"""`vismerch plan` in-process: table, JSON, plots, claims, catalog and usage errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vismerch.cli import app, main

runner = CliRunner()
OPTION_KEYS = {"gpu", "gpus", "precision", "hours", "rent_usd", "own_usd", "bound", "strategy"}
BOUNDS = {"compute", "memory", "communication", "decode"}


def _json(args: list[str]) -> dict:
    result = runner.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_embed_table():
    result = runner.invoke(app, ["plan", "--workload", "embed", "--model", "vit-b-16", "--images",
                                 "50M", "--deadline", "24h", "--gpus", "h100,h200,b200"])
    assert result.exit_code == 0, result.output
    for word in ("h100", "h200", "b200", "decode", "sensitivity", "rented", "owned"):
        assert word in result.stdout


def test_embed_json_shape():
    out = _json(["--workload", "embed", "--model", "vit-b-16", "--images", "50M",
                 "--deadline", "24h", "--gpus", "h100,h200,b200"])
    assert out["workload"]["kind"] == "embed" and out["workload"]["images"] == 50e6
    assert [o["gpu"] for o in out["options"]] and len(out["options"]) == 3
    for option in out["options"]:
        assert set(option) >= OPTION_KEYS
        assert option["bound"] in BOUNDS
        assert option["hours"] <= 24
    rents = [o["rent_usd"] for o in out["options"]]
    assert rents == sorted(rents)  # ranked
    assert out["assumptions"]["utilisation"]["why"]  # every assumption explained
    assert out["sensitivity"][0]["assumption"] == "baseline"


def test_search_and_finetune_json():
    search = _json(["--workload", "search", "--vectors", "100M", "--dim", "768",
                    "--queries", "10M", "--gpus", "h100,h200"])
    assert search["workload"]["index_gb"] == pytest.approx(153.6)
    assert {o["gpu"] for o in search["options"]} == {"h100", "h200"}
    tune = _json(["--workload", "finetune", "--model", "vit-b-16", "--images", "2M",
                  "--epochs", "3", "--gpus", "h100", "--deadline", "30m"])
    option = tune["options"][0]
    assert tune["workload"]["units"] == 6e6 and option["precision"] == "bf16"
    assert option["hours"] <= 0.5 and option["strategy"].startswith("DP x")


def test_set_and_precision_flags():
    cheap = _json(["--images", "1M", "--gpus", "h100", "--set", "h100.rent_usd_per_h=1",
                   "--set", "decode_per_core=0", "--precision", "bf16"])
    option = cheap["options"][0]
    assert option["precision"] == "bf16" and option["bound"] != "decode"
    assert option["rent_usd"] == pytest.approx(option["gpu_hours"] * 1, rel=0.01)


def test_plots_written(tmp_path):
    result = runner.invoke(app, ["plan", "--workload", "finetune", "--model", "vit-b-16",
                                 "--images", "2M", "--epochs", "3", "--gpus", "h100,l40s",
                                 "--plots", str(tmp_path / "plots"), "--json"])
    assert result.exit_code == 0, result.output
    paths = json.loads(result.stdout)["plots"]
    assert len(paths) == 2
    for path in paths:
        with open(path, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_claims_turn_measured_with_a_recorded_fp8_run(tmp_path):
    doc = {"device": "NVIDIA H200", "results": [
        {"model": "vit-b-16", "precision": "bf16", "images_per_s": 9112, "batch": 256},
        {"model": "vit-b-16", "precision": "fp8", "images_per_s": 3731, "batch": 256}]}
    (tmp_path / "gpu.json").write_text(json.dumps(doc))
    claims = _json(["--claims", "--calibrate", str(tmp_path / "gpu.json")])
    fp8 = next(c for c in claims if "6x" in c["claim"])
    assert fp8["status"] == "measured"
    assert fp8["measured_fp8_over_bf16"] == {"h200 vit-b-16": pytest.approx(0.409, abs=0.001)}
    assert "0.41x" in fp8["verdict"]


def test_claims_and_catalog():
    claims = _json(["--claims"])
    by_claim = {c["claim"]: c for c in claims}
    fp8 = next(c for name, c in by_claim.items() if "6x" in name)
    assert fp8["peak_ratio"] == pytest.approx(1979 / 312, abs=0.01)
    assert fp8["same_precision_peak_ratio"] == pytest.approx(989 / 312, abs=0.01)
    fp4 = next(c for name, c in by_claim.items() if "FP4" in name)
    assert fp8["status"] == fp4["status"] == "unverified"
    assert fp8["verdict"].startswith("Unverified")
    bw = next(c for name, c in by_claim.items() if "43%" in name)
    assert bw["peak_ratio"] == pytest.approx(1.433, abs=0.001)
    bubble = next(c for name, c in by_claim.items() if "bubble" in name)
    assert bubble["holds_for"]["p=4"] == "m in 7..17"
    table = runner.invoke(app, ["plan", "--claims"])
    assert table.exit_code == 0 and "verdict" in table.stdout
    catalog = _json(["--catalog"])
    assert {g["gpu"] for g in catalog} >= {"a100", "h100", "h200", "b200", "b300", "l40s", "l4"}
    # every figure the planner reads is printed, and each has a source
    h100 = next(g for g in catalog if g["gpu"] == "h100")
    for name in ("pcie_gb_s", "scaleout_gb_s", "gpus_per_node", "nvlink_domain", "purchase_usd"):
        assert h100[name] > 0 and h100["source"].get(name), name


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--images", "fifty"], "--images"),
     (["--images", "1M", "--deadline", "soon"], "deadline"),
     (["--images", "1M", "--gpus", "h900"], "unknown GPU"),
     (["--images", "1M", "--model", "vit-z-99"], "unknown model"),
     (["--workload", "search", "--vectors", "1M"], "--queries"),
     (["--workload", "dance", "--images", "1M"], "unknown workload"),
     (["--images", "1M", "--set", "utilisation=2"], "utilisation"),
     (["--images", "1M", "--precision", "fp2"], "precision"),
     (["--workload", "embed"], "--images")],
)
def test_usage_errors_exit_2(args, message):
    result = runner.invoke(app, ["plan", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_main_entry_point(capsys):
    assert main(["plan", "--images", "1M", "--gpus", "l4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["options"][0]["gpu"] == "l4"
    assert main(["plan", "--images", "lots"]) == 2
