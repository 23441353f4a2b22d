"""Merchandising rules: list (filtered by collection and whether active now), the rules
that affect one collection's page (its own, inherited subtree rules, global ones), add,
change, delete, enable/disable, the out-of-stock rule log with reverts, and the rule form's
helpers: the kinds, a check for conflicts before saving, the product fields a condition may
use and a live match count."""

from __future__ import annotations

from typing import Any

from vismerch import rules as R
from vismerch.catalog.store import utc_timestamp
from vismerch.merch import collections as colls
from vismerch.rules import storage
from vismerch.rules.conflicts import rule_conflicts
from vismerch.rules.kinds import KINDS
from vismerch.rules.model import parse_where
from vismerch.service.models_merch import (
    MatchCount,
    ProductField,
    Rule,
    RuleCheck,
    RuleConflict,
    RuleKindInfo,
    RuleLogRow,
)
from vismerch.service.workspace import Workspace

# the API's rule fields: the names of rules.Rule's attributes and of the store's columns
_FIELDS = ("kind", "collection", "product", "position", "where", "factor", "starts_at", "ends_at",
           "reach", "oos_policy", "note", "enabled")
_REQUIRED = ("kind", "factor", "reach", "oos_policy", "enabled")


def _model(rule: R.Rule, now: str, inherited_from: str | None = None) -> Rule:
    return Rule(id=rule.id, kind=rule.kind, collection=rule.collection, product=rule.product,
                position=rule.position, where=rule.where, factor=rule.factor,
                starts_at=rule.starts_at, ends_at=rule.ends_at, reach=rule.reach,
                active=rule.active(now), enabled=rule.enabled, oos_policy=rule.oos_policy,
                note=rule.note, created_at=rule.created_at, inherited_from=inherited_from,
                description=rule.describe())


def list_rules(ws: Workspace, collection: str | None = None, active: bool | None = None,
               *, at: str | None = None) -> list[Rule]:
    """All rules, or those scoped to ``collection``; ``active`` keeps only the rules that
    are (or are not) in force at ``at`` (default now)."""
    if collection is not None:
        colls.get_collection(ws.store, collection)
    now = at or utc_timestamp()
    rules = R.list_rules(ws.store, collection)
    return [_model(r, now) for r in rules if active is None or r.active(now) == active]


def rules_for_collection(ws: Workspace, collection: str, *, at: str | None = None) -> list[Rule]:
    """Every rule that reaches ``collection``'s page: its own, the ``subtree`` rules of its
    parents (``inherited_from`` says which) and the global ones, each with ``active`` now."""
    colls.get_collection(ws.store, collection)
    now = R.parse_stamp(at, "at") or utc_timestamp()
    lineage = colls.ancestors(ws.store, collection)
    return [_model(r, now, r.collection if r.collection in lineage else None)
            for r in R.list_rules(ws.store, collection, applicable=True)
            if R.applies_to(r, collection, lineage)]


def get_rule(ws: Workspace, rule_id: int) -> Rule:
    return _model(R.get_rule(ws.store, rule_id), utc_timestamp())


def add_rule(ws: Workspace, kind: str, **fields: Any) -> Rule:
    """Validate and store a rule from the API's fields (``collection``, ``product``,
    ``position``, ``where``, ``factor``, ``starts_at``, ``ends_at``, ``reach``,
    ``oos_policy``, ``note``, ``enabled``); bad input: InvalidInput naming the API field."""
    from vismerch.errors import InvalidInput

    unknown = [k for k in fields if k not in _FIELDS or k == "kind"]
    if unknown:
        raise InvalidInput(unknown[0], f"a rule has no field {unknown[0]!r}")
    rule = R.add_rule(ws.store, kind, **fields)
    return _model(rule, utc_timestamp())


