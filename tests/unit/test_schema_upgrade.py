"""A store made by an older vismerch opens in this one: its migrations run in order and keep
what the store held (here: rules stored under the columns' earlier names)."""

from __future__ import annotations

import sqlite3

from vismerch.catalog.schema import MIGRATIONS, SCHEMA_VERSION
from vismerch.catalog.store import DB_NAME, Store
from vismerch.rules import list_rules


def _old_store(path, version: int):
    path.mkdir()
    db = sqlite3.connect(path / DB_NAME, isolation_level=None)
    for script in MIGRATIONS[:version]:
        db.executescript(script)
    db.execute(f"PRAGMA user_version = {version}")
    return db


def test_rules_stored_before_one_vocabulary_keep_their_collection_where_and_product(tmp_path):
    db = _old_store(tmp_path / "store", 11)
    db.execute("INSERT INTO collections (name, kind, definition, created_at) "
               "VALUES ('dresses', 'rule', 'true', '2026-01-01T00:00:00Z')")
    db.execute("INSERT INTO rules (kind, scope, condition, factor, created_at) "
               "VALUES ('boost', 'dresses', 'price < 50', 30, '2026-01-01T00:00:00Z')")
    db.execute("INSERT INTO rules (kind, scope, product_id, position, created_at) "
               "VALUES ('pin', NULL, 'P7', 2, '2026-01-01T00:00:00Z')")
    db.close()
    with Store.open(tmp_path / "store", create=True) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        boost, pin = list_rules(store)
    assert (boost.kind, boost.collection, boost.where, boost.factor) == ("boost", "dresses", "price < 50", 30)
    assert (pin.kind, pin.collection, pin.product, pin.position) == ("pin", None, "P7", 2)
