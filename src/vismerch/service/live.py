"""The storefront grid as it is live now: the published grid, adjusted at read time for the
dated rules that started or ended since its arrangement (``rules.schedule``), so a
scheduled boost, bury, hide or pin goes live at its start without a republish.

``LiveGrids`` keeps each collection's live grid until the store changes (``PRAGMA
data_version``: a publish, a rule edit, an ingest) or the clock passes the next rule start
or end; between those moments a storefront read costs a pragma and a dict lookup. The clock
is the caller's ``now`` (an RFC 3339 UTC stamp), so tests can move it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vismerch.catalog import collections as db_collections
from vismerch.catalog import versions_store as vstore
from vismerch.catalog.changes import ChangeCounter, next_rule_change
from vismerch.catalog.grids import grid_etag, read_grid
from vismerch.merch import collections as colls
from vismerch.rules import applies_to, get_kind, list_rules
from vismerch.rules.schedule import live_order, state_changes

if TYPE_CHECKING:
    from vismerch.catalog.store import Store


def live_grid(store: Store, collection: str, now: str) -> dict[str, Any] | None:
    """``catalog.grids.read_grid``'s dict for what the storefront shows at ``now``, with
    ``scheduled``: the dated rules that changed it since it was arranged (empty: the grid as
    published). None when nothing is published."""
    grid = read_grid(store, collection)
    return None if grid is None else live_version(store, collection, grid, now)


def live_version(store: Store, collection: str, grid: dict[str, Any], now: str) -> dict[str, Any]:
    """A grid (``read_grid``'s or ``version_grid``'s dict: an experiment's variant) with the
    dated rules that changed since its version was arranged applied at ``now``."""
    version = vstore.version_by_id(store, grid["version_id"])
    baked = version["created_at"] if version else grid["published_at"]
    lineage = colls.ancestors(store, collection)
    rules = [r for r in list_rules(store, collection, applicable=True)
             if applies_to(r, collection, lineage)]
    changes = state_changes(rules, baked, now)
    if not changes:
        return {**grid, "scheduled": []}
    members = db_collections.member_ids(store, collection)
    wanted = set(members) | set(grid["ids"])
    records = {r["id"]: r for r in colls.product_records(
        store, [p for p in store.products() if p.id in wanted])}
    pins_now = [r for r in rules if get_kind(r.kind).target == "product" and r.active(now)]
    ids = live_order(grid["ids"], records, changes, pins_now, members=members)
    had = dict(zip(grid["ids"], grid["thumbs"], strict=True))
    thumbs = [had[pid] if pid in had else store.has_thumbnail(pid) for pid in ids]
    return {**grid, "ids": ids, "thumbs": thumbs, "scheduled": sorted(r.id for r, _ in changes),
            "etag": grid_etag(grid["version_id"], [*ids, *(f"r{r.id}" for r, _ in changes)])}


@dataclass
class _Entry:
    version: int
    since: str
    until: str | None
    grid: dict[str, Any] | None


class LiveGrids:
    """Live grids by collection, each valid for one store version and one clock interval."""

    MISS = object()

    def __init__(self, db_path: Path, size: int = 4096):
        self.changes = ChangeCounter(db_path)
        self.size = size
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def cached(self, collection: str, now: str) -> Any:
        """The kept live grid (None: nothing published), or ``MISS``."""
        version = self.changes.value()
        with self._lock:
            hit = self._entries.get(collection)
        if hit is None or version is None or hit.version != version or now < hit.since or \
                (hit.until is not None and now >= hit.until):
            return self.MISS
        return hit.grid

    def refresh(self, store: Store, collection: str, now: str) -> dict[str, Any] | None:
        """Compute (and keep) the live grid at ``now``."""
        version = self.changes.value()  # before reading: a commit meanwhile is seen next time
        grid = live_grid(store, collection, now)
        until = next_rule_change(store, now)
        if grid is not None:
            grid["until"] = until  # the next moment a rule starts or ends: this grid may change
        if version is not None:
            entry = _Entry(version, now, until, grid)
            with self._lock:
                if len(self._entries) >= self.size:
                    self._entries.clear()
                self._entries[collection] = entry
        return grid
