"""An acknowledged event survives a SIGKILL of the server: batches are posted to a real
`vismerch serve` while its log compacts every few batches, the server is killed mid-stream,
and every event it answered for is in the log exactly once."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

import pytest

from vismerch.catalog import access
from vismerch.cli import main
from vismerch.config import load_settings
from vismerch.events.log import EventLog
from vismerch.events.query import open_events
from vismerch.service.workspace import Workspace
from vismerch.testing.catalog import small_catalog
from vismerch.testing.server import free_port, wait_up

pytestmark = pytest.mark.slow


def test_acknowledged_events_survive_sigkill(tmp_path):
    catalog = small_catalog(tmp_path / "catalog", n=12, seed=8)
    store = tmp_path / "store"
    assert main(["ingest", str(catalog.manifest_path), "--store", str(store), "--workers", "1",
                 "--json"]) == 0
    with Workspace.open(store, load_settings()) as ws:
        key = access.create_key(ws.store, "storefront")[0]
        products = [p.id for p in ws.store.products()]
    port = free_port()
    env = {**os.environ, "VISMERCH_SERVE_RATE_LIMIT": "0", "VISMERCH_EVENTS_COMPACT_ROWS": "150"}
    proc = subprocess.Popen([sys.executable, "-m", "vismerch.cli", "serve", str(store), "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    acked: list[str] = []
    stop = threading.Event()

    def post() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        n = 0
        while not stop.is_set():
            batch = [{"event_id": f"k-{n}-{i}", "type": "impression", "ts": datetime.now(UTC).isoformat(),
                      "visitor": f"v{n}", "collection": "all", "position": i + 1, "columns": 4,
                      "product_id": products[i % len(products)]} for i in range(50)]
            n += 1
            try:
                conn.request("POST", "/api/v1/events", body=json.dumps({"events": batch}),
                             headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
                resp = conn.getresponse()
                body = json.loads(resp.read())
            except (OSError, http.client.HTTPException, ValueError):
                return  # the server is gone
            if resp.status == 200 and body["accepted"] + body["duplicates"] == 50:
                acked.extend(e["event_id"] for e in batch)

    try:
        wait_up(port, proc)
        poster = threading.Thread(target=post)
        poster.start()
        deadline = time.monotonic() + 60
        while len(acked) < 40 * 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # mid-stream: a batch is usually in flight
        proc.wait(timeout=30)
        stop.set()
        poster.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(acked) >= 40 * 50, "too few batches acknowledged before the deadline"
    log = EventLog(store)
    assert log.counts()["segments"] > 0, "no compaction ran: the test did not cover Parquet segments"
    log.compact()  # what the next start does: leftovers of an interrupted write are removed
    con = open_events(log)
    ids = [r[0] for r in con.execute("SELECT event_id FROM events").fetchall()]
    assert len(ids) == len(set(ids)), "an event was stored twice"
    missing = set(acked) - set(ids)
    assert not missing, f"{len(missing)} acknowledged events lost, e.g. {sorted(missing)[:3]}"
