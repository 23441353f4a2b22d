"""Store-owned SQL for merchandising rules and the rule log (``vismerch.rules`` validates and
resolves them; this module reads and writes the rows)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp

COLUMNS = ("kind", "collection", "where", "product", "position", "factor", "oos_policy",
           "enabled", "note", "created_at", "starts_at", "ends_at", "reach")



def _quoted(column: str) -> str:
    return f'"{column}"'  # "where" is an SQL keyword


def insert(store: Store, fields: Mapping[str, Any]) -> int:
    """A new rule row from ``fields`` (the COLUMNS); its id."""
    with store.transaction() as con:
        cur = con.execute(f"INSERT INTO rules ({', '.join(map(_quoted, COLUMNS))}) VALUES "
                          f"({', '.join('?' * len(COLUMNS))})", [fields.get(c) for c in COLUMNS])
        return int(cur.lastrowid)


def update(store: Store, rule_id: int, fields: Mapping[str, Any]) -> bool:
    """Overwrite the given COLUMNS of one rule; False when there is no such rule."""
    cols = [c for c in fields if c in COLUMNS]
    if not cols:
        return get(store, rule_id) is not None
    with store.transaction() as con:
        cur = con.execute(f"UPDATE rules SET {', '.join(f'{_quoted(c)} = ?' for c in cols)} WHERE id = ?",
                          [fields[c] for c in cols] + [int(rule_id)])
        return cur.rowcount > 0


def get(store: Store, rule_id: int) -> dict[str, Any] | None:
    r = store.db.execute("SELECT * FROM rules WHERE id = ?", (int(rule_id),)).fetchone()
    return None if r is None else dict(r)


def select(store: Store, *, collection: str | None = None, inherited: Sequence[str] = (),
           with_global: bool = False, enabled_only: bool = False) -> list[dict[str, Any]]:
    """Rule rows by id: all of them, or those of ``collection`` (plus the global ones
    with ``with_global`` and the ``subtree`` rules of the ``inherited`` collections)."""
    sql, args, clauses = "SELECT * FROM rules", [], []
    if collection is not None:
        wanted = ["collection = ?"]
        args.append(collection)
        if with_global:
            wanted.append("collection IS NULL")
        if inherited:
            wanted.append(f"(reach = 'subtree' AND collection IN ({','.join('?' * len(inherited))}))")
            args += list(inherited)
        clauses.append("(" + " OR ".join(wanted) + ")")
    if enabled_only:
        clauses.append("enabled = 1")
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    return [dict(r) for r in store.db.execute(sql + " ORDER BY id", args)]


def delete(store: Store, rule_id: int) -> bool:
    with store.transaction() as con:
        return con.execute("DELETE FROM rules WHERE id = ?", (int(rule_id),)).rowcount > 0


def log_events(store: Store, collection: str, events: Sequence[Mapping[str, Any]]) -> list[int]:
    """Record substitutions/releases not already logged (same rule, product, substitute)."""
    ids = []
    with store.transaction() as con:
        for e in events:
            last = con.execute(
                "SELECT kind, substitute_id, reverted_at FROM rule_log WHERE rule_id = ? AND "
                "collection = ? AND product_id = ? ORDER BY id DESC LIMIT 1",
                (e["rule"], collection, e["product"]),
            ).fetchone()
            if last and last["kind"] == e["kind"] and last["substitute_id"] == e.get("substitute") \
                    and last["reverted_at"] is None:
                continue
            cur = con.execute(
                "INSERT INTO rule_log (rule_id, collection, kind, product_id, substitute_id,"
                " position, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (e["rule"], collection, e["kind"], e["product"], e.get("substitute"),
                 e.get("position"), json.dumps(dict(e), sort_keys=True), utc_timestamp()),
            )
            ids.append(int(cur.lastrowid))
    return ids


def log_rows(store: Store, collection: str | None = None) -> list[dict[str, Any]]:
    sql, args = "SELECT * FROM rule_log", ()
    if collection:
        sql, args = sql + " WHERE collection = ?", (collection,)
    return [dict(r) for r in store.db.execute(sql + " ORDER BY id", args).fetchall()]


def mark_reverted(store: Store, log_id: int) -> dict[str, Any] | None:
    """Stamp a logged substitution as reverted; the row, or None when it is not one."""
    with store.transaction() as con:
        row = con.execute("SELECT * FROM rule_log WHERE id = ?", (int(log_id),)).fetchone()
        if row is None or row["kind"] != "substitute":
            return None
        con.execute("UPDATE rule_log SET reverted_at = ? WHERE id = ?", (utc_timestamp(), int(log_id)))
    return dict(row)


def reverted_pins(store: Store, collection: str) -> set[tuple[int, str]]:
    """(rule id, product id) pairs whose substitution was reverted."""
    rows = store.db.execute(
        "SELECT rule_id, product_id FROM rule_log WHERE collection = ? AND kind = 'substitute' "
        "AND reverted_at IS NOT NULL", (collection,)).fetchall()
    return {(int(r[0]), r[1]) for r in rows}