def update_rule(ws: Workspace, rule_id: int, changes: dict[str, Any]) -> Rule:
    """Change the given API fields of a rule (None clears an optional one); the whole rule
    is validated again."""
    from vismerch.errors import InvalidInput

    unknown = [k for k in changes if k not in _FIELDS]
    if unknown:
        raise InvalidInput(unknown[0], f"a rule has no field {unknown[0]!r}")
    for name in _REQUIRED:
        if name in changes and changes[name] is None:
            raise InvalidInput(name, f"{name} cannot be cleared (send a value, or leave it out)")
    rule = R.update_rule(ws.store, rule_id, **changes)
    return _model(rule, utc_timestamp())


def delete_rule(ws: Workspace, rule_id: int) -> None:
    R.remove_rule(ws.store, rule_id)


def set_enabled(ws: Workspace, rule_id: int, enabled: bool) -> Rule:
    return update_rule(ws, rule_id, {"enabled": enabled})


def rule_log(ws: Workspace, collection: str | None = None) -> list[RuleLogRow]:
    return [RuleLogRow(**row) for row in R.rule_log(ws.store, collection)]


def revert_substitution(ws: Workspace, log_id: int) -> RuleLogRow:
    return RuleLogRow(**R.revert_substitution(ws.store, log_id))


# ---------------------------------------------------------------- the rule form's helpers


def kinds() -> list[RuleKindInfo]:
    """Every registered rule kind with what the form needs to ask for it."""
    return [RuleKindInfo(**k.metadata()) for k in KINDS.values()]


def check_rule(ws: Workspace, fields: dict[str, Any], rule_id: int | None = None) -> RuleCheck:
    """Validate a rule as it would be saved (``fields``: the API's; with ``rule_id``, the
    changes to that rule) and list the stored rules it conflicts with. Bad input raises
    InvalidInput naming the field, as saving would."""
    store = ws.store
    if rule_id is None:
        fields = {k: v for k, v in fields.items() if k in _FIELDS}
        rule = storage.new_rule(fields.pop("kind"), **fields)
        storage.check_against_store(store, rule)
    else:
        rule = storage.changed_rule(store, rule_id, {k: v for k, v in fields.items() if k in _FIELDS})
    record = None
    if rule.product:
        product = store.product(rule.product)
        record = colls.product_records(store, [product])[0] if product else None
    found = rule_conflicts(rule, R.list_rules(store), record=record,
                           lineage=lambda name: colls.ancestors(store, name))
    return RuleCheck(ok=not found, conflicts=[RuleConflict(**c) for c in found])


def product_fields(ws: Workspace, collection: str | None = None) -> list[ProductField]:
    """The fields a condition may use, with their type and (text fields) common values."""
    records = _records(ws, collection)
    out = []
    for name in sorted(colls.known_fields(records)):
        values = [r.get(name) for r in records if r.get(name) is not None]
        out.append(ProductField(name=name, type=_field_type(values),
                                values=_common(values) if _field_type(values) == "text" else []))
    return out


def count_matches(ws: Workspace, where: str, collection: str | None = None) -> MatchCount:
    """How many products (of ``collection``, or of the catalog) ``where`` matches now."""
    records = _records(ws, collection)
    expr = parse_where(where, colls.known_fields(records), [{}, *records[:1]])
    hits = [r for r in records if expr.evaluate(r)]
    return MatchCount(matches=len(hits), total=len(records),
                      sample=[{"id": r["id"], "title": r.get("title")} for r in hits[:8]])


def _records(ws: Workspace, collection: str | None) -> list[dict[str, Any]]:
    store = ws.store
    if collection is None:
        return colls.product_records(store)
    members = set(colls.members(store, collection))  # refuses an unknown collection
    return colls.product_records(store, [p for p in store.products() if p.id in members])


def _field_type(values: list[Any]) -> str:
    if values and all(isinstance(v, bool) for v in values):
        return "boolean"
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "number"
    if any(isinstance(v, (list, tuple)) for v in values):
        return "list"
    return "text"


def _common(values: list[Any], top: int = 20) -> list[str]:
    counts: dict[str, int] = {}
    for v in values:
        counts[str(v)] = counts.get(str(v), 0) + 1
    return [v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
