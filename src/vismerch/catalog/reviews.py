"""Store-owned SQL for review decisions: duplicate groups and the quality/audit queues.

Duplicate decisions are kept per pair of products, not per group number: groups are
recomputed by every ingest and renumbered, while a pair keeps meaning the same two
products. ``apply_dup_reviews`` re-imposes the decisions on freshly derived groups:

- ``distinct`` on every pair of a group: the group is dropped (not duplicates);
- ``keep``: the kept product is the group's representative (the one grids show).

A group that gained a member nobody reviewed stays in the queue as pending.

Queue decisions (``resolved`` / ``ignored``) name the image they judged (its sha256): a
new image for the product reopens the item, the same image keeps it closed.
"""

from __future__ import annotations

import itertools
import sqlite3
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp

DUP_DECISIONS = ("keep", "distinct")
QUEUE_DECISIONS = ("resolved", "ignored")


def _pairs(members: list[str]) -> list[tuple[str, str]]:
    return [(a, b) if a < b else (b, a) for a, b in itertools.combinations(members, 2)]


def record_dup_decision(store: Store, members: list[str], decision: str, keep: str | None,
                        by: str | None) -> None:
    """Store ``decision`` for every pair of ``members`` and re-apply all decisions."""
    stamp = utc_timestamp()
    with store.transaction() as con:
        con.executemany(
            "INSERT OR REPLACE INTO dup_reviews (a, b, decision, keep, by, at) VALUES (?,?,?,?,?,?)",
            [(a, b, decision, keep, by, stamp) for a, b in _pairs(members)])
        apply_dup_reviews(con)


def _groups(con: sqlite3.Connection) -> dict[int, list[str]]:
    groups: dict[int, list[str]] = {}
    for gid, pid in con.execute("SELECT group_id, product_id FROM dup_groups ORDER BY group_id, product_id"):
        groups.setdefault(int(gid), []).append(pid)
    return groups


def _decisions(con: sqlite3.Connection) -> dict[tuple[str, str], sqlite3.Row]:
    return {(r["a"], r["b"]): r for r in con.execute("SELECT * FROM dup_reviews")}


def apply_dup_reviews(con: sqlite3.Connection) -> int:
    """Impose stored decisions on ``dup_groups`` (inside the caller's transaction); returns
    how many groups were dropped as not duplicates."""
    decisions = _decisions(con)
    if not decisions:
        return 0
    dropped = 0
    for gid, members in _groups(con).items():
        got = [decisions.get(p) for p in _pairs(members)]
        if got and all(d is not None and d["decision"] == "distinct" for d in got):
            con.execute("DELETE FROM dup_groups WHERE group_id = ?", (gid,))
            dropped += 1
            continue
        keeps = sorted((d["at"], d["keep"]) for d in got
                       if d is not None and d["decision"] == "keep" and d["keep"] in members)
        if keeps:
            keep = keeps[-1][1]  # the newest decision wins
            con.execute("UPDATE dup_groups SET representative = (product_id = ?) WHERE group_id = ?",
                        (keep, gid))
    return dropped


def dup_group_reviews(store: Store) -> dict[int, dict[str, Any]]:
    """Group id -> ``{decision, keep, by, at, complete}`` for groups with any decision on
    their pairs (``complete``: every pair decided)."""
    decisions = _decisions(store.db)
    out: dict[int, dict[str, Any]] = {}
    for gid, members in _groups(store.db).items():
        got = [decisions.get(p) for p in _pairs(members)]
        done = [d for d in got if d is not None]
        if not done:
            continue
        newest = max(done, key=lambda d: d["at"])
        out[gid] = {"decision": newest["decision"], "keep": newest["keep"], "by": newest["by"],
                    "at": newest["at"], "complete": len(done) == len(got)}
    return out


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
