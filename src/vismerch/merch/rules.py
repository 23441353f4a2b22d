"""Merchandising rules: pin, boost, bury, hide, bury out-of-stock.

- ``pin``: a product at a 1-based position. When the pinned product is out of stock its
  ``oos_policy`` decides: ``release`` (the pin lapses, the product ranks normally),
  ``substitute`` (the slot goes to the most visually similar in-stock product of the
  collection, logged in ``rule_log`` and reversible) or ``keep``.
- ``boost`` / ``bury``: products matching a condition (see ``merch.expr``) move up or
  down by ``factor``/100 of the score range: scores are in [0, 1], so a factor of 100
  puts every boosted product above every other one (bury: below).
- ``hide``: products matching the condition leave the page.
- ``bury-out-of-stock``: ``bury`` with the condition ``stock <= 0``.

A rule is scoped to one collection or global (``scope`` NULL). ``resolve`` turns the
rules that apply to a collection into adjusted scores, hidden products and pins, and
resolves conflicts deterministically, reporting each one:

- a pin on a hidden product: the hide wins (hiding is usually a compliance decision);
- a collection pin on a product outside the collection: ignored (global pins simply do
  not apply to collections without the product);
- two pins on one slot, or one product pinned twice: the collection rule beats the
  global one, then the newer rule (higher id) wins; the loser is released.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC
from typing import Any

import numpy as np

from vismerch.catalog.store import utc_timestamp
from vismerch.errors import NotFound, UsageError
from vismerch.merch.collections import get_collection
from vismerch.merch.expr import parse

RULE_KINDS = ("pin", "boost", "bury", "hide", "bury-out-of-stock")
OOS_POLICIES = ("release", "substitute", "keep")
OUT_OF_STOCK = "stock <= 0"
REACHES = ("collection", "subtree")


@dataclass
class Rule:
    id: int
    kind: str
    scope: str | None = None  # collection name; None = global
    condition: str | None = None
    product_id: str | None = None
    position: int | None = None  # 1-based
    factor: float = 0.0
    oos_policy: str = "release"
    enabled: bool = True
    note: str | None = None
    created_at: str | None = None
    starts_at: str | None = None  # RFC 3339 UTC; the rule applies from then (None: always)
    ends_at: str | None = None  # ... until then, exclusive (None: never ends)
    reach: str = "collection"  # collection: its scope only; subtree: its sub-collections too

    def active(self, at: str) -> bool:
        """Enabled and inside its dates at ``at`` (an RFC 3339 UTC stamp, compared as text)."""
        return self.enabled and (self.starts_at is None or self.starts_at <= at) and \
            (self.ends_at is None or at < self.ends_at)

    def describe(self) -> str:
        where = (f" in {self.scope}" + (" and its sub-collections" if self.reach == "subtree" else "")
                 if self.scope else " (global)")
        if self.kind == "pin":
            return f"rule #{self.id}: pin {self.product_id} to {self.position}{where}"
        if self.kind == "hide":
            return f"rule #{self.id}: hide where {self.condition}{where}"
        cond = OUT_OF_STOCK if self.kind == "bury-out-of-stock" else self.condition
        verb = "boost" if self.kind == "boost" else "bury"
        return f"rule #{self.id}: {verb} {self.factor:g} where {cond}{where}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate(rule: Rule) -> None:
    """Raise UsageError for a rule that cannot work (bad kind, factor, expression...)."""
    if rule.kind not in RULE_KINDS:
        raise UsageError(f"unknown rule kind {rule.kind!r}", hint="kinds: " + ", ".join(RULE_KINDS))
    if rule.reach not in REACHES:
        raise UsageError(f"unknown rule reach {rule.reach!r}", hint="choose one of: " + ", ".join(REACHES))
    if rule.reach == "subtree" and not rule.scope:
        raise UsageError("reach subtree needs a collection scope", hint="--collection NAME")
    if rule.starts_at and rule.ends_at and rule.ends_at <= rule.starts_at:
        raise UsageError(f"the rule ends ({rule.ends_at}) before it starts ({rule.starts_at})")
    if rule.kind == "pin":
        if not rule.product_id:
            raise UsageError("a pin needs a product id", hint="--product ID")
        if rule.position is None or int(rule.position) < 1:
            raise UsageError(f"a pin needs a position ≥ 1, got {rule.position}",
                             hint="positions count from 1 (top left)")
        if rule.oos_policy not in OOS_POLICIES:
            raise UsageError(f"unknown out-of-stock policy {rule.oos_policy!r}",
                             hint="choose one of: " + ", ".join(OOS_POLICIES))
        return
    if rule.kind in ("boost", "bury", "bury-out-of-stock") and not 0 <= rule.factor <= 100:
        raise UsageError(f"factor must be between 0 and 100, got {rule.factor:g}")
    if rule.kind in ("boost", "bury", "hide"):
        if not rule.condition:
            raise UsageError(f"a {rule.kind} rule needs a condition",
                             hint='--where \'brand == "acme"\'')
        parse(rule.condition)  # raises with a caret on a syntax error


# ---------------------------------------------------------------- storage


def add_rule(store: Any, kind: str, *, scope: str | None = None, condition: str | None = None,
             product_id: str | None = None, position: int | None = None,
             factor: float | None = None, oos_policy: str = "release",
             note: str | None = None, starts_at: str | None = None, ends_at: str | None = None,
             reach: str = "collection") -> Rule:
    """Validate and store a rule; returns it with its id."""
    if factor is None:
        factor = 100.0 if kind == "bury-out-of-stock" else 50.0
    rule = Rule(0, kind, scope or None, condition, product_id,
                int(position) if position is not None else None, float(factor), oos_policy,
                True, note, utc_timestamp(), parse_stamp(starts_at), parse_stamp(ends_at), reach)
    validate(rule)
    if scope:
        get_collection(store, scope)
    if condition and kind in ("boost", "bury", "hide"):  # a typo'd column matches nothing
        from vismerch.merch.collections import known_fields, product_records

        parse(condition).check_fields(known_fields(product_records(store)))
    with store.transaction() as con:
        cur = con.execute(
            "INSERT INTO rules (kind, scope, condition, product_id, position, factor, oos_policy,"
            " enabled, note, created_at, starts_at, ends_at, reach)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
            (rule.kind, rule.scope, rule.condition, rule.product_id, rule.position, rule.factor,
             rule.oos_policy, rule.note, rule.created_at, rule.starts_at, rule.ends_at, rule.reach),
        )
        rule.id = int(cur.lastrowid)
    return rule


def list_rules(store: Any, collection: str | None = None, *, applicable: bool = False,
               enabled_only: bool = False, at: str | None = None) -> list[Rule]:
    """All rules, or those scoped to ``collection`` (plus, if ``applicable``, global ones
    and the ``subtree`` rules of its parent collections); with ``at``, only those active then."""
    from vismerch.merch.collections import ancestors

    sql, args = "SELECT * FROM rules", []
    clauses = []
    if collection is not None:
        if applicable:
            above = ancestors(store, collection)
            marks = ",".join("?" * len(above))
            clauses.append("(scope = ? OR scope IS NULL"
                           + (f" OR (reach = 'subtree' AND scope IN ({marks}))" if above else "") + ")")
            args += [collection, *above]
        else:
            clauses.append("scope = ?")
            args.append(collection)
    if enabled_only:
        clauses.append("enabled = 1")
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    rows = store.db.execute(sql + " ORDER BY id", args).fetchall()
    out = [Rule(row["id"], row["kind"], row["scope"], row["condition"], row["product_id"],
                 row["position"], float(row["factor"]), row["oos_policy"], bool(row["enabled"]),
                 row["note"], row["created_at"], row["starts_at"], row["ends_at"], row["reach"])
             for row in rows]
    return [r for r in out if at is None or r.active(at)]


def parse_stamp(value: str | None) -> str | None:
    """A date (``2026-12-24``) or RFC 3339 time -> the store's UTC stamp; None stays None."""
    if value is None or value == "":
        return None
    from datetime import datetime

    text = str(value).strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"bad date {value!r}", hint="use 2026-12-24 or 2026-12-24T08:00:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def remove_rule(store: Any, rule_id: int) -> None:
    with store.transaction() as con:
        cur = con.execute("DELETE FROM rules WHERE id = ?", (int(rule_id),))
        if cur.rowcount == 0:
            raise NotFound("rule", rule_id, f"no rule #{rule_id}",
                           hint="list them with: vismerch rules list STORE")


