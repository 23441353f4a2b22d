"""Score a run's answers against a sample catalog's ground truth (truth.json).

Definitions (``score_against_truth`` returns all of these):

- **colour_accuracy**: top-1 accuracy of the predicted colour name (case and surrounding
  space ignored) over the *scored* products: the products in the truth, minus the corrupt
  ones, minus those the run reported as failed (``failed``). A scored product with no
  prediction counts as wrong (``colour_missing`` says how many), so dropping items
  silently cannot raise the score. ``colour_n`` is the number scored.
- **duplicate_precision / recall / f1**: over unordered pairs of product ids. A group of
  k ids implies k(k-1)/2 pairs; predicted pairs are compared with the truth's pairs.
  Pairs the truth lists as ``mirror_symmetric_pairs`` (a nearly symmetric product and
  its mirror image: the same picture either way) count neither way.
  ``duplicate_recall_by_edit``: {edit: [found, true]}, a pair named by the edits its
  copies went through (``duplicate_transform``; two copies of one original: "a+b").
- **colourway_merges / mirror_merges**: the truth's colourway pairs (the same shot in
  another colour: another SKU) and mirror pairs that were predicted in one group;
  ``colourway_pairs`` / ``mirror_pairs`` say how many there were.
- **quality_precision / recall / f1**: over (product id, flag) pairs of the scored
  products, counting only flags both sides know (the truth's ``flag_names``); a
  detector's extra flags (say ``watermark``) and ids outside the truth are ignored.
  Copies whose truth has ``quality_truth: false`` (framing or light edits the truth does
  not model) are left out of the quality scores.
  ``quality_by_flag`` gives tp/fp/fn/precision/recall per flag.
- **corrupt_detected**: the fraction of the truth's corrupt files that the run refused
  with exactly the expected reason (``failed[id] == truth["corrupt"][id]``);
  ``corrupt_wrong_reason`` lists refusals with another reason, ``unexpected_failures``
  the ids that failed although the truth has them as good images.
- **audit_precision / recall / f1** (only when ``predicted_listed_wrong`` is given): the
  catalog audit's "listed colour is wrong" findings against ``listed_colour_wrong``.

Conventions for empty sets: precision is 1.0 when nothing was predicted (no false
claims), recall is 1.0 when there was nothing to find, F1 is 0.0 when both are 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vismerch.sample.write import FLAG_NAMES


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def group_pairs(groups: Iterable[Iterable[str]]) -> set[frozenset[str]]:
    """Unordered id pairs implied by groups (an id paired with itself is ignored)."""
    pairs: set[frozenset[str]] = set()
    for group in groups:
        ids = sorted(set(map(str, group)))
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                pairs.add(frozenset((a, b)))
    return pairs


def _edit_name(products: Mapping, pair: frozenset[str]) -> str:
    edits = sorted(str(products.get(pid, {}).get("duplicate_transform")) for pid in pair
                   if products.get(pid, {}).get("duplicate_transform"))
    return "+".join(edits) or "original"


def duplicate_scores(truth: Mapping, predicted_dup_groups: Iterable[Iterable[str]]) -> dict:
    """Pair precision/recall/F1, recall by edit kind, colourway and mirror merges (see
    the module docstring)."""
    groups = [list(map(str, g)) for g in predicted_dup_groups]
    true_pairs = group_pairs(truth.get("duplicate_groups", []))
    neutral = {frozenset(p) for p in truth.get("mirror_symmetric_pairs", [])} - true_pairs
    pred_pairs = group_pairs(groups) - neutral
    tp = len(true_pairs & pred_pairs)
    p, r, f = _prf(tp, len(pred_pairs) - tp, len(true_pairs) - tp)
    products = truth.get("products", {})
    by_edit: dict[str, list[int]] = {}
    for pair in true_pairs:
        counts = by_edit.setdefault(_edit_name(products, pair), [0, 0])
        counts[0] += pair in pred_pairs
        counts[1] += 1
    return {"duplicate_pairs_true": len(true_pairs), "duplicate_pairs_predicted": len(pred_pairs),
            "duplicate_precision": p, "duplicate_recall": r, "duplicate_f1": f,
            "duplicate_recall_by_edit": dict(sorted(by_edit.items())),
            "colourway_pairs": len(truth.get("colourway_pairs", [])),
            "colourway_merges": len(merged_pairs(truth, groups, "colourway_pairs")),
            "mirror_pairs": len(truth.get("mirror_pairs", [])),
            "mirror_merges": len(merged_pairs(truth, groups, "mirror_pairs"))}


def merged_pairs(truth: Mapping, predicted_dup_groups: Iterable[Iterable[str]],
                 key: str) -> list[tuple[str, str]]:
    """The truth's ``key`` pairs (``colourway_pairs``, ``mirror_pairs``) that were predicted
    in one group: the look-alikes that should have stayed apart."""
    group_of = {str(pid): k for k, g in enumerate(predicted_dup_groups) for pid in g}
    return [(a, b) for a, b in truth.get(key, []) if a in group_of and group_of.get(b) == group_of[a]]


def _norm(name: str | None) -> str | None:
    return name.strip().lower() if isinstance(name, str) else None


def score_against_truth(
    truth: Mapping,
    predicted_colours: Mapping[str, str | None],
    predicted_dup_groups: Iterable[Iterable[str]],
    predicted_flags: Mapping[str, Iterable[str]],
    failed: Mapping[str, str] | None = None,
    predicted_listed_wrong: Iterable[str] | None = None,
) -> dict:
    """Compare predictions with ``truth`` (the parsed truth.json); see the module doc."""
    failed = dict(failed or {})
    corrupt = dict(truth.get("corrupt", {}))
    products = {pid: p for pid, p in truth["products"].items() if pid not in corrupt}
    scored = [pid for pid in products if pid not in failed]

    missing = sum(1 for pid in scored if _norm(predicted_colours.get(pid)) is None)
    correct = sum(1 for pid in scored
                  if _norm(predicted_colours.get(pid)) == _norm(products[pid]["colour"]))
    result: dict = {
        "colour_n": len(scored),
        "colour_accuracy": correct / len(scored) if scored else 0.0,
        "colour_missing": missing,
    }

    predicted_dup_groups = [list(g) for g in predicted_dup_groups]
    result.update(duplicate_scores(truth, predicted_dup_groups))

    known = set(truth.get("meta", {}).get("flag_names", FLAG_NAMES))
    judged = [pid for pid in scored if products[pid].get("quality_truth", True)]
    t_set = {(pid, fl) for pid in judged for fl in products[pid].get("flags", []) if fl in known}
    p_set = {(pid, fl) for pid in judged for fl in predicted_flags.get(pid, ()) if fl in known}
    tp = len(t_set & p_set)
    p, r, f = _prf(tp, len(p_set) - tp, len(t_set) - tp)
    result.update(quality_precision=p, quality_recall=r, quality_f1=f)
    by_flag = {}
    for flag in sorted({fl for _, fl in t_set | p_set}):
        t_f = {x for x in t_set if x[1] == flag}
        p_f = {x for x in p_set if x[1] == flag}
        tp_f = len(t_f & p_f)
        pf, rf, _ = _prf(tp_f, len(p_f) - tp_f, len(t_f) - tp_f)
        by_flag[flag] = {"tp": tp_f, "fp": len(p_f) - tp_f, "fn": len(t_f) - tp_f,
                         "precision": pf, "recall": rf}
    result["quality_by_flag"] = by_flag

    right = [pid for pid, reason in corrupt.items() if failed.get(pid) == reason]
    result.update(
        corrupt_n=len(corrupt),
        corrupt_detected=len(right) / len(corrupt) if corrupt else 1.0,
        corrupt_wrong_reason={pid: failed[pid] for pid in corrupt
                              if pid in failed and failed[pid] != corrupt[pid]},
        unexpected_failures=sorted(pid for pid in failed if pid in products),
    )

    if predicted_listed_wrong is not None:
        t_wrong = set(truth.get("listed_colour_wrong", [])) - corrupt.keys()
        p_wrong = {str(pid) for pid in predicted_listed_wrong} & products.keys()
        tp = len(t_wrong & p_wrong)
        p, r, f = _prf(tp, len(p_wrong) - tp, len(t_wrong) - tp)
        result.update(audit_precision=p, audit_recall=r, audit_f1=f)
    return result
