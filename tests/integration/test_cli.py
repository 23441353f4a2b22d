"""The CLI end to end on a small generated catalog: ingest, then every read command's
JSON shape, exit codes, and incremental re-runs."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from vismerch.cli import app, main
from vismerch.sample import generate_catalog

runner = CliRunner()


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    return generate_catalog(tmp_path_factory.mktemp("cat"), n=40, seed=5)


@pytest.fixture(scope="module")
def store(catalog, tmp_path_factory):
    path = tmp_path_factory.mktemp("store")
    result = runner.invoke(app, ["ingest", str(catalog.manifest_path), "--store", str(path),
                                 "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    truth = catalog.truth()
    assert summary["total"] == catalog.n_images  # 40 products + generated colourways/mirrors
    assert summary["failed"] == len(truth["corrupt"])
    assert summary["ingested"] == catalog.n_images - len(truth["corrupt"])
    return path


def _json(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_tags_json_shape(store):
    tags = _json(["tags", str(store), "--json"])
    assert tags and all(set(t) == {"id", "colours", "multicolour", "flags"} for t in tags)
    first = next(t for t in tags if t["colours"])
    assert set(first["colours"][0]) == {"name", "hex", "weight"}
    # multicolour is its own field: the colour list holds measured colours only, and the
    # verdict is that no colour covers the default 55% of the product
    assert all(c["name"] != "multicolour" and len(c["hex"]) == 7 for t in tags for c in t["colours"])
    assert all(t["multicolour"] == (t["colours"][0]["weight"] < 0.55) for t in tags if t["colours"])
    assert all(set(f) == {"name", "value"} for t in tags for f in t["flags"])


def test_dupes_json_shape_and_planted_groups(store, catalog):
    groups = _json(["dupes", str(store), "--json"])
    for g in groups:
        assert set(g) == {"group", "representative", "members"}
        assert g["representative"] in g["members"] and len(g["members"]) >= 2
    planted = [set(g) for g in catalog.truth()["duplicate_groups"]]
    found = [set(g["members"]) for g in groups]
    assert any(p <= f for p in planted for f in found)


def test_similar_and_colour_search_json(store):
    tags = _json(["tags", str(store), "--json"])
    pid = tags[0]["id"]
    hits = _json(["similar", str(store), pid, "-k", "5", "--json"])
    assert len(hits) == 5 and pid not in {h["id"] for h in hits}
    assert all(set(h) == {"id", "score"} for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    named = [t["colours"][0]["name"] for t in tags if t["colours"]]
    colour = named[0]
    found = _json(["search", str(store), "--colour", colour, "-k", "3", "--json"])
    assert len(found) == 3 and all(set(h) == {"id", "score"} for h in found)
    by_hex = _json(["search", str(store), "--colour", "#1f2a4d", "-k", "3", "--json"])
    assert len(by_hex) == 3


def test_quality_json(store):
    flagged = _json(["quality", str(store), "--json"])
    assert all(set(d) == {"id", "flags"} and d["flags"] for d in flagged)


def test_bad_usage_exits_2_with_a_message(store, tmp_path, capsys):
    assert main(["search", str(store), "--colour", "not-a-colour"]) == 2
    assert main(["similar", str(store), "no-such-id"]) == 2
    assert main(["tags", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "not-a-colour" in err and "no-such-id" in err and "not a vismerch store" in err


def test_rerun_skips_everything_and_a_changed_image_is_refeatured(catalog, tmp_path):
    src = tmp_path / "cat"
    shutil.copytree(catalog.root, src)
    manifest = src / catalog.manifest_path.name
    store = tmp_path / "store"
    first = _json(["ingest", str(manifest), "--store", str(store), "--workers", "1", "--json"])
    again = _json(["ingest", str(manifest), "--store", str(store), "--workers", "1", "--json"])
    assert again["skipped"] == first["ingested"] and again["ingested"] == 0
    # replace one good image's bytes with another product's picture
    from vismerch.catalog.store import Store

    with Store.open(store) as s:
        products = s.products()
        a, b = products[0], products[-1]
    shutil.copyfile(b.image_path, a.image_path)
    third = _json(["ingest", str(manifest), "--store", str(store), "--workers", "1", "--json"])
    assert third["ingested"] == 1 and third["skipped"] == first["ingested"] - 1
    with Store.open(store) as s:
        assert s.product(a.id).sha256 == s.product(b.id).sha256


def test_nothing_ingestable_exits_1(tmp_path):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.jpg").write_bytes(b"")
    (tmp_path / "imgs" / "b.png").write_text("hello")
    assert main(["ingest", str(tmp_path / "imgs"), "--store", str(tmp_path / "s"), "--workers", "1"]) == 1


def test_python_api_answers_as_the_cli(store):
    """README's Python API (a path or an open Store) gives what the CLI prints."""
    import vismerch

    tags = _json(["tags", str(store), "--json"])
    pid = tags[0]["id"]
    cli_similar = _json(["similar", str(store), pid, "-k", "4", "--json"])
    cli_colour = _json(["search", str(store), "--colour", "navy", "-k", "5", "--json"])
    assert vismerch.similar(store, pid, k=4) == cli_similar
    with vismerch.Store.open(store) as s:
        assert vismerch.similar(s, pid, k=4) == cli_similar
        assert vismerch.colour_search(s, "navy", k=5) == cli_colour
        assert vismerch.search(s, colour="navy", k=5) == cli_colour
    with pytest.raises(vismerch.errors.UsageError, match="no-such-id"):
        vismerch.similar(store, "no-such-id")


