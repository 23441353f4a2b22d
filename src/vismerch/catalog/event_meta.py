"""Store-owned SQL the shopper event log needs from the catalog: the salt of visitor ids,
product ids, and the publication history (which version was live when)."""

from __future__ import annotations

import secrets

from vismerch.catalog.store import Store

_SALT_KEY = "events_visitor_salt"


def visitor_salt(store: Store) -> str:
    """The store's salt for hashing visitor ids, made on first use (two racing makers
    agree on the first one written)."""
    salt = store.get_meta(_SALT_KEY)
    if salt is None:
        with store.transaction() as con:
            con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                        (_SALT_KEY, secrets.token_hex(16)))
        salt = store.get_meta(_SALT_KEY)
    return salt


def existing_salt(store: Store) -> str | None:
    """The salt if one was made (a read: the storefront never creates it)."""
    return store.get_meta(_SALT_KEY)


def product_ids(store: Store) -> list[str]:
    """Every product id, ingested or failed (events may name either)."""
    return [pid for (pid,) in store.db.execute("SELECT id FROM products")]


def publication_history(store: Store) -> list[tuple[str, str, int]]:
    """(collection, RFC 3339 time, version id made live) of every publish and rollback, oldest first."""
    return [(c, at, int(v)) for c, at, v in store.db.execute(
        "SELECT collection, at, version_id FROM arrangement_publications ORDER BY id")]
