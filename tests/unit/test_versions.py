"""Arrangement versions: save, list, diff, edit drafts (ETags), publish, roll back (with the
storefront grid rewritten each time), export."""

from __future__ import annotations

import csv
import io
import itertools
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from merch_fixtures import build_store

from vismerch.arrange import versions as V
from vismerch.arrange.layout import arrange_collection
from vismerch.catalog.grids import read_grid
from vismerch.cli import main
from vismerch.errors import Conflict, InvalidInput, NotFound, Stale, UsageError
from vismerch.service import versions as S
from vismerch.service.workspace import Workspace


@pytest.fixture
def store(tmp_path):
    products = [{"id": f"P{i}", "category": "dress", "sales": 10.0 - i, "price": 20.0, "stock": 3,
                 "title": f"Dress {i}"} for i in range(6)]
    s = build_store(tmp_path / "store", products)
    yield s
    s.close()


@pytest.fixture
def ws(store):
    with Workspace.open(store.path) as w:
        yield w


def _ids(ws, name):
    return S.get_version(ws, "dress", name).ids


def test_diff_orders():
    d = V.diff_orders(["a", "b", "c", "d"], ["c", "b", "a", "e"])
    assert d["moved"] == [{"id": "c", "from": 3, "to": 1, "delta": -2},
                          {"id": "a", "from": 1, "to": 3, "delta": 2}]
    assert d["added"] == [{"id": "e", "position": 4}]
    assert d["removed"] == [{"id": "d", "position": 4}]
    assert d["unchanged"] == 1


def test_save_list_show(store, ws):
    result = arrange_collection(store, "dress", columns=3)
    saved = S.save_order(ws, "dress", "v1", result, by="k1")
    assert saved.size == 6 and saved.created_by == "k1" and saved.editable
    assert saved.etag == f'"v{saved.id}-1"'
    v1 = S.get_version(ws, "dress", "v1")
    assert v1.ids == result.ids
    assert v1.items[0].reason == result.arrangement.slots[0].reason
    assert v1.params["columns"] == [3]
    with pytest.raises(Conflict):
        S.save_order(ws, "dress", "v1", result)  # names are unique per collection
    with pytest.raises(InvalidInput):
        S.save_order(ws, "dress", "published", result)
    with pytest.raises(NotFound):
        S.save_order(ws, "no-such", "v1", result)
    with pytest.raises(InvalidInput):
        S.save_order(ws, "dress", "twice", ["P1", "P1"])
    S.save_order(ws, "dress", "manual", ["P5", "P4", "P3"])
    listed = S.list_versions(ws, "dress")
    assert [(v.name, v.size, v.published) for v in listed.versions] == [
        ("v1", 6, False), ("manual", 3, False)]
    assert listed.etag == '"p0"' and listed.published is None
    with pytest.raises(NotFound):
        S.get_version(ws, "dress", "v9")


def test_save_draft_arranges_now(ws):
    draft = S.save_draft(ws, "dress", "auto", columns=[3, 2], mode="flow", by="k2")
    assert sorted(draft.ids) == [f"P{i}" for i in range(6)] and draft.params["mode"] == "flow"
    assert draft.params["columns"] == [3, 2] and all(s.reason for s in draft.items)
    with pytest.raises(InvalidInput) as bad:
        S.save_draft(ws, "dress", "x", mode="zigzag")
    assert bad.value.field == "mode"
    with pytest.raises(InvalidInput) as bad:
        S.save_draft(ws, "dress", "x", columns=[0])
    assert bad.value.field == "columns"
    with pytest.raises(Conflict):
        S.save_draft(ws, "dress", "auto")


def test_edit_draft_needs_its_current_etag_and_published_versions_never_change(ws):
    d = S.save_order(ws, "dress", "d", ["P0", "P1", "P2"])
    first = d.etag
    edited = S.edit_draft(ws, "dress", "d", ["P2", "P0", "P1", "P5"], expect=first, by="alice")
    assert edited.ids == ["P2", "P0", "P1", "P5"] and edited.revision == 2 and edited.etag != first
    assert edited.updated_by == "alice"
    assert [s.reason for s in edited.items] == ["moved by hand from 3", "moved by hand from 1",
                                                "moved by hand from 2", "added by hand"]
    with pytest.raises(Stale) as stale:  # a second editor who read the first ETag
        S.edit_draft(ws, "dress", "d", ["P1"], expect=first, by="bob")
    assert stale.value.current_etag == edited.etag.strip('"')
    assert _ids(ws, "d") == ["P2", "P0", "P1", "P5"]  # bob changed nothing
    with pytest.raises(InvalidInput) as bad:
        S.edit_draft(ws, "dress", "d", ["P0", "nope"], expect=edited.etag)
    assert bad.value.field == "ids[1]"
    with pytest.raises(InvalidInput):
        S.edit_draft(ws, "dress", "d", ["P0"], expect="garbage")
    S.publish(ws, "dress", "d")
    with pytest.raises(Conflict) as locked:
        S.edit_draft(ws, "dress", "d", ["P0"], expect=edited.etag)
    assert not isinstance(locked.value, Stale) and "published" in locked.value.message
    assert not S.get_version(ws, "dress", "d").editable


