"""Downloads against a real HTTP server on 127.0.0.1 started by the test: redirects,
retries, caps, timeouts, validators, per-host limits, and the guard on every hop."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import quote

import pytest

from vismerch.catalog.fetch import FetchFailed, FetchPolicy, HttpFetcher, check_url, fetch, in_order
from vismerch.catalog.urlguard import AllowList
from vismerch.errors import SourceError
from vismerch.testing.image_server import ImageServer

DATA = {"a.jpg": b"\xff\xd8 first image", "b.jpg": b"\xff\xd8 second image"}
LOOPBACK = AllowList.parse("127.0.0.1")


def _policy(**kw) -> FetchPolicy:
    base = {"timeout": 2.0, "deadline": 10.0, "retries": 2, "backoff": 0.01, "per_host": 4,
            "concurrency": 8, "max_bytes": 1 << 20, "allow": LOOPBACK}
    return FetchPolicy(**{**base, **kw})


@pytest.fixture
def server():
    with ImageServer(DATA, slow_s=1.0, big_bytes=2 << 20) as srv:
        yield srv


def _reason(call) -> str:
    with pytest.raises(FetchFailed) as info:
        call()
    return info.value.reason


def test_download_keeps_validators_and_a_conditional_request_gets_304(server):
    fetcher = HttpFetcher(_policy())
    got = fetcher.fetch(server.url("/img/a.jpg"))
    assert got.data == DATA["a.jpg"] and got.etag and got.last_modified
    again = fetcher.fetch(server.url("/img/a.jpg"), got.etag, got.last_modified)
    assert again.not_modified and again.etag == got.etag
    lm_only = fetcher.fetch(server.url("/lm/a.jpg"))
    assert lm_only.etag is None
    assert fetcher.fetch(server.url("/lm/a.jpg"), None, lm_only.last_modified).not_modified
    assert server.bodies["a.jpg"] == 2 and server.not_modified["a.jpg"] == 2


def test_up_to_three_redirects_are_followed_and_a_fourth_is_refused(server):
    fetcher = HttpFetcher(_policy())
    assert fetcher.fetch(server.url("/redirect/3/b.jpg")).data == DATA["b.jpg"]
    server.reset_counts()
    assert _reason(lambda: fetcher.fetch(server.url("/redirect/4/b.jpg"))) == "fetch-too-many-redirects"
    assert server.bodies["b.jpg"] == 0  # stopped before the fourth hop's target


@pytest.mark.parametrize("target", ["http://10.0.0.1/x.jpg", "http://192.168.1.1/x.jpg",
                                    "http://169.254.169.254/latest/meta-data/",
                                    "http://[::1]:80/x.jpg", "http://167772161/x.jpg",  # 10.0.0.1
                                    "http://metadata.google.internal/computeMetadata/v1/"])
def test_a_redirect_to_a_private_or_metadata_address_is_refused(server, target):
    fetcher = HttpFetcher(_policy())
    assert _reason(lambda: fetcher.fetch(server.url("/to?url=" + quote(target)))) == "fetch-refused-address"


@pytest.mark.parametrize("target", ["file:///etc/passwd", "gopher://127.0.0.1/x", "s3://bucket/key"])
def test_a_redirect_out_of_http_is_refused(server, target):
    fetcher = HttpFetcher(_policy())
    assert _reason(lambda: fetcher.fetch(server.url("/to?url=" + quote(target)))) == "fetch-bad-redirect"


def test_without_the_allow_list_loopback_is_refused_before_any_request(server):
    fetcher = HttpFetcher(_policy(allow=AllowList()))
    assert _reason(lambda: fetcher.fetch(server.url("/img/a.jpg"))) == "fetch-refused-address"
    assert sum(server.hits.values()) == 0


def test_5xx_is_retried_with_backoff_and_4xx_is_not(server):
    fetcher = HttpFetcher(_policy(retries=2))
    assert fetcher.fetch(server.url("/flaky/a.jpg")).data == DATA["a.jpg"]
    assert server.hits["/flaky/a.jpg"] == 2
    assert _reason(lambda: fetcher.fetch(server.url("/error"))) == "fetch-http-500"
    assert server.hits["/error"] == 3  # the first attempt and two retries
    assert _reason(lambda: fetcher.fetch(server.url("/img/nope.jpg"))) == "fetch-http-404"
    assert server.hits["/img/nope.jpg"] == 1


def test_a_slow_server_times_out_and_is_retried(server):
    fetcher = HttpFetcher(_policy(timeout=0.2, retries=1))
    assert _reason(lambda: fetcher.fetch(server.url("/slow/a.jpg"))) == "fetch-timeout"
    assert server.hits["/slow/a.jpg"] == 2


def test_a_server_dripping_bytes_is_cut_off_at_the_deadline(server):
    fetcher = HttpFetcher(_policy(timeout=1.0, deadline=0.5, retries=0))
    started = time.monotonic()
    assert _reason(lambda: fetcher.fetch(server.url("/drip"))) == "fetch-timeout"
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("path", ["/big", "/big-stream"])
def test_bodies_over_the_byte_cap_are_refused(server, path):
    fetcher = HttpFetcher(_policy(max_bytes=1 << 20))
    assert _reason(lambda: fetcher.fetch(server.url(path))) == "fetch-too-large"


def test_at_most_per_host_requests_run_at_once(server):
    server.slow_s = 0.3
    policy = _policy(per_host=2, concurrency=8)
    urls = [server.url("/slow/a.jpg")] * 8
    results = [r for _, r in in_order(urls, lambda u: fetch(u, policy), 8)]
    assert all(r.data == DATA["a.jpg"] for r in results)
    assert server.max_in_flight == 2


def test_the_connection_goes_to_the_checked_address_and_keeps_the_host_name(server, monkeypatch):
    """DNS rebinding: the name is resolved once per connection, checked, and that very
    address is connected to; a second lookup (which would say 10.0.0.1) never happens.
    The Host header is still the URL's name."""
    calls = _rebind(monkeypatch, "shop.test", ["127.0.0.1", "10.0.0.1"])
    fetcher = HttpFetcher(_policy())
    assert fetcher.fetch(server.url("/img/a.jpg", host="shop.test")).data == DATA["a.jpg"]
    assert calls == ["shop.test"]
    assert server.hosts[-1] == f"shop.test:{server.port}"
    # a new connection resolves again and is refused: the check is per connection
    fresh = HttpFetcher(_policy())
    assert _reason(lambda: fresh.fetch(server.url("/img/a.jpg", host="shop.test"))) == \
        "fetch-refused-address"


