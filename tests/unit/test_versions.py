"""Arrangement versions: save, list, diff, publish, roll back, export."""

from __future__ import annotations

import csv
import io
import json

import pytest
from merch_fixtures import build_store

from vismerch.cli import main
from vismerch.errors import UsageError
from vismerch.merch import versions as V
from vismerch.merch.layout import arrange_collection


@pytest.fixture
def store(tmp_path):
    products = [{"id": f"P{i}", "category": "dress", "sales": 10.0 - i, "price": 20.0, "stock": 3}
                for i in range(6)]
    s = build_store(tmp_path / "store", products)
    yield s
    s.close()


def test_diff_orders():
    d = V.diff_orders(["a", "b", "c", "d"], ["c", "b", "a", "e"])
    assert d["moved"] == [{"id": "c", "from": 3, "to": 1, "delta": -2},
                          {"id": "a", "from": 1, "to": 3, "delta": 2}]
    assert d["added"] == [{"id": "e", "position": 4}]
    assert d["removed"] == [{"id": "d", "position": 4}]
    assert d["unchanged"] == 1


def test_save_list_show(store):
    result = arrange_collection(store, "dress", columns=3)
    saved = V.save_version(store, "dress", "v1", result)
    assert saved["size"] == 6
    v1 = V.get_version(store, "dress", "v1")
    assert [i["id"] for i in v1["items"]] == result.ids
    assert v1["items"][0]["reason"] == result.arrangement.slots[0].reason
    assert v1["params"]["columns"] == [3]
    with pytest.raises(UsageError):
        V.save_version(store, "dress", "v1", result)  # versions are immutable
    with pytest.raises(UsageError):
        V.save_version(store, "dress", "published", result)
    with pytest.raises(UsageError):
        V.save_version(store, "no-such", "v1", result)
    V.save_version(store, "dress", "manual", ["P5", "P4", "P3"])
    assert [(v["name"], v["size"], v["published"]) for v in V.list_versions(store, "dress")] == [
        ("v1", 6, False), ("manual", 3, False)]
    with pytest.raises(UsageError):
        V.get_version(store, "dress", "v9")


def test_diff_publish_rollback(store):
    V.save_version(store, "dress", "a", ["P0", "P1", "P2", "P3"])
    V.save_version(store, "dress", "b", ["P2", "P1", "P0", "P5"])
    V.save_version(store, "dress", "c", ["P5"])
    d = V.diff_versions(store, "dress", "a", "b")
    assert {m["id"] for m in d["moved"]} == {"P0", "P2"}
    assert d["added"] == [{"id": "P5", "position": 4}] and d["removed"] == [{"id": "P3", "position": 4}]
    with pytest.raises(UsageError):
        V.rollback(store, "dress")  # nothing published yet
    V.publish(store, "dress", "a")
    V.publish(store, "dress", "b")
    V.publish(store, "dress", "c")
    assert V.published_version(store, "dress")["name"] == "c"
    assert V.diff_versions(store, "dress", "published", "a")["to"] == "a"
    assert V.rollback(store, "dress")["published"] == "b"
    assert V.rollback(store, "dress")["published"] == "a"
    with pytest.raises(UsageError):
        V.rollback(store, "dress")  # a was the first one
    V.publish(store, "dress", "c")
    assert V.rollback(store, "dress", to="a")["published"] == "a"
    with pytest.raises(UsageError):
        V.rollback(store, "dress", to="b")  # b is not below a in the publish history
    assert [v["published"] for v in V.list_versions(store, "dress")] == [True, False, False]


def test_exports(store, tmp_path):
    V.save_version(store, "dress", "a", ["P3", "P1", "P2"])
    with pytest.raises(UsageError):
        V.export_version(store, "dress")  # nothing published
    V.publish(store, "dress", "a")
    rows = list(csv.reader(io.StringIO(V.export_version(store, "dress", fmt="csv"))))
    assert rows == [["position", "product_id"], ["1", "P3"], ["2", "P1"], ["3", "P2"]]
    out = tmp_path / "a.json"
    V.export_version(store, "dress", "a", fmt="json", path=out)
    data = json.loads(out.read_text())
    assert data["version"] == "a" and data["published"] is True
    assert data["items"] == [{"position": 1, "id": "P3"}, {"position": 2, "id": "P1"},
                             {"position": 3, "id": "P2"}]
    with pytest.raises(UsageError):
        V.export_version(store, "dress", "a", fmt="xml")


def test_versions_cli(store, tmp_path, capsys):
    path = str(store.path)
    assert main(["arrange", path, "-c", "dress", "--save", "one", "--publish", "--json"]) == 0
    one = [i["id"] for i in V.get_version(store, "dress", "one")["items"]]
    V.save_version(store, "dress", "two", one[::-1])
    capsys.readouterr()
    assert main(["versions", "diff", path, "dress", "one", "two", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["moved"]) == 6
    assert main(["versions", "publish", path, "dress", "two"]) == 0
    assert main(["versions", "rollback", path, "dress"]) == 0
    capsys.readouterr()
    assert main(["versions", "export", path, "dress", "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "position,product_id"
    assert text.splitlines()[1] == f"1,{one[0]}"  # rolled back to "one"
    assert main(["versions", "show", path, "dress", "nope"]) == 2
