"""Downloading images named by URL: ``http(s)://`` with the SSRF guard, fsspec URLs
(``s3://``, ``gs://``, ``file://``) through their filesystems.

HTTP runs on httpcore's connection pool with a network backend that resolves each host
itself, refuses addresses ``urlguard`` refuses and connects to the address it checked
(the TLS server name and ``Host`` header stay the URL's host). Redirects are followed
here, at most ``MAX_REDIRECTS``, each hop checked the same way. Every download has
connect/read timeouts, a whole-download deadline and the ``max_image_bytes`` cap; 5xx,
429, timeouts and dropped connections are retried with exponential backoff; at most
``fetch_per_host`` downloads per host run at once in one worker process. A request may
carry the ``ETag``/``Last-Modified`` of the last download, and a 304 answer means the
stored features still hold. Failures are ``FetchFailed`` with a stable reason:

``fetch-refused-address``, ``fetch-timeout``, ``fetch-http-<status>``, ``fetch-too-large``,
``fetch-too-many-redirects``, ``fetch-bad-redirect``, ``fetch-bad-url``,
``fetch-connect-error``, ``fetch-dns-error``, ``fetch-error`` (an fsspec filesystem error);
an fsspec path that does not exist is ``missing-file``, a directory ``not-a-file``.
"""

from __future__ import annotations

import mmap
import random
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import httpcore

from vismerch.catalog.spool import Spool, Spooled, budget_for
from vismerch.catalog.urlguard import AddressRefused, AllowList, resolve
from vismerch.errors import DecodeError, SourceError

MAX_REDIRECTS = 3
HTTP_SCHEMES = ("http", "https")
# fsspec protocols a manifest may name, and the package each needs
FSSPEC_PACKAGES = {"file": None, "s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}
REDIRECTS = (301, 302, 303, 307, 308)
USER_AGENT = "vismerch-ingest/1"
_CHUNK = 1 << 20  # fsspec reads, a MiB at a time into the spool
T = TypeVar("T")


class FetchFailed(DecodeError):
    """A download that failed; ``reason`` is a stable code (see the module docstring)."""

    def __init__(self, reason: str, message: str, retry: bool = False, wait: float | None = None):
        super().__init__(reason, message)
        self.retry = retry  # worth another attempt (5xx, 429, timeout, dropped connection)
        self.wait = wait  # the server's Retry-After, in seconds


def url_scheme(location: str) -> str | None:
    """The scheme of a URL (``https``, ``s3``...), or None for a plain path."""
    head, sep, _ = location.partition("://")
    if not sep or not head or not head[0].isalpha():
        return None
    if not all(c.isalnum() or c in "+-." for c in head):
        return None
    return head.lower()


def check_url(location: str) -> str:
    """Why a manifest's URL cannot be used, raised as SourceError before the run starts:
    an unknown scheme, no host, or an fsspec protocol whose package is not installed.
    Returns the scheme."""
    scheme = url_scheme(location)
    if scheme in HTTP_SCHEMES:
        if not urlsplit(location).hostname:
            raise SourceError(f"URL {location!r} has no host")
        return scheme
    if scheme not in FSSPEC_PACKAGES:
        raise SourceError(
            f"URL {location!r}: unsupported scheme {scheme!r}",
            hint="use http(s)://, s3://, gs:// or file:// URLs, or paths relative to the manifest",
        )
    package = FSSPEC_PACKAGES[scheme]
    try:
        import fsspec

        fsspec.get_filesystem_class(scheme)
    except ImportError as exc:
        raise SourceError(
            f"the manifest has {scheme}:// URLs and {package or 'fsspec'} is not installed ({exc})",
            hint=f"install it: pip install {package or 'fsspec'}",
        ) from exc
    return scheme


@dataclass(frozen=True)
class FetchPolicy:
    """How downloads behave; built from the ``fetch_*`` settings and ``max_image_bytes``."""

    timeout: float = 10.0
    deadline: float = 60.0
    retries: int = 2
    backoff: float = 0.5
    per_host: int = 4
    concurrency: int = 16
    max_bytes: int | None = None
    allow: AllowList = AllowList()
    max_redirects: int = MAX_REDIRECTS
    memory_bytes: int = 64 << 20  # all downloads of the process in memory at once (spool.py)
    spool_bytes: int = 8 << 20  # one download past this goes to a temporary file

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> FetchPolicy:
        return cls(
            timeout=float(settings["fetch_timeout"]),
            deadline=float(settings["fetch_deadline"]),
            retries=max(0, int(settings["fetch_retries"])),
            backoff=max(0.0, float(settings["fetch_backoff"])),
            per_host=max(1, int(settings["fetch_per_host"])),
            concurrency=max(1, int(settings["fetch_concurrency"])),
            max_bytes=int(settings["max_image_bytes"]) or None,
            allow=AllowList.parse(settings["fetch_allow_hosts"]),
            memory_bytes=max(0, int(settings["fetch_memory_bytes"])),
            spool_bytes=max(0, int(settings["fetch_spool_bytes"])),
        )

    def spool(self) -> Spool:
        return Spool(budget_for(self.memory_bytes), self.spool_bytes)


@dataclass
class Fetched:
    """One download: the bytes (None when the server said 304 Not Modified) and the
    validators to send next time."""

    data: bytes | mmap.mmap | None  # an mmap when the download was spooled to disk
    etag: str | None = None
    last_modified: str | None = None
    spooled: Spooled | None = field(default=None, repr=False, compare=False)

    @property
    def not_modified(self) -> bool:
        return self.data is None

    def take(self) -> bytes | None:
        """The bytes, giving back their share of the process's download budget."""
        return self.spooled.take() if self.spooled is not None else self.data

    @classmethod
    def of(cls, spooled: Spooled, etag: str | None = None, last_modified: str | None = None) -> Fetched:
        return cls(spooled.data, etag, last_modified, spooled)


class GuardedBackend(httpcore.SyncBackend):
    """httpcore's socket backend, but a host is resolved here and only an address the
    guard admits is connected to: the check and the connection use the same address."""

    def __init__(self, allow: AllowList):
        self.allow = allow

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None):
        try:
            addresses = resolve(host, port, self.allow)
        except socket.gaierror as exc:
            raise FetchFailed("fetch-dns-error", f"cannot resolve {host}: {exc.strerror or exc}",
                              retry=exc.errno == socket.EAI_AGAIN) from None
        last: Exception | None = None
        for ip in addresses:  # every one of them passed the guard
            try:
                return super().connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc
        raise last or httpcore.ConnectError(f"cannot connect to {host}")


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


