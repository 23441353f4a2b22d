"""score_against_truth on small hand-computed examples."""

from __future__ import annotations

import pytest

from vismerch.sample.evaluate import group_pairs, score_against_truth

TRUTH = {
    "meta": {"flag_names": ["blur", "under-exposed", "off-centre", "too-small"]},
    "products": {
        "a": {"colour": "red", "flags": []},
        "b": {"colour": "blue", "flags": ["blur"]},
        "c": {"colour": "green", "flags": ["off-centre", "too-small"]},
        "d": {"colour": "navy", "flags": []},
        "e": {"colour": "black", "flags": ["under-exposed"]},
    },
    "duplicate_groups": [["a", "d"], ["b", "c", "e"]],  # 1 + 3 = 4 true pairs
    "corrupt": {"x": "truncated", "y": "empty-file"},
    "listed_colour_wrong": ["a", "c"],
}
FAILED = {"x": "truncated", "y": "not-an-image", "e": "corrupt"}


def score(**kw):
    args = {
        "predicted_colours": {"a": " Red", "b": "navy", "c": "green", "e": "black"},
        "predicted_dup_groups": [["a", "d"], ["b", "c"], ["x", "e"]],
        "predicted_flags": {"a": {"blur"}, "b": {"blur", "watermark"}, "c": {"off-centre"},
                            "e": {"under-exposed"}, "zz": {"blur"}},
        "failed": FAILED,
    }
    args.update(kw)
    return score_against_truth(TRUTH, **args)


def test_colour_accuracy_skips_corrupt_and_failed_and_counts_missing_as_wrong():
    s = score()
    # scored: a, b, c, d (e failed; x, y corrupt); right: a (case/space ignored), c
    assert s["colour_n"] == 4
    assert s["colour_accuracy"] == pytest.approx(2 / 4)
    assert s["colour_missing"] == 1  # d


def test_duplicate_pairs():
    s = score()
    # predicted pairs {a,d} {b,c} {x,e}: tp 2, fp 1; true pairs 4 -> fn 2
    assert s["duplicate_pairs_true"] == 4 and s["duplicate_pairs_predicted"] == 3
    assert s["duplicate_precision"] == pytest.approx(2 / 3)
    assert s["duplicate_recall"] == pytest.approx(2 / 4)
    assert s["duplicate_f1"] == pytest.approx(4 / 7)


def test_quality_flags_only_known_flags_and_scored_products():
    s = score()
    # truth over a-d: (b,blur) (c,off-centre) (c,too-small); predicted: (a,blur) (b,blur)
    # (c,off-centre); "watermark", the failed e and the unknown id zz are ignored
    assert s["quality_precision"] == pytest.approx(2 / 3)
    assert s["quality_recall"] == pytest.approx(2 / 3)
    assert s["quality_f1"] == pytest.approx(2 / 3)
    by = s["quality_by_flag"]
    assert by["blur"] == {"tp": 1, "fp": 1, "fn": 0, "precision": 0.5, "recall": 1.0}
    assert by["too-small"]["fn"] == 1 and by["too-small"]["recall"] == 0.0
    assert "watermark" not in by and "under-exposed" not in by


def test_corrupt_detection_needs_the_expected_reason():
    s = score()
    assert s["corrupt_n"] == 2
    assert s["corrupt_detected"] == pytest.approx(0.5)  # x right, y refused for another reason
    assert s["corrupt_wrong_reason"] == {"y": "not-an-image"}
    assert s["unexpected_failures"] == ["e"]
    assert score(failed=None)["corrupt_detected"] == 0.0


def test_audit_scores_only_when_asked():
    assert "audit_f1" not in score()
    s = score(predicted_listed_wrong=["a", "d", "x"])  # x is corrupt: ignored
    assert (s["audit_precision"], s["audit_recall"], s["audit_f1"]) == (0.5, 0.5, 0.5)


