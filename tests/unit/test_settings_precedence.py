"""Settings precedence through the real CLI: table default < --config TOML < VISMERCH_*
environment < flag, for each kind of setting (int threshold, float, str, search_*, tag_*,
serve_*), each layer observed in what the command does (the settings recorded with an
ingest run, quality flags, tag and search result counts, CORS headers of a running server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from vismerch.catalog.store import Store
from vismerch.cli import main
from vismerch.testing import small_catalog


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """Only the layers a test sets: no VISMERCH_* from the calling shell."""
    for key in list(os.environ):
        if key.startswith("VISMERCH_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return small_catalog(tmp_path_factory.mktemp("prec") / "cat", n=8, seed=11, corrupt=False,
                         flawed=False, duplicates=False)


@pytest.fixture(scope="module")
def store(cat, tmp_path_factory):
    path = tmp_path_factory.mktemp("prec-store") / "store"
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("VISMERCH_")}
    try:
        assert main(["ingest", str(cat.manifest_path), "--store", str(path), "--workers", "1",
                     "--json"]) == 0
    finally:
        os.environ.update(saved)
    return path


def _toml(tmp_path: Path, **values) -> str:
    path = tmp_path / f"settings-{len(list(tmp_path.glob('settings-*')))}.toml"
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()))
    return str(path)


def _run(capsys, args: list[str], code: int = 0):
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == code, (args, out[-2000:], err[-2000:])
    return json.loads(out) if "--json" in args and code == 0 else err


def _last_run_settings(store: Path) -> dict:
    with Store.open(store) as s:
        row = s.db.execute("SELECT settings FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    return json.loads(row[0])


def _ingest(cat, store, *extra: str, root: tuple[str, ...] = ()) -> list[str]:
    return [*root, "ingest", str(cat.manifest_path), "--store", str(store), "--json", *extra]


# ------------------------------------------------------------------ str: precision, device


def test_ingest_precision_default_toml_env_flag(cat, store, tmp_path, capsys, monkeypatch):
    _run(capsys, _ingest(cat, store))
    assert _last_run_settings(store)["precision"] == "auto"  # table default
    toml = _toml(tmp_path, precision="fp32")
    _run(capsys, _ingest(cat, store, root=("--config", toml)))  # root --config, before the command
    assert _last_run_settings(store)["precision"] == "fp32"
    monkeypatch.setenv("VISMERCH_PRECISION", "bf16")
    _run(capsys, _ingest(cat, store, root=("--config", toml)))
    assert _last_run_settings(store)["precision"] == "bf16"  # env over TOML
    _run(capsys, _ingest(cat, store, "--precision", "fp16", root=("--config", toml)))
    assert _last_run_settings(store)["precision"] == "fp16"  # flag over env


def test_ingest_no_longer_forces_device_cpu(cat, store, tmp_path, capsys, monkeypatch):
    _run(capsys, _ingest(cat, store))
    assert _last_run_settings(store)["device"] == "cpu"
    # a device no machine has: it is only refused if the TOML's value reaches ingest
    toml = _toml(tmp_path, device="cuda:99")
    err = _run(capsys, _ingest(cat, store, root=("--config", toml)), code=2)
    assert "cuda:99" in err
    err = _run(capsys, _ingest(cat, store, "--config", toml), code=2)  # ingest --config alias
    assert "cuda:99" in err
    monkeypatch.setenv("VISMERCH_DEVICE", "cpu")
    _run(capsys, _ingest(cat, store, root=("--config", toml)))  # env over TOML
    assert _last_run_settings(store)["device"] == "cpu"
    monkeypatch.setenv("VISMERCH_DEVICE", "cuda:99")
    assert "cuda:99" in _run(capsys, _ingest(cat, store), code=2)
    _run(capsys, _ingest(cat, store, "--device", "cpu"))  # flag over env
    assert _last_run_settings(store)["device"] == "cpu"


# ------------------------------------------------------------------ int: a quality threshold


def _low_res(capsys, store) -> int:
    flagged = _run(capsys, ["quality", str(store), "--json"])
    return sum(f["name"] == "low-resolution" for d in flagged for f in d["flags"])


def test_int_threshold_default_toml_env_flag(cat, store, tmp_path, capsys, monkeypatch):
    # images are 560-704 px: none is under the default 500, every one under 100000
    with Store.open(store) as s:
        ok = len(s.products())
    _run(capsys, _ingest(cat, store))
    assert _last_run_settings(store)["quality_min_side"] == 500 and _low_res(capsys, store) == 0
    toml = _toml(tmp_path, quality_min_side=100000, workers=1)
    _run(capsys, _ingest(cat, store, root=("--config", toml)))
    assert _last_run_settings(store)["quality_min_side"] == 100000 and _low_res(capsys, store) == ok
    monkeypatch.setenv("VISMERCH_QUALITY_MIN_SIDE", "1")
    monkeypatch.setenv("VISMERCH_WORKERS", "2")
    _run(capsys, _ingest(cat, store, root=("--config", toml)))
    recorded = _last_run_settings(store)
    assert recorded["quality_min_side"] == 1 and recorded["workers"] == 2 and _low_res(capsys, store) == 0
    _run(capsys, _ingest(cat, store, "--workers", "1",
                         root=("--config", toml, "--setting", "quality_min_side=100000")))
    recorded = _last_run_settings(store)
    assert recorded["quality_min_side"] == 100000 and recorded["workers"] == 1
    assert _low_res(capsys, store) == ok


# ------------------------------------------------------------------ search_* (a float)


def _hybrid_count(capsys, store, *root: str) -> int:
    return len(_run(capsys, [*root, "search", str(store), "shirt", "--colour", "red", "-k", "50",
                             "--json"]))


def test_search_colour_min_share_default_toml_env_flag(store, tmp_path, capsys, monkeypatch):
    with Store.open(store) as s:
        ok = len(s.products())
    default = _hybrid_count(capsys, store)
    toml = _toml(tmp_path, search_colour_min_share=0.0)  # every product passes the colour
    assert _hybrid_count(capsys, store, "--config", toml) == ok > default
    monkeypatch.setenv("VISMERCH_SEARCH_COLOUR_MIN_SHARE", "1.0")  # all of it red: none is
    assert _hybrid_count(capsys, store, "--config", toml) == 0
    assert _hybrid_count(capsys, store, "--config", toml,
                         "--setting", "search_colour_min_share=0") == ok


def test_a_share_outside_zero_to_one_is_refused_naming_the_setting(store, capsys, monkeypatch):
    monkeypatch.setenv("VISMERCH_SEARCH_COLOUR_MIN_SHARE", "1.01")
    err = " ".join(_run(capsys, ["search", str(store), "shirt", "--colour", "red"], code=2).split())
    assert "search_colour_min_share" in err and "at most 1" in err
    monkeypatch.delenv("VISMERCH_SEARCH_COLOUR_MIN_SHARE")
    err = " ".join(_run(capsys, ["--setting", "quality_min_fill=-0.1", "search", str(store), "shirt"],
                        code=2).split())
    assert "quality_min_fill" in err and "at least 0" in err


# ------------------------------------------------------------------ tag_* (a float)


@pytest.fixture(scope="module")
def tag_store(tmp_path_factory):
    from vismerch.features.neural import build_backend, calibration_images
    from vismerch.testing.models import save_tiny_clip, store_with_vectors

    base = tmp_path_factory.mktemp("prec-tags")
    backend = build_backend("clip", model=str(save_tiny_clip(base / "clip")))
    products = [{"id": f"p{i}", "title": f"item {i}", "category": "dress"} for i in range(5)]
    store_with_vectors(base / "store", backend, products, calibration_images(5, 32, seed=3)).close()
    return base / "store"


def _tag_count(capsys, store, *extra: str, root: tuple[str, ...] = ()) -> int:
    rows = _run(capsys, [*root, "tags", str(store), "--attribute", "pattern", "--json", *extra])
    return sum(len(r["tags"]) for r in rows)


def test_tag_threshold_default_toml_env_flag(tag_store, tmp_path, capsys, monkeypatch):
    default = _tag_count(capsys, tag_store)
    toml = _toml(tmp_path, tag_threshold=0.0)  # any score passes: each product its best label
    every = _tag_count(capsys, tag_store, root=("--config", toml))
    assert every == 5 > default  # pattern is single-label; 13 labels share the softmax
    monkeypatch.setenv("VISMERCH_TAG_THRESHOLD", "1.5")  # a softmax score never reaches it
    assert _tag_count(capsys, tag_store, root=("--config", toml)) == 0
    assert _tag_count(capsys, tag_store, "--threshold", "0", root=("--config", toml)) == every


# ------------------------------------------------------------------ serve_* (a str)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _allowed_origin(store: Path, env: dict[str, str], root: list[str], extra: list[str]) -> str | None:
    """Start `vismerch serve`, ask /openapi.json from origin https://b.example, stop it;
    the Access-Control-Allow-Origin header it answered (None: CORS off for that origin)."""
    port = _free_port()
    cmd = [sys.executable, "-m", "vismerch.cli", *root, "serve", str(store), "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/openapi.json",
                                             headers={"Origin": "https://b.example"})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return response.headers.get("access-control-allow-origin")
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"server did not start: {proc.stdout.read()[-2000:]}") from None
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.timeout(400)
def test_serve_cors_origins_default_toml_env_flag(store, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VISMERCH_")}
    toml = _toml(tmp_path, serve_cors_origins="https://b.example")
    other = "https://a.example, https://c.example"
    assert _allowed_origin(store, env, [], []) is None  # default: CORS off
    assert _allowed_origin(store, env, ["--config", toml], []) == "https://b.example"
    env_other = {**env, "VISMERCH_SERVE_CORS_ORIGINS": other}
    assert _allowed_origin(store, env_other, ["--config", toml], []) is None  # env over TOML
    assert _allowed_origin(store, env_other, ["--config", toml],
                           ["--cors-origins", "https://b.example"]) == "https://b.example"  # flag


# ------------------------------------------------------------------ root options


def test_root_options_are_checked_before_any_command(store, tmp_path, capsys):
    err = _run(capsys, ["--config", str(tmp_path / "missing.toml"), "tags", str(store)], code=2)
    assert "missing.toml" in err
    bad = _toml(tmp_path, no_such_setting=1)
    assert "no_such_setting" in _run(capsys, ["--config", bad, "errors", str(store)], code=2)
    assert "tag_thresh" in _run(capsys, ["--setting", "tag_thresh=1", "tags", str(store)], code=2)
    assert "NAME=VALUE" in _run(capsys, ["--setting", "tag_threshold", "tags", str(store)], code=2)
    err = _run(capsys, ["--setting", "quality_min_side=big", "ingest", "x", "--store", str(store)], code=2)
    assert "quality_min_side" in err and "big" in err
