"""Merchandising rules: list (filtered by collection and whether active now), the rules
that affect one collection's page (its own, inherited subtree rules, global ones), add,
change, delete, enable/disable, and the out-of-stock rule log with reverts."""

from __future__ import annotations

from typing import Any

from vismerch.catalog.store import utc_timestamp
from vismerch.merch import collections as colls
from vismerch.merch import rules as R
from vismerch.service.models_merch import Rule, RuleLogRow
from vismerch.service.workspace import Workspace

# API field -> merch.rules.Rule attribute
_FIELDS = {"kind": "kind", "collection": "scope", "product": "product_id", "position": "position",
           "where": "condition", "factor": "factor", "starts_at": "starts_at",
           "ends_at": "ends_at", "reach": "reach", "oos_policy": "oos_policy", "note": "note",
           "enabled": "enabled"}
_REQUIRED = ("kind", "factor", "reach", "oos_policy", "enabled")


def _model(rule: R.Rule, now: str, inherited_from: str | None = None) -> Rule:
    return Rule(id=rule.id, kind=rule.kind, collection=rule.scope, product=rule.product_id,
                position=rule.position, where=rule.condition, factor=rule.factor,
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
    now = at or utc_timestamp()
    lineage = colls.ancestors(ws.store, collection)
    return [_model(r, now, r.scope if r.scope in lineage else None)
            for r in R.list_rules(ws.store, collection, applicable=True)
            if R.applies_to(r, collection, lineage)]


def get_rule(ws: Workspace, rule_id: int) -> Rule:
    return _model(R.get_rule(ws.store, rule_id), utc_timestamp())


def add_rule(ws: Workspace, kind: str, *, collection: str | None = None,
             product: str | None = None, position: int | None = None, where: str | None = None,
             factor: float | None = None, starts_at: str | None = None,
             ends_at: str | None = None, reach: str = "collection", oos_policy: str = "release",
             note: str | None = None, enabled: bool = True) -> Rule:
    """Validate and store a rule (bad input: InvalidInput naming the API field)."""
    rule = R.add_rule(ws.store, kind, scope=collection, condition=where, product_id=product,
                      position=position, factor=factor, oos_policy=oos_policy, note=note,
                      starts_at=starts_at, ends_at=ends_at, reach=reach, enabled=enabled)
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
    rule = R.update_rule(ws.store, rule_id, **{_FIELDS[k]: v for k, v in changes.items()})
    return _model(rule, utc_timestamp())


def delete_rule(ws: Workspace, rule_id: int) -> None:
    R.remove_rule(ws.store, rule_id)


def set_enabled(ws: Workspace, rule_id: int, enabled: bool) -> Rule:
    return update_rule(ws, rule_id, {"enabled": enabled})


def rule_log(ws: Workspace, collection: str | None = None) -> list[RuleLogRow]:
    return [RuleLogRow(**row) for row in R.rule_log(ws.store, collection)]


def revert_substitution(ws: Workspace, log_id: int) -> RuleLogRow:
    return RuleLogRow(**R.revert_substitution(ws.store, log_id))
