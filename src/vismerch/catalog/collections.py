"""Store-owned SQL for collections and their members (``merch.collections`` decides who
belongs; this module reads and writes the rows).

Rows come back as plain dicts with ``definition`` already parsed from JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp
from vismerch.errors import Conflict


def _row(r: Any) -> dict[str, Any]:
    return {"name": r["name"], "kind": r["kind"], "definition": json.loads(r["definition"]),
            "auto": bool(r["auto"]), "parent": r["parent"]}


def rows(store: Store) -> dict[str, dict[str, Any]]:
    """Every collection by name."""
    return {r["name"]: _row(r) for r in store.db.execute("SELECT * FROM collections ORDER BY name")}


def row(store: Store, name: str) -> dict[str, Any] | None:
    r = store.db.execute("SELECT * FROM collections WHERE name = ?", (name,)).fetchone()
    return None if r is None else _row(r)


def names(store: Store) -> list[str]:
    return [r[0] for r in store.db.execute("SELECT name FROM collections ORDER BY name")]


def with_sizes(store: Store, name: str | None = None) -> list[dict[str, Any]]:
    """``[{name, kind, definition, auto, parent, size, published_version}]`` by name (one
    collection when ``name`` is given)."""
    sql = ("SELECT c.*, (SELECT COUNT(*) FROM collection_members m WHERE m.collection = c.name) AS size,"
           " g.version_name AS published_version"
           " FROM collections c LEFT JOIN published_grids g ON g.collection = c.name")
    args: tuple = ()
    if name is not None:
        sql, args = sql + " WHERE c.name = ?", (name,)
    return [{**_row(r), "size": int(r["size"]), "published_version": r["published_version"]}
            for r in store.db.execute(sql + " ORDER BY c.name", args)]


def parent_of(store: Store, name: str) -> str | None:
    r = store.db.execute("SELECT parent FROM collections WHERE name = ?", (name,)).fetchone()
    return None if r is None else r[0]


def children_of(store: Store, name: str) -> list[str]:
    return [r[0] for r in store.db.execute(
        "SELECT name FROM collections WHERE parent = ? ORDER BY name", (name,))]


def member_ids(store: Store, name: str) -> list[str]:
    return [r[0] for r in store.db.execute(
        "SELECT product_id FROM collection_members WHERE collection = ? ORDER BY product_id", (name,))]


def insert(store: Store, name: str, kind: str, definition: Mapping[str, Any],
           parent: str | None, members: Sequence[str]) -> None:
    """A new (not auto) collection with its members, in one transaction."""
    stamp = utc_timestamp()
    with store.transaction() as con:
        con.execute("INSERT INTO collections (name, kind, definition, auto, created_at, "
                    "refreshed_at, parent) VALUES (?, ?, ?, 0, ?, ?, ?)",
                    (name, kind, json.dumps(dict(definition)), stamp, stamp, parent))
        con.executemany("INSERT INTO collection_members (collection, product_id) VALUES (?, ?)",
                        [(name, pid) for pid in members])


def _referenced(con: Any, name: str) -> bool:
    return bool(
        con.execute("SELECT 1 FROM rules WHERE collection = ? LIMIT 1", (name,)).fetchone()
        or con.execute("SELECT 1 FROM arrangement_versions WHERE collection = ? LIMIT 1",
                       (name,)).fetchone()
        or con.execute("SELECT 1 FROM collections WHERE parent = ? LIMIT 1", (name,)).fetchone()
    )


def apply_refresh(store: Store, new: Mapping[str, tuple[str, Mapping[str, Any]]],
                  members: Mapping[str, Sequence[str]], droppable: Sequence[str]) -> list[str]:
    """One transaction: insert the ``new`` auto collections ``{name: (kind, definition)}``,
    delete the ``droppable`` ones nothing refers to (rules, versions, sub-collections), and
    replace the members of every other collection in ``members``. Returns the deleted names."""
    stamp = utc_timestamp()
    removed = []
    with store.transaction() as con:
        for name, (kind, definition) in new.items():
            con.execute("INSERT INTO collections (name, kind, definition, auto, created_at)"
                        " VALUES (?, ?, ?, 1, ?)", (name, kind, json.dumps(dict(definition)), stamp))
        for name in droppable:
            if not _referenced(con, name):
                con.execute("DELETE FROM collections WHERE name = ?", (name,))
                con.execute("DELETE FROM collection_members WHERE collection = ?", (name,))
                removed.append(name)
        for name, ids in members.items():
            if name in removed:
                continue
            con.execute("DELETE FROM collection_members WHERE collection = ?", (name,))
            con.executemany("INSERT INTO collection_members (collection, product_id) VALUES (?, ?)",
                            [(name, pid) for pid in ids])
            con.execute("UPDATE collections SET refreshed_at = ? WHERE name = ?", (stamp, name))
    return removed


def is_published(con: Any, name: str) -> bool:
    return con.execute("SELECT 1 FROM published_grids WHERE collection = ? UNION ALL SELECT 1 FROM "
                       "arrangement_publications WHERE collection = ? LIMIT 1", (name, name)).fetchone() \
        is not None


def delete(store: Store, name: str, *, unpublish: bool = False) -> tuple[int, int]:
    """Delete a collection, its members, the rules scoped to it (and the query rules that
    redirect to it), its versions, their publication history and its storefront grid, all in
    one transaction, so a collection made again under the same name starts empty and never
    serves the old grid. A published one is refused (Conflict) unless ``unpublish``. Returns
    (rules, versions) removed."""
    with store.transaction() as con:
        if not unpublish and is_published(con, name):
            raise Conflict(f"{name!r} is published: deleting it takes its storefront grid down",
                           hint="a publisher or admin key may delete it (grid, versions and all)")
        n_rules = con.execute("DELETE FROM rules WHERE collection = ?", (name,)).rowcount
        n_rules += con.execute("DELETE FROM query_rules WHERE kind = 'redirect' AND collection = ?",
                               (name,)).rowcount  # a redirect to a page that is gone
        con.execute("DELETE FROM published_grids WHERE collection = ?", (name,))
        con.execute("DELETE FROM arrangement_publications WHERE collection = ?", (name,))
        n_versions = con.execute("DELETE FROM arrangement_versions WHERE collection = ?", (name,)).rowcount
        con.execute("DELETE FROM collection_members WHERE collection = ?", (name,))
        con.execute("DELETE FROM collections WHERE name = ?", (name,))
    return int(n_rules), int(n_versions)
