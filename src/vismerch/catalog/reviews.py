"""Store-owned SQL for review decisions: duplicate groups and the quality/audit queues.

Duplicate groups and the decisions on their pairs: rows only; what the decisions mean
is dupes/reviews.py's.

Queue decisions (``resolved`` / ``ignored``) name the image they judged (its sha256): a
new image for the product reopens the item, the same image keeps it closed.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp

QUEUE_DECISIONS = ("resolved", "ignored")


def replace_dup_groups(con: sqlite3.Connection, members: list[tuple[int, str, int]]) -> None:
    """Replace every duplicate group by ``members`` (group id, product id, representative)."""
    con.execute("DELETE FROM dup_groups")
    con.executemany(
        "INSERT INTO dup_groups (group_id, product_id, representative) VALUES (?,?,?)", members)


def dup_groups(con: sqlite3.Connection) -> dict[int, list[str]]:
    """Group id -> its members, by id."""
    groups: dict[int, list[str]] = {}
    for gid, pid in con.execute("SELECT group_id, product_id FROM dup_groups ORDER BY group_id, product_id"):
        groups.setdefault(int(gid), []).append(pid)
    return groups


def dup_decisions(con: sqlite3.Connection) -> dict[tuple[str, str], sqlite3.Row]:
    """(a, b) with a < b -> the decision row on that pair."""
    return {(r["a"], r["b"]): r for r in con.execute("SELECT * FROM dup_reviews")}


def put_dup_decisions(con: sqlite3.Connection, decided: list[tuple]) -> None:
    """Insert or replace (a, b, decision, keep, by, at) rows."""
    con.executemany(
        "INSERT OR REPLACE INTO dup_reviews (a, b, decision, keep, by, at) VALUES (?,?,?,?,?,?)",
        decided)


def impose_dup_reviews(con: sqlite3.Connection, drop: list[int], keep: dict[int, str]) -> None:
    """Delete the groups ``drop``; make ``keep[group]`` its group's representative."""
    for gid in drop:
        con.execute("DELETE FROM dup_groups WHERE group_id = ?", (gid,))
    for gid, pid in keep.items():
        con.execute("UPDATE dup_groups SET representative = (product_id = ?) WHERE group_id = ?",
                    (pid, gid))


def set_queue_decision(store: Store, queue: str, product_id: str, item: str, decision: str | None,
                       note: str | None, by: str | None) -> None:
    """Record (or with ``decision=None`` clear) a decision on one queue item."""
    with store.transaction() as con:
        if decision is None:
            con.execute("DELETE FROM queue_reviews WHERE queue = ? AND product_id = ? AND item = ?",
                        (queue, product_id, item))
            return
        sha = con.execute("SELECT sha256 FROM products WHERE id = ?", (product_id,)).fetchone()
        con.execute(
            "INSERT OR REPLACE INTO queue_reviews (queue, product_id, item, sha256, decision, note, by, at)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (queue, product_id, item, sha[0] if sha else None, decision, note, by, utc_timestamp()))


def queue_decisions(store: Store, queue: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(product id, item) -> decision row, only where it judged the product's current image."""
    rows = store.db.execute(
        "SELECT r.* FROM queue_reviews r JOIN products p ON p.id = r.product_id "
        "WHERE r.queue = ? AND r.sha256 IS p.sha256", (queue,)).fetchall()
    return {(r["product_id"], r["item"]): dict(r) for r in rows}
