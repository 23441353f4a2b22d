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

A rule is scoped to one collection or global (``scope`` NULL). Its ``reach`` says how far
a scoped rule goes: ``collection`` (that page only) or ``subtree`` (also every
sub-collection below it, following ``collections.parent``). Optional ``starts_at`` /
``ends_at`` (RFC 3339 UTC, the end exclusive) schedule it: outside that window it does
not apply (a Christmas pin, a weekend boost). ``resolve`` turns the rules that apply to a
collection into adjusted scores, hidden products and pins, and resolves conflicts
deterministically, reporting each one:

- a pin on a hidden product: the hide wins (hiding is usually a compliance decision);
- a collection pin on a product outside the collection: ignored (global pins simply do
  not apply to collections without the product);
- two pins on one slot, or one product pinned twice: the collection's own rule beats one
  inherited from a parent (the nearer parent first), which beats a global one; then the
  newer rule (higher id) wins; the loser is released.

The SQL lives in ``catalog.rules``; the functions here that take a store validate and
delegate to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC
from typing import Any

import numpy as np

from vismerch.catalog import collections as db_collections
from vismerch.catalog import rules as db
from vismerch.catalog.store import utc_timestamp
from vismerch.errors import InvalidInput, NotFound, UsageError
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
    """Raise InvalidInput (naming the field, as the HTTP API calls it) for a rule that
    cannot work: bad kind, reach, dates, factor, expression..."""
    if rule.kind not in RULE_KINDS:
        raise InvalidInput("kind", f"unknown rule kind {rule.kind!r}",
                           hint="kinds: " + ", ".join(RULE_KINDS))
    if rule.reach not in REACHES:
        raise InvalidInput("reach", f"unknown rule reach {rule.reach!r}",
                           hint="choose one of: " + ", ".join(REACHES))
    if rule.reach == "subtree" and not rule.scope:
        raise InvalidInput("reach", "reach subtree needs a collection scope",
                           hint="--collection NAME")
    if rule.starts_at and rule.ends_at and rule.ends_at <= rule.starts_at:
        raise InvalidInput("ends_at", f"the rule ends ({rule.ends_at}) before it starts "
                           f"({rule.starts_at})", hint="the end is exclusive and must be later")
    if rule.kind == "pin":
        if not rule.product_id:
            raise InvalidInput("product", "a pin needs a product id", hint="--product ID")
        if rule.position is None or int(rule.position) < 1:
            raise InvalidInput("position", f"a pin needs a position ≥ 1, got {rule.position}",
                               hint="positions count from 1 (top left)")
        if rule.oos_policy not in OOS_POLICIES:
            raise InvalidInput("oos_policy", f"unknown out-of-stock policy {rule.oos_policy!r}",
                               hint="choose one of: " + ", ".join(OOS_POLICIES))
        return
    if rule.kind in ("boost", "bury", "bury-out-of-stock") and not 0 <= rule.factor <= 100:
        raise InvalidInput("factor", f"factor must be between 0 and 100, got {rule.factor:g}")
    if rule.kind in ("boost", "bury", "hide"):
        if not rule.condition:
            raise InvalidInput("where", f"a {rule.kind} rule needs a condition",
                               hint='--where \'brand == "acme"\'')
        _parse_where(rule.condition)


def _parse_where(condition: str, fields: set[str] | None = None,
                 samples: Sequence[Mapping[str, Any]] = ()) -> None:
    """A syntax error (with its caret), an unknown field, or an evaluation that fails on a
    sample record, as InvalidInput naming ``where``."""
    try:
        expr = parse(condition)
        if fields is not None:
            expr.check_fields(fields)
        for record in samples:
            expr.probe(record)
    except InvalidInput:
        raise
    except UsageError as exc:
        raise InvalidInput("where", exc.message, exc.hint) from None


# ---------------------------------------------------------------- storage


def _from_row(row: Mapping[str, Any]) -> Rule:
    return Rule(row["id"], row["kind"], row["scope"], row["condition"], row["product_id"],
                row["position"], float(row["factor"]), row["oos_policy"], bool(row["enabled"]),
                row["note"], row["created_at"], row["starts_at"], row["ends_at"], row["reach"])


