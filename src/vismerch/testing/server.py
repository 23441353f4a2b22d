"""Start-up helpers for tests and benchmarks that run `vismerch serve` in a subprocess."""

from __future__ import annotations

import http.client
import socket
import subprocess
import time


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_up(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Return once ``GET /api/v1/health`` on ``port`` answers 200; raise if ``proc`` exits or
    ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before answering")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/v1/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server did not answer on port {port} within {timeout:.0f}s")
