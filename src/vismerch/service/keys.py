"""API keys for `vismerch serve`: make one (its text is returned once), list, revoke.

The CLI (`vismerch keys`) and the admin routes both call these; the SQL and the hashing
live in ``catalog/access.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vismerch.catalog import access
from vismerch.errors import InvalidInput, NotFound, UsageError
from vismerch.service.workspace import Workspace

KEY_KINDS = access.KEY_KINDS  # the roles, then the storefront scope


@dataclass(frozen=True)
class NewKey:
    """A key just made: ``text`` is the whole key, never stored and never shown again."""

    text: str
    key: access.ApiKey

    def as_dict(self) -> dict[str, Any]:
        return {**self.key.as_dict(), "key": self.text}


def create(ws: Workspace, role: str, *, expires: str | None = None, name: str | None = None,
           record_as: str | None = None) -> NewKey:
    """Make a key of ``role`` living ``expires`` (``30d``, ``12h``, ``90m``, ``2w``; None: for
    ever). ``record_as``: an actor to write the audit row for, when no audited context (an
    API request's) records the write already."""
    if role not in KEY_KINDS:
        raise InvalidInput("role", f"unknown role {role!r}", hint="choose one of: " + ", ".join(KEY_KINDS))
    try:
        seconds = access.parse_duration(expires) if expires else None
        text, key = access.create_key(ws.store, role, expires_in=seconds, name=name)
    except UsageError as exc:  # a malformed lifetime, or one past the year 9999
        raise InvalidInput("expires", exc.message, exc.hint) from None
    if record_as is not None:
        access.record(ws.store, record_as, "keys create", target=key.id,
                      detail={"role": role, "expires_at": key.expires_at})
    return NewKey(text, key)


def list_keys(ws: Workspace) -> list[access.ApiKey]:
    """Every key with its role, expiry and revocation, oldest first (never a secret)."""
    return access.list_keys(ws.store)


def revoke(ws: Workspace, key_id: str, *, record_as: str | None = None) -> access.ApiKey:
    """Revoke a key now (the server refuses it from the next request); NotFound when no key
    has that id. Revoking twice keeps the first time."""
    if access.get_key(ws.store, key_id) is None:
        raise NotFound("API key", key_id, hint="list them with: vismerch keys list STORE")
    key = access.revoke_key(ws.store, key_id)
    if record_as is not None:
        access.record(ws.store, record_as, "keys revoke", target=key_id)
    return key


def audit_entries(ws: Workspace, *, after: int = 0, limit: int = 100,
                  actor: str | None = None) -> list[dict[str, Any]]:
    """The audit log of writes after row ``after``, oldest first (``actor``: one key id)."""
    return access.audit_entries(ws.store, after=after, limit=limit, actor=actor)
