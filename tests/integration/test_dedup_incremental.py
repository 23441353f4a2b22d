"""Incremental duplicate search: an ingest of new images searches them against the store,
keeps the earlier pairs and merchandisers' decisions, and gives the groups a search of
everything gives; a changed dup_* setting searches everything again."""

from __future__ import annotations

import csv
import json

from vismerch.catalog.store import Store
from vismerch.config import load_settings
from vismerch.dupes.reviews import record
from vismerch.pipeline.ingest import ingest
from vismerch.testing import small_catalog
from vismerch.testing.catalog import read_manifest_rows


def _members(store: Store) -> set[frozenset[str]]:
    return {frozenset(g["members"]) for g in store.dup_groups()}


def _last(store: Store) -> dict:
    return json.loads(store.get_meta("dedup_last"))


def test_new_images_are_searched_against_the_store(tmp_path):
    cat = small_catalog(tmp_path / "cat", n=70, seed=12, corrupt=False, flawed=False)
    truth = cat.truth()
    rows = read_manifest_rows(cat.manifest_path)
    # groups at even positions arrive whole in the first ingest; of the others one member,
    # and a dozen more products, come later
    groups = truth["duplicate_groups"]
    whole_groups = {pid for g in groups[::2] for pid in g}
    late = {sorted(g)[-1] for g in groups[1::2]}
    late |= {r["id"] for r in rows[-20:] if r["id"] not in whole_groups}
    first = cat.root / "first.csv"
    with first.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["id"] not in late)
    store_dir = tmp_path / "store"
    ingest(first, store_dir, workers=1, progress=False)
    with Store.open(store_dir) as store:
        assert _last(store)["mode"] == "full"
        before = _members(store)
        assert before, "the first ingest holds whole duplicate groups"
        reviewed = sorted(before, key=sorted)[0]
        record(store, sorted(reviewed), "distinct", None, "test")

    ingest(cat.manifest_path, store_dir, workers=1, progress=False)
    whole = tmp_path / "whole"
    ingest(cat.manifest_path, whole, workers=1, progress=False)
    with Store.open(store_dir) as store, Store.open(whole) as fresh:
        last = _last(store)
        assert last["mode"] == "incremental"
        assert last["searched"] == len(late)  # the new images only
        got = _members(store)
        # the same groups as searching everything, less the pair a merchandiser split
        assert got == {g for g in _members(fresh) if not reviewed <= g}
        truth_groups = {frozenset(g) for g in truth["duplicate_groups"]}
        assert len(got & truth_groups) >= len(truth_groups) - 2

    # a changed rule: everything is searched again, with the decisions still applied
    stricter = load_settings().replace(dup_layout=0.99)
    ingest(cat.manifest_path, store_dir, workers=1, progress=False, settings=stricter)
    with Store.open(store_dir) as store:
        assert _last(store)["mode"] == "full"
        assert not any(reviewed <= g for g in _members(store))
