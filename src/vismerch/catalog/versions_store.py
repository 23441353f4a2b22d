"""Store-owned SQL for arrangement versions and their publication history.

``arrangement_versions`` holds one row per named order of a collection (``revision`` goes
up with every edit of a draft); ``arrangement_publications`` keeps every publish and
rollback, so what is published is a stack: publish pushes, rollback pops back to an
earlier version. The collection's *publication state* is the id of its newest
publication row (0 before the first): publish and rollback take the state the caller saw
and refuse, inside the same ``BEGIN IMMEDIATE`` transaction that would change it, when it
moved on meanwhile. Every publish and rollback rewrites the storefront grid
(``catalog.grids``) in that transaction, so the storefront never shows anything else
than the top of the stack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vismerch.catalog.grids import write_grid
from vismerch.catalog.store import Store, utc_timestamp
from vismerch.errors import Conflict, NotFound, Stale

_COLUMNS = ("id, collection, name, created_at, created_by, updated_at, updated_by, revision, "
            "params, items, summary")


def require_collection(store: Store, collection: str) -> None:
    """NotFound (with the close names) unless ``collection`` exists."""
    if store.db.execute("SELECT 1 FROM collections WHERE name = ?", (collection,)).fetchone():
        return
    names = [r[0] for r in store.db.execute("SELECT name FROM collections ORDER BY name")]
    close = [n for n in names if collection.casefold() in n.casefold()][:5]
    raise NotFound("collection", collection, f"no collection named {collection!r}",
                   hint=("did you mean: " + ", ".join(close)) if close else
                   ("collections: " + ", ".join(names[:12]) if names else
                    "ingest a catalog first; every category becomes a collection"))


def _decode(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["items"] = json.loads(out["items"])
    out["params"] = json.loads(out["params"] or "{}")
    out["summary"] = json.loads(out["summary"] or "{}")
    return out


def version_row(store: Store, collection: str, name: str) -> dict[str, Any] | None:
    """The stored version (items ``[[id, reason], ...]`` decoded) or None."""
    row = store.db.execute(f"SELECT {_COLUMNS} FROM arrangement_versions WHERE collection = ? AND name = ?",
                           (collection, name)).fetchone()
    return None if row is None else _decode(row)


def collections_with_version(store: Store, name: str) -> list[str]:
    """The collections that have a version called ``name``."""
    return [c for (c,) in store.db.execute(
        "SELECT collection FROM arrangement_versions WHERE name = ? ORDER BY collection", (name,))]


def version_by_id(store: Store, version_id: int) -> dict[str, Any]:
    row = store.db.execute(f"SELECT {_COLUMNS} FROM arrangement_versions WHERE id = ?",
                           (version_id,)).fetchone()
    return _decode(row)


def version_names(store: Store, collection: str) -> list[str]:
    return [r[0] for r in store.db.execute(
        "SELECT name FROM arrangement_versions WHERE collection = ? ORDER BY id", (collection,))]


def list_rows(store: Store, collection: str | None = None) -> list[dict[str, Any]]:
    """Every version (oldest first) without its items, with ``size`` and ``ever_published``."""
    sql = ("SELECT v.id, v.collection, v.name, v.created_at, v.created_by, v.updated_at, v.updated_by, "
           "v.revision, json_array_length(v.items) AS size, EXISTS (SELECT 1 FROM "
           "arrangement_publications p WHERE p.version_id = v.id) AS ever_published "
           "FROM arrangement_versions v")
    args: tuple = ()
    if collection is not None:
        sql, args = sql + " WHERE v.collection = ?", (collection,)
    return [dict(r) for r in store.db.execute(sql + " ORDER BY v.id", args)]


def ever_published(store: Any, version_id: int) -> bool:
    con = getattr(store, "db", store)
    return con.execute("SELECT 1 FROM arrangement_publications WHERE version_id = ? LIMIT 1",
                       (version_id,)).fetchone() is not None


# -- the publication history ------------------------------------------------------------


def _stack(con: Any, collection: str) -> list[int]:
    """Replay publications: publish pushes, rollback pops back to its version."""
    stack: list[int] = []
    for version_id, action in con.execute(
            "SELECT version_id, action FROM arrangement_publications WHERE collection = ? ORDER BY id",
            (collection,)):
        if action == "publish":
            stack.append(int(version_id))
        else:
            while stack and stack[-1] != int(version_id):
                stack.pop()
    return stack


def _state(con: Any, collection: str) -> int:
    row = con.execute("SELECT COALESCE(MAX(id), 0) FROM arrangement_publications WHERE collection = ?",
                      (collection,)).fetchone()
    return int(row[0])


def published_stack(store: Store, collection: str) -> list[int]:
    """Version ids of the publish stack, the one shown last."""
    return _stack(store.db, collection)


def publication_state(store: Store, collection: str) -> int:
    """The id of the collection's newest publish or rollback (0 before the first)."""
    return _state(store.db, collection)


def _check_state(con: Any, collection: str, expect_state: int | None) -> None:
    if expect_state is None:
        return
    current = _state(con, collection)
    if current != expect_state:
        raise Stale(f"{collection} was published or rolled back since you read it (your If-Match "
                    f"names publication state {expect_state}, it is now {current}); nothing was changed",
                    current_etag=f"p{current}",
                    hint=f"GET /collections/{collection}/versions again, check what is published, "
                         "and retry with its ETag")


