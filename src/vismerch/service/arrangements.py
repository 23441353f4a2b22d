"""Arrangements: arrange a collection for a set of grid widths, and the explained,
paged preview the API and the web app show.

The feature vectors come from the workspace's cache (read once per ingest, not once per
request). A preview's whole arrangement is kept too, so paging through a 10,000-product
collection arranges it once: the kept one is used while nothing has been committed to the
store (``catalog.changes.ChangeCounter``: any rule, review, membership or ingest commit
invalidates it) and no rule has started or ended since. Nothing is written: a preview
logs no substitutions and saves no version.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from vismerch.arrange.explain import lookalike_adjacencies
from vismerch.arrange.layout import CollectionArrangement, arrange_collection, parse_columns
from vismerch.catalog.changes import ChangeCounter, next_rule_change
from vismerch.catalog.store import DB_NAME, utc_timestamp
from vismerch.config import setting
from vismerch.errors import InvalidInput, UsageError
from vismerch.merch import collections as colls
from vismerch.rules import parse_stamp
from vismerch.service._util import check_choice
from vismerch.service.models_merch import Preview, PreviewSlot, Score
from vismerch.service.workspace import Workspace

MODES = ("mix", "flow", "plain")
MAX_PAGE = 1000
KEPT = 8  # whole arrangements kept per workspace (collection x widths x mode)


class _Kept:
    """Recent preview arrangements of one workspace, each with the store state it saw."""

    def __init__(self, db_path: Any):
        self.changes = ChangeCounter(db_path)
        self.entries: OrderedDict[tuple, tuple[int, str | None, CollectionArrangement]] = \
            OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple, version: int | None, now: str) -> CollectionArrangement | None:
        if version is None:
            return None
        with self.lock:
            hit = self.entries.get(key)
            if hit is None or hit[0] != version or (hit[1] is not None and now >= hit[1]):
                return None
            self.entries.move_to_end(key)
            return hit[2]

    def put(self, key: tuple, version: int | None, until: str | None,
            result: CollectionArrangement) -> None:
        if version is None:
            return
        with self.lock:
            self.entries[key] = (version, until, result)
            self.entries.move_to_end(key)
            while len(self.entries) > KEPT:
                self.entries.popitem(last=False)


def _preview_arrangement(ws: Workspace, collection: str, widths: list[int], mode: str,
                         at: str | None) -> CollectionArrangement:
    kept: _Kept = ws.cached(("preview-arrangements",), lambda: _Kept(ws.path / DB_NAME))
    now = at or utc_timestamp()
    version = kept.changes.value()  # read before arranging: a commit meanwhile is seen next time
    key = (collection, tuple(widths), mode, at)
    hit = kept.get(key, version, now)
    if hit is not None:
        return hit
    result = arrange(ws, collection, columns=widths, mode=mode, log=False, at=now)
    kept.put(key, version, None if at else next_rule_change(ws.store, now), result)
    return result


def _widths(columns: int | str | Sequence[int], columns_set: Any = None) -> tuple[int, ...]:
    try:
        return parse_columns(columns, columns_set)
    except UsageError as exc:
        raise InvalidInput("columns", exc.message, exc.hint) from None


def arrange(ws: Workspace, collection: str, *, columns: int | str | Sequence[int] = 4,
            columns_set: Any = None, mode: str = "mix", weights: Any = None,
            **request: Any) -> CollectionArrangement:
    """Arrange ``collection`` for the widths ``columns`` (+ ``columns_set``) at once.
    ``mode``: mix, flow, or plain (rules and score only, no diversity moves). ``request``:
    ``backend``, ``quality_gate``, ``duplicates``, ``log`` (record out-of-stock pin
    substitutions in the rule log) and ``at``, as ``merch.layout.ArrangeRequest`` has them."""
    check_choice(mode, MODES, "mode")
    unknown = sorted(set(request) - {"backend", "quality_gate", "duplicates", "log", "at"})
    if unknown:
        raise TypeError(f"arrange() got an unexpected keyword argument {unknown[0]!r}")
    widths = _widths(columns, columns_set)
    return arrange_collection(
        ws.store, collection, columns=widths, mode="mix" if mode == "plain" else mode,
        weights=weights, settings=ws.settings, load_features=ws.features,
        strength=0.0 if mode == "plain" else None, behaviour=behaviour_for(ws, collection, weights),
        **request)


def behaviour_for(ws: Workspace, collection: str, weights: Any) -> dict[str, dict[str, float]] | None:
    """The shopper-behaviour signals ``weights`` (or the arrange_weights setting) ask for."""
    from vismerch.arrange.scoring import wants_behaviour
    from vismerch.service import events

    weights = weights or setting(ws.settings, "arrange_weights") or None
    try:
        wanted = wants_behaviour(weights)
    except UsageError as exc:
        raise InvalidInput("weights", exc.message, exc.hint) from None
    if not wanted:
        return None
    return events.behaviour_signals(ws, collection, colls.members(ws.store, collection))


def _lookalike_widths(result: CollectionArrangement, lo: int, hi: int,
                      widths: Sequence[int]) -> dict[int, list[int]]:
    """0-based position -> widths at which it has a look-alike neighbour, for [lo, hi)."""
    ids = result.ids
    tau = float(result.arrangement.params["lookalike_cosine"])
    out: dict[int, list[int]] = {}
    if result.member_vectors is None or lo >= hi:
        return out
    for c in sorted(widths):
        start = max(0, (lo // c) * c - c)  # a row boundary one row above the page
        stop = min(len(ids), hi + c)
        vectors = result.vectors(ids[start:stop])
        for adj in lookalike_adjacencies(vectors, c, tau):
            for p in (adj.a + start, adj.b + start):
                if lo <= p < hi and c not in out.setdefault(p, []):
                    out[p].append(c)
    return out


def preview(ws: Workspace, collection: str, *, columns: Sequence[int] = (2, 3, 4, 5),
            mode: str = "mix", offset: int = 0, limit: int = 48, at: str | None = None,
            thumbnail_prefix: str = "/api/v1/products/") -> Preview:
    """One page (``offset``, ``limit``) of ``collection`` arranged for every width in
    ``columns`` at once, each slot explained: pinned or not, what it substitutes for,
    flags, the widths where it has a look-alike neighbour, reasons, and its score parts.
    ``at`` (a date or RFC 3339 time): the rules as they are active then (default now)."""
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput("offset", f"offset must be a whole number ≥ 0, got {offset!r}")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", f"limit must be between 1 and {MAX_PAGE}, got {limit!r}")
    if not columns:
        raise InvalidInput("columns", "give at least one width")
    check_choice(mode, MODES, "mode")
    result = _preview_arrangement(ws, collection, list(_widths(list(columns))), mode,
                                  parse_stamp(at, "at"))
    arr = result.arrangement
    widths = list(arr.params["columns"])
    page = arr.slots[offset:offset + limit]
    alike = _lookalike_widths(result, offset, offset + len(page), widths)
    subs = {e["substitute"]: e["product"] for e in result.events if e["kind"] == "substitute"}
    slots = []
    for s in page:
        rec = result.records.get(s.id, {})
        thumb = ws.store.has_thumbnail(s.id)
        slots.append(PreviewSlot(
            position=s.position, id=s.id, title=rec.get("title"), category=rec.get("category"),
            price=rec.get("price"), stock=rec.get("stock"), colour=rec.get("colour"),
            thumbnail_url=f"{thumbnail_prefix}{quote(s.id, safe='')}/thumbnail" if thumb else None,
            pinned=s.kind == "pinned", substituted_for=subs.get(s.id) if s.kind == "pinned" else None,
            flags=list(rec.get("flags", [])), lookalike_at=alike.get(s.position - 1, []),
            kind=s.kind, reasons=[r for r in s.reason.split("; ") if r],
            score=Score(total=round(s.score, 6), parts=result.score_parts(s.id))))
    return Preview(collection=collection, total=len(arr.slots), columns=widths, mode=mode,
                   offset=offset, limit=limit, slots=slots, rules=result.applied,
                   business_share=float(arr.business["ratio"]), hidden=len(result.hidden),
                   conflicts=result.conflicts, warnings=list(arr.warnings),
                   backend=result.backend)
