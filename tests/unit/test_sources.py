"""Catalog sources: folders and manifests, and every manifest problem named by row."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vismerch.catalog.sources import read_source
from vismerch.errors import SourceError


def _img(path, colour=(200, 10, 10)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (32, 32), colour).save(path)


def test_folder_is_recursive_and_ids_are_relative_posix_paths(tmp_path):
    _img(tmp_path / "a.jpg")
    _img(tmp_path / "shoes" / "b.PNG")
    _img(tmp_path / "shoes" / "deep" / "c.webp")
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / ".hidden.jpg").write_bytes(b"")
    records = read_source(tmp_path)
    assert [r.id for r in records] == ["a.jpg", "shoes/b.PNG", "shoes/deep/c.webp"]
    assert records[1].image_path == (tmp_path / "shoes" / "b.PNG").resolve()


def _manifest_rows():
    return [
        {"id": "sku-1", "image": "img/1.jpg", "title": "Navy tee", "category": "t-shirt",
         "price": "19.99", "stock": "3", "sales": "10", "colour": "navy", "material": "cotton"},
        {"id": "sku-2", "image": "img/2.jpg", "title": "Red dress", "category": "dress",
         "price": "", "stock": "0", "sales": "2", "colour": "red", "material": "silk"},
    ]


def _write_csv(path, rows):
    import csv

    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_manifest_formats_read_the_same(tmp_path, kind):
    rows = _manifest_rows()
    path = tmp_path / f"manifest.{kind}"
    if kind == "csv":
        _write_csv(path, rows)
    elif kind == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    records = read_source(path)
    assert [r.id for r in records] == ["sku-1", "sku-2"]
    first = records[0]
    assert first.image_path == (tmp_path / "img" / "1.jpg").resolve()
    assert first.price == pytest.approx(19.99) and first.stock == 3 and first.sales == 10
    assert first.category == "t-shirt" and first.title == "Navy tee"
    assert first.attributes == {"colour": "navy", "material": "cotton"}
    assert records[1].price is None  # an empty cell is missing, not zero


def test_manifest_without_id_uses_the_image_path(tmp_path):
    path = tmp_path / "m.csv"
    _write_csv(path, [{"image": "a/x.jpg", "title": "t"}])
    assert read_source(path)[0].id == "a/x.jpg"


def test_missing_image_column_is_a_clear_error(tmp_path):
    path = tmp_path / "m.csv"
    _write_csv(path, [{"id": "1", "picture": "x.jpg"}])
    with pytest.raises(SourceError, match="no 'image' column.*picture"):
        read_source(path)


def test_duplicate_ids_name_both_rows(tmp_path):
    path = tmp_path / "m.csv"
    rows = [{"id": "a", "image": "1.jpg"}, {"id": "b", "image": "2.jpg"}, {"id": "a", "image": "3.jpg"}]
    _write_csv(path, rows)
    with pytest.raises(SourceError, match=r"row 4: duplicate id 'a' \(first seen at row 2\)"):
        read_source(path)


def test_unparsable_number_names_row_and_column(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"id": "a", "image": "1.jpg", "price": "$12"}) + "\n")
    with pytest.raises(SourceError, match=r"row 1: column 'price' has '\$12', not a number"):
        read_source(path)


@pytest.mark.parametrize("bad", ["../outside.jpg", "/etc/passwd", "img/../../x.jpg"])
def test_paths_escaping_the_manifest_folder_are_refused(tmp_path, bad):
    path = tmp_path / "m.csv"
    _write_csv(path, [{"id": "a", "image": "ok.jpg"}, {"id": "b", "image": bad}])
    with pytest.raises(SourceError, match="row 3: image path .* escapes"):
        read_source(path)


def test_unknown_source_type_and_missing_source(tmp_path):
    (tmp_path / "m.xlsx").write_text("x")
    with pytest.raises(SourceError, match="unknown source type"):
        read_source(tmp_path / "m.xlsx")
    with pytest.raises(SourceError, match="does not exist"):
        read_source(tmp_path / "nope")


def test_image_urls_are_kept_as_urls_and_name_the_product_without_an_id(tmp_path):
    path = tmp_path / "m.csv"
    inside = (tmp_path / "img" / "1.jpg")
    _write_csv(path, [{"image": "https://cdn.example.com/p/1.jpg?w=800", "title": "a"},
                      {"image": "HTTP://cdn.example.com/p/2.jpg", "title": "b"},
                      {"image": inside.as_uri(), "title": "c"},
                      {"image": "img/4.jpg", "title": "d"}])
    by_title = {r.title: r for r in read_source(path)}
    first = by_title["a"]
    assert first.image_url == "https://cdn.example.com/p/1.jpg?w=800" and first.image_path is None
    assert first.id == first.location == first.image_url
    assert by_title["b"].image_url == "HTTP://cdn.example.com/p/2.jpg"
    assert by_title["c"].image_url == inside.as_uri()
    assert by_title["d"].image_url is None
    assert by_title["d"].location == str((tmp_path / "img" / "4.jpg").resolve())


@pytest.mark.parametrize(("bad", "message"), [
    ("ftp://files.example.com/1.jpg", "unsupported scheme 'ftp'"),
    ("https:///no-host.jpg", "has no host"),
    ("file:///etc/passwd", "outside the manifest's folder"),
    ("file://otherhost/share/1.jpg", "names another host"),
])
def test_unusable_image_urls_name_the_row(tmp_path, bad, message):
    path = tmp_path / "m.csv"
    _write_csv(path, [{"id": "a", "image": "ok.jpg"}, {"id": "b", "image": bad}])
    with pytest.raises(SourceError, match=f"row 3: .*{message}"):
        read_source(path)


def _write(path, kind, rows):
    if kind == "csv":
        _write_csv(path, rows)
    elif kind == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("column, value, message", [
    ("title", "t" * 10_001, r"row \d: column 'title' holds 10,001 characters, over the 10,000"),
    ("material", "m" * 20_000, r"row \d: column 'material' holds 20,000 characters"),
    ("id", "i" * 501, r"row \d: column 'id' holds 501 characters, over the 500"),
    ("w" * 10_001, "x", r"row \d: column '\(a column name\)' holds 10,001 characters"),
])
def test_every_manifest_text_has_a_length_cap_naming_row_and_column(tmp_path, kind, column, value,
                                                                    message):
    rows = _manifest_rows()
    rows = [{**r, column: "ok" if column != "id" else r["id"]} for r in rows]
    rows[1][column] = value
    path = tmp_path / f"m.{kind}"
    _write(path, kind, rows)
    with pytest.raises(SourceError, match=message) as err:
        read_source(path)
    assert "manifest_max_" in err.value.hint
    if column in ("title", "material"):  # the setting raises the cap
        assert len(read_source(path, max_text_chars=50_000)) == 2


def test_a_deeply_nested_jsonl_row_names_its_line_not_a_recursion_error(tmp_path):
    path = tmp_path / "m.jsonl"
    nested = '{"id": "b", "image": "2.jpg", "x": ' + "[" * 200_000 + "]" * 200_000 + "}"
    path.write_text(json.dumps({"id": "a", "image": "1.jpg"}) + "\n" + nested + "\n")
    with pytest.raises(SourceError, match="line 2 nests its values too deeply"):
        read_source(path)