def set_enabled(store: Any, rule_id: int, enabled: bool) -> None:
    with store.transaction() as con:
        cur = con.execute("UPDATE rules SET enabled = ? WHERE id = ?", (int(enabled), int(rule_id)))
        if cur.rowcount == 0:
            raise NotFound("rule", rule_id, f"no rule #{rule_id}")


def log_events(store: Any, collection: str, events: Sequence[dict[str, Any]]) -> list[int]:
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
                 e.get("position"), json.dumps(e, sort_keys=True), utc_timestamp()),
            )
            ids.append(int(cur.lastrowid))
    return ids


def rule_log(store: Any, collection: str | None = None) -> list[dict[str, Any]]:
    sql, args = "SELECT * FROM rule_log", ()
    if collection:
        sql, args = sql + " WHERE collection = ?", (collection,)
    return [dict(r) for r in store.db.execute(sql + " ORDER BY id", args).fetchall()]


def revert_substitution(store: Any, log_id: int) -> dict[str, Any]:
    """Undo a logged substitution: from now on that pin keeps its own product in the slot
    (even out of stock) until the rule is changed or the revert is itself undone."""
    with store.transaction() as con:
        row = con.execute("SELECT * FROM rule_log WHERE id = ?", (int(log_id),)).fetchone()
        if row is None or row["kind"] != "substitute":
            raise UsageError(f"no substitution #{log_id} in the rule log",
                             hint="see: vismerch rules log STORE")
        con.execute("UPDATE rule_log SET reverted_at = ? WHERE id = ?", (utc_timestamp(), int(log_id)))
    return dict(row)


