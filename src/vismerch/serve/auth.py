"""Who is calling and may they: API keys, roles, the storefront scope and a per-key rate limit.

Roles rank viewer < merchandiser < publisher < admin; a route names the lowest role it
needs (``require("publisher")``). ``storefront`` keys are a scope apart: they may only read
published grids (routes that ``require("storefront")``, which every role may read too).

A key is sent as ``Authorization: Bearer vmk_...`` or ``X-API-Key: vmk_...``; the web app
instead signs in once and sends a session cookie (``serve/sessions.py``), whose writes must
also carry the session's CSRF token in ``X-CSRF-Token``. Its scrypt
check runs once per key and process; after that a verified key is known by the SHA-256 of
its text, and only its row (revoked? expired?) is read per request, so revocation is
immediate.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

import anyio.to_thread
from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from vismerch.catalog import access
from vismerch.serve.errors import ApiError
from vismerch.serve.sessions import COOKIE, CSRF_HEADER, WRITE_METHODS

LEVELS = (access.STOREFRONT, *access.ROLES)
_bearer = HTTPBearer(auto_error=False, description="An API key: Authorization: Bearer vmk_...")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key (vmk_...)")


@dataclass(frozen=True)
class Principal:
    key_id: str
    role: str


def allowed(role: str, needed: str) -> bool:
    """May a key of ``role`` call a route that needs ``needed``?"""
    if needed == access.STOREFRONT:
        return True  # every kind of key reads published grids
    if role == access.STOREFRONT:
        return False
    return access.ROLES.index(role) >= access.ROLES.index(needed)


class RateLimiter:
    """Token bucket per key: ``rate`` requests a second on average, bursts of ``burst``."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = float(rate), max(1, int(burst))
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 when the request may go ahead, else the seconds until it may."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


class FailureThrottle:
    """Failed authentications per subject (a key id, a client address) in a sliding window,
    and the digests of key texts that failed lately: a guess repeated within the window is
    refused without another 16 MiB scrypt, and a subject past ``limit`` failures waits."""

    MAX_SUBJECTS = 100_000  # memory bound: the oldest subjects are forgotten past it

    def __init__(self, limit: int, window: float):
        self.limit, self.window = int(limit), float(window)
        self._fails: OrderedDict[str, deque[float]] = OrderedDict()
        self._bad: OrderedDict[str, float] = OrderedDict()  # digest -> when it failed
        self._lock = threading.Lock()

    def wait(self, subjects: list[str]) -> float:
        """0 when these subjects may try, else the seconds until the oldest failure ages out."""
        if self.limit <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            waits = [times[0] + self.window - now for s in subjects
                     if (times := self._fresh(s, now)) is not None and len(times) >= self.limit]
        return max(waits, default=0.0)

    def known_bad(self, digest: str) -> bool:
        with self._lock:
            at = self._bad.get(digest)
            return at is not None and time.monotonic() - at < self.window

    def failed(self, subjects: list[str], digest: str | None = None) -> None:
        now = time.monotonic()
        with self._lock:
            for s in subjects:
                times = self._fresh(s, now) or deque(maxlen=max(1, self.limit))
                times.append(now)
                self._fails[s] = times
                self._fails.move_to_end(s)
            if digest is not None:
                self._bad[digest] = now
                self._bad.move_to_end(digest)
            for table in (self._fails, self._bad):
                while len(table) > self.MAX_SUBJECTS:
                    table.popitem(last=False)

    def _fresh(self, subject: str, now: float) -> deque[float] | None:
        times = self._fails.get(subject)
        while times and now - times[0] >= self.window:
            times.popleft()
        return times


API_BUDGET, THUMBNAIL_BUDGET = "api", "thumbnail"


