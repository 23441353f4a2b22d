"""Rules: each kind, out-of-stock pins, conflict resolution, storage and the rule log."""

from __future__ import annotations

import numpy as np
import pytest
from merch_fixtures import build_store

from vismerch import rules as R
from vismerch.arrange.layout import arrange_collection
from vismerch.errors import UsageError


def records(n=6, **over):
    out = [{"id": f"P{i}", "brand": "acme" if i % 2 else "zenith", "stock": 5, "price": 10.0 * i}
           for i in range(n)]
    for pid, fields in over.items():
        out[int(pid[1:])].update(fields)
    return out


def rule(id, kind, **kw):
    return R.Rule(id, kind, **kw)


def test_boost_and_bury_move_by_a_share_of_the_positions():
    recs = records()
    base = np.linspace(0.5, 0.0, 6)  # P0 first ... P5 last
    res = R.resolve([rule(1, "boost", where='brand == "acme"', factor=30),
                     rule(2, "bury", where="price >= 40", factor=100)], recs, base)
    order = [int(i) for i in np.lexsort((np.arange(6), -res.scores))]
    # boost 30 of 6 = about 2 places up: P1 to the top, P3 above P2; P4 and P5 (bury 100
    # outweighs P5's boost) at the bottom, in their own order
    assert order == [1, 0, 3, 2, 4, 5]
    assert any("boosted 30% of the positions by rule #1" in n for n in res.notes[1])
    assert any("buried 100% of the positions by rule #2" in n for n in res.notes[5])
    assert 0 not in res.notes


def test_bury_strength_moves_to_a_position_not_always_last():
    n = 40
    recs = [{"id": f"P{i:02d}", "brand": "acme" if i == 4 else "other"} for i in range(n)]
    base = np.linspace(0.9, 0.3, n)  # a narrow spread, as real business scores have
    for factor, place in ((25, 14), (50, 24), (100, 39)):
        res = R.resolve([rule(1, "bury", where='brand == "acme"', factor=factor)], recs, base)
        order = list(np.lexsort((np.arange(n), -res.scores)))
        assert order.index(4) == place, (factor, order.index(4))
        others = [i for i in order if i != 4]
        assert others == sorted(others)  # nobody else moved
    res = R.resolve([rule(1, "boost", where='brand == "acme"', factor=5)], recs, base)
    assert list(np.lexsort((np.arange(n), -res.scores))).index(4) == 2


def test_bury_out_of_stock_and_hide():
    recs = records(P2={"stock": 0}, P3={"stock": None})
    res = R.resolve([rule(1, "bury-out-of-stock", factor=100),
                     rule(2, "hide", where='brand == "zenith" and price > 0')], recs, np.ones(6))
    assert res.scores[2] < 1.0 and np.all(np.delete(res.scores, 2) == 1.0)  # stock 0 buried
    assert res.scores[3] == 1.0  # unknown stock is not out of stock
    assert sorted(res.hidden) == [2, 4]
    assert res.hidden[2] == [2]


def test_scope_limits_rules_to_their_collection():
    recs = records()
    rules = [rule(1, "hide", where="true", collection="shoes")]
    assert R.resolve(rules, recs, np.ones(6), collection="dresses").hidden == {}
    assert len(R.resolve(rules, recs, np.ones(6), collection="shoes").hidden) == 6


def test_pin_and_pin_on_hidden_product():
    recs = records()
    res = R.resolve([rule(1, "pin", product="P4", position=1),
                     rule(2, "pin", product="P1", position=2),
                     rule(3, "hide", where='id == "P1"')], recs, np.ones(6))
    assert res.pins == {0: 4}
    assert res.conflicts == [{"kind": "pin-on-hidden", "rule": 2, "winner": None, "product": "P1",
                              "position": 2,
                              "resolution": "hidden by rule #3; the hide wins, pin ignored"}]


def test_two_pins_on_one_slot_collection_beats_global_then_newer_wins():
    recs = records()
    rules = [rule(1, "pin", product="P1", position=1, collection="c"),
             rule(5, "pin", product="P2", position=1),  # global, newer
             rule(3, "pin", product="P3", position=2),
             rule(4, "pin", product="P4", position=2)]  # newer global wins slot 2
    res = R.resolve(rules, recs, np.ones(6), collection="c")
    assert res.pins == {0: 1, 1: 4}
    lost = {(c["rule"], c["winner"], c["kind"]) for c in res.conflicts}
    assert lost == {(5, 1, "same-slot"), (3, 4, "same-slot")}
    # deterministic: the same outcome whatever order the rules come in
    again = R.resolve(list(reversed(rules)), recs, np.ones(6), collection="c")
    assert again.pins == res.pins and again.conflicts == res.conflicts


