"""Dated rules at read time: what a published grid becomes when a rule has started or ended
since its arrangement was made, without a republish.

The published order already holds the effect of every rule that was active when it was
arranged (``baked_at``). For each dated rule whose state differs now, the order is adjusted
from its positions: a boost or bury that started moves its matches (as ``resolve`` would);
one that ended moves them back; a hide that started removes its matches; one that ended
brings its matches (members of the collection) back at the end; a pin that started takes its
slot; every pin active now keeps its slot. A pin that ended leaves its product where it was
until the next arrangement.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from vismerch.errors import UsageError
from vismerch.merch.expr import parse
from vismerch.rules.kinds import KINDS, get_kind
from vismerch.rules.model import Rule
from vismerch.rules.resolve import resolve


def state_changes(rules: Sequence[Rule], baked_at: str, now: str) -> list[tuple[Rule, bool]]:
    """(dated rule, active now) for each dated rule whose activity differs between the
    arrangement (``baked_at``; a rule created after it was not in it) and ``now``."""
    out = []
    for rule in rules:
        if not rule.dated or rule.id <= 0:
            continue
        then = (rule.created_at or "") <= baked_at and rule.active(baked_at)
        if then != rule.active(now):
            out.append((rule, not then))
    return out


def _inverse(rule: Rule) -> Rule | None:
    """The rule that undoes a boost or bury (same strength, opposite way); None for others."""
    kind = get_kind(rule.kind)
    if not kind.direction or kind.fixed_condition:
        return None
    opposite = next(k for k in KINDS.values() if k.direction == -kind.direction
                    and k.fixed_condition is None)
    return replace(rule, kind=opposite.name, starts_at=None, ends_at=None)


def live_order(ids: Sequence[str], records: Mapping[str, Mapping[str, Any]],
               changes: Sequence[tuple[Rule, bool]], pins_now: Sequence[Rule], *,
               members: Sequence[str] = ()) -> list[str]:
    """The published ``ids`` adjusted for ``changes`` (see the module docstring).
    ``records``: product fields by id (the grid's and ``members``'); ``pins_now``: the pins
    active now that reach the page."""
    ended_hides = [r for r, on in changes if not on and get_kind(r.kind).hides]
    returning = [pid for pid in members if pid not in set(ids) and pid in records
                 and any(_matches(r, records[pid]) for r in ended_hides)]
    order = [pid for pid in [*ids, *returning] if pid in records]
    n = len(order)
    scores = np.array([(n - k) / max(n, 1) for k in range(n)])
    if returning:
        scores[len(order) - len(returning):] = -1.0
    effective: list[Rule] = []
    for rule, on in changes:
        kind = get_kind(rule.kind)
        if kind.target == "product" or (kind.hides and not on):
            continue
        undo = rule if on else _inverse(rule)
        if undo is not None:
            effective.append(replace(undo, starts_at=None, ends_at=None, collection=None))
    keep = [replace(p, oos_policy="keep", starts_at=None, ends_at=None, collection=None) for p in pins_now]
    recs = [records[pid] for pid in order]
    res = resolve([*effective, *keep], recs, scores)
    visible = [i for i in range(n) if i not in res.hidden]
    pinned = set(res.pins.values())
    rest = deque(sorted((i for i in visible if i not in pinned), key=lambda i: (-res.scores[i], i)))
    out: list[str] = []
    slots = dict(res.pins)
    while rest or slots:
        slot = len(out)
        if slot in slots:
            out.append(order[slots.pop(slot)])
        elif rest:
            out.append(order[rest.popleft()])
        else:  # a pin beyond the end: the next pinned product closes the gap
            out.append(order[slots.pop(min(slots))])
    return out


def _matches(rule: Rule, record: Mapping[str, Any]) -> bool:
    try:
        return bool(parse(rule.where or "").evaluate(record))
    except UsageError:
        return False


def next_boundary(rules: Sequence[Rule], after: str) -> str | None:
    """The first start or end of ``rules`` later than ``after``."""
    times = [t for r in rules for t in (r.starts_at, r.ends_at) if t is not None and t > after]
    return min(times) if times else None
