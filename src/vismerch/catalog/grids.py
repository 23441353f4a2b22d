"""Store-owned SQL for the precomputed storefront form of each published arrangement.

Publish and rollback rewrite one row per collection (ids by position, which have a
thumbnail, and an ETag), so a storefront read is one primary-key lookup: no model, no
feature shard, no replay of the publication history.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from vismerch.catalog.store import Store, utc_timestamp


def grid_etag(version_id: int, ids: list[str]) -> str:
    digest = hashlib.sha256(json.dumps([version_id, ids]).encode()).hexdigest()[:20]
    return f'"g{version_id}-{digest}"'


def write_grid(con: Any, store: Store, collection: str, version_id: int, version_name: str,
               ids: list[str]) -> str:
    """Replace ``collection``'s published grid (inside the caller's transaction); its ETag."""
    thumbs = [1 if store.has_thumbnail(pid) else 0 for pid in ids]
    etag = grid_etag(version_id, ids)
    con.execute(
        "INSERT OR REPLACE INTO published_grids (collection, version_id, version_name, etag, ids,"
        " thumbs, published_at) VALUES (?,?,?,?,?,?,?)",
        (collection, version_id, version_name, etag, json.dumps(ids), json.dumps(thumbs), utc_timestamp()))
    return etag


def read_grid(store: Store, collection: str) -> dict[str, Any] | None:
    """``{collection, version_id, version_name, etag, ids, thumbs, published_at}`` or None."""
    row = store.db.execute("SELECT * FROM published_grids WHERE collection = ?", (collection,)).fetchone()
    if row is None:
        return None
    out = dict(row)
    out["ids"] = json.loads(out["ids"])
    out["thumbs"] = [bool(t) for t in json.loads(out["thumbs"])]
    return out


def grid_etag_only(store: Store, collection: str) -> str | None:
    """The ETag alone, for an ``If-None-Match`` answered without reading the ids."""
    row = store.db.execute("SELECT etag FROM published_grids WHERE collection = ?", (collection,)).fetchone()
    return None if row is None else row[0]


def version_grid(store: Store, version_id: int) -> dict[str, Any] | None:
    """A saved version in the published grid's form (``read_grid``'s keys), for an experiment's
    variant: ids by position, which have a thumbnail, an ETag that changes with its revision."""
    row = store.db.execute("SELECT collection, name, items, revision FROM arrangement_versions WHERE id = ?",
                           (version_id,)).fetchone()
    if row is None:
        return None
    ids = [item[0] for item in json.loads(row["items"])]
    return {"collection": row["collection"], "version_id": version_id, "version_name": row["name"],
            "etag": grid_etag(version_id, [*ids, f"r{row['revision']}"]), "ids": ids,
            "thumbs": [store.has_thumbnail(pid) for pid in ids], "published_at": None}