def test_product_pinned_twice_and_pin_outside_collection():
    recs = records()
    res = R.resolve([rule(1, "pin", product="P1", position=1),
                     rule(2, "pin", product="P1", position=3),
                     rule(3, "pin", product="NOPE", position=2, collection="c"),
                     rule(4, "pin", product="NOPE2", position=2)], recs, np.ones(6),
                    collection="c")
    assert res.pins == {2: 1}
    kinds = sorted((c["kind"], c["rule"]) for c in res.conflicts)
    assert kinds == [("not-a-member", 3), ("pinned-twice", 1)]  # global pin 4 silently n/a


def test_out_of_stock_pin_release_keep_and_substitute():
    recs = records(P1={"stock": 0})
    vecs = np.eye(6, dtype=np.float32)
    vecs[3] = vecs[1] * 0.9 + vecs[2] * 0.1  # P3 looks most like P1
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    released = R.resolve([rule(1, "pin", product="P1", position=2)], recs, np.ones(6))
    assert released.pins == {} and released.events[0]["kind"] == "release"
    kept = R.resolve([rule(1, "pin", product="P1", position=2, oos_policy="keep")],
                     recs, np.ones(6))
    assert kept.pins == {1: 1}
    sub = R.resolve([rule(1, "pin", product="P1", position=2, oos_policy="substitute")],
                    recs, np.ones(6), vectors=vecs)
    assert sub.pins == {1: 3}
    assert sub.events[0]["kind"] == "substitute" and sub.events[0]["substitute"] == "P3"
    assert "substitute for out-of-stock P1" in sub.pin_notes[3]
    # the substitute must be visible, in stock and not wanted by another pin
    sub2 = R.resolve([rule(1, "pin", product="P1", position=2, oos_policy="substitute"),
                      rule(2, "pin", product="P3", position=5)], recs, np.ones(6), vectors=vecs)
    assert sub2.pins[1] != 3 and sub2.pins[4] == 3
    # a reverted substitution keeps the pinned product itself
    back = R.resolve([rule(1, "pin", product="P1", position=2, oos_policy="substitute")],
                     recs, np.ones(6), vectors=vecs, reverted={(1, "P1")})
    assert back.pins == {1: 1} and back.events == []


@pytest.mark.parametrize("kw, words", [
    ({"kind": "shove"}, "unknown rule kind"),
    ({"kind": "boost", "where": "x > 1", "factor": 150}, "between 0 and 100"),
    ({"kind": "bury", "where": "x >", "factor": 10}, "column 4"),
    ({"kind": "hide"}, "needs a condition"),
    ({"kind": "pin", "product": "P1", "position": 0}, "position ≥ 1"),
    ({"kind": "pin", "position": 1}, "product id"),
    ({"kind": "pin", "product": "P1", "position": 1, "oos_policy": "pray"}, "policy"),
])
def test_invalid_rules_are_refused(kw, words):
    kind = kw.pop("kind")
    with pytest.raises(UsageError) as info:
        R.validate(R.Rule(0, kind, **kw))
    assert words in info.value.message


def _store(tmp_path):
    rng = np.random.default_rng(0)
    products = [{"id": f"P{i}", "category": "dress", "brand": "acme" if i < 4 else "zenith",
                 "price": 20.0 + i, "stock": 0 if i == 2 else 5, "sales": 100 - 10 * i}
                for i in range(8)]
    vectors = {p["id"]: rng.standard_normal(16) for p in products}
    vectors["P5"] = vectors["P2"] + 0.01  # P5 is P2's look-alike
    vectors = {k: v / np.linalg.norm(v) for k, v in vectors.items()}
    return build_store(tmp_path / "store", products, vectors=vectors)