def _check_against_store(store: Any, rule: Rule) -> None:
    validate(rule)
    if rule.scope and db_collections.row(store, rule.scope) is None:
        raise InvalidInput("collection", f"no collection named {rule.scope!r}",
                           hint="list them with: vismerch collections STORE")
    if rule.kind == "pin" and store.product(rule.product_id) is None:
        raise InvalidInput("product", f"no product {rule.product_id!r} in this store",
                           hint="pin a product id the catalog has (GET /products)")
    if rule.condition and rule.kind in ("boost", "bury", "hide"):  # a typo'd column matches nothing
        from vismerch.merch.collections import known_fields, product_records

        records = product_records(store)
        _parse_where(rule.condition, known_fields(records), [{}, *records[:1]])


def add_rule(store: Any, kind: str, *, scope: str | None = None, condition: str | None = None,
             product_id: str | None = None, position: int | None = None,
             factor: float | None = None, oos_policy: str = "release",
             note: str | None = None, starts_at: str | None = None, ends_at: str | None = None,
             reach: str = "collection", enabled: bool = True) -> Rule:
    """Validate and store a rule; returns it with its id. ``starts_at``/``ends_at``: a date
    or RFC 3339 time (UTC unless it says otherwise), the end exclusive."""
    if factor is None:
        factor = 100.0 if kind == "bury-out-of-stock" else 50.0
    rule = Rule(0, kind, scope or None, condition or None, product_id or None,
                int(position) if position is not None else None, float(factor), oos_policy,
                bool(enabled), note, utc_timestamp(), parse_stamp(starts_at, "starts_at"),
                parse_stamp(ends_at, "ends_at"), reach or "collection")
    _check_against_store(store, rule)
    rule.id = db.insert(store, rule.as_dict())
    return rule


def get_rule(store: Any, rule_id: int) -> Rule:
    row = db.get(store, rule_id)
    if row is None:
        raise NotFound("rule", rule_id, f"no rule #{rule_id}",
                       hint="list them with: vismerch rules list STORE")
    return _from_row(row)


def update_rule(store: Any, rule_id: int, **changes: Any) -> Rule:
    """Change some fields of a rule (those given; None clears an optional one), then
    validate the whole rule again. Dates are parsed like ``add_rule``'s."""
    rule = get_rule(store, rule_id)
    unknown = set(changes) - {f for f in Rule.__dataclass_fields__ if f not in ("id", "created_at")}
    if unknown:
        raise InvalidInput(sorted(unknown)[0], f"a rule has no field {sorted(unknown)[0]!r}")
    for name in ("starts_at", "ends_at"):
        if name in changes:
            changes[name] = parse_stamp(changes[name], name)
    if "position" in changes and changes["position"] is not None:
        changes["position"] = int(changes["position"])
    if changes.get("factor") is not None:
        changes["factor"] = float(changes["factor"])
    for name, value in changes.items():
        setattr(rule, name, value)
    _check_against_store(store, rule)
    fields = rule.as_dict()
    db.update(store, rule_id, {k: fields[k] for k in changes})
    return rule


def list_rules(store: Any, collection: str | None = None, *, applicable: bool = False,
               enabled_only: bool = False, at: str | None = None) -> list[Rule]:
    """All rules, or those scoped to ``collection`` (plus, if ``applicable``, global ones
    and the ``subtree`` rules of its parent collections); with ``at``, only those active then."""
    from vismerch.merch.collections import ancestors

    inherited = ancestors(store, collection) if collection is not None and applicable else []
    rows = db.select(store, scope=collection, inherited=inherited, with_global=applicable,
                     enabled_only=enabled_only)
    out = [_from_row(row) for row in rows]
    return [r for r in out if at is None or r.active(at)]