def _publish_row(con: Any, store: Store, collection: str, version: dict[str, Any], action: str) -> int:
    """Append a publication and rewrite the storefront grid (inside the caller's transaction)."""
    state = int(con.execute("INSERT INTO arrangement_publications (collection, version_id, action, at) "
                            "VALUES (?, ?, ?, ?)", (collection, version["id"], action, utc_timestamp())
                            ).lastrowid)
    write_grid(con, store, collection, int(version["id"]), version["name"],
               [pid for pid, _ in version["items"]])
    return state


# -- writes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewVersion:
    """A version to save: its ``name`` (unique per collection), order (``items``: [id, kind]
    per slot), the arrangement's ``params`` and ``summary``."""

    name: str
    items: list[list[str]]
    params: dict[str, Any]
    summary: dict[str, Any]


def insert_version(store: Store, collection: str, version: NewVersion, *, by: str | None = None,
                   publish: bool = False, expect_state: int | None = None) -> dict[str, Any]:
    """Save ``version``; with ``publish``, publish it in the same transaction (a kill leaves
    both or neither). Saving with ``publish`` again under the name of a never-published
    version with the same order finishes an interrupted save-and-publish instead of failing
    on the name. Returns ``{id, published_state}``."""
    name, items, params, summary = version.name, version.items, version.params, version.summary
    with store.transaction() as con:
        existing = con.execute("SELECT id, items FROM arrangement_versions WHERE collection = ? "
                               "AND name = ?", (collection, name)).fetchone()
        if existing is not None:
            unfinished = (publish and json.loads(existing["items"]) == items
                          and not ever_published(con, int(existing["id"])))
            if not unfinished:
                raise Conflict(f"{collection} already has a version named {name!r}",
                               hint="save under a new name (a draft can be edited: PUT its order)")
            version_id = int(existing["id"])
        else:
            version_id = int(con.execute(
                "INSERT INTO arrangement_versions (collection, name, created_at, created_by, params, "
                "items, summary, revision) VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                (collection, name, utc_timestamp(), by, json.dumps(params, default=str),
                 json.dumps(items), json.dumps(summary, default=str))).lastrowid)
        state = None
        if publish:
            _check_state(con, collection, expect_state)
            state = _publish_row(con, store, collection, {"id": version_id, "name": name, "items": items},
                                 "publish")
    return {"id": version_id, "published_state": state}


def update_items(store: Store, version_id: int, items: list[list[str]], *, expect_revision: int | None,
                 by: str | None = None) -> int:
    """Replace a draft's items; the new revision. Stale when ``expect_revision`` is not the
    current one, Conflict when the version was ever published (published versions never
    change, so a rollback shows what was shown)."""
    with store.transaction() as con:
        row = con.execute("SELECT collection, name, revision FROM arrangement_versions WHERE id = ?",
                          (version_id,)).fetchone()
        if row is None:
            raise NotFound("version", version_id)
        label = f"{row['collection']} / {row['name']}"
        if ever_published(con, version_id):
            raise Conflict(f"{label} has been published and can no longer change",
                           hint="save a new draft from it and edit that one")
        if expect_revision is not None and int(row["revision"]) != expect_revision:
            raise Stale(f"{label} was edited since you read it (your If-Match names revision "
                        f"{expect_revision}, it is now at {row['revision']}); your edit was not saved",
                        current_etag=f"v{version_id}-{row['revision']}",
                        hint="GET the version again, re-apply your change to its order, and PUT "
                             "with its new ETag")
        revision = int(row["revision"]) + 1
        con.execute("UPDATE arrangement_versions SET items = ?, revision = ?, updated_at = ?, "
                    "updated_by = ? WHERE id = ?",
                    (json.dumps(items), revision, utc_timestamp(), by, version_id))
    return revision


def publish(store: Store, collection: str, version_id: int, *, expect_state: int | None = None,
            expect_revision: int | None = None) -> int:
    """Publish a version (rewriting the storefront grid); the new publication state."""
    with store.transaction() as con:
        _check_state(con, collection, expect_state)
        version = version_by_id(store, version_id)
        if expect_revision is not None and version["revision"] != expect_revision:
            raise Stale(f"{collection} / {version['name']} was edited since you read it; "
                        "nothing was published", current_etag=f"v{version_id}-{version['revision']}",
                        hint="review the version again before publishing it")
        return _publish_row(con, store, collection, version, "publish")


def rollback(store: Store, collection: str, to_id: int | None = None, *,
             expect_state: int | None = None) -> tuple[int, int]:
    """Show again the version published before the current one (or ``to_id``, which must be
    below the top of the stack); ``(version id, new publication state)``."""
    with store.transaction() as con:
        _check_state(con, collection, expect_state)
        stack = _stack(con, collection)
        if to_id is None:
            if len(stack) < 2:
                raise Conflict(f"{collection} has no earlier published version to roll back to",
                                 hint="see: vismerch versions list STORE --collection " + collection)
            to_id = stack[-2]
        elif to_id not in stack[:-1]:
            raise Conflict(f"that version of {collection} was not published before the current one",
                           hint="publish it instead")
        version = version_by_id(store, to_id)
        return to_id, _publish_row(con, store, collection, version, "rollback")