def reverted_pins(store: Any, collection: str) -> set[tuple[int, str]]:
    """(rule id, product id) pairs whose substitution was reverted."""
    rows = store.db.execute(
        "SELECT rule_id, product_id FROM rule_log WHERE collection = ? AND kind = 'substitute' "
        "AND reverted_at IS NOT NULL", (collection,)).fetchall()
    return {(int(r[0]), r[1]) for r in rows}


# ---------------------------------------------------------------- resolution


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

    def report(self) -> dict[str, Any]:
        return {"conflicts": self.conflicts, "events": self.events,
                "hidden": len(self.hidden), "pins": len(self.pins)}


def _in_stock(record: Mapping[str, Any]) -> bool:
    stock = record.get("stock")
    if stock is None:
        return True  # unknown stock is not a reason to act
    try:
        return float(stock) > 0
    except (TypeError, ValueError):
        return True


def _priority(rule: Rule) -> tuple[int, int]:
    """Lower sorts first: collection-scoped before global, then newest first."""
    return (0 if rule.scope else 1, -rule.id)


def resolve(rules: Sequence[Rule], records: Sequence[Mapping[str, Any]], scores: np.ndarray, *,
            collection: str | None = None, vectors: np.ndarray | None = None,
            reverted: set[tuple[int, str]] | None = None) -> Resolution:
    """Apply ``rules`` to products ``records`` (dicts with the product fields, in the same
    order as ``scores`` and ``vectors``) for ``collection``."""
    n = len(records)
    rules = [r for r in rules if r.enabled and (r.scope is None or r.scope == collection
                                                or r.reach == "subtree")]
    adjusted = np.asarray(scores, np.float64).copy()
    res = Resolution(adjusted)
    reverted = reverted or set()
    for rule in sorted(rules, key=lambda r: r.id):
        if rule.kind == "pin":
            continue
        condition = OUT_OF_STOCK if rule.kind == "bury-out-of-stock" else rule.condition
        expr = parse(condition or "")
        match = [i for i, rec in enumerate(records) if expr.evaluate(rec)]
        if rule.kind == "hide":
            for i in match:
                res.hidden.setdefault(i, []).append(rule.id)
            continue
        delta = rule.factor / 100.0 * (1 if rule.kind == "boost" else -1)
        verb = "boosted" if delta > 0 else "buried"
        label = "out of stock" if rule.kind == "bury-out-of-stock" else condition
        for i in match:
            adjusted[i] += delta
            res.notes.setdefault(i, []).append(f"{verb} {delta:+.2f} by rule #{rule.id} ({label})")

    index = {rec["id"]: i for i, rec in enumerate(records)}
    pins = sorted((r for r in rules if r.kind == "pin"), key=_priority)
    wanted = {index[r.product_id] for r in pins if r.product_id in index}
    taken_slots: dict[int, Rule] = {}
    taken_items: dict[int, Rule] = {}

    def conflict(kind: str, rule: Rule, detail: str, winner: Rule | None = None) -> None:
        res.conflicts.append({"kind": kind, "rule": rule.id, "winner": winner.id if winner else None,
                              "product": rule.product_id, "position": rule.position,
                              "resolution": detail})

    for rule in pins:
        item = index.get(rule.product_id)
        slot = int(rule.position) - 1
        if item is None:
            if rule.scope:
                conflict("not-a-member", rule,
                         f"{rule.product_id} is not in {collection}; pin ignored")
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
                     f"{rule.product_id} already pinned by rule #{taken_items[item].id}; released",
                     taken_items[item])
            continue
        note = f"pinned by rule #{rule.id}"
        if not _in_stock(records[item]) and (rule.id, rule.product_id) not in reverted:
            if rule.oos_policy == "release":
                res.events.append({"kind": "release", "rule": rule.id, "product": rule.product_id,
                                   "position": rule.position})
                res.notes.setdefault(item, []).append(
                    f"out of stock: pin of rule #{rule.id} released")
                continue
            if rule.oos_policy == "substitute":
                sub, cosine = _most_similar(item, records, vectors, res.hidden,
                                            set(taken_items) | wanted)
                if sub is None:
                    res.events.append({"kind": "release", "rule": rule.id,
                                       "product": rule.product_id, "position": rule.position,
                                       "detail": "no in-stock product to substitute"})
                    continue
                res.events.append({"kind": "substitute", "rule": rule.id,
                                   "product": rule.product_id, "substitute": records[sub]["id"],
                                   "position": rule.position, "cosine": round(cosine, 4)})
                note = (f"substitute for out-of-stock {rule.product_id} pinned by rule "
                        f"#{rule.id} (most similar in stock, cosine {cosine:.2f})")
                item = sub
        elif not _in_stock(records[item]):
            note += " (out of stock, kept)"
        taken_slots[slot] = rule
        taken_items[item] = rule
        res.pins[slot] = item
        res.pin_notes[item] = note
    assert len(res.pins) <= n
    return res


def _most_similar(item: int, records: Sequence[Mapping[str, Any]], vectors: np.ndarray | None,
                  hidden: Mapping[int, Any], exclude: set[int]) -> tuple[int | None, float]:
    """The in-stock, visible, unpinned product most similar to ``item`` (ties by id)."""
    candidates = [i for i in range(len(records)) if i != item and i not in hidden
                  and i not in exclude and _in_stock(records[i])]
    if not candidates:
        return None, 0.0
    candidates.sort(key=lambda i: records[i]["id"])
    if vectors is None or not len(vectors):
        return candidates[0], 0.0
    sims = np.round(vectors[candidates] @ vectors[item], 6)
    best = int(np.argmax(sims))  # first maximum: the smallest id among equals
    return candidates[best], float(sims[best])
