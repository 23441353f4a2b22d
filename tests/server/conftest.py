"""A small ingested store (made once per session) and, per test module, a copy of it served
in-process by ``create_app`` with a key of every kind."""

from __future__ import annotations

import shutil

import pytest
from fastapi.testclient import TestClient

from vismerch.catalog import access
from vismerch.config import load_settings
from vismerch.serve.app import create_app
from vismerch.service.workspace import Workspace
from vismerch.testing.catalog import small_catalog


@pytest.fixture(scope="session")
def store_template(tmp_path_factory):
    from vismerch.cli import main

    catalog = small_catalog(tmp_path_factory.mktemp("catalog"), n=40, seed=3)
    path = tmp_path_factory.mktemp("template") / "store"
    assert main(["ingest", str(catalog.manifest_path), "--store", str(path), "--workers", "1", "--json"]) == 0
    return path


@pytest.fixture(scope="module", autouse=True)
def one_compute_thread():
    """As `vismerch serve` runs (serve.server.run): one torch/FAISS intra-op thread, so a
    first text search on a busy host stays well inside the clients' timeouts; restored after."""
    import torch

    from vismerch.serve.server import one_thread_per_request

    before = torch.get_num_threads()
    one_thread_per_request()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def served(store_template, tmp_path_factory):
    """(client, workspace, {kind: key}) over a private copy of the store."""
    path = tmp_path_factory.mktemp("served") / "store"
    shutil.copytree(store_template, path)
    settings = load_settings(overrides={"serve_rate_limit": 0})
    ws = Workspace.open(path, settings)
    keys = {kind: access.create_key(ws.store, kind)[0] for kind in access.KEY_KINDS}
    client = TestClient(create_app(ws, settings), raise_server_exceptions=False)
    yield client, ws, keys
    client.close()
    ws.close()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