def test_rules_storage_log_and_revert(tmp_path):
    store = _store(tmp_path)
    r1 = R.add_rule(store, "pin", collection="dress", product="P2", position=1,
                    oos_policy="substitute")
    R.add_rule(store, "hide", where='brand == "zenith" and price > 26')
    with pytest.raises(UsageError):
        R.add_rule(store, "pin", collection="shoes", product="P1", position=1)
    assert [r.id for r in R.list_rules(store, "dress", applicable=True)] == [1, 2]
    assert [r.id for r in R.list_rules(store, "dress")] == [1]

    first = arrange_collection(store, "dress", columns=2)
    assert first.ids[0] == "P5"  # the most similar in-stock product fills the pinned slot
    assert "substitute for out-of-stock P2" in first.arrangement.slots[0].reason
    assert {h["id"] for h in first.hidden} == {"P7"}
    arrange_collection(store, "dress", columns=2)  # same substitution: logged once
    log = R.rule_log(store, "dress")
    assert [(e["kind"], e["product_id"], e["substitute_id"]) for e in log] == [
        ("substitute", "P2", "P5")]

    R.revert_substitution(store, log[0]["id"])
    after = arrange_collection(store, "dress", columns=2)
    assert after.ids[0] == "P2"  # reverted: the pin keeps its own product
    assert R.rule_log(store)[0]["reverted_at"]

    R.set_enabled(store, r1.id, False)
    assert arrange_collection(store, "dress", columns=2).ids[0] == "P0"
    R.remove_rule(store, r1.id)
    with pytest.raises(UsageError):
        R.remove_rule(store, r1.id)


# ---------------------------------------------------------------- schedules and reach


def test_a_rule_is_active_from_its_start_until_its_exclusive_end():
    r = rule(1, "pin", product="P1", position=1,
             starts_at="2026-12-01T00:00:00Z", ends_at="2026-12-24T00:00:00Z")
    assert not r.active("2026-11-30T23:59:59Z")
    assert r.active("2026-12-01T00:00:00Z") and r.active("2026-12-23T23:59:59Z")
    assert not r.active("2026-12-24T00:00:00Z")  # the end is exclusive
    assert rule(2, "pin", starts_at="2026-12-01T00:00:00Z").active("2099-01-01T00:00:00Z")
    assert rule(3, "pin", ends_at="2026-12-01T00:00:00Z").active("2000-01-01T00:00:00Z")
    assert not rule(4, "pin", enabled=False).active("2026-12-05T00:00:00Z")


@pytest.mark.parametrize("text, stamp", [
    ("2026-12-01", "2026-12-01T00:00:00Z"),
    ("2026-12-01T08:30:00Z", "2026-12-01T08:30:00Z"),
    ("2026-12-01T08:30:00", "2026-12-01T08:30:00Z"),  # no offset: UTC
    ("2026-12-01T02:00:00+02:00", "2026-12-01T00:00:00Z"),
    ("2026-12-01T00:30:00-01:00", "2026-12-01T01:30:00Z"),
    (None, None), ("", None),
])
def test_dates_become_utc_stamps(text, stamp):
    assert R.parse_stamp(text) == stamp


def test_bad_dates_and_windows_name_their_field():
    from vismerch.errors import InvalidInput

    with pytest.raises(InvalidInput) as info:
        R.parse_stamp("next friday", "starts_at")
    assert info.value.field == "starts_at"
    for ends in ("2026-12-01T00:00:00Z", "2026-11-01T00:00:00Z"):  # equal or before: no window
        with pytest.raises(InvalidInput) as info:
            R.validate(rule(0, "boost", where="true", factor=10,
                            starts_at="2026-12-01T00:00:00Z", ends_at=ends))
        assert info.value.field == "ends_at"
    with pytest.raises(InvalidInput) as info:
        R.validate(rule(0, "boost", where="true", factor=10, reach="subtree"))
    assert info.value.field == "reach"  # subtree of what? it needs a scope


def test_resolve_applies_a_scheduled_pin_only_inside_its_window():
    rules = [rule(1, "pin", product="P5", position=1, starts_at="2026-12-01T00:00:00Z",
                  ends_at="2026-12-24T00:00:00Z"),
             rule(2, "boost", where='id == "P4"', factor=100, starts_at="2026-12-20T00:00:00Z")]
    before = R.resolve(rules, records(), np.ones(6), at="2026-11-30T12:00:00Z")
    assert before.pins == {} and before.scores[4] == 1.0 and before.applied == set()
    during = R.resolve(rules, records(), np.ones(6), at="2026-12-21T00:00:00Z")
    assert during.pins == {0: 5} and during.scores[4] > 1.0 and during.applied == {1, 2}
    after = R.resolve(rules, records(), np.ones(6), at="2026-12-24T00:00:00Z")
    assert after.pins == {} and after.scores[4] > 1.0 and after.applied == {2}