class HttpFetcher:
    """Thread-safe downloader for http(s) URLs under one policy."""

    def __init__(self, policy: FetchPolicy, ssl_context: ssl.SSLContext | None = None):
        """``ssl_context``: the certificates to trust (default: the system's)."""
        self.policy = policy
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context or ssl.create_default_context(),
            max_connections=max(policy.concurrency, policy.per_host),
            network_backend=GuardedBackend(policy.allow),
        )
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    def _slot(self, host: str) -> threading.BoundedSemaphore:
        with self._lock:
            if host not in self._slots:
                self._slots[host] = threading.BoundedSemaphore(self.policy.per_host)
            return self._slots[host]

    def fetch(self, url: str, etag: str | None = None, last_modified: str | None = None) -> Fetched:
        """GET ``url`` following up to ``max_redirects`` redirects; conditional when
        ``etag``/``last_modified`` are given. FetchFailed on any failure."""
        current = url
        for hop in range(self.policy.max_redirects + 1):
            status, location, got = self._retrying(current, etag, last_modified)
            if status not in REDIRECTS:
                return got
            if not location:
                raise FetchFailed("fetch-bad-redirect", f"{current}: {status} without a Location")
            target = urljoin(current, location)
            if url_scheme(target) not in HTTP_SCHEMES:
                raise FetchFailed("fetch-bad-redirect", f"{current} redirects to {target!r}, "
                                  "not an http(s) URL")
            if hop == self.policy.max_redirects:
                break
            current = target
        raise FetchFailed("fetch-too-many-redirects",
                          f"{url}: more than {self.policy.max_redirects} redirects")

    def _retrying(self, url: str, etag: str | None, last_modified: str | None):
        policy = self.policy
        for attempt in range(policy.retries + 1):
            try:
                return self._once(url, etag, last_modified)
            except FetchFailed as exc:
                if not exc.retry or attempt == policy.retries:
                    raise
                pause = policy.backoff * (2 ** attempt) * (1 + random.random() / 4)
                time.sleep(min(exc.wait, 30.0) if exc.wait is not None else pause)
        raise AssertionError("unreachable")

    def _once(self, url: str, etag: str | None, last_modified: str | None):
        """One request: (status, Location, Fetched). Redirects come back to ``fetch``."""
        policy = self.policy
        parts = urlsplit(url)
        if parts.scheme not in HTTP_SCHEMES or not parts.hostname:
            raise FetchFailed("fetch-bad-url", f"{url!r} is not an http(s) URL with a host")
        headers = [(b"User-Agent", USER_AGENT.encode()), (b"Accept", b"image/*"),
                   (b"Accept-Encoding", b"identity")]
        if etag:
            headers.append((b"If-None-Match", etag.encode("latin-1")))
        if last_modified:
            headers.append((b"If-Modified-Since", last_modified.encode("latin-1")))
        timeouts = {"connect": policy.timeout, "read": policy.timeout, "write": policy.timeout,
                    "pool": policy.deadline}
        target = parts._replace(fragment="").geturl()  # scheme lower-cased, no #fragment
        started = time.monotonic()
        try:
            with self._slot(parts.netloc.lower()), self._pool.stream(
                    "GET", target, headers=headers, extensions={"timeout": timeouts}) as response:
                status = response.status
                got_headers = response.headers
                location = _header(got_headers, b"location")
                if status == 200:
                    body = self._body(url, response, got_headers, started)
                    return status, location, Fetched.of(body, _header(got_headers, b"etag"),
                                                        _header(got_headers, b"last-modified"))
        except AddressRefused as exc:  # on this hop's connection: never retried
            raise FetchFailed(exc.reason, exc.message) from None
        except FetchFailed:
            raise
        except (httpcore.TimeoutException, TimeoutError):
            raise FetchFailed("fetch-timeout", f"{url}: no answer within {policy.timeout:g} s",
                              retry=True) from None
        except (httpcore.ConnectError, httpcore.ReadError, httpcore.WriteError,
                httpcore.RemoteProtocolError) as exc:
            raise FetchFailed("fetch-connect-error", f"{url}: {type(exc).__name__}: {exc}",
                              retry=True) from None
        except (httpcore.UnsupportedProtocol, httpcore.LocalProtocolError, UnicodeError,
                ValueError) as exc:
            raise FetchFailed("fetch-bad-url", f"{url!r}: {exc}") from None
        if status in REDIRECTS:
            return status, location, None
        if status == 304 and (etag or last_modified):
            return status, None, Fetched(None, _header(got_headers, b"etag") or etag,
                                         _header(got_headers, b"last-modified") or last_modified)
        raise FetchFailed(f"fetch-http-{status}", f"{url}: HTTP {status}",
                          retry=status >= 500 or status == 429,
                          wait=_retry_after(_header(got_headers, b"retry-after")))

    def _body(self, url: str, response, headers, started: float) -> Spooled:
        cap, deadline = self.policy.max_bytes, self.policy.deadline
        length = _header(headers, b"content-length")
        if cap and length and length.isdigit() and int(length) > cap:
            raise FetchFailed("fetch-too-large", f"{url} is {int(length):,} bytes, over "
                              f"max_image_bytes ({cap:,})")
        spool = self.policy.spool()
        try:
            for chunk in response.iter_stream():
                if cap and spool.size + len(chunk) > cap:
                    raise FetchFailed("fetch-too-large", f"{url} sent more than max_image_bytes ({cap:,})")
                if time.monotonic() - started > deadline:
                    # a server dripping bytes never trips the read timeout
                    raise FetchFailed("fetch-timeout", f"{url}: not finished within fetch_deadline "
                                      f"({deadline:g} s)", retry=True)
                spool.write(chunk)
        except BaseException:
            spool.discard()
            raise
        return spool.finish()

    def close(self) -> None:
        self._pool.close()