def test_collections_rules_and_arrange_with_schedules_and_reach(store):
    """`collections --create --parent`, `rules add --starts --ends --reach`, `rules update`
    and `arrange --at`: a scheduled subtree pin reaches the sub-collection inside its window
    only, and stops reaching it with reach collection."""
    from datetime import date, timedelta

    path = str(store)
    big = max(_json(["collections", path, "--json"]), key=lambda c: c["size"])
    made = _json(["collections", path, "--create", "cli-sub", "--parent", big["name"], "--json"])
    assert (made["parent"], made["size"]) == (big["name"], big["size"])
    assert main(["collections", path, "--delete", big["name"]]) == 2  # a category: refused

    def order(name, *extra):
        slots = _json(["arrange", path, "-c", name, "--mode", "plain", "--json", *extra])
        return slots

    plain = order("cli-sub")
    last = [s["id"] for s in plain if "flagged" not in s["reason"]][-1]
    start = date.today() + timedelta(days=10)
    inside, after = (start + timedelta(days=1)).isoformat(), (start + timedelta(days=5)).isoformat()
    rule = _json(["rules", "add", path, "pin", "-c", big["name"], "--product", last,
                  "--position", "1", "--oos", "keep", "--starts", start.isoformat(),
                  "--ends", (start + timedelta(days=3)).isoformat(), "--reach", "subtree", "--json"])
    try:
        assert rule["active"] is False and rule["starts_at"] == f"{start.isoformat()}T00:00:00Z"
        assert order("cli-sub")[0]["id"] != last  # not yet
        top = order("cli-sub", "--at", inside)[0]
        assert (top["id"], top["kind"]) == (last, "pinned")  # inside the window, from the parent
        assert order("cli-sub", "--at", after)[0]["id"] != last  # over
        listed = _json(["rules", "list", path, "-c", "cli-sub", "--json"])
        assert [(r["id"], r["inherited_from"]) for r in listed] == [(rule["id"], big["name"])]
        assert rule["id"] in {r["id"] for r in _json(["rules", "list", path, "--inactive", "--json"])}

        assert _json(["rules", "update", path, str(rule["id"]), "--reach", "collection",
                      "--json"])["reach"] == "collection"
        assert order("cli-sub", "--at", inside)[0]["id"] != last
        assert order(big["name"], "--at", inside)[0]["id"] == last
        assert _json(["rules", "list", path, "-c", "cli-sub", "--json"]) == []
        assert _json(["rules", "update", path, str(rule["id"]), "--always", "--json"])["active"] is True

        assert main(["rules", "add", path, "boost", "--where", "true", "--starts", "2026-12-24",
                     "--ends", "2026-12-01"]) == 2
        assert main(["rules", "add", path, "boost", "--where", "true", "--reach", "subtree"]) == 2
        assert main(["collections", path, "--create", "x", "--parent", "no-such"]) == 2
    finally:
        assert main(["rules", "remove", path, str(rule["id"])]) == 0
        assert main(["collections", path, "--delete", "cli-sub"]) == 0
