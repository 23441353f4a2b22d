"""Conflicts a rule would have with the rules already stored, found before it is saved (the
workbench warns in its form): two pins on one slot, one product pinned twice, a pin on a
product that a hide takes off the page. ``resolve`` settles the same conflicts on a page
(and reports them); this says so while the merchandiser can still change the rule."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vismerch.errors import UsageError
from vismerch.merch.expr import parse
from vismerch.rules.kinds import get_kind
from vismerch.rules.model import Rule


def windows_overlap(a: Rule, b: Rule) -> bool:
    """Do the two rules' date windows share a moment (open ends are unbounded)?"""
    return (a.ends_at is None or b.starts_at is None or b.starts_at < a.ends_at) and \
        (b.ends_at is None or a.starts_at is None or a.starts_at < b.ends_at)


def scopes_meet(a: Rule, b: Rule, lineage: Callable[[str], Sequence[str]]) -> bool:
    """Can both rules reach one page? ``lineage(name)``: a collection's parents, nearest first."""
    if a.collection is None or b.collection is None or a.collection == b.collection:
        return True
    return (a.reach == "subtree" and a.collection in lineage(b.collection)) or \
        (b.reach == "subtree" and b.collection in lineage(a.collection))


def _winner(candidate: Rule, other: Rule) -> str:
    mine, theirs = candidate.collection, other.collection
    if theirs == mine or (theirs is None and mine is not None):
        return "this rule would win (own before inherited before global, then newer first)"
    if mine is None and theirs is not None:
        return f"rule #{other.id} would win (a collection's rule beats a global one)"
    return "on each page the nearer collection's rule wins"


def _hides(rule: Rule, record: Mapping[str, Any]) -> bool:
    try:
        return bool(parse(rule.where or "").evaluate(record))
    except UsageError:
        return False


def rule_conflicts(candidate: Rule, others: Sequence[Rule], *,
                   lineage: Callable[[str], Sequence[str]],
                   record: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """What ``candidate`` (a pin) would conflict with among ``others`` (enabled rules whose
    scope and dates meet its own); ``record``: the pinned product's fields, to find hides."""
    if get_kind(candidate.kind).target != "product":
        return []
    out = []
    for other in others:
        if other.id == candidate.id or not other.enabled or not windows_overlap(candidate, other) \
                or not scopes_meet(candidate, other, lineage):
            continue
        kind = get_kind(other.kind)
        if kind.target == "product" and other.position == candidate.position:
            out.append({"kind": "same-slot", "rule": other.id, "description": other.describe(),
                        "message": f"position {candidate.position} is also pinned by rule #{other.id} "
                                   f"({other.product}); {_winner(candidate, other)}, the other pin "
                                   "is released"})
        elif kind.target == "product" and other.product == candidate.product:
            out.append({"kind": "pinned-twice", "rule": other.id, "description": other.describe(),
                        "message": f"{candidate.product} is already pinned at {other.position} by "
                                   f"rule #{other.id}; {_winner(candidate, other)}"})
        elif kind.hides and record is not None and _hides(other, record):
            out.append({"kind": "pin-on-hidden", "rule": other.id, "description": other.describe(),
                        "message": f"{candidate.product} is hidden by rule #{other.id} "
                                   f"({other.where}); the hide wins and the pin is ignored"})
    return out
