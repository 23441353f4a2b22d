"""The pure arrangement: pins, look-alikes at every width, business floor, modes,
quality gate, near-duplicates, determinism and per-slot reasons."""

from __future__ import annotations

import numpy as np
import pytest
from merch_fixtures import lookalike_catalog

from vismerch.arrange.engine import ArrangeOptions, Products, arrange
from vismerch.arrange.explain import count_lookalikes, dcg, lookalike_adjacencies
from vismerch.arrange.scoring import sort_by_score
from vismerch.errors import UsageError
from vismerch.features.colourtable import family_of

WIDTHS = (2, 3, 4, 5)


def run(cat, **kw):
    return arrange(Products(cat["ids"], cat["scores"], cat["vectors"],
                            colour_family=cat.get("colour_family")), **kw)


def test_removes_lookalike_neighbours_at_every_width_and_keeps_business():
    cat = lookalike_catalog(n_styles=40, per_style=4)
    result = run(cat, columns=WIDTHS)
    plain = sort_by_score(cat["scores"], cat["ids"])
    v = cat["vectors"]
    for c in WIDTHS:
        before = count_lookalikes(v[plain], c, 0.9, 48)
        after = count_lookalikes(v[result.order], c, 0.9, 48)
        assert before >= 5, "the fixture must start with look-alike neighbours"
        assert after <= 0.2 * before, (c, before, after)
    ratio = dcg(cat["scores"][result.order], 48) / dcg(cat["scores"][plain], 48)
    assert ratio >= 0.98
    assert result.business["ratio"] >= 0.98
    assert sorted(result.ids) == sorted(cat["ids"])  # a permutation: nothing lost


def test_single_width_only_optimises_that_width():
    cat = lookalike_catalog(n_styles=40, per_style=4, seed=1)
    result = run(cat, columns=4)
    assert [b.columns for b in result.breakpoints] == [4]
    assert result.breakpoints[0].in_depth <= 0.2 * result.breakpoints[0].plain_in_depth


def test_breakpoint_reports_worst_first_and_match_a_recount():
    cat = lookalike_catalog(n_styles=6, per_style=6, seed=2)  # too few styles to fix it all
    result = run(cat, columns=WIDTHS)
    counts = [b.in_depth for b in result.breakpoints]
    assert counts == sorted(counts, reverse=True)
    assert {b.columns for b in result.breakpoints} == set(WIDTHS)
    v = cat["vectors"][result.order]
    for b in result.breakpoints:
        assert b.in_depth == len(lookalike_adjacencies(v, b.columns, 0.9, 48))
        cosines = [p["cosine"] for p in b.pairs]
        assert cosines == sorted(cosines, reverse=True)
        for p in b.pairs:
            a, c = p["positions"]
            assert result.ids[a - 1] == p["a"] and result.ids[c - 1] == p["b"]
            assert c - a in (1, b.columns) and p["cosine"] >= 0.9


def test_business_floor_limits_diversity():
    # one style of 5 look-alikes outsells everything: separating them all costs > 2%
    rng = np.random.default_rng(3)
    centre = rng.standard_normal(16)
    vecs = [centre + 0.01 * rng.standard_normal(16) for _ in range(5)]
    vecs += [rng.standard_normal(16) for _ in range(60)]
    vecs = np.array([v / np.linalg.norm(v) for v in vecs], np.float32)
    scores = np.r_[np.linspace(1.0, 0.95, 5), np.linspace(0.5, 0.1, 60)]
    ids = [f"P{i:02d}" for i in range(65)]
    for floor in (0.98, 0.9):
        result = arrange(Products(ids, scores, vecs), columns=WIDTHS,
                         options=ArrangeOptions(business_floor=floor))
        assert result.business["ratio"] >= floor - 1e-9
    strict = arrange(Products(ids, scores, vecs), columns=WIDTHS,
                     options=ArrangeOptions(business_floor=0.98))
    loose = arrange(Products(ids, scores, vecs), columns=WIDTHS,
                    options=ArrangeOptions(business_floor=0.5))
    assert sum(b.in_depth for b in loose.breakpoints) < sum(b.in_depth for b in strict.breakpoints)


