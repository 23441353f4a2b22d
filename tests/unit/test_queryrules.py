"""Query rules and synonyms (pure): normalised matching by each match kind, dates, what each
rule kind does to a hit list, conflicts resolved and reported, synonym expansion."""

from __future__ import annotations

import pytest

from vismerch.errors import InvalidInput
from vismerch.merch import queryrules as Q
from vismerch.merch import synonyms as S

NOW = "2026-06-01T12:00:00Z"
HITS = [(f"p{i}", round(1 - i / 10, 2)) for i in range(1, 8)]  # p1 best .. p7


def rule(rule_id, kind, query, match="exact", products=(), **kw):
    return Q.QueryRule(rule_id, kind, Q.normalise(query), match, tuple(products), **kw)


def ids(outcome):
    return [pid for pid, _ in outcome.hits]


def test_normalise_folds_case_accents_and_spaces():
    assert Q.normalise("  Robe  ÉTÉ\t") == "robe ete"
    assert Q.normalise("Straße") == "strasse"


@pytest.mark.parametrize(("match", "pattern", "yes", "no"), [
    ("exact", "red dress", ["Red  Dress", "RED DRESS"], ["red dresses", "a red dress"]),
    ("prefix", "dre", ["dress", "dresses for summer"], ["red dress"]),
    ("contains", "red dress", ["long red dress", "red dress sale"], ["red dresses", "bored dress"]),
    ("glob", "red * dress", ["red summer dress", "red long silk dress"], ["red dress", "blue summer dress"]),
    ("glob", "t?e", ["tee", "toe"], ["tree"]),
])
def test_match_kinds(match, pattern, yes, no):
    r = rule(1, "hide", pattern, match, ["p1"])
    assert [q for q in yes if Q.matching(q, [r], NOW)] == yes
    assert [q for q in no if Q.matching(q, [r], NOW)] == []


def test_dates_and_enabled_decide_whether_a_rule_is_in_force():
    dated = rule(1, "hide", "dress", products=["p1"], starts_at="2026-06-01T00:00:00Z",
                 ends_at="2026-06-02T00:00:00Z")
    off = rule(2, "hide", "dress", products=["p2"], enabled=False)
    assert [r.id for r in Q.matching("dress", [dated, off], NOW)] == [1]
    assert Q.matching("dress", [dated], "2026-05-31T23:59:59Z") == []
    assert Q.matching("dress", [dated], "2026-06-02T00:00:00Z") == []  # the end is exclusive


def test_pin_hide_boost_bury():
    rules = [rule(1, "pin", "q", products=["p9"], position=2), rule(2, "hide", "q", products=["p1"]),
             rule(3, "boost", "q", products=["p7"], factor=100),
             rule(4, "bury", "q", products=["p2"], factor=100)]
    out = Q.apply(HITS, Q.matching("q", rules, NOW), k=5)
    # p1 hidden; p7 boosted above all; p9 (not found by the search) pinned at 2; p2 buried last
    assert ids(out) == ["p7", "p9", "p3", "p4", "p5"]
    assert dict(out.hits)["p9"] == 0.0 and dict(out.hits)["p7"] == HITS[6][1]  # scores are the search's
    actions = {(e["action"], e.get("product")) for e in out.effects}
    assert {("hidden", "p1"), ("boosted", "p7"), ("buried", "p2"), ("pinned", "p9")} <= actions
    assert out.conflicts == []


def test_a_small_boost_moves_a_product_only_a_little():
    out = Q.apply(HITS, [rule(1, "boost", "q", products=["p5"], factor=30)], k=7)
    assert ids(out).index("p5") < 4 and ids(out).index("p5") > 0


def test_pin_beyond_the_hits_follows_them_and_beyond_k_is_off_the_page():
    out = Q.apply(HITS[:2], [rule(1, "pin", "q", products=["p9"], position=6)], k=5)
    assert ids(out) == ["p1", "p2", "p9"]
    out = Q.apply(HITS, [rule(1, "pin", "q", products=["p9"], position=6)], k=5)
    assert "p9" not in ids(out) and len(out.hits) == 5