def read_fsspec(url: str, max_bytes: int | None, spool: Spool | None = None) -> Spooled:
    """The bytes of an fsspec URL (``s3://``, ``gs://``, ``file://``), at most ``max_bytes``,
    read in chunks into ``spool`` (memory under the process budget, else a temporary file)."""
    spool = spool or FetchPolicy().spool()
    done = False
    import fsspec

    from vismerch.catalog.reading import NOT_A_FILE, FileRefused

    try:
        fs, path = fsspec.core.url_to_fs(url)
        info = fs.info(path)
        if info.get("type") != "file":
            raise FileRefused(NOT_A_FILE, f"{url} is a {info.get('type') or 'non-file'}, not an image file")
        size = info.get("size")
        if max_bytes and size is not None and size > max_bytes:
            raise FetchFailed("fetch-too-large", f"{url} is {size:,} bytes, over max_image_bytes "
                              f"({max_bytes:,})")
        with fs.open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                spool.write(chunk)
                if max_bytes and spool.size > max_bytes:
                    raise FetchFailed("fetch-too-large", f"{url} is over max_image_bytes ({max_bytes:,})")
        done = True
    except FileNotFoundError:
        raise FetchFailed("missing-file", f"{url} does not exist") from None
    except ImportError as exc:  # the ingest checked this before the run; a worker may differ
        raise FetchFailed("fetch-error", f"{url}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise FetchFailed("fetch-error", f"{url}: {type(exc).__name__}: {exc}", retry=True) from None
    finally:
        if not done:
            spool.discard()
    return spool.finish()


_FETCHERS: dict[FetchPolicy, HttpFetcher] = {}
_FETCHERS_LOCK = threading.Lock()


def fetcher_for(policy: FetchPolicy) -> HttpFetcher:
    """One fetcher (connection pool, per-host slots) per policy for the life of the
    process, so a worker's tasks share connections and host limits."""
    with _FETCHERS_LOCK:
        if policy not in _FETCHERS:
            _FETCHERS[policy] = HttpFetcher(policy)
        return _FETCHERS[policy]


def fetch(url: str, policy: FetchPolicy, etag: str | None = None,
          last_modified: str | None = None) -> Fetched:
    """Download one URL of any supported scheme; FetchFailed (or FileRefused) on failure."""
    scheme = url_scheme(url)
    if scheme in HTTP_SCHEMES:
        return fetcher_for(policy).fetch(url, etag, last_modified)
    if scheme in FSSPEC_PACKAGES:
        fetcher = fetcher_for(policy)  # its per-host slots bound the reads per bucket too
        with fetcher._slot(f"{scheme}://{urlsplit(url).netloc}"):
            return Fetched.of(_retry_fsspec(url, policy))
    raise FetchFailed("fetch-bad-url", f"{url!r}: unsupported URL scheme")


def _retry_fsspec(url: str, policy: FetchPolicy) -> Spooled:
    for attempt in range(policy.retries + 1):
        try:
            return read_fsspec(url, policy.max_bytes, policy.spool())
        except FetchFailed as exc:
            if not exc.retry or attempt == policy.retries:
                raise
            time.sleep(policy.backoff * (2 ** attempt))
    raise AssertionError("unreachable")


def in_order(jobs: Iterable[T], run: Callable[[T], Any], threads: int) -> Iterator[tuple[T, Any]]:
    """``(job, run(job))`` in the jobs' order, at most ``2 * threads`` ahead of the reader
    (bounded memory); an exception from ``run`` is yielded as the result, not raised."""
    def safe(job):
        try:
            return run(job)
        except Exception as exc:  # noqa: BLE001 - the caller records it against the item
            return exc

    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="vismerch-fetch") as pool:
        window: deque = deque()
        source = iter(jobs)
        for job in source:
            window.append((job, pool.submit(safe, job)))
            if len(window) >= 2 * threads:
                done_job, future = window.popleft()
                yield done_job, future.result()
        while window:
            done_job, future = window.popleft()
            yield done_job, future.result()
