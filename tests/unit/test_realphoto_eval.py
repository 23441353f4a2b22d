"""benchmarks/realphoto_eval.py: the set it builds and the scores it reports, on stamps
and backgrounds the test draws (no package is fetched)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("realphoto_eval", ROOT / "benchmarks" / "realphoto_eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stamp(path: Path, colour, size=(200, 160)) -> None:
    im = Image.new("RGBA", size, (0, 0, 0, 0))
    ImageDraw.Draw(im).ellipse([10, 10, size[0] - 10, size[1] - 10], fill=(*colour, 255))
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path)


def test_recall_counts_a_hit_when_a_near_neighbour_shares_the_category(bench):
    truth = {"products": {p: {"original": True, "category": c} for p, c in
                          (("a", "food/fruit"), ("b", "food/fruit"), ("c", "household/tools"),
                           ("d", "household/tools"), ("e", "food/veg"))}}
    ids = ["a", "b", "c", "d", "e"]
    sim = np.array([[1, .9, .1, .1, .1], [.9, 1, .1, .1, .1], [.1, .1, 1, .2, .8],
                    [.1, .1, .2, 1, .9], [.1, .1, .8, .9, 1]])
    got = bench.recall_at(truth, ids, sim, ks=(1, 2))
    assert got["queries"] == 4  # "e" is alone in its folder
    assert got["recall@1"] == 0.5 and got["recall@2"] == 1.0  # c and d reach e first
    dept = bench.recall_at(truth, ids, sim, ks=(1,), level=1)  # food, household
    assert dept["queries"] == 5 and dept["recall@1"] == 0.4  # e reaches d first


def test_the_summary_states_each_target_with_the_default_similar_mode(bench):
    result = {"duplicates": {"vismerch": {"duplicate_f1": 0.97272, "colourway_merges": 1,
                                          "colourway_pairs": 53, "mirror_merges": 0, "mirror_pairs": 39}},
              "colour": {"vismerch": {"family_top1": 0.92}},
              "similar": {"department": {"vismerch": {"mode": "style", "recall@1": 0.614,
                                                      "recall@5": 0.864}}}}
    assert bench.summary(result) == {
        "duplicate_f1": 0.973, "colourway_merges": "1 of 53", "mirror_merges": "0 of 39",
        "colour_family_top1": 0.92, "similar_mode": "style",
        "similar_department_recall@1": 0.614, "similar_department_recall@5": 0.864}
    assert bench.COLOUR_LABELS["grapes"] == "purple" and len(bench.COLOUR_LABELS) == 74


def test_compose_and_recolour(bench):
    product = Image.new("RGBA", (100, 50), (200, 30, 30, 255))
    bgs = [Image.new("RGB", (300, 200), (10, 120, 10))]
    rng = np.random.default_rng(0)
    full = bench.compose(product, {**bench.draw_params(rng, "fullframe", 1), "jitter": [0, 0]}, bgs)
    a = np.asarray(full)
    assert (a[a.shape[0] // 2, :, 0] > 150).mean() >= 0.8  # the product fills the frame's width
    cut = np.asarray(bench.compose(product, bench.draw_params(rng, "cutout", 1), bgs))
    assert cut[0, 0].min() > 230  # a studio backdrop, not the scene
    turned = np.asarray(bench.recolour(product, 0.5))
    assert turned[0, 0, 3] == 255 and turned[0, 0, 0] < 100 and turned[0, 0, 2] > 100


def test_the_set_has_copies_by_kind_and_edit_and_colourways_of_coloured_stamps(bench, tmp_path,
                                                                               monkeypatch):
    stamps = tmp_path / "stamps"
    for k in range(8):
        _stamp(stamps / "food" / "fruit" / f"red{k}.png", (220, 40 + 10 * k, 30))
        _stamp(stamps / "household" / f"grey{k}.png", (128 + k, 128, 128))
    _stamp(stamps / "symbols" / "letter.png", (0, 0, 255))  # left out
    _stamp(stamps / "food" / "cartoon" / "drawn.png", (0, 0, 255))  # left out
    monkeypatch.setattr(bench, "backgrounds", lambda: [Image.new("RGB", (400, 300), (90, 60, 30))])
    truth = bench.build(tmp_path / "set", stamps, seed=3)
    prods = truth["products"]
    originals = [p for p in prods.values() if p.get("original")]
    assert len(originals) == 16 and {p["category"] for p in originals} == {"food/fruit", "household"}
    copies = [p for p in prods.values() if p.get("duplicate_transform")]
    assert copies and all(p["duplicate_transform"].split(":")[0] in bench.KINDS for p in copies)
    assert all(p["duplicate_transform"].split(":")[1] in bench.EDIT_KINDS for p in copies)
    for a, b in truth["colourway_pairs"]:  # only saturated stamps get another colourway
        assert prods[a]["stamp"].startswith("red") and prods[b]["lookalike"] == "colourway"
    assert json.loads((tmp_path / "set" / "truth.json").read_text()) == truth
    assert all((tmp_path / "set" / p["image"]).exists() for p in prods.values())
