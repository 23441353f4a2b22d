"""Collections in the store (category, manifest column, rule), refresh after ingest,
the store-level arrangement, the CLI and the preview hooks."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from merch_fixtures import build_store
from PIL import Image

from vismerch.arrange.layout import arrange_collection
from vismerch.arrange.preview import arranged_before_after
from vismerch.cli import main
from vismerch.errors import UsageError
from vismerch.merch import collections as C


def catalog(n=24, seed=0):
    rng = np.random.default_rng(seed)
    products, vectors, colours = [], {}, {}
    names = ["navy", "red", "black", "white", "green", "pink"]
    for i in range(n):
        cat = ["Summer Dresses", "shoes", "bags"][i % 3]
        products.append({"id": f"P{i:02d}", "category": cat, "brand": f"b{i % 4}",
                         "price": 30.0 + 5 * i, "stock": 0 if i % 7 == 0 else 10,
                         "sales": float(100 - 3 * i), "created_at": f"2024-0{1 + i % 9}-01",
                         "collections": "sale; new in" if i % 2 else "new in",
                         "season": "SS24" if i < 12 else "AW24"})
        v = rng.standard_normal(16)
        vectors[f"P{i:02d}"] = v / np.linalg.norm(v)
        colours[f"P{i:02d}"] = names[i % len(names)]
    # a look-alike pair among the top dresses
    vectors["P03"] = vectors["P00"] * 0.99 + 0.01 * vectors["P03"]
    vectors["P03"] /= np.linalg.norm(vectors["P03"])
    return products, vectors, colours


@pytest.fixture
def store(tmp_path):
    products, vectors, colours = catalog()
    s = build_store(tmp_path / "store", products, vectors=vectors, colours=colours,
                    flags={"P06": ["blur"]}, dups=[(1, ["P09", "P12"], "P09")])
    yield s
    s.close()


def test_every_category_and_collection_value_is_a_collection(store):
    sizes = {c["name"]: c["size"] for c in C.list_collections(store)}
    assert sizes == {"summer-dresses": 8, "shoes": 8, "bags": 8, "sale": 12, "new-in": 24}
    assert C.members(store, "summer-dresses")[:3] == ["P00", "P03", "P06"]


def test_column_and_rule_collections(store):
    C.add_collection_column(store, "season")
    sizes = {c["name"]: c["size"] for c in C.list_collections(store)}
    assert sizes["season-ss24"] == 12 and sizes["season-aw24"] == 12
    made = C.create_collection(store, "cheap-red",
                               where='colour_family == "red" and price < 100 and in_stock')
    expected = [p.id for p in store.products()
                if p.price < 100 and p.stock > 0 and int(p.id[1:]) % 6 in (1,)]
    assert made["size"] == len(expected) and C.members(store, "cheap-red") == expected
    C.create_collection(store, "flagged", where="flagged or duplicate")
    assert C.members(store, "flagged") == ["P06", "P09", "P12"]
    with pytest.raises(UsageError) as info:
        C.create_collection(store, "typo", where='categroy == "shoes"')
    assert "unknown field 'categroy'" in info.value.message and "column 1" in info.value.message
    with pytest.raises(UsageError) as info:
        C.create_collection(store, "broken", where="price <")
    assert "column 8" in info.value.message
    with pytest.raises(UsageError):
        C.create_collection(store, "cheap-red", where="true")
    with pytest.raises(UsageError):
        C.create_collection(store, "bad name!", where="true")


def test_refresh_follows_the_catalog(store):
    C.create_collection(store, "pricey", where="price > 120")
    with store.transaction() as con:  # what a new ingest would commit
        con.execute("UPDATE products SET category = 'hats' WHERE category = 'bags'")
        con.execute("UPDATE products SET price = 10 WHERE id = 'P23'")
    out = C.refresh_collections(store)
    assert "hats" in out["created"] and "bags" in out["removed"]
    sizes = {c["name"]: c["size"] for c in C.list_collections(store)}
    assert sizes["hats"] == 8 and "bags" not in sizes
    assert "P23" not in C.members(store, "pricey")


def test_sub_collections_stay_inside_their_parent_through_refreshes(store):
    from vismerch.errors import Conflict

    C.create_collection(store, "cheap-shoes", where="price < 100", parent="shoes")
    C.create_collection(store, "cheap-shoes-in-stock", where="in_stock", parent="cheap-shoes")
    shoes = C.members(store, "shoes")
    cheap = [p.id for p in store.products() if p.id in shoes and p.price < 100]
    assert C.members(store, "cheap-shoes") == cheap and len(cheap) < len(shoes)
    assert len([p for p in store.products() if p.price < 100]) > len(cheap)  # the parent bounds it
    with store.transaction() as con:  # an ingest moves a cheap shoe to bags, restocks another
        con.execute("UPDATE products SET category = 'bags' WHERE id = ?", (cheap[0],))
        con.execute("UPDATE products SET stock = 10")
    C.refresh_collections(store)
    assert C.members(store, "cheap-shoes") == cheap[1:]
    assert C.members(store, "cheap-shoes-in-stock") == cheap[1:]
    with pytest.raises(Conflict):  # a category comes back with every ingest
        C.delete_collection(store, "shoes")
    with pytest.raises(Conflict):  # it has a sub-collection
        C.delete_collection(store, "cheap-shoes")
    assert C.delete_collection(store, "cheap-shoes-in-stock")["name"] == "cheap-shoes-in-stock"
    C.delete_collection(store, "cheap-shoes")
    assert "cheap-shoes" not in {c["name"] for c in C.list_collections(store)}


def test_arrange_collection_end_to_end(store):
    from vismerch.rules import add_rule

    add_rule(store, "pin", collection="summer-dresses", product="P15", position=1)
    add_rule(store, "pin", collection="summer-dresses", product="P21", position=2)  # stock 0
    add_rule(store, "bury", collection="summer-dresses", where="price > 120", factor=100)
    # the explicit rules alone (out-of-stock P00 not buried by the setting): see
    # test_out_of_stock_products_are_buried_by_default for that
    plain = SimpleNamespace(rules_bury_out_of_stock=False)
    result = arrange_collection(store, "summer-dresses", columns=2, columns_set="2,3", settings=plain)
    assert result.ids[0] == "P15" and result.arrangement.slots[0].kind == "pinned"
    assert result.events == [{"kind": "release", "rule": 2, "product": "P21", "position": 2}]
    assert set(result.ids) == set(C.members(store, "summer-dresses"))
    pos = {pid: k for k, pid in enumerate(result.ids)}
    assert result.arrangement.params["first_screen"] == 6
    assert pos["P06"] >= 6  # flagged (blur): below the first screen
    assert pos["P21"] >= 6  # released, then buried (price 135)
    assert "buried 100% of the positions by rule #3" in result.arrangement.slots[pos["P21"]].reason
    assert result.arrangement.business["ratio"] >= 0.98
    with pytest.raises(UsageError):
        arrange_collection(store, "no-such")
    bigger = arrange_collection(store, "new-in", columns=4, columns_set="2,3,5")
    gap = abs(bigger.ids.index("P00") - bigger.ids.index("P03"))
    assert gap not in (1, 2, 3, 4, 5)  # the look-alike pair is apart at every width


def test_cli_collections_and_arrange_json(store, tmp_path, capsys):
    path = str(store.path)
    assert main(["collections", path, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"name": "shoes", "size": 8} in [{"name": c["name"], "size": c["size"]} for c in listed]
    assert main(["collections", path, "--create", "x", "--where", "price <"]) == 2
    capsys.readouterr()
    png, page = tmp_path / "out.png", tmp_path / "out.html"
    code = main(["arrange", path, "--collection", "shoes", "--columns", "4", "--columns-set",
                 "2,3,4,5", "--mode", "flow", "--preview", str(png), "--html", str(page),
                 "--save", "v1", "--json"])
    assert code == 0
    slots = json.loads(capsys.readouterr().out)
    assert [s["position"] for s in slots] == list(range(1, 9))
    assert all(s["id"] and s["reason"] for s in slots)
    assert Image.open(png).size[0] > 100 and "<html" in page.read_text()
    assert main(["versions", "list", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == "v1"
    assert main(["rules", "add", path, "boost", "-c", "shoes", "--where", "price <", "--json"]) == 2


def test_before_after_hook(store, tmp_path):
    out = arranged_before_after(store, "new-in", tmp_path / "ba", columns=4, columns_set="2,3,4,5")
    for key in ("combined_png", "html"):
        assert (tmp_path / "ba").joinpath(out[key].split("/")[-1]).exists()
    assert Image.open(out["before"]["png"]).size == Image.open(out["after"]["png"]).size
    assert sorted(out["before"]["ids"]) == sorted(out["after"]["ids"])
    assert sum(out["after"]["lookalikes"].values()) <= sum(out["before"]["lookalikes"].values())
    assert out["business"]["ratio"] >= 0.98


def test_out_of_stock_products_are_buried_by_default(store):
    members = C.members(store, "shoes")
    oos = [p.id for p in store.products() if p.id in members and p.stock == 0]
    assert oos  # the catalogue has some
    on = arrange_collection(store, "shoes", columns=4)
    assert on.ids[-len(oos):] == sorted(oos, key=on.ids.index) and set(on.ids[-len(oos):]) == set(oos)
    reason = on.arrangement.slots[on.ids.index(oos[0])].reason
    assert "out of stock, setting rules_bury_out_of_stock" in reason
    assert on.applied == []  # the implicit rule is not a stored one
    off = arrange_collection(store, "shoes", columns=4,
                             settings=SimpleNamespace(rules_bury_out_of_stock=False))
    assert "rules_bury_out_of_stock" not in off.arrangement.slots[off.ids.index(oos[0])].reason
