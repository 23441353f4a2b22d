"""One GPU session, about five minutes: the correctness checks and every GPU figure of
issue 32, raw JSON into one folder.

Steps, each a subprocess with its own time limit (one that fails or overruns is recorded
and the rest still run):

1. ``pytest -m gpu``: the tests that need CUDA (GPU vs CPU embeddings, nvJPEG fallbacks,
   the streaming ingest on ``cuda`` against the CPU store);
2. ``benchmarks/gpu.py``: matmul peak, agreement, ViT-B/16 and ViT-L/14 at bf16, FP8
   per-row and FP8 per-tensor, eager, plus compiled rows (bf16 and FP8), with MFU under
   ``plan.workloads.FLOP_CONVENTION`` and the FP8 verdict per model size;
3. ``benchmarks/gpu_ingest.py``: 20,000 512 px JPEGs through ``vismerch ingest --backend
   clip`` (streaming), start-up and steady state apart, each part alone, colour-only GPU
   ingest against the CPU workers, the planner's prediction from a probe run;
4. ``vismerch plan --calibrate`` on both JSON files for the card: what the planner now says.

``summary.json`` names the card, driver and torch and each step's status, seconds and
checks. Run from the repository root.

With the device tool (one call; keeps to about 5 of its 15 minutes, leaving room to rerun):

    run(command="PYTHONPATH=src python benchmarks/gpu_session.py --out $OUT", timeout_s=480)

(480 s leaves room for the machine's start within the 15 minutes, and for one rerun.)

then copy ``gpu-<card>.json``, ``gpu-ingest-<card>.json`` and ``summary.json`` from the
returned files into ``benchmarks/results/``. FP8 rows need torchao on that machine; without
it they are recorded as skipped with the reason. Dry-run anywhere (a test runs it):

    PYTHONPATH=src python benchmarks/gpu_session.py --device cpu --tiny --out /tmp/session
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# seconds per step on a GPU: about five minutes in all, a little over six at worst; gpu.py
# saves its JSON after every section and stops starting new ones after its own budget
LIMITS = {"tests": 60, "gpu": 170, "ingest": 150, "plan": 20}
GPU_ARGS = ["--models", "vit-b-16,vit-l-14", "--precisions", "bf16,fp8,fp8-tensor",
            "--compiled", "vit-b-16:bf16,vit-b-16:fp8,vit-l-14:fp8", "--budget-s", "120"]


def step(name: str, cmd: list[str], limit: float, log: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit,
                              check=False)
        status, out = ("ok" if proc.returncode == 0 else f"exit {proc.returncode}"), proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        status = f"over its {limit:.0f} s"
        out = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
    log.write_text(out)
    seconds = round(time.perf_counter() - started, 1)
    print(f"[{name}] {status} in {seconds} s", file=sys.stderr)
    return {"status": status, "seconds": seconds, "log": log.name, "tail": out[-1500:]}


def card(device: str) -> str:
    import torch

    from vismerch.accel.device import device_info

    if device.startswith("cuda") and not torch.cuda.is_available():
        return "none"
    info = device_info(device)
    return info.gpu or info.type


def read(path: Path, key: str) -> Any:
    try:
        return json.loads(path.read_text()).get(key)
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny models and catalog: a CPU dry-run")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(HERE / "results"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from vismerch.testing.bench import gpu_stack

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    key = card(args.device)
    py = sys.executable
    tiny = ["--tiny"] if args.tiny else []
    gpu_json, ingest_json = out / f"gpu-{key}.json", out / f"gpu-ingest-{key}.json"
    limits = {k: v * (3 if args.tiny else 1) for k, v in LIMITS.items()}
    summary: dict[str, Any] = {"card": key, "device": args.device, **gpu_stack(), "steps": {}}
    steps = summary["steps"]
    if args.device.startswith("cuda"):
        steps["tests"] = step("tests", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                                        "tests"], limits["tests"], out / "tests.log")
    else:
        steps["tests"] = {"status": "skipped", "why": "no CUDA device: the gpu tests need one"}
    # the dry-run traces its compiled row with dynamo's eager backend (no C++ build on CPU)
    gpu_args = (["--precisions", "bf16,fp8", "--compiled", "tiny:bf16", "--compile-backend", "eager"]
                if args.tiny else GPU_ARGS)
    steps["gpu"] = step("gpu", [py, "benchmarks/gpu.py", "--device", args.device, *tiny, *gpu_args,
                                "--out", str(gpu_json)], limits["gpu"], out / "gpu.log")
    steps["ingest"] = step("ingest", [py, "benchmarks/gpu_ingest.py", "--device", args.device, *tiny,
                                      "--out", str(ingest_json)], limits["ingest"], out / "gpu-ingest.log")
    plan_cmd = [py, "-m", "vismerch.cli", "plan", "--images", "20000", "--json",
                "--calibrate", str(gpu_json), "--calibrate", str(ingest_json)]
    if key not in ("cpu", "none"):
        plan_cmd += ["--gpus", key]
    steps["plan"] = step("plan", plan_cmd, limits["plan"], out / "plan.log")
    summary["checks"] = {"gpu": read(gpu_json, "checks"), "ingest": read(ingest_json, "checks")}
    summary["figures"] = {k: read(ingest_json, k) for k in ("startup_s", "steady_img_s", "ceiling_img_s")}
    summary["seconds"] = round(sum(s.get("seconds", 0) for s in steps.values()), 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: summary[k] for k in ("card", "checks", "figures", "seconds")}, indent=2))
    return 0 if all(s["status"] in ("ok", "skipped") for s in steps.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