@pytest.mark.parametrize("mode", ["mix", "flow"])
@pytest.mark.parametrize("columns", [3, WIDTHS])
def test_pins_are_always_honoured(mode, columns):
    cat = lookalike_catalog(n_styles=10, per_style=4, seed=4)
    pins = {0: 39, 5: 0, 6: 1, 17: 12}  # the worst product on top, look-alikes side by side
    result = run(cat, columns=columns, mode=mode, pins=pins)
    for slot, item in pins.items():
        assert result.order[slot] == item
        assert result.slots[slot].kind == "pinned"
        assert "pinned to position" in result.slots[slot].reason


def test_pins_past_the_end_go_to_the_last_free_slots():
    ids = [f"P{i}" for i in range(5)]
    result = arrange(Products(ids, np.arange(5.0)), pins={99: 0, 4: 1}, columns=2)
    assert result.ids[4] == "P1" and result.ids[3] == "P0"
    assert "past the end" in result.warnings[0]


def test_deterministic_and_independent_of_input_order():
    cat = lookalike_catalog(n_styles=20, per_style=3, seed=5)
    a = run(cat, columns=WIDTHS)
    b = run(cat, columns=WIDTHS)
    assert a.ids == b.ids and [s.reason for s in a.slots] == [s.reason for s in b.slots]
    perm = np.random.default_rng(0).permutation(len(cat["ids"]))
    shuffled = {k: (np.asarray(v)[perm] if k != "ids" else [v[i] for i in perm])
                for k, v in cat.items()}
    shuffled["colour_family"] = list(shuffled["colour_family"])
    assert run(shuffled, columns=WIDTHS).ids == a.ids


def test_ties_break_by_id():
    result = arrange(Products(["b", "c", "a"], [1.0, 1.0, 1.0]), columns=3)
    assert result.ids == ["a", "b", "c"]


def test_colour_modes():
    # equal scores, no vectors: only colour decides
    fams = ["red"] * 10 + ["blue"] * 10 + ["green"] * 10 + ["yellow"] * 10
    rng = np.random.default_rng(6)
    fams = [fams[i] for i in rng.permutation(40)]
    ids = [f"P{i:02d}" for i in range(40)]
    scores = np.full(40, 0.5)

    def same_neighbours(order, c=4):
        f = [fams[i] for i in order]
        row = sum(f[p] == f[p + 1] for p in range(39) if (p + 1) % c)
        col = sum(f[p] == f[p + c] for p in range(40 - c))
        return row + col

    def changes(order):
        f = [fams[i] for i in order]
        return sum(f[p] != f[p + 1] for p in range(39))

    mix = arrange(Products(ids, scores, colour_family=fams), columns=4, mode="mix")
    flow = arrange(Products(ids, scores, colour_family=fams), columns=4, mode="flow")
    plain = sort_by_score(scores, ids)
    assert same_neighbours(mix.order) < same_neighbours(plain)
    assert same_neighbours(mix.order) < same_neighbours(flow.order)
    assert changes(flow.order) < changes(plain)
    assert changes(flow.order) < changes(mix.order)


def test_quality_gate_keeps_flagged_below_the_first_screen_unless_pinned():
    ids = [f"P{i:02d}" for i in range(30)]
    scores = np.linspace(1, 0, 30)
    flagged = np.zeros(30, bool)
    flagged[[0, 1, 2]] = True
    names = {0: ["blur"], 1: ["low-resolution"], 2: ["blur"]}
    result = arrange(Products(ids, scores, flagged=flagged, flag_names=names), columns=4,
                     pins={3: 2})
    first_screen = result.params["first_screen"]
    assert first_screen == 8
    positions = {pid: k for k, pid in enumerate(result.ids)}
    assert positions["P00"] >= first_screen and positions["P01"] >= first_screen
    assert positions["P02"] == 3  # pinned wins over the gate
    reason = result.slots[positions["P00"]].reason
    assert "flagged (blur): held below the first screen" in reason
    off = arrange(Products(ids, scores, flagged=flagged), columns=4,
                  options=ArrangeOptions(quality_gate=False))
    assert off.ids[0] == "P00"


