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
PER_KEY = 20  # sessions one key may hold (serve_sessions_per_key); its least recently used goes


@dataclass
class Session:
    key_id: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_used: float = field(default_factory=time.monotonic)

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(sent.encode(), self.csrf.encode())


class Sessions:
    """Session id -> Session, idle-expiring, thread-safe. Each key holds at most ``per_key``
    sessions: a sign-in past that ends the same key's least recently used one, so one key
    can never sign anyone else out (memory is bounded by keys x per_key)."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, per_key: int = PER_KEY):
        self.idle, self.per_key = idle_seconds, max(1, int(per_key))
        self._items: dict[str, Session] = {}
        self._by_key: dict[str, dict[str, None]] = {}  # key id -> its session ids, oldest first
        self._lock = threading.Lock()

    def create(self, key_id: str) -> tuple[str, Session]:
        sid, session = secrets.token_urlsafe(32), Session(key_id)
        with self._lock:
            self._items[sid] = session
            mine = self._by_key.setdefault(key_id, {})
            mine[sid] = None
            while len(mine) > self.per_key:
                oldest = min(mine, key=lambda s: self._items[s].last_used)
                self._forget(oldest)
        return sid, session

    def _forget(self, sid: str) -> None:
        session = self._items.pop(sid, None)
        if session is not None:
            mine = self._by_key.get(session.key_id, {})
            mine.pop(sid, None)
            if not mine:
                self._by_key.pop(session.key_id, None)

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._items.get(sid)
            if session is None:
                return None
            if now - session.last_used > self.idle:
                self._forget(sid)
                return None
            session.last_used = now
            return session

    def drop(self, sid: str | None) -> None:
        with self._lock:
            self._forget(sid or "")