def test_conflicts_more_specific_wins_and_is_reported():
    rules = [rule(1, "pin", "dress", "contains", ["p5"], position=1),
             rule(2, "pin", "red dress", "exact", ["p6"], position=1),
             rule(3, "redirect", "red", "prefix", collection="red-things"),
             rule(4, "redirect", "red dress", "exact", collection="dresses"),
             rule(5, "pin", "red dress", "exact", ["p3"], position=3),
             rule(6, "hide", "red *", "glob", ["p3"])]
    out = Q.apply(HITS, Q.matching("red dress", rules, NOW), k=6)
    assert ids(out)[0] == "p6" and out.redirect == "dresses" and "p3" not in ids(out)
    lost = {(c["rule"], c["winner"]) for c in out.conflicts}
    assert lost == {(1, 2), (3, 4), (5, 6)}  # slot 1, the redirect, the hidden pin
    again = Q.apply(HITS, Q.matching("red dress", list(reversed(rules)), NOW), k=6)
    assert again.hits == out.hits and again.conflicts == out.conflicts  # order of input does not matter


def test_same_specificity_newer_rule_wins():
    rules = [rule(1, "pin", "dress", products=["p5"], position=1),
             rule(2, "pin", "dress", products=["p6"], position=1)]
    out = Q.apply(HITS, Q.matching("dress", rules, NOW), k=3)
    assert ids(out)[0] == "p6" and out.conflicts[0]["rule"] == 1


def test_extra_depth_counts_hidden_products():
    assert Q.extra_depth([rule(1, "hide", "q", products=["a", "b"]), rule(2, "pin", "q", products=["c"],
                                                                          position=1)]) == 2


@pytest.mark.parametrize(("bad", "field"), [
    (dict(kind="promote"), "kind"),
    (dict(match="regex"), "match"),
    (dict(query=""), "query"),
    (dict(match="glob", query="**"), "query"),
    (dict(kind="pin", products=("a", "b"), position=1), "products"),
    (dict(kind="pin", products=("a",), position=0), "position"),
    (dict(kind="boost", products=("a",), factor=101), "factor"),
    (dict(kind="hide", products=()), "products"),
    (dict(kind="redirect", products=()), "collection"),
    (dict(starts_at="2026-02-01T00:00:00Z", ends_at="2026-01-01T00:00:00Z"), "ends_at"),
])
def test_validate_names_the_field(bad, field):
    fields = {"id": 1, "kind": "hide", "query": "dress", "match": "exact", "products": ("a",), **bad}
    with pytest.raises(InvalidInput) as err:
        Q.validate(Q.QueryRule(**fields))
    assert err.value.field == field


def test_equivalent_synonyms_expand_each_way_on_whole_words():
    sofa = S.Synonym(1, "equivalent", ("sofa", "couch", "settee"))
    variants, used = S.expand("Grey Couch", [sofa])
    assert variants == ["grey couch", "grey sofa", "grey settee"]
    assert [u["synonym"] for u in used] == [1, 1]
    assert S.expand("couches", [sofa])[0] == ["couches"]  # whole words only


def test_one_way_synonyms_expand_one_way_and_multiword_terms():
    tee = S.Synonym(2, "one-way", ("t-shirt", "tshirt"), term="tee")
    assert S.expand("white tee", [tee])[0] == ["white tee", "white t-shirt", "white tshirt"]
    assert S.expand("white t-shirt", [tee])[0] == ["white t-shirt"]
    phrase = S.Synonym(3, "equivalent", ("sneakers", "running shoes"))
    assert S.expand("red running shoes", [phrase])[0] == ["red running shoes", "red sneakers"]


def test_expansion_is_capped_and_skips_disabled():
    many = S.Synonym(1, "equivalent", tuple(f"w{i}" for i in range(10)))
    assert len(S.expand("w0", [many])[0]) == S.MAX_VARIANTS
    off = S.Synonym(2, "equivalent", ("a", "b"), enabled=False)
    assert S.expand("a", [off])[0] == ["a"]


@pytest.mark.parametrize(("syn", "field"), [
    (S.Synonym(1, "similar", ("a", "b")), "kind"),
    (S.Synonym(1, "equivalent", ("a",)), "synonyms"),
    (S.Synonym(1, "equivalent", ("a", "b"), term="a"), "term"),
    (S.Synonym(1, "one-way", ("a",)), "term"),
    (S.Synonym(1, "one-way", ("a",), term="a"), "synonyms"),
])
def test_synonym_validation_names_the_field(syn, field):
    with pytest.raises(InvalidInput) as err:
        S.validate_synonym(syn)
    assert err.value.field == field