def parse_stamp(value: str | None, field: str = "date") -> str | None:
    """A date (``2026-12-24``) or RFC 3339 time -> the store's UTC stamp; None stays None.
    A time without an offset is taken as UTC."""
    if value is None or value == "":
        return None
    from datetime import datetime

    text = str(value).strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(field, f"bad date {str(value)[:40]!r}",
                           hint="use 2026-12-24 or 2026-12-24T08:00:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def remove_rule(store: Any, rule_id: int) -> None:
    if not db.delete(store, rule_id):
        raise NotFound("rule", rule_id, f"no rule #{rule_id}",
                       hint="list them with: vismerch rules list STORE")


def set_enabled(store: Any, rule_id: int, enabled: bool) -> None:
    if not db.update(store, rule_id, {"enabled": int(enabled)}):
        raise NotFound("rule", rule_id, f"no rule #{rule_id}")


def log_events(store: Any, collection: str, events: Sequence[dict[str, Any]]) -> list[int]:
    """Record substitutions/releases not already logged (same rule, product, substitute)."""
    return db.log_events(store, collection, events)


def rule_log(store: Any, collection: str | None = None) -> list[dict[str, Any]]:
    return db.log_rows(store, collection)


def revert_substitution(store: Any, log_id: int) -> dict[str, Any]:
    """Undo a logged substitution: from now on that pin keeps its own product in the slot
    (even out of stock) until the rule is changed or the revert is itself undone."""
    row = db.mark_reverted(store, log_id)
    if row is None:
        raise NotFound("substitution", log_id, f"no substitution #{log_id} in the rule log",
                       hint="see: vismerch rules log STORE")
    return row


def reverted_pins(store: Any, collection: str) -> set[tuple[int, str]]:
    """(rule id, product id) pairs whose substitution was reverted."""
    return db.reverted_pins(store, collection)


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
    applied: set[int] = field(default_factory=set)  # rules that changed a score, slot or visibility

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


def applies_to(rule: Rule, collection: str | None, lineage: Sequence[str] = ()) -> bool:
    """Does ``rule`` reach ``collection``, whose parents are ``lineage`` (nearest first)?
    Global rules reach every collection; a ``collection`` rule its own scope only; a
    ``subtree`` rule its scope and every sub-collection below it."""
    return rule.scope is None or rule.scope == collection or (
        rule.reach == "subtree" and rule.scope in lineage)


def _priority(rule: Rule, lineage: Sequence[str] = ()) -> tuple[int, int]:
    """Lower sorts first: the collection's own rules, then those inherited from the nearest
    parent up, then global ones; among equals the newest first."""
    if rule.scope is None:
        return (len(lineage) + 1, -rule.id)
    return (lineage.index(rule.scope) + 1 if rule.scope in lineage else 0, -rule.id)


def _condition(rule: Rule, res: Resolution) -> Any:
    """The rule's parsed condition; None (and a conflict saying so) for one stored before the
    parser refused it, so it is reported, never fatal to the arrangement."""
    try:
        return parse(OUT_OF_STOCK if rule.kind == "bury-out-of-stock" else rule.condition or "")
    except UsageError as exc:
        res.conflicts.append({"kind": "broken-condition", "rule": rule.id, "winner": None,
                              "product": None, "position": None,
                              "resolution": f"rule ignored: {exc.message.splitlines()[0]}"})
        return None


def resolve(rules: Sequence[Rule], records: Sequence[Mapping[str, Any]], scores: np.ndarray, *,
            collection: str | None = None, vectors: np.ndarray | None = None,
            reverted: set[tuple[int, str]] | None = None, lineage: Sequence[str] = (),
            at: str | None = None) -> Resolution:
    """Apply ``rules`` to products ``records`` (dicts with the product fields, in the same
    order as ``scores`` and ``vectors``) for ``collection``, whose parent collections are
    ``lineage`` (nearest first). With ``at`` (an RFC 3339 UTC stamp) only rules active then
    apply; ``Resolution.applied`` lists the rules that changed something."""
    n = len(records)
    lineage = list(lineage)
    rules = [r for r in rules if r.enabled and applies_to(r, collection, lineage)
             and (at is None or r.active(at))]
    adjusted = np.asarray(scores, np.float64).copy()
    res = Resolution(adjusted)
    reverted = reverted or set()
    for rule in sorted(rules, key=lambda r: r.id):
        if rule.kind == "pin":
            continue
        expr = _condition(rule, res)
        if expr is None:
            continue
        match = [i for i, rec in enumerate(records) if expr.evaluate(rec)]
        if match:
            res.applied.add(rule.id)
        if rule.kind == "hide":
            for i in match:
                res.hidden.setdefault(i, []).append(rule.id)
            continue
        delta = rule.factor / 100.0 * (1 if rule.kind == "boost" else -1)
        verb = "boosted" if delta > 0 else "buried"
        label = "out of stock" if rule.kind == "bury-out-of-stock" else rule.condition
        for i in match:
            adjusted[i] += delta
            res.notes.setdefault(i, []).append(f"{verb} {delta:+.2f} by rule #{rule.id} ({label})")

    index = {rec["id"]: i for i, rec in enumerate(records)}
    pins = sorted((r for r in rules if r.kind == "pin"), key=lambda r: _priority(r, lineage))
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
            if rule.scope == collection and collection is not None:  # inherited: n/a here
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
        res.applied.add(rule.id)
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