def _rebind(monkeypatch, name: str, answers: list[str]) -> list[str]:
    """Resolve ``name`` to the next of ``answers`` each time (a DNS server that rebinds)."""
    real = socket.getaddrinfo
    calls: list[str] = []

    def rebinding(host, port, *args, **kwargs):  # the resolver, not the guard
        if host != name:
            return real(host, port, *args, **kwargs)
        calls.append(host)
        ip = answers[min(len(calls), len(answers)) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    return calls


def test_https_checks_the_certificate_against_the_url_host_not_the_address(tmp_path, monkeypatch):
    """The socket goes to the checked 127.0.0.1, but TLS sends SNI and verifies the
    certificate for the URL's name: a certificate for shop.test passes for
    https://shop.test and fails for https://127.0.0.1."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "2", "-subj", "/CN=shop.test",
                    "-addext", "subjectAltName=DNS:shop.test"], check=True, capture_output=True)
    trust = ssl.create_default_context(cafile=str(cert))
    calls = _rebind(monkeypatch, "shop.test", ["127.0.0.1"])
    with ImageServer(DATA, tls=(str(cert), str(key))) as tls_server:
        got = HttpFetcher(_policy(), ssl_context=trust).fetch(tls_server.url("/img/a.jpg", host="shop.test"))
        assert got.data == DATA["a.jpg"] and calls == ["shop.test"]
        assert tls_server.hosts[-1] == f"shop.test:{tls_server.port}"
        by_address = HttpFetcher(_policy(retries=0), ssl_context=trust)
        with pytest.raises(FetchFailed, match="(?i)certificate|hostname") as info:
            by_address.fetch(tls_server.url("/img/a.jpg"))
        assert info.value.reason == "fetch-connect-error"


def test_in_order_keeps_order_and_reports_errors_per_job():
    gate = threading.Event()

    def run(n):
        if n == 0:
            gate.wait(2)
        if n == 3:
            raise ValueError("three")
        gate.set()
        return n * 10

    out = list(in_order(range(6), run, 3))
    assert [job for job, _ in out] == list(range(6))
    assert [r for _, r in out if not isinstance(r, Exception)] == [0, 10, 20, 40, 50]
    assert isinstance(out[3][1], ValueError)


def test_file_urls_read_through_fsspec(tmp_path):
    (tmp_path / "x.jpg").write_bytes(b"local bytes")
    assert fetch((tmp_path / "x.jpg").as_uri(), _policy()).data == b"local bytes"
    with pytest.raises(FetchFailed) as info:
        fetch((tmp_path / "nope.jpg").as_uri(), _policy())
    assert info.value.reason == "missing-file"
    (tmp_path / "big.jpg").write_bytes(b"\0" * 2048)
    with pytest.raises(FetchFailed) as info:
        fetch((tmp_path / "big.jpg").as_uri(), _policy(max_bytes=1024))
    assert info.value.reason == "fetch-too-large"


@pytest.mark.parametrize(("url", "package"), [("s3://bucket/a.jpg", "s3fs"), ("gs://bucket/a.jpg", "gcsfs")])
def test_object_store_urls_without_their_package_fail_clearly(url, package):
    try:
        __import__(package)
        pytest.skip(f"{package} is installed here")
    except ImportError:
        pass
    with pytest.raises(SourceError, match=f"pip install {package}"):
        check_url(url)


@pytest.mark.parametrize("url", ["ftp://host/a.jpg", "http:///a.jpg", "javascript://x"])
def test_unsupported_or_hostless_urls_are_source_errors(url):
    with pytest.raises(SourceError):
        check_url(url)


def test_downloads_share_one_memory_budget_and_spool_the_rest_to_disk(server):
    """Eight 2 MiB downloads at once under a 1 MiB budget: memory never holds more than the
    budget, the big ones wait in temporary files, and every byte arrives intact."""
    import os

    from vismerch.catalog.spool import budget_for

    big = os.urandom(2 << 20)
    server.images["huge.jpg"] = big
    capacity = (1 << 20) + 7  # a budget of its own for this test
    policy = _policy(max_bytes=4 << 20, concurrency=8, per_host=8, memory_bytes=capacity,
                     spool_bytes=256 << 10)
    budget = budget_for(capacity)
    got = [r for _, r in in_order([server.url("/img/huge.jpg")] * 8, lambda u: fetch(u, policy), 8)]
    assert all(r.spooled.on_disk for r in got)
    assert [r.take() for r in got] == [big] * 8
    assert 0 < budget.peak <= capacity and budget.held == 0

    small = fetch(server.url("/img/a.jpg"), policy)  # small: in memory, holding its bytes until taken
    assert not small.spooled.on_disk and budget.held == len(DATA["a.jpg"])
    assert small.take() == DATA["a.jpg"] and budget.held == 0


def test_a_failed_download_gives_its_budget_back(server):
    from vismerch.catalog.spool import budget_for

    capacity = (8 << 20) + 11
    policy = _policy(max_bytes=1 << 20, memory_bytes=capacity, spool_bytes=8 << 20)
    assert _reason(lambda: fetch(server.url("/big-stream"), policy)) == "fetch-too-large"
    assert budget_for(capacity).held == 0 and budget_for(capacity).peak > 0
