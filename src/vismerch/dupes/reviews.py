"""Merchandisers' decisions on duplicate groups, and how they outlive recomputed groups.

Duplicate decisions are kept per pair of products, not per group number: groups are
recomputed by every ingest and renumbered, while a pair keeps meaning the same two
products. ``apply`` re-imposes the decisions on freshly derived groups:

- ``distinct`` on every pair of a group: the group is dropped (not duplicates);
- ``keep``: the kept product is the group's representative (the one grids show; the
  newest decision wins).

A group that gained a member nobody reviewed stays in the queue as pending. The rows are
read and written by catalog/reviews.py (all SQL is there).
"""

from __future__ import annotations

import itertools
from typing import Any

from vismerch.catalog import reviews as rows
from vismerch.catalog.store import Store, utc_timestamp

DUP_DECISIONS = ("keep", "distinct")


def pairs(members: list[str]) -> list[tuple[str, str]]:
    """Every pair of ``members``, each as (smaller id, larger id)."""
    return [(a, b) if a < b else (b, a) for a, b in itertools.combinations(members, 2)]


def review_actions(groups: dict[int, list[str]], decisions: dict[tuple[str, str], Any],
                   ) -> tuple[list[int], dict[int, str]]:
    """(groups to drop, group -> the representative to keep) under ``decisions`` (pair ->
    a row with ``decision``, ``keep`` and ``at``)."""
    drop: list[int] = []
    keep: dict[int, str] = {}
    if not decisions:
        return drop, keep
    for gid, members in groups.items():
        got = [decisions.get(p) for p in pairs(members)]
        if got and all(d is not None and d["decision"] == "distinct" for d in got):
            drop.append(gid)
            continue
        keeps = sorted((d["at"], d["keep"]) for d in got
                       if d is not None and d["decision"] == "keep" and d["keep"] in members)
        if keeps:
            keep[gid] = keeps[-1][1]  # the newest decision wins
    return drop, keep


def apply(con) -> int:
    """Impose the stored decisions on the stored groups, inside the caller's transaction;
    how many groups were dropped as not duplicates."""
    drop, keep = review_actions(rows.dup_groups(con), rows.dup_decisions(con))
    rows.impose_dup_reviews(con, drop, keep)
    return len(drop)


def record(store: Store, members: list[str], decision: str, keep: str | None,
           by: str | None) -> None:
    """Store ``decision`` for every pair of ``members`` and re-apply all decisions."""
    stamp = utc_timestamp()
    with store.transaction() as con:
        rows.put_dup_decisions(con, [(a, b, decision, keep, by, stamp) for a, b in pairs(members)])
        apply(con)


def group_reviews(store: Store) -> dict[int, dict[str, Any]]:
    """Group id -> ``{decision, keep, by, at, complete}`` for groups with any decision on
    their pairs (``complete``: every pair decided)."""
    decisions = rows.dup_decisions(store.db)
    out: dict[int, dict[str, Any]] = {}
    for gid, members in rows.dup_groups(store.db).items():
        got = [decisions.get(p) for p in pairs(members)]
        done = [d for d in got if d is not None]
        if not done:
            continue
        newest = max(done, key=lambda d: d["at"])
        out[gid] = {"decision": newest["decision"], "keep": newest["keep"], "by": newest["by"],
                    "at": newest["at"], "complete": len(done) == len(got)}
    return out
