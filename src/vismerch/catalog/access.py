"""API keys and the audit log: the store-owned tables behind the HTTP API's auth.

A key is ``vmk_<id>_<secret>``. Only ``id`` (to find the row) and a salted scrypt hash of
``secret`` are stored, so a copied database does not give anyone a working key; the full
key is shown once, when it is made. Every write through the API (and every key change
from the CLI) appends a row to ``audit_log``: who, when, what, and the HTTP status.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp
from vismerch.errors import UsageError

ROLES = ("viewer", "merchandiser", "publisher", "admin")  # each includes the ones before it
STOREFRONT = "storefront"  # a scope, not a rank: reads published grids only
KEY_KINDS = (*ROLES, STOREFRONT)
PREFIX = "vmk"
# scrypt cost: 16 MiB and ~30 ms per check; the server caches a verified key's digest so
# this is paid once per key and process, not per request
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
_KEY_RE = re.compile(rf"^{PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_\-]{{20,100}})$")
_DURATION_RE = re.compile(r"^(\d+)([mhdw])$")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class ApiKey:
    id: str
    role: str
    name: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None

    def usable(self, now: str | None = None) -> bool:
        """Not revoked and not expired, compared as times (as text, a year past 9999 sorted
        before this one: a key for 450000w was expired when made)."""
        if self.revoked_at is not None:
            return False
        if self.expires_at is None:
            return True
        return _moment(self.expires_at) > _moment(now or utc_timestamp())

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "role": self.role, "name": self.name, "created_at": self.created_at,
                "expires_at": self.expires_at, "revoked_at": self.revoked_at,
                "active": self.usable()}


def _moment(stamp: str) -> datetime:
    """An RFC 3339 UTC stamp as a time. A year past 9999 (written by versions that made such
    expiries) is the far future; any other stamp that cannot be read, long past."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        year = re.match(r"^(\d+)-", stamp)
        far = year is not None and int(year.group(1)) > 9999
        return (datetime.max if far else datetime.min).replace(tzinfo=UTC)


def parse_duration(text: str) -> int:
    """``30d`` / ``12h`` / ``90m`` / ``2w`` -> seconds."""
    match = _DURATION_RE.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise UsageError(f"bad duration {text!r}", hint="a number and a unit: 90m, 12h, 30d or 2w")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _hash(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT)


def _key(row: Any) -> ApiKey:
    return ApiKey(row["id"], row["role"], row["name"], row["created_at"], row["expires_at"],
                  row["revoked_at"])


def create_key(store: Store, role: str, *, expires_in: int | None = None,
               name: str | None = None) -> tuple[str, ApiKey]:
    """A new key: (the full key text, shown once and never stored; its record)."""
    if role not in KEY_KINDS:
        raise UsageError(f"unknown role {role!r}", hint="choose one of: " + ", ".join(KEY_KINDS))
    if expires_in is not None and expires_in <= 0:
        raise UsageError("expiry must be in the future")
    key_id, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), secrets.token_bytes(16)
    created = utc_timestamp()
    expires = None
    if expires_in:
        try:
            expires = (datetime.now(UTC) + timedelta(seconds=expires_in)).strftime("%Y-%m-%dT%H:%M:%SZ")
        except OverflowError:  # past the year 9999
            raise UsageError(f"expiry in {expires_in:,} seconds is past the year 9999",
                             hint="give a shorter lifetime, or none for a key that never expires") from None
    with store.transaction() as con:
        con.execute("INSERT INTO api_keys (id, role, name, salt, hash, created_at, expires_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key_id, role, name, salt, _hash(secret, salt), created, expires))
    return f"{PREFIX}_{key_id}_{secret}", ApiKey(key_id, role, name, created, expires, None)


def split_key(text: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed key, else None."""
    match = _KEY_RE.match(text or "")
    return (match.group(1), match.group(2)) if match else None


def get_key(store: Store, key_id: str) -> ApiKey | None:
    row = store.db.execute("SELECT * FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    return _key(row) if row else None


def verify_key(store: Store, text: str) -> ApiKey | None:
    """The key record when ``text`` is a key whose secret matches (usable or not), else None.
    The hash comparison is constant-time."""
    parts = split_key(text)
    if parts is None:
        return None
    row = store.db.execute("SELECT * FROM api_keys WHERE id = ?", (parts[0],)).fetchone()
    if row is None:
        return None
    if not hmac.compare_digest(_hash(parts[1], bytes(row["salt"])), bytes(row["hash"])):
        return None
    return _key(row)


def list_keys(store: Store) -> list[ApiKey]:
    return [_key(r) for r in store.db.execute("SELECT * FROM api_keys ORDER BY created_at, id")]


def revoke_key(store: Store, key_id: str) -> ApiKey:
    """Revoke a key now (idempotent: an already revoked key keeps its first revocation time)."""
    with store.transaction() as con:
        cur = con.execute("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
                          (utc_timestamp(), key_id))
        if cur.rowcount == 0:
            raise UsageError(f"no API key {key_id!r}", hint="list them with: vismerch keys list STORE")
    key = get_key(store, key_id)
    assert key is not None
    return key


# ---------------------------------------------------------------- audit log


def record(store: Store, actor: str, action: str, *, role: str | None = None,
           target: str | None = None, status: int | None = None,
           detail: dict[str, Any] | None = None) -> int:
    """Append one audit row; returns its id."""
    with store.transaction() as con:
        cur = con.execute(
            "INSERT INTO audit_log (at, actor, role, action, target, status, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (utc_timestamp(), actor, role, action, target, status,
             json.dumps(detail, default=str) if detail else None))
    return int(cur.lastrowid)


def set_status(store: Store, row_id: int, status: int) -> None:
    """The HTTP status of an audit row written with its write (``catalog/audit_context.py``)."""
    with store.transaction() as con:
        con.execute("UPDATE audit_log SET status = ? WHERE id = ?", (int(status), int(row_id)))


def audit_done_newest(store: Store, *, before: int | None, limit: int) -> list[dict[str, Any]]:
    """Audit rows of writes that succeeded (2xx), newest first, with id < ``before``."""
    rows = store.db.execute(
        "SELECT * FROM audit_log WHERE id < ? AND status BETWEEN 200 AND 299 ORDER BY id DESC LIMIT ?",
        (2**62 if before is None else int(before), int(limit))).fetchall()
    return [{**dict(r), "detail": json.loads(r["detail"]) if r["detail"] else None} for r in rows]


def key_names(store: Store) -> dict[str, str | None]:
    """Key id -> the name it was made with (None when unnamed), revoked keys included."""
    return {r[0]: r[1] for r in store.db.execute("SELECT id, name FROM api_keys")}


def audit_entries(store: Store, *, after: int = 0, limit: int = 100,
                  actor: str | None = None) -> list[dict[str, Any]]:
    """Audit rows with id > ``after``, oldest first (``after`` is the paging cursor)."""
    sql, args = "SELECT * FROM audit_log WHERE id > ?", [int(after)]
    if actor:
        sql, args = sql + " AND actor = ?", [*args, actor]
    rows = store.db.execute(sql + " ORDER BY id LIMIT ?", (*args, int(limit))).fetchall()
    return [{**dict(r), "detail": json.loads(r["detail"]) if r["detail"] else None} for r in rows]