def test_near_duplicates_spaced_or_collapsed():
    ids = [f"P{i:02d}" for i in range(24)]
    scores = np.linspace(1, 0.9, 24)
    group = np.full(24, -1)
    group[[0, 1, 2]] = 7  # three copies of one photo at the top
    rep = np.zeros(24, bool)
    rep[1] = True
    dupes = Products(ids, scores, duplicate_group=group, representative=rep)
    spaced = arrange(dupes, columns=4)
    pos = sorted(spaced.ids.index(f"P0{i}") for i in range(3))
    assert min(np.diff(pos)) > 4  # never neighbours at 4 columns (row or column)
    collapsed = arrange(dupes, columns=4,
                        options=ArrangeOptions(duplicates="collapse"))
    assert "P00" not in collapsed.ids and "P02" not in collapsed.ids
    assert collapsed.ids[0] == "P01"  # the representative ranks like its group's best
    assert collapsed.collapsed == {"P01": ["P00", "P02"]}
    pinned = arrange(dupes, columns=4,
                     pins={5: 2}, options=ArrangeOptions(duplicates="collapse"))
    assert pinned.ids[5] == "P02" and "P01" not in pinned.ids  # a pinned member is the hero


def test_every_slot_is_explained():
    cat = lookalike_catalog(n_styles=12, per_style=4, seed=7)
    result = run(cat, columns=WIDTHS, notes={0: ["boosted +0.20 by rule #3 (x)"]})
    assert [s.position for s in result.slots] == list(range(1, len(cat["ids"]) + 1))
    assert all(s.reason for s in result.slots)
    moved = [s for s in result.slots if s.position > s.plain_position]
    assert moved and all("moved for diversity" in s.reason or "shifted" in s.reason for s in moved)
    assert any("look-alike of" in s.reason for s in moved)
    assert "boosted +0.20 by rule #3" in next(s.reason for s in result.slots if s.id == "S000-0")


def test_displacement_is_bounded_by_the_window():
    cat = lookalike_catalog(n_styles=50, per_style=5, seed=8)
    window = 12
    result = run(cat, columns=WIDTHS, options=ArrangeOptions(window=window))
    assert max(s.position - s.plain_position for s in result.slots) <= window


def test_colour_family_from_the_colour_table():
    assert family_of("navy") == "blue" and family_of("Burgundy") == "red"
    assert family_of("no-such-colour") is None and family_of(None) is None


@pytest.mark.parametrize("kw, words", [
    ({"scores": [1.0]}, "expected 3 scores"),
    ({"mode": "zigzag"}, "unknown arrangement mode"),
    ({"columns": 0}, "positive"),
    ({"pins": {0: 5}}, "outside"),
    ({"pins": {0: 1, 1: 1}}, "pinned to two slots"),
    ({"ids": ["a", "a", "b"]}, "unique"),
])
def test_bad_input_is_a_usage_error(kw, words):
    args = {"ids": ["a", "b", "c"], "scores": [1.0, 2.0, 3.0], "mode": "mix", "columns": 2,
            "pins": None, **kw}
    with pytest.raises(UsageError) as info:
        arrange(Products(args["ids"], args["scores"]), mode=args["mode"], columns=args["columns"],
                pins=args["pins"])
    assert words in info.value.message


def test_empty_and_tiny_inputs():
    assert arrange(Products([], [])).ids == []
    assert arrange(Products(["x"], [0.3], np.ones((1, 4), np.float32)), columns=WIDTHS).ids == ["x"]