def test_empty_prediction_conventions():
    s = score(predicted_dup_groups=[], predicted_flags={})
    assert s["duplicate_precision"] == 1.0 and s["duplicate_recall"] == 0.0
    assert s["duplicate_f1"] == 0.0
    assert s["quality_precision"] == 1.0 and s["quality_recall"] == 0.0
    nothing = {"products": {"a": {"colour": "red", "flags": []}}, "duplicate_groups": []}
    s = score_against_truth(nothing, {"a": "red"}, [], {})
    assert s["duplicate_f1"] == 1.0 and s["quality_f1"] == 1.0 and s["colour_accuracy"] == 1.0
    assert s["corrupt_detected"] == 1.0 and s["corrupt_n"] == 0


def test_perfect_answers_score_one():
    products = {k: v for k, v in TRUTH["products"].items()}
    s = score_against_truth(
        TRUTH,
        {k: v["colour"] for k, v in products.items()},
        [["e", "c", "b"], ["d", "a"]],
        {k: set(v["flags"]) for k, v in products.items()},
        failed=dict(TRUTH["corrupt"]),
        predicted_listed_wrong=TRUTH["listed_colour_wrong"],
    )
    for key in ("colour_accuracy", "duplicate_f1", "quality_f1", "corrupt_detected", "audit_f1"):
        assert s[key] == 1.0, key


def test_group_pairs():
    assert group_pairs([["a", "b", "c"], ["d"], ["a", "a"]]) == {
        frozenset("ab"), frozenset("ac"), frozenset("bc")}


def _dup_truth() -> dict:
    products = {p: {"colour": "red", "flags": []} for p in "abcdefgh"}
    products["b"]["duplicate_transform"] = "pad"
    products["c"]["duplicate_transform"] = "crop"
    products["e"]["duplicate_transform"] = "light"
    products["e"]["quality_truth"] = False
    products["e"]["flags"] = ["blur"]
    return {"products": products, "duplicate_groups": [["a", "b", "c"], ["d", "e"]],
            "colourway_pairs": [["a", "f"]], "mirror_pairs": [["d", "g"]],
            "mirror_symmetric_pairs": [["a", "h"]]}


def test_duplicate_scores_by_edit_and_lookalike_merges():
    from vismerch.sample.evaluate import duplicate_scores, merged_pairs

    truth = _dup_truth()
    # a-h (a symmetric product's mirror image) counts neither way; a-f is a colourway merge
    got = duplicate_scores(truth, [["a", "b", "h"], ["d", "e"], ["c", "f"]])
    assert got["duplicate_pairs_true"] == 4
    assert got["duplicate_pairs_predicted"] == 4  # a-b, b-h, d-e, c-f (a-h left out)
    assert got["duplicate_precision"] == pytest.approx(2 / 4)
    assert got["duplicate_recall"] == pytest.approx(2 / 4)
    assert got["duplicate_recall_by_edit"] == {"crop": [0, 1], "crop+pad": [0, 1],
                                               "light": [1, 1], "pad": [1, 1]}
    assert got["colourway_merges"] == 0 and got["mirror_merges"] == 0
    merged = duplicate_scores(truth, [["a", "b", "c", "f"], ["d", "e", "g"]])
    assert merged["colourway_merges"] == 1 and merged["mirror_merges"] == 1
    assert merged["duplicate_recall"] == 1.0
    groups = [["a", "b", "c", "f"], ["d", "e"], ["g"]]  # which look-alikes merged, by name
    assert merged_pairs(truth, groups, "colourway_pairs") == [("a", "f")]
    assert merged_pairs(truth, groups, "mirror_pairs") == []


def test_copies_without_quality_truth_are_not_scored_for_quality():
    truth = _dup_truth()
    scores = score_against_truth(truth, {}, [], {"e": []})  # e's blur is not truth
    assert scores["quality_recall"] == 1.0 and scores["quality_by_flag"] == {}
