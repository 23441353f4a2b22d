"""Rules in a store: validate against it, add, change, list, delete, and the out-of-stock
rule log. The SQL lives in ``catalog.rules``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vismerch.catalog import collections as db_collections
from vismerch.catalog import rules as db
from vismerch.catalog.store import utc_timestamp
from vismerch.errors import InvalidInput, NotFound
from vismerch.rules.kinds import get_kind
from vismerch.rules.model import Rule, parse_stamp, parse_where, validate

if TYPE_CHECKING:
    from vismerch.catalog.store import Store


def from_row(row: Mapping[str, Any]) -> Rule:
    return Rule(row["id"], row["kind"], row["collection"], row["where"], row["product"],
                row["position"], float(row["factor"]), row["oos_policy"], bool(row["enabled"]),
                row["note"], row["created_at"], row["starts_at"], row["ends_at"], row["reach"])


def check_against_store(store: Store, rule: Rule) -> None:
    validate(rule)
    kind = get_kind(rule.kind)
    if rule.collection and db_collections.row(store, rule.collection) is None:
        raise InvalidInput("collection", f"no collection named {rule.collection!r}",
                           hint="list them with: vismerch collections STORE")
    if kind.target == "product" and store.product(rule.product) is None:
        raise InvalidInput("product", f"no product {rule.product!r} in this store",
                           hint="pin a product id the catalog has (GET /products)")
    if kind.target == "condition" and kind.fixed_condition is None:  # a typo'd column matches nothing
        from vismerch.merch.collections import known_fields, product_records

        records = product_records(store)
        parse_where(rule.where or "", known_fields(records), [{}, *records[:1]])


_OPTIONAL = ("collection", "where", "product", "position", "factor", "oos_policy", "note",
             "starts_at", "ends_at", "reach", "enabled")


def new_rule(kind: str, **fields: Any) -> Rule:
    """A rule (id 0) from loose input (``_OPTIONAL`` fields, empty ones left out): dates
    parsed, the kind's default strength, reach ``collection`` unless given."""
    unknown = sorted(set(fields) - set(_OPTIONAL))
    if unknown:
        raise InvalidInput(unknown[0], f"a rule has no field {unknown[0]!r}")
    get = fields.get
    factor = get("factor")
    return Rule(0, kind, get("collection") or None, get("where") or None, get("product") or None,
                int(get("position")) if get("position") is not None else None,
                float(get_kind(kind).default_factor if factor is None else factor),
                get("oos_policy") or "release", bool(get("enabled", True)), get("note"),
                utc_timestamp(), parse_stamp(get("starts_at"), "starts_at"),
                parse_stamp(get("ends_at"), "ends_at"), get("reach") or "collection")


def add_rule(store: Store, kind: str, **fields: Any) -> Rule:
    """Validate and store a rule (``new_rule``'s fields); returns it with its id.
    ``starts_at``/``ends_at``: a date or RFC 3339 time (UTC unless it says otherwise), the
    end exclusive."""
    rule = new_rule(kind, **fields)
    check_against_store(store, rule)
    rule.id = db.insert(store, rule.as_dict())
    return rule


def get_rule(store: Store, rule_id: int) -> Rule:
    row = db.get(store, rule_id)
    if row is None:
        raise NotFound("rule", rule_id, f"no rule #{rule_id}",
                       hint="list them with: vismerch rules list STORE")
    return from_row(row)


def changed_rule(store: Store, rule_id: int, changes: Mapping[str, Any]) -> Rule:
    """The rule with ``changes`` made (not stored), validated against the store."""
    rule = get_rule(store, rule_id)
    unknown = set(changes) - {f for f in Rule.__dataclass_fields__ if f not in ("id", "created_at")}
    if unknown:
        raise InvalidInput(sorted(unknown)[0], f"a rule has no field {sorted(unknown)[0]!r}")
    changes = dict(changes)
    for name in ("starts_at", "ends_at"):
        if name in changes:
            changes[name] = parse_stamp(changes[name], name)
    if changes.get("position") is not None:
        changes["position"] = int(changes["position"])
    if changes.get("factor") is not None:
        changes["factor"] = float(changes["factor"])
    for name, value in changes.items():
        setattr(rule, name, value)
    check_against_store(store, rule)
    return rule


def update_rule(store: Store, rule_id: int, **changes: Any) -> Rule:
    """Change some fields of a rule (those given; None clears an optional one), then
    validate the whole rule again. Dates are parsed like ``add_rule``'s."""
    rule = changed_rule(store, rule_id, changes)
    fields = rule.as_dict()
    db.update(store, rule_id, {k: fields[k] for k in changes})
    return rule


def list_rules(store: Store, collection: str | None = None, *, applicable: bool = False,
               enabled_only: bool = False, at: str | None = None) -> list[Rule]:
    """All rules, or those scoped to ``collection`` (plus, if ``applicable``, global ones
    and the ``subtree`` rules of its parent collections); with ``at``, only those active then."""
    from vismerch.merch.collections import ancestors

    inherited = ancestors(store, collection) if collection is not None and applicable else []
    rows = db.select(store, collection=collection, inherited=inherited, with_global=applicable,
                     enabled_only=enabled_only)
    out = [from_row(row) for row in rows]
    return [r for r in out if at is None or r.active(at)]


def remove_rule(store: Store, rule_id: int) -> None:
    if not db.delete(store, rule_id):
        raise NotFound("rule", rule_id, f"no rule #{rule_id}",
                       hint="list them with: vismerch rules list STORE")


def set_enabled(store: Store, rule_id: int, enabled: bool) -> None:
    if not db.update(store, rule_id, {"enabled": int(enabled)}):
        raise NotFound("rule", rule_id, f"no rule #{rule_id}")


def log_events(store: Store, collection: str, events: Sequence[dict[str, Any]]) -> list[int]:
    """Record substitutions/releases not already logged (same rule, product, substitute)."""
    return db.log_events(store, collection, events)


def rule_log(store: Store, collection: str | None = None) -> list[dict[str, Any]]:
    return db.log_rows(store, collection)


def revert_substitution(store: Store, log_id: int) -> dict[str, Any]:
    """Undo a logged substitution: from now on that pin keeps its own product in the slot
    (even out of stock) until the rule is changed or the revert is itself undone."""
    row = db.mark_reverted(store, log_id)
    if row is None:
        raise NotFound("substitution", log_id, f"no substitution #{log_id} in the rule log",
                       hint="see: vismerch rules log STORE")
    return row


def reverted_pins(store: Store, collection: str) -> set[tuple[int, str]]:
    """(rule id, product id) pairs whose substitution was reverted."""
    return db.reverted_pins(store, collection)