def test_reach_subtree_goes_down_to_sub_collections_and_reach_collection_does_not():
    rules = [rule(1, "hide", where='id == "P1"', collection="dresses", reach="subtree"),
             rule(2, "hide", where='id == "P2"', collection="dresses"),  # reach collection
             rule(3, "hide", where='id == "P3"', collection="summer", reach="subtree"),
             rule(4, "hide", where='id == "P4"', collection="shoes", reach="subtree")]
    own = R.resolve(rules, records(), np.ones(6), collection="dresses")
    assert sorted(own.hidden) == [1, 2]
    child = R.resolve(rules, records(), np.ones(6), collection="summer", lineage=["dresses"])
    assert sorted(child.hidden) == [1, 3]
    grandchild = R.resolve(rules, records(), np.ones(6), collection="sale",
                           lineage=["summer", "dresses"])
    assert sorted(grandchild.hidden) == [1, 3]
    sibling = R.resolve(rules, records(), np.ones(6), collection="sandals", lineage=["shoes"])
    assert sorted(sibling.hidden) == [4]
    assert R.applies_to(rules[0], "summer", ["dresses"]) and not R.applies_to(rules[1], "summer",
                                                                                 ["dresses"])


def test_own_pins_beat_inherited_ones_which_beat_global_ones():
    rules = [rule(9, "pin", product="P1", position=1),  # global, newest
             rule(8, "pin", product="P2", position=1, collection="dresses", reach="subtree"),
             rule(3, "pin", product="P3", position=1, collection="summer"),  # own, oldest
             rule(7, "pin", product="P4", position=2),  # global
             rule(6, "pin", product="P5", position=2, collection="dresses", reach="subtree"),
             rule(5, "pin", product="NOPE", position=3, collection="dresses", reach="subtree")]
    res = R.resolve(rules, records(), np.ones(6), collection="summer", lineage=["dresses"])
    assert res.pins == {0: 3, 1: 5}
    lost = sorted((c["rule"], c["winner"]) for c in res.conflicts)
    assert lost == [(7, 6), (8, 3), (9, 3)]  # the inherited pin of a non-member is silently n/a


def test_store_rules_reach_sub_collections_and_follow_the_clock(tmp_path):
    from vismerch.merch import collections as C

    store = _store(tmp_path)
    C.create_collection(store, "cheap", where="price < 24", parent="dress")
    C.create_collection(store, "cheapest", where="price < 22", parent="cheap")
    assert C.members(store, "cheap") == ["P0", "P1", "P2", "P3"]
    assert C.members(store, "cheapest") == ["P0", "P1"]
    assert C.ancestors(store, "cheapest") == ["cheap", "dress"]
    down = R.add_rule(store, "pin", collection="dress", product="P1", position=1, reach="subtree",
                      starts_at="2026-12-01", ends_at="2026-12-24")
    R.add_rule(store, "pin", collection="dress", product="P3", position=2)
    assert [r.id for r in R.list_rules(store, "cheapest", applicable=True)] == [down.id]
    assert [r.id for r in R.list_rules(store, "dress", applicable=True)] == [1, 2]
    inside, outside = "2026-12-10T00:00:00Z", "2026-12-24T00:00:00Z"
    assert arrange_collection(store, "cheapest", columns=2, at=inside).ids[0] == "P1"
    assert arrange_collection(store, "cheapest", columns=2, at=outside).ids[0] == "P0"
    cheap = arrange_collection(store, "cheap", columns=2, at=inside)
    assert cheap.ids[:2] != ["P1", "P3"] and cheap.ids[0] == "P1"  # P3's pin stays on dress
    assert cheap.applied == [down.id]
    R.update_rule(store, down.id, reach="collection")
    assert arrange_collection(store, "cheapest", columns=2, at=inside).ids[0] == "P0"
    with pytest.raises(UsageError):
        R.update_rule(store, down.id, ends_at="2026-11-01")  # before its start
    assert R.get_rule(store, down.id).ends_at == "2026-12-24T00:00:00Z"
