"""Values and flags that used to be misread or quietly bent: each is refused with exit 2
and names the file, row and field (or the flag)."""

from __future__ import annotations

import codecs
import json

import pytest

from vismerch.cli import main
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog
from vismerch.testing.catalog import make_manifest, read_manifest_rows


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return small_catalog(tmp_path_factory.mktemp("misread") / "cat", n=6, seed=8, corrupt=False,
                         flawed=False, duplicates=False)


@pytest.fixture(scope="module")
def store(cat, tmp_path_factory):
    path = tmp_path_factory.mktemp("misread-store") / "store"
    ingest(cat.manifest_path, path, workers=1, progress=False)
    return path


@pytest.mark.parametrize("column, value", [
    ("price", "12,50"), ("price", "inf"), ("price", "-3"), ("price", "1e400"),
    ("stock", "1e15"), ("sales", "-1"),
])
def test_bad_numbers_stop_the_run_naming_row_and_column(cat, tmp_path, capsys, column, value):
    rows = read_manifest_rows(cat.manifest_path)
    rows[2][column] = value
    manifest = make_manifest(cat.root / f"bad-{column}.csv", rows)
    assert main(["ingest", str(manifest), "--store", str(tmp_path / "s"), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert f"bad-{column}.csv row 4" in err and repr(column) in err and value in err, err
    assert not (tmp_path / "s").exists()  # refused before the store was made


def test_thousands_separators_still_read(cat, tmp_path):
    rows = read_manifest_rows(cat.manifest_path)
    rows[0]["price"], rows[1]["stock"] = "1,250.00", "12,000"
    manifest = make_manifest(cat.root / "thousands.csv", rows)
    from vismerch.catalog.sources import read_source

    by_id = {r.id: r for r in read_source(manifest)}
    assert by_id[rows[0]["id"]].price == 1250.0 and by_id[rows[1]["id"]].stock == 12000.0


def test_jsonl_with_a_bom_is_read_like_csv_with_one(cat, tmp_path):
    rows = read_manifest_rows(cat.manifest_path)
    path = cat.root / "bom.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + "".join(json.dumps(r) + "\n" for r in rows).encode())
    summary = ingest(path, tmp_path / "s", workers=1, progress=False)
    assert summary.ingested == len(rows)


def test_rule_with_an_unknown_column_is_refused(store, capsys):
    assert main(["rules", "add", str(store), "bury", "--where", "pricee < 10"]) == 2
    err = capsys.readouterr().err
    assert "unknown field 'pricee'" in err
    assert main(["rules", "add", str(store), "bury", "--where", "price < 10"]) == 0


@pytest.mark.parametrize("args, named", [
    (["similar", "{store}", "{pid}", "-k", "0"], "-k"),
    (["similar", "{store}", "{pid}", "-k", "-1"], "-k"),
    (["search", "{store}", "--colour", "red", "-k", "0"], "-k"),
    (["arrange", "{store}", "--collection", "dress", "--publish"], "--save"),
    (["ingest", "{manifest}", "--store", "{tmp}/w", "--workers", "-1"], "--workers"),
    (["ingest", "{manifest}", "--store", "{tmp}/w", "--workers", "10000"], "--workers"),
])
def test_bad_flags_exit_2_naming_the_flag(store, cat, tmp_path, capsys, args, named):
    pid = read_manifest_rows(cat.manifest_path)[0]["id"]
    args = [a.format(store=store, pid=pid, manifest=cat.manifest_path, tmp=tmp_path) for a in args]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert named in captured.err, captured
    assert not (tmp_path / "w").exists()