class Authenticator:
    """Resolves a request's key to a Principal, or raises 401/429. Each rate budget (the
    API's, the thumbnails') has its own token bucket per key."""

    def __init__(self, store_of: Callable[[], object], limiter: RateLimiter,
                 throttle: FailureThrottle | None = None, thumbnails: RateLimiter | None = None):
        self._store_of = store_of
        self._limiters = {API_BUDGET: limiter, THUMBNAIL_BUDGET: thumbnails or RateLimiter(0, 1)}
        self.throttle = throttle or FailureThrottle(0, 60.0)
        self._verified: dict[str, str] = {}  # sha256(key text) -> key id, after one scrypt check
        self._lock = threading.Lock()

    def known(self, text: str | None) -> bool:
        """Has this key text passed its scrypt check in this process already? Then
        ``principal`` is a primary-key read and a dict lookup (cheap enough for the event loop)."""
        return bool(text) and hashlib.sha256(text.encode()).hexdigest() in self._verified

    def principal(self, text: str | None, client: str | None = None, budget: str = API_BUDGET) -> Principal:
        """The key's principal. ``client`` (the caller's address) and the key's id are
        throttled after serve_auth_fail_limit failures (429); a key text known good skips that."""
        if not text:
            raise ApiError(401, "unauthenticated", "this route needs an API key",
                           hint="send Authorization: Bearer <key> (make one: vismerch keys create STORE)",
                           headers={"WWW-Authenticate": "Bearer"})
        store = self._store_of()
        digest = hashlib.sha256(text.encode()).hexdigest()
        key_id = self._verified.get(digest)
        if key_id is not None:
            return self._admit(access.get_key(store, key_id), [f"addr:{client}"], budget)
        parts = access.split_key(text)
        subjects = [f"addr:{client}"] + ([f"key:{parts[0]}"] if parts else [])
        wait = self.throttle.wait(subjects)
        if wait > 0:
            raise ApiError(429, "auth_throttled", "too many failed sign-ins from this address or for this "
                           "key; try again later", hint="see Retry-After",
                           headers={"Retry-After": str(math.ceil(wait))})
        key = None if self.throttle.known_bad(digest) else access.verify_key(store, text)
        if key is None:
            self.throttle.failed(subjects, digest)
            raise ApiError(401, "unauthenticated", "unknown API key", headers={"WWW-Authenticate": "Bearer"})
        with self._lock:
            self._verified[digest] = key.id
        return self._admit(key, subjects, budget)

    def principal_of_id(self, key_id: str, budget: str = API_BUDGET) -> Principal:
        """The principal of a key already verified (a web session's); revocation still applies."""
        key = access.get_key(self._store_of(), key_id)
        if key is None:
            raise ApiError(401, "unauthenticated", "the session's API key no longer exists")
        return self._admit(key, [], budget)

    def _admit(self, key: access.ApiKey | None, subjects: list[str], budget: str = API_BUDGET) -> Principal:
        if key is None:  # deleted since it was verified
            raise ApiError(401, "unauthenticated", "unknown API key", headers={"WWW-Authenticate": "Bearer"})
        if not key.usable():
            why = "revoked" if key.revoked_at else "expired"
            self.throttle.failed(subjects)
            raise ApiError(401, "unauthenticated", f"API key {key.id} is {why}",
                           hint="ask an admin for a new key", headers={"WWW-Authenticate": "Bearer"})
        wait = self._limiters[budget].take(key.id)
        if wait > 0:
            what = "thumbnail requests" if budget == THUMBNAIL_BUDGET else "requests"
            raise ApiError(429, "rate_limited", f"too many {what} for key {key.id}",
                           hint="slow down; see Retry-After", headers={"Retry-After": str(math.ceil(wait))})
        return Principal(key.id, key.role)


def require(needed: str, budget: str = API_BUDGET) -> Callable[..., Principal]:
    """A dependency that lets through keys whose role allows ``needed`` (401/403/429 otherwise),
    spending one request of the key's ``budget``."""
    if needed not in LEVELS:
        raise ValueError(f"unknown role {needed!r}")
    if budget not in (API_BUDGET, THUMBNAIL_BUDGET):
        raise ValueError(f"unknown rate budget {budget!r}")

    async def dependency(request: Request,
                         bearer: HTTPAuthorizationCredentials | None = Depends(_bearer),
                         header: str | None = Depends(_header)) -> Principal:
        # a write was authenticated by serve/guard.py before its body was read
        principal = getattr(request.state, "principal", None) or await authenticate(request, budget)
        if not allowed(principal.role, needed):
            raise ApiError(403, "forbidden", f"a {principal.role} key may not do this (needs {needed})",
                           hint="use a key with a higher role")
        return principal

    dependency.needed_role = needed  # the role matrix test reads it from the route table
    return dependency


def key_text(request: Request) -> str | None:
    """The key a request sends (``Authorization: Bearer`` or ``X-API-Key``), if any."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.headers.get("x-api-key") or None


def client_address(request: Request) -> str:
    """The caller's address for throttling: the socket's peer, or behind a proxy the last
    entry of the serve_client_ip_header header (the one the proxy itself appended)."""
    header = str(getattr(request.app.state, "client_ip_header", "") or "")
    if header and request.headers.get(header):
        return request.headers[header].split(",")[-1].strip()
    return request.client.host if request.client else "unknown"


async def authenticate(request: Request, budget: str = API_BUDGET) -> Principal:
    """The request's principal (a key, or the web app's session cookie with its CSRF token on
    writes), set on ``request.state``; 401/403/429 otherwise. Async, so a request pays no
    thread-pool hop: a key already verified costs one primary-key read here on the event loop;
    the first check of a key text (scrypt, tens of ms) and unknown keys go to a worker thread."""
    text = key_text(request)
    auth: Authenticator = request.app.state.auth
    if text is None and request.cookies.get(COOKIE):
        principal = _session_principal(request, budget)  # one primary-key read, like a known key
    elif auth.known(text):
        principal = auth.principal(text, client_address(request), budget)
    else:
        principal = await anyio.to_thread.run_sync(auth.principal, text, client_address(request), budget)
    request.state.principal = principal
    return principal


def _session_principal(request: Request, budget: str = API_BUDGET) -> Principal:
    """The key behind the web app's session cookie; a write must also echo its CSRF token."""
    session = request.app.state.sessions.get(request.cookies.get(COOKIE))
    if session is None:
        raise ApiError(401, "unauthenticated", "the session has expired or was signed out",
                       hint="sign in again with your API key")
    if request.method in WRITE_METHODS and not session.csrf_ok(request.headers.get(CSRF_HEADER)):
        raise ApiError(403, "csrf", f"a write made with the session cookie needs the {CSRF_HEADER} header "
                       "of that session", hint="reload the web app")
    return request.app.state.auth.principal_of_id(session.key_id, budget)
