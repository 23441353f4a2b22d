"""What the applicable rules do to one collection's page, conflicts resolved and reported.

- boost / bury: each match moves by ``factor`` percent of the collection's positions (a bury
  of 25 on a product ranked 10th of 100 puts it about 35th; 100 sends it to the bottom).
  Moves of several rules add up; the move is made on the score, so the arrangement that
  follows still spaces look-alikes.
- hide: the matches leave the page. A pin on a hidden product: the hide wins (hiding is
  usually a compliance decision).
- pin: a product at a 1-based position. When it is out of stock its ``oos_policy`` decides:
  ``release`` (the pin lapses), ``substitute`` (the slot goes to the most visually similar
  in-stock product, logged and reversible) or ``keep``.
- a collection pin on a product outside the collection: ignored (reported).
- two pins on one slot, or one product pinned twice: the collection's own rule beats one
  inherited from a parent (the nearer parent first), which beats a global one; then the
  newer rule (higher id) wins; the loser is released and reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vismerch.errors import UsageError
from vismerch.merch.expr import parse
from vismerch.rules.kinds import get_kind
from vismerch.rules.model import Rule, applies_to


@dataclass
class Resolution:
    """What the applicable rules do to one collection (indices into the product list)."""

    scores: np.ndarray  # adjusted scores
    hidden: dict[int, list[int]] = field(default_factory=dict)  # product -> hiding rule ids
    pins: dict[int, int] = field(default_factory=dict)  # 0-based slot -> product
    pin_notes: dict[int, str] = field(default_factory=dict)
    notes: dict[int, list[str]] = field(default_factory=dict)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # substitutions, releases
    applied: set[int] = field(default_factory=set)  # rules that changed a score, slot or visibility

    def report(self) -> dict[str, Any]:
        return {"conflicts": self.conflicts, "events": self.events,
                "hidden": len(self.hidden), "pins": len(self.pins)}


def in_stock(record: Mapping[str, Any]) -> bool:
    stock = record.get("stock")
    if stock is None:
        return True  # unknown stock is not a reason to act
    try:
        return float(stock) > 0
    except (TypeError, ValueError):
        return True


def priority(rule: Rule, lineage: Sequence[str] = ()) -> tuple[int, int]:
    """Lower sorts first: the collection's own rules, then those inherited from the nearest
    parent up, then global ones; among equals the newest first."""
    if rule.collection is None:
        return (len(lineage) + 1, -rule.id)
    return (lineage.index(rule.collection) + 1 if rule.collection in lineage else 0, -rule.id)


def _condition(rule: Rule, res: Resolution) -> Any:
    """The rule's parsed condition; None (and a conflict saying so) for one stored before the
    parser refused it, so it is reported, never fatal to the arrangement."""
    try:
        return parse(get_kind(rule.kind).condition(rule) or "")
    except UsageError as exc:
        res.conflicts.append({"kind": "broken-condition", "rule": rule.id, "winner": None,
                              "product": None, "position": None,
                              "resolution": f"rule ignored: {exc.message.splitlines()[0]}"})
        return None


def _label(rule: Rule) -> str:
    if rule.id <= 0:
        return "out of stock, setting rules_bury_out_of_stock"
    return f"rule #{rule.id} ({get_kind(rule.kind).condition(rule)})"


def shifted_scores(scores: np.ndarray, shifts: Mapping[int, float]) -> np.ndarray:
    """Scores after moving product ``i`` by ``shifts[i]`` (a fraction of the positions; +
    up, - down): it lands with about ``rank - shift·n`` of the unmoved products above it
    (between their scores; at the top or bottom, a full point beyond them), so a move is
    the same whatever the spread of the scores. Products moved to the same place keep their own order."""
    out = np.asarray(scores, np.float64).copy()
    n = len(out)
    order = np.lexsort((np.arange(n), -out))  # rank order, ties by index
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    target = {i: int(np.clip(round(rank[i] - s * n), 0, n - 1)) for i, s in shifts.items() if s}
    # a move to an end counts even for a product already there: it gets the margin
    moved = {i for i, t in target.items() if t != rank[i] or t == (0 if shifts[i] > 0 else n - 1)}
    if not moved:
        return out
    still = out[[i for i in order if i not in moved]]  # unmoved scores, best first
    m = len(still)
    spread = max(float(out.max() - out.min()), 1e-6)
    margin = max(spread, 1.0)  # business scores lie in [0, 1]: a full point beyond any of them
    eps = spread * 1e-7
    for i in moved:
        t, tie = target[i], eps * rank[i] / n
        if m == 0:
            out[i] = -tie
        elif t == 0:  # to the top (bottom): by a clear margin, so diversity keeps it there
            out[i] = still[0] + margin - tie
        elif t >= m or t == n - 1:
            out[i] = still[m - 1] - margin - tie
        else:
            out[i] = (still[t - 1] + still[t]) / 2 - tie
    return out


def _apply_condition_rules(rules: Sequence[Rule], records: Sequence[Mapping[str, Any]],
                           res: Resolution) -> dict[int, float]:
    shifts: dict[int, float] = {}
    for rule in sorted(rules, key=lambda r: r.id):
        kind = get_kind(rule.kind)
        if kind.target != "condition":
            continue
        expr = _condition(rule, res)
        if expr is None:
            continue
        match = [i for i, rec in enumerate(records) if expr.evaluate(rec)]
        if match and rule.id > 0:
            res.applied.add(rule.id)
        if kind.hides:
            for i in match:
                res.hidden.setdefault(i, []).append(rule.id)
            continue
        step = kind.direction * rule.factor / 100.0
        verb = "boosted" if step > 0 else "buried"
        for i in match:
            shifts[i] = shifts.get(i, 0.0) + step
            res.notes.setdefault(i, []).append(
                f"{verb} {abs(step) * 100:g}% of the positions by {_label(rule)}")
    return shifts


def resolve(rules: Sequence[Rule], records: Sequence[Mapping[str, Any]], scores: np.ndarray, *,
            collection: str | None = None, vectors: np.ndarray | None = None,
            reverted: set[tuple[int, str]] | None = None, lineage: Sequence[str] = (),
            at: str | None = None) -> Resolution:
    """Apply ``rules`` to products ``records`` (dicts with the product fields, in the same
    order as ``scores`` and ``vectors``) for ``collection``, whose parent collections are
    ``lineage`` (nearest first). With ``at`` (an RFC 3339 UTC stamp) only rules active then
    apply; ``Resolution.applied`` lists the rules that changed something. A rule with an id
    ≤ 0 is implicit (a setting's), never listed as applied."""
    lineage = list(lineage)
    rules = [r for r in rules if r.enabled and applies_to(r, collection, lineage)
             and (at is None or r.active(at))]
    res = Resolution(np.asarray(scores, np.float64).copy())
    shifts = _apply_condition_rules(rules, records, res)
    res.scores = shifted_scores(res.scores, shifts)
    pins = sorted((r for r in rules if get_kind(r.kind).target == "product"),
                  key=lambda r: priority(r, lineage))
    _place_pins(pins, records, res, collection, vectors, reverted or set())
    return res


def _place_pins(pins: Sequence[Rule], records: Sequence[Mapping[str, Any]], res: Resolution,
                collection: str | None, vectors: np.ndarray | None,
                reverted: set[tuple[int, str]]) -> None:
    index = {rec["id"]: i for i, rec in enumerate(records)}
    wanted = {index[r.product] for r in pins if r.product in index}
    taken_slots: dict[int, Rule] = {}
    taken_items: dict[int, Rule] = {}

    def conflict(kind: str, rule: Rule, detail: str, winner: Rule | None = None) -> None:
        res.conflicts.append({"kind": kind, "rule": rule.id, "winner": winner.id if winner else None,
                              "product": rule.product, "position": rule.position,
                              "resolution": detail})

    for rule in pins:
        item = index.get(rule.product)
        slot = int(rule.position) - 1
        if item is None:
            if rule.collection == collection and collection is not None:  # inherited: n/a here
                conflict("not-a-member", rule, f"{rule.product} is not in {collection}; pin ignored")
            continue
        if item in res.hidden:
            conflict("pin-on-hidden", rule,
                     f"hidden by rule #{res.hidden[item][0]}; the hide wins, pin ignored")
            continue
        if slot in taken_slots:
            conflict("same-slot", rule,
                     f"position {rule.position} already pinned by rule #{taken_slots[slot].id} "
                     "(collection rules beat global ones, then newer beats older); released",
                     taken_slots[slot])
            continue
        if item in taken_items:
            conflict("pinned-twice", rule,
                     f"{rule.product} already pinned by rule #{taken_items[item].id}; released",
                     taken_items[item])
            continue
        placed = _out_of_stock_pin(rule, item, records, vectors, res, reverted,
                                   set(taken_items) | wanted)
        if placed is None:
            continue
        item, note = placed
        taken_slots[slot] = rule
        taken_items[item] = rule
        res.applied.add(rule.id)
        res.pins[slot] = item
        res.pin_notes[item] = note


def _out_of_stock_pin(rule: Rule, item: int, records: Sequence[Mapping[str, Any]],
                      vectors: np.ndarray | None, res: Resolution, reverted: set[tuple[int, str]],
                      exclude: set[int]) -> tuple[int, str] | None:
    """(the product the pin places, its note), or None when the pin lapses."""
    note = f"pinned by rule #{rule.id}"
    if in_stock(records[item]):
        return item, note
    if (rule.id, rule.product) in reverted or rule.oos_policy == "keep":
        return item, note + " (out of stock, kept)"
    if rule.oos_policy == "release":
        res.events.append({"kind": "release", "rule": rule.id, "product": rule.product,
                           "position": rule.position})
        res.notes.setdefault(item, []).append(f"out of stock: pin of rule #{rule.id} released")
        return None
    sub, cosine = most_similar(item, records, vectors, res.hidden, exclude)
    if sub is None:
        res.events.append({"kind": "release", "rule": rule.id, "product": rule.product,
                           "position": rule.position, "detail": "no in-stock product to substitute"})
        return None
    res.events.append({"kind": "substitute", "rule": rule.id, "product": rule.product,
                       "substitute": records[sub]["id"], "position": rule.position,
                       "cosine": round(cosine, 4)})
    return sub, (f"substitute for out-of-stock {rule.product} pinned by rule #{rule.id} "
                 f"(most similar in stock, cosine {cosine:.2f})")


def most_similar(item: int, records: Sequence[Mapping[str, Any]], vectors: np.ndarray | None,
                 hidden: Mapping[int, Any], exclude: set[int]) -> tuple[int | None, float]:
    """The in-stock, visible, unpinned product most similar to ``item`` (ties by id)."""
    candidates = [i for i in range(len(records)) if i != item and i not in hidden
                  and i not in exclude and in_stock(records[i])]
    if not candidates:
        return None, 0.0
    candidates.sort(key=lambda i: records[i]["id"])
    if vectors is None or not len(vectors):
        return candidates[0], 0.0
    sims = np.round(vectors[candidates] @ vectors[item], 6)
    best = int(np.argmax(sims))  # first maximum: the smallest id among equals
    return candidates[best], float(sims[best])
