"""The rule-kind registry, pin conflicts found before saving, and dated rules applied to a
published order at read time (rules.schedule)."""

from __future__ import annotations

import pytest

from vismerch.errors import InvalidInput
from vismerch.rules import KINDS, Rule, get_kind, kind_names, register, resolve
from vismerch.rules.conflicts import rule_conflicts
from vismerch.rules.kinds import Bury, RuleKind
from vismerch.rules.schedule import live_order, next_boundary, state_changes


def test_every_kind_is_a_registered_class_with_its_metadata():
    assert kind_names() == ("pin", "boost", "bury", "hide", "bury-out-of-stock")
    assert all(isinstance(k, RuleKind) and k.name == name for name, k in KINDS.items())
    assert get_kind("bury").direction == -1 and get_kind("boost").direction == 1
    assert get_kind("pin").target == "product" and not get_kind("pin").uses_factor
    with pytest.raises(InvalidInput) as info:
        get_kind("spotlight")
    assert info.value.field == "kind" and "pin" in info.value.hint
    with pytest.raises(ValueError, match="twice"):
        register(Bury)


def test_a_new_kind_registered_in_one_place_is_validated_and_resolved():
    import numpy as np

    @register
    class Sink(RuleKind):  # a third party's kind: a bury with its own condition
        name = "sink-sale"
        summary = "Bury the products on sale."
        direction = -1
        default_factor = 100.0
        fixed_condition = "sale"

    try:
        recs = [{"id": f"P{i}", "sale": i == 0} for i in range(4)]
        res = resolve([Rule(1, "sink-sale", factor=100)], recs, np.linspace(1, 0.5, 4))
        assert int(np.argmin(res.scores)) == 0 and "sink 100 where sale" in Rule(1, "sink-sale",
                                                                               factor=100).describe()
        from vismerch.rules import validate

        with pytest.raises(InvalidInput) as info:
            validate(Rule(1, "sink-sale", factor=120))
        assert info.value.field == "factor"
    finally:
        del KINDS["sink-sale"]


def pin(id, product, position, **kw):
    return Rule(id, "pin", product=product, position=position, **kw)


def test_pin_conflicts_same_slot_twice_hidden_and_not_across_scopes_or_dates():
    lineage = {"dresses": [], "maxi": ["dresses"], "shoes": []}.get
    stored = [pin(1, "A", 2, collection="dresses"), pin(2, "B", 4),
              Rule(3, "hide", collection="dresses", where='colour == "red"'),
              pin(4, "C", 2, collection="shoes"), pin(5, "D", 7, collection="dresses", reach="subtree"),
              pin(6, "E", 2, collection="dresses", enabled=False)]
    kinds = lambda cand, record=None: [(c["kind"], c["rule"]) for c in  # noqa: E731
                                       rule_conflicts(cand, stored, lineage=lineage, record=record)]
    assert kinds(pin(0, "X", 2, collection="dresses")) == [("same-slot", 1)]
    assert kinds(pin(0, "X", 2)) == [("same-slot", 1), ("same-slot", 4)]  # global meets every page
    assert kinds(pin(0, "B", 9, collection="shoes")) == [("pinned-twice", 2)]
    assert kinds(pin(0, "X", 7, collection="maxi")) == [("same-slot", 5)]  # inherited through subtree
    assert kinds(pin(0, "X", 3, collection="dresses"), {"id": "X", "colour": "red"}) == [("pin-on-hidden", 3)]
    assert kinds(pin(0, "X", 3, collection="dresses"), {"id": "X", "colour": "blue"}) == []
    assert kinds(pin(1, "A", 2, collection="dresses")) == []  # an edit does not conflict with itself
    dated = [pin(7, "F", 5, starts_at="2026-12-01T00:00:00Z", ends_at="2026-12-24T00:00:00Z")]
    assert rule_conflicts(pin(0, "X", 5, starts_at="2026-12-24T00:00:00Z"), dated, lineage=lineage) == []
    assert len(rule_conflicts(pin(0, "X", 5, ends_at="2026-12-02T00:00:00Z"), dated, lineage=lineage)) == 1
    message = rule_conflicts(pin(0, "X", 2), stored[:1], lineage=lineage)[0]["message"]
    assert "rule #1 would win" in message


def test_schedule_applies_only_the_dated_rules_whose_state_changed():
    baked, now = "2026-12-01T00:00:00Z", "2026-12-10T00:00:00Z"
    rules = [Rule(1, "boost", where="true", factor=10, created_at="2026-11-01T00:00:00Z"),
             Rule(2, "boost", where='id == "P5"', factor=100, created_at="2026-11-01T00:00:00Z",
                  starts_at="2026-12-05T00:00:00Z"),
             Rule(3, "hide", where='id == "P0"', created_at="2026-11-01T00:00:00Z",
                  ends_at="2026-12-05T00:00:00Z"),
             Rule(4, "bury", where='id == "P1"', factor=50, created_at="2026-12-02T00:00:00Z",
                  starts_at="2026-11-01T00:00:00Z")]  # made after the arrangement: not in it
    changes = state_changes(rules, baked, now)
    assert [(r.id, on) for r, on in changes] == [(2, True), (3, False), (4, True)]
    ids = ["P1", "P2", "P3", "P4", "P5"]  # the published order; P0 was hidden then
    records = {f"P{i}": {"id": f"P{i}"} for i in range(6)}
    out = live_order(ids, records, changes, [], members=["P0", *ids])
    assert out[0] == "P5" and out[-1] == "P0"  # boosted to the top; unhidden at the end
    assert out.index("P1") > out.index("P3")  # buried half the page
    assert live_order(ids, records, [], [pin(9, "P4", 1)]) == ["P4", "P1", "P2", "P3", "P5"]
    assert next_boundary(rules, now) is None and next_boundary(rules, baked) == "2026-12-05T00:00:00Z"
