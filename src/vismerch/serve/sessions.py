"""Web app sessions: an API key exchanged once for an HttpOnly, SameSite=Strict cookie.

The key never reaches JavaScript storage: the sign-in request sends it once, the server
keeps only ``session id -> key id`` (in memory: a restart signs everyone out) and every
request through the cookie re-reads the key's row, so revoking the key ends its sessions.
Writes through the cookie must echo the session's CSRF token in ``X-CSRF-Token`` (the page
reads it from ``GET /ui/session``, same origin only); SameSite=Strict already keeps the
cookie off cross-site requests, the token covers the rest.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

COOKIE = "vm_session"
CSRF_HEADER = "X-CSRF-Token"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
IDLE_SECONDS = 8 * 3600  # a session unused this long is gone
MAX_SESSIONS = 10_000  # the oldest are dropped past this (memory bound)


@dataclass
class Session:
    key_id: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_used: float = field(default_factory=time.monotonic)

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(sent.encode(), self.csrf.encode())


class Sessions:
    """Session id -> Session, idle-expiring, thread-safe."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS):
        self.idle = idle_seconds
        self._items: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, key_id: str) -> tuple[str, Session]:
        sid, session = secrets.token_urlsafe(32), Session(key_id)
        with self._lock:
            self._items[sid] = session
            while len(self._items) > MAX_SESSIONS:
                self._items.pop(next(iter(self._items)))
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._items.get(sid)
            if session is None:
                return None
            if now - session.last_used > self.idle:
                del self._items[sid]
                return None
            session.last_used = now
            return session

    def drop(self, sid: str | None) -> None:
        with self._lock:
            self._items.pop(sid or "", None)
