"""Issue 29 against a real ``vismerch serve`` on loopback: a 40 MB body without a key costs
the server under 10 MB, and half-sent requests (headers or body) are cut off after
serve_header_timeout / serve_body_timeout instead of holding a socket for ever."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from vismerch.serve.app import API_PREFIX

TIMEOUT = 1.0  # serve_header_timeout and serve_body_timeout of the test server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(store_template, tmp_path_factory):
    """(pid, port, merchandiser key) of ``vismerch serve`` over a copy of the store."""
    from vismerch.catalog import access
    from vismerch.catalog.store import Store

    path = tmp_path_factory.mktemp("socket") / "store"
    shutil.copytree(store_template, path)
    store = Store.open(path)
    key = access.create_key(store, "merchandiser")[0]
    store.close()
    port = _free_port()
    env = {**os.environ, "VISMERCH_SERVE_HEADER_TIMEOUT": str(TIMEOUT),
           "VISMERCH_SERVE_BODY_TIMEOUT": str(TIMEOUT), "VISMERCH_SERVE_RATE_LIMIT": "0"}
    log = path.parent / "serve.log"
    proc = subprocess.Popen([sys.executable, "-m", "vismerch.cli", "serve", str(path), "--port", str(port)],
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{API_PREFIX}/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"vismerch serve did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
    yield proc.pid, port, key
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _head(method: str, path: str, *headers: str) -> bytes:
    lines = [f"{method} {API_PREFIX}{path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket, limit: float = 10.0) -> bytes:
    """Everything the server sends until it closes (or ``limit`` seconds pass)."""
    sock.settimeout(limit)
    out = b""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        out += chunk
    return out


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_40_mb_body_without_a_key_costs_the_server_under_10_mb(server, framing):
    pid, port, _ = server
    size, piece = 40 * 1024 * 1024, b"[" * 65536
    peak, before = [0], _rss(pid)
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss(pid))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    length = f"Content-Length: {size}" if framing == "content-length" else "Transfer-Encoding: chunked"
    head = _head("POST", "/rules", "Content-Type: application/json", length)
    chunk = piece if framing == "content-length" else b"10000\r\n" + piece + b"\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(head)
            sent = 0
            try:
                while sent < size:
                    sock.sendall(chunk)
                    sent += len(piece)
            except OSError:  # the server answered and closed: the rest was never wanted
                pass
            reply = _answer(sock)
    finally:
        stop.set()
        watcher.join()
    assert reply.startswith(b"HTTP/1.1 401 "), reply[:200]  # the key is checked before the size
    assert peak[0] - before < 10 * 1024 * 1024, f"server RSS rose {(peak[0] - before) / 2**20:.1f} MiB"


def test_half_sent_headers_are_cut_off_after_the_header_timeout(server):
    _, port, _ = server
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"GET {API_PREFIX}/health HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())  # no blank line
        started = time.monotonic()
        assert _answer(sock, limit=TIMEOUT * 8) == b""
        assert time.monotonic() - started < TIMEOUT * 6  # closed by the server, not by our limit
    with socket.create_connection(("127.0.0.1", port)) as sock:  # silent after connecting
        started = time.monotonic()
        assert _answer(sock, limit=TIMEOUT * 8) == b""
        assert time.monotonic() - started < TIMEOUT * 6


def test_a_body_that_stalls_is_answered_408_and_closed(server):
    _, port, key = server
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_head("POST", "/rules", f"Authorization: Bearer {key}",
                           "Content-Type: application/json", "Content-Length: 100") + b'{"kind":')
        started = time.monotonic()
        reply = _answer(sock, limit=TIMEOUT * 8)
        assert time.monotonic() - started < TIMEOUT * 6
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b'"field":"body"' in reply
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{API_PREFIX}/health", timeout=5) as r:
        assert r.status == 200  # and the server answers the next client as ever
