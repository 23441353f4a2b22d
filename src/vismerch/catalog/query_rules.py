"""Store-owned SQL for query rules and synonyms (``merch.queryrules`` says what they mean;
``service.query_rules`` validates; this module reads and writes the rows)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from vismerch.catalog.store import Store

RULE_COLUMNS = ("kind", "query", "match", "products", "position", "factor", "collection", "enabled",
                "note", "starts_at", "ends_at", "created_at")
SYNONYM_COLUMNS = ("kind", "term", "synonyms", "enabled", "note", "created_at")
_TABLES = {"query_rules": RULE_COLUMNS, "synonyms": SYNONYM_COLUMNS}
_JSON = ("products", "synonyms")
_REVISION = "query_rules_revision"  # meta key: bumped by every write here, so readers may cache
_BUMP = (f"INSERT INTO meta (key, value) VALUES ('{_REVISION}', '1') "
         "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")


def _encode(fields: Mapping[str, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for c in columns:
        if c in fields:
            value = fields[c]
            out[c] = json.dumps(list(value)) if c in _JSON else (int(value) if c == "enabled" else value)
    return out


def _decode(row: Any) -> dict[str, Any]:
    out = dict(row)
    for c in _JSON:
        if c in out:
            out[c] = json.loads(out[c] or "[]")
    out["enabled"] = bool(out["enabled"])
    return out


def insert(store: Store, table: str, fields: Mapping[str, Any]) -> int:
    """A new row of ``table`` (query_rules or synonyms) from ``fields``; its id."""
    values = _encode(fields, _TABLES[table])
    with store.transaction() as con:
        marks = ", ".join("?" * len(values))
        cur = con.execute(f"INSERT INTO {table} ({', '.join(values)}) VALUES ({marks})",
                          list(values.values()))
        con.execute(_BUMP)
        return int(cur.lastrowid)


def update(store: Store, table: str, row_id: int, fields: Mapping[str, Any]) -> bool:
    """Overwrite the given columns of one row; False when there is no such row."""
    values = _encode(fields, _TABLES[table])
    if not values:
        return get(store, table, row_id) is not None
    with store.transaction() as con:
        cur = con.execute(f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in values)} WHERE id = ?",
                          [*values.values(), int(row_id)])
        con.execute(_BUMP)
        return cur.rowcount > 0


def get(store: Store, table: str, row_id: int) -> dict[str, Any] | None:
    _TABLES[table]  # only the two tables
    row = store.db.execute(f"SELECT * FROM {table} WHERE id = ?", (int(row_id),)).fetchone()
    return None if row is None else _decode(row)


def select(store: Store, table: str, *, enabled_only: bool = False) -> list[dict[str, Any]]:
    """Every row of ``table`` by id (only the enabled ones with ``enabled_only``)."""
    _TABLES[table]
    where = " WHERE enabled = 1" if enabled_only else ""
    return [_decode(r) for r in store.db.execute(f"SELECT * FROM {table}{where} ORDER BY id")]


def delete(store: Store, table: str, row_id: int) -> bool:
    _TABLES[table]
    with store.transaction() as con:
        con.execute(_BUMP)
        return con.execute(f"DELETE FROM {table} WHERE id = ?", (int(row_id),)).rowcount > 0


def revision(store: Store) -> tuple:
    """Changes whenever a query rule or synonym is added, changed or deleted (the counts
    catch deletes made elsewhere, such as a collection's redirect rules going with it)."""
    return tuple(store.db.execute(
        f"SELECT (SELECT value FROM meta WHERE key = '{_REVISION}'), (SELECT COUNT(*) FROM query_rules), "
        "(SELECT COUNT(*) FROM synonyms)").fetchone())