def test_diff_publish_rollback_rewrite_the_grid(store, ws):
    S.save_order(ws, "dress", "a", ["P0", "P1", "P2", "P3"])
    S.save_order(ws, "dress", "b", ["P2", "P1", "P0", "P5"])
    S.save_order(ws, "dress", "c", ["P5"])
    d = S.diff(ws, "dress", "a", "b")
    assert {m.id for m in d.moved} == {"P0", "P2"}
    assert d.added == ["P5"] and d.removed == ["P3"]
    assert d.added_at[0].position == 4 and d.removed_from[0].position == 4
    with pytest.raises(Conflict):
        S.rollback(ws, "dress")  # nothing published yet
    assert read_grid(store, "dress") is None
    states = [S.publish(ws, "dress", n).etag for n in ("a", "b", "c")]
    assert len(set(states)) == 3
    assert S.published_version(ws, "dress").name == "c"
    assert read_grid(store, "dress")["ids"] == ["P5"]
    assert S.diff(ws, "dress", "published", "a").b == "a"
    assert S.rollback(ws, "dress").published == "b"
    assert read_grid(store, "dress")["ids"] == ["P2", "P1", "P0", "P5"]
    assert S.rollback(ws, "dress").published == "a"
    assert read_grid(store, "dress")["version_name"] == "a"
    with pytest.raises(UsageError):
        S.rollback(ws, "dress")  # a was the first one
    S.publish(ws, "dress", "c")
    assert S.rollback(ws, "dress", to="a").published == "a"
    with pytest.raises(UsageError):
        S.rollback(ws, "dress", to="b")  # b is not below a in the publish history
    assert [v.published for v in S.list_versions(ws, "dress").versions] == [True, False, False]


def test_publish_and_rollback_refuse_a_stale_publication_state(store, ws):
    S.save_order(ws, "dress", "a", ["P0", "P1"])
    S.save_order(ws, "dress", "b", ["P1", "P0"])
    seen = S.list_versions(ws, "dress").etag
    first = S.publish(ws, "dress", "a", expect=seen)  # publisher 1
    with pytest.raises(Stale) as stale:  # publisher 2 read the same state
        S.publish(ws, "dress", "b", expect=seen)
    assert "published or rolled back since" in stale.value.message
    assert S.published_version(ws, "dress").name == "a" and read_grid(store, "dress")["ids"] == ["P0", "P1"]
    second = S.publish(ws, "dress", "b", expect=first.etag)
    with pytest.raises(Stale):
        S.rollback(ws, "dress", expect=first.etag)
    assert S.rollback(ws, "dress", expect=second.etag).published == "a"
    # a reviewer's version ETag: publishing a draft edited after the review is refused
    draft = S.save_order(ws, "dress", "c", ["P0"])
    S.edit_draft(ws, "dress", "c", ["P1"], expect=draft.etag)
    with pytest.raises(Stale):
        S.publish(ws, "dress", "c", expect=S.publication_etag(ws, "dress"), version_etag_seen=draft.etag)


def test_racing_writers_with_one_etag_exactly_one_wins(store, ws):
    """Threads (a store connection each, as server requests have) write with the same ETag at
    once: the check and the write share one transaction, so exactly one lands."""
    draft = S.save_order(ws, "dress", "race", ["P0", "P1", "P2", "P3"])
    S.save_order(ws, "dress", "other", ["P5", "P4"])
    orders = [list(p) for p in itertools.permutations(["P0", "P1", "P2", "P3"])][1:9]
    barrier = threading.Barrier(len(orders))

    def edit(order):
        ws.store  # noqa: B018 - this thread's connection, opened before the race
        barrier.wait()
        try:
            return S.edit_draft(ws, "dress", "race", order, expect=draft.etag).ids
        except Stale:
            return None

    with ThreadPoolExecutor(len(orders)) as pool:
        results = list(pool.map(edit, orders))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    after = S.get_version(ws, "dress", "race")
    assert after.ids == winners[0] and after.revision == 2

    seen = S.publication_etag(ws, "dress")
    names = ["race", "other"] * 4
    barrier = threading.Barrier(len(names))

    def publish(name):
        ws.store  # noqa: B018
        barrier.wait()
        try:
            return S.publish(ws, "dress", name, expect=seen).published
        except Stale:
            return None

    with ThreadPoolExecutor(len(names)) as pool:
        published = [p for p in pool.map(publish, names) if p is not None]
    assert len(published) == 1
    assert S.published_version(ws, "dress").name == published[0]
    assert read_grid(store, "dress")["version_name"] == published[0]
    assert len(S.list_versions(ws, "dress").etag) and S.publication_etag(ws, "dress") != seen


