"""A real HTTP server on 127.0.0.1 for download tests: it serves images the test made and
misbehaves on purpose (redirects, 500s, slow and oversized answers), counting requests.

Routes (``NAME`` is a key of ``images``):

- ``/img/NAME``: the bytes with ``ETag`` and ``Last-Modified``; 304 to a matching
  ``If-None-Match`` (or, without one, ``If-Modified-Since``);
- ``/lm/NAME``: only ``Last-Modified``; ``/plain/NAME``: no validators;
- ``/redirect/K/NAME``: K redirects (302) before ``/img/NAME``;
- ``/to?url=U``: a 302 to ``U``, whatever it is;
- ``/flaky/NAME``: 500 the first time, then as ``/img/NAME``; ``/error``: always 500;
- ``/slow/NAME``: waits ``slow_s`` before answering;
- ``/drip``: a declared 1,000 bytes sent one every 0.1 s;
- ``/big``: declares ``big_bytes`` bytes; ``/big-stream``: sends ``big_bytes`` with no length;
- anything else: 404.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import Counter
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

LAST_MODIFIED = formatdate(1_700_000_000, usegmt=True)


class ImageServer:
    """``with ImageServer({"a.jpg": data}) as server: server.url("/img/a.jpg")``."""

    def __init__(self, images: dict[str, bytes], slow_s: float = 2.0, big_bytes: int = 4 << 20,
                 tls: tuple[str, str] | None = None):
        """``tls``: (certificate, key) PEM files to serve HTTPS instead of HTTP."""
        self.images = dict(images)
        self.slow_s = slow_s
        self.big_bytes = big_bytes
        self.hits: Counter = Counter()  # path -> requests
        self.bodies: Counter = Counter()  # image name -> 200 answers carrying its bytes
        self.not_modified: Counter = Counter()  # image name -> 304 answers
        self.hosts: list[str] = []  # Host headers as sent
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def downloads(self) -> int:
        return sum(self.bodies.values())

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until no request is being answered: a client killed mid-download leaves its
        requests running here (a slow answer is counted when it is sent), and counts reset
        before they end would charge them to the next client."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.in_flight:
            raise AssertionError(f"{self.in_flight} request(s) still in flight after {timeout} s")

    def reset_counts(self) -> None:
        with self._lock:
            self.hits.clear()
            self.bodies.clear()
            self.not_modified.clear()

    def __enter__(self) -> ImageServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _etag(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest()[:16] + '"'


def _handler(server: ImageServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"state": server})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: ImageServer

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def handle(self) -> None:
        # the client gave up (a timeout test): nothing to answer
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        parts = urlsplit(self.path)
        server = self.state
        with server._lock:
            server.hits[parts.path] += 1
            server.hosts.append(self.headers.get("Host", ""))
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            head, _, rest = parts.path.lstrip("/").partition("/")
            route = _ROUTES.get(head, _Handler._missing)
            route(self, rest, parts.path, parse_qs(parts.query))
        finally:
            with server._lock:
                server.in_flight -= 1

    # -- routes: (rest of the path after the route's name, the whole path, the query)
    def _img(self, rest: str, path: str, query: dict) -> None:
        self._image(rest, etag=True, modified=True)

    def _lm(self, rest: str, path: str, query: dict) -> None:
        self._image(rest, etag=False, modified=True)

    def _plain(self, rest: str, path: str, query: dict) -> None:
        self._image(rest, etag=False, modified=False)

    def _redirect(self, rest: str, path: str, query: dict) -> None:
        hops, _, name = rest.partition("/")
        target = f"/redirect/{int(hops) - 1}/{name}" if int(hops) > 1 else f"/img/{name}"
        self._send(302, b"", [("Location", target)])

    def _to(self, rest: str, path: str, query: dict) -> None:
        self._send(302, b"", [("Location", query["url"][0])])

    def _flaky(self, rest: str, path: str, query: dict) -> None:
        if self.state.hits[path] == 1:
            self._send(500, b"try again")
        else:
            self._image(rest, etag=True, modified=True)

    def _error(self, rest: str, path: str, query: dict) -> None:
        self._send(500, b"broken")

    def _slow(self, rest: str, path: str, query: dict) -> None:
        time.sleep(self.state.slow_s)
        self._image(rest, etag=True, modified=True)

    def _drip(self, rest: str, path: str, query: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        for _ in range(1000):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(0.1)

    def _big(self, rest: str, path: str, query: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(self.state.big_bytes))
        self.end_headers()
        self.wfile.write(b"\0" * 1024)  # the client must stop at the header
        self.close_connection = True

    def _big_stream(self, rest: str, path: str, query: dict) -> None:
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        for _ in range(self.state.big_bytes // 65536 + 1):
            self.wfile.write(b"\0" * 65536)
        self.close_connection = True

    def _missing(self, rest: str, path: str, query: dict) -> None:
        self._send(404, b"not found")

    # -- answers
    def _fresh(self, data: bytes, etag: bool, modified: bool) -> bool:
        """Whether the client's validators match (If-None-Match wins over If-Modified-Since)."""
        match = self.headers.get("If-None-Match")
        since = self.headers.get("If-Modified-Since")
        if etag and match is not None:
            return _etag(data) in [m.strip() for m in match.split(",")]
        if modified and since is not None:
            return parsedate_to_datetime(since) >= parsedate_to_datetime(LAST_MODIFIED)
        return False

    def _image(self, name: str, etag: bool, modified: bool) -> None:
        server = self.state
        data = server.images.get(name)
        if data is None:
            return self._send(404, b"not found")
        headers = []
        if etag:
            headers.append(("ETag", _etag(data)))
        if modified:
            headers.append(("Last-Modified", LAST_MODIFIED))
        if self._fresh(data, etag, modified):
            with server._lock:
                server.not_modified[name] += 1
            return self._send(304, b"", headers)
        with server._lock:
            server.bodies[name] += 1
        return self._send(200, data, [("Content-Type", "image/octet-stream"), *headers])

    def _send(self, status: int, body: bytes, headers: list[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)


_ROUTES = {"img": _Handler._img, "lm": _Handler._lm, "plain": _Handler._plain,
           "redirect": _Handler._redirect, "to": _Handler._to, "flaky": _Handler._flaky,
           "error": _Handler._error, "slow": _Handler._slow, "drip": _Handler._drip,
           "big": _Handler._big, "big-stream": _Handler._big_stream}