def test_exports(ws, tmp_path):
    S.save_order(ws, "dress", "a", ["P3", "P1", "P2"])
    with pytest.raises(NotFound):
        S.export(ws, "dress")  # nothing published
    S.publish(ws, "dress", "a")
    out = S.export(ws, "dress", fmt="csv")
    assert out.media_type.startswith("text/csv") and out.filename == "dress-a.csv"
    rows = list(csv.reader(io.StringIO(out.text)))
    assert rows == [["position", "product_id", "title"], ["1", "P3", "Dress 3"], ["2", "P1", "Dress 1"],
                    ["3", "P2", "Dress 2"]]
    data = json.loads(S.export(ws, "dress", "a", fmt="json").text)
    assert data["version"] == "a" and data["published"] is True
    assert data["items"] == [{"position": 1, "id": "P3", "title": "Dress 3"},
                             {"position": 2, "id": "P1", "title": "Dress 1"},
                             {"position": 3, "id": "P2", "title": "Dress 2"}]
    with pytest.raises(InvalidInput) as bad:
        S.export(ws, "dress", "a", fmt="xml")
    assert bad.value.field == "format"


def test_render_export_neutralises_formula_cells():
    version = {"collection": "c", "name": "v", "created_at": "t", "published": False,
               "items": [{"position": 1, "id": "=1+1", "title": '=HYPERLINK("x")'},
                         {"position": 2, "id": "ok", "title": "@SUM(A1)"}]}
    rows = list(csv.reader(io.StringIO(V.render_export(version, "csv"))))
    assert rows[1:] == [["1", "'=1+1", "'=HYPERLINK(\"x\")"], ["2", "ok", "'@SUM(A1)"]]
    raw = list(csv.reader(io.StringIO(V.render_export(version, "csv", spreadsheet=False))))
    assert raw[1][2] == '=HYPERLINK("x")'


def test_versions_cli(store, ws, tmp_path, capsys):
    path = str(store.path)
    assert main(["arrange", path, "-c", "dress", "--save", "one", "--publish", "--json"]) == 0
    one = _ids(ws, "one")
    assert read_grid(store, "dress")["ids"] == one  # --save --publish writes the storefront grid
    S.save_order(ws, "dress", "two", one[::-1])
    capsys.readouterr()
    assert main(["versions", "diff", path, "dress", "one", "two", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["moved"]) == 5  # reversed: all but one
    assert main(["versions", "publish", path, "dress", "two"]) == 0
    assert read_grid(store, "dress")["ids"] == one[::-1]
    assert main(["versions", "rollback", path, "dress"]) == 0
    assert read_grid(store, "dress")["ids"] == one
    capsys.readouterr()
    assert main(["versions", "export", path, "dress", "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "position,product_id,title"
    assert text.splitlines()[1].startswith(f"1,{one[0]},")  # rolled back to "one"
    assert main(["versions", "list", path, "--json"]) == 0
    assert [(v["name"], v["published"]) for v in json.loads(capsys.readouterr().out)] == [
        ("one", True), ("two", False)]
    assert main(["versions", "show", path, "dress", "nope"]) == 2


def test_diff_orders_counts_moves_as_a_minimal_edit():
    import random

    rng = random.Random(4)
    for _ in range(200):
        a = [f"p{i}" for i in range(rng.randint(0, 12))]
        b = [x for x in a if rng.random() > 0.2] + [f"n{i}" for i in range(rng.randint(0, 2))]
        rng.shuffle(b)
        d = V.diff_orders(a, b)
        common = [x for x in a if x in b]
        ranks = [b.index(x) for x in common]
        longest = [1] * len(ranks)  # O(n^2) longest increasing run, as a check
        for i in range(len(ranks)):
            for j in range(i):
                if ranks[j] < ranks[i]:
                    longest[i] = max(longest[i], longest[j] + 1)
        assert len(d["moved"]) == len(common) - max(longest, default=0)
        kept = [x for x in common if x not in {m["id"] for m in d["moved"]}]
        assert [b.index(x) for x in kept] == sorted(b.index(x) for x in kept)  # the rest keep their order
    one = V.diff_orders(list("abcdefgh"), list("habcdefg"))
    assert [m["id"] for m in one["moved"]] == ["h"] and one["shifted"] == 7
