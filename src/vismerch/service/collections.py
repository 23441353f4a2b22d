"""Collections: list, read, create (rule collections and sub-collections), delete, members,
column collections and a refresh of every membership."""

from __future__ import annotations

from typing import Any

from vismerch.catalog import collections as db
from vismerch.catalog import experiments_store
from vismerch.errors import Conflict
from vismerch.merch import collections as colls
from vismerch.service.models_merch import Collection, CollectionDeleted, CollectionsRefreshed
from vismerch.service.workspace import Workspace


def _model(row: dict[str, Any]) -> Collection:
    return Collection(id=row["name"], kind=row["kind"], parent=row.get("parent"),
                      size=row["size"], where=row["definition"].get("where"),
                      published_version=row.get("published_version"), auto=row["auto"],
                      definition=row["definition"])


def list_collections(ws: Workspace) -> list[Collection]:
    """Every collection with its size and published version, by name."""
    return [_model(row) for row in db.with_sizes(ws.store)]


def get_collection(ws: Workspace, name: str) -> Collection:
    colls.get_collection(ws.store, name)  # NotFound with close names
    return _model(db.with_sizes(ws.store, name)[0])


def create_collection(ws: Workspace, name: str, *, where: str | None = None,
                      parent: str | None = None, column: str | None = None,
                      value: str | None = None) -> Collection:
    """A rule collection (``where``), a column collection (``column`` + ``value``) or, with
    ``parent``, a sub-collection of the parent's products (that match ``where``)."""
    colls.create_collection(ws.store, name, where=where, column=column, value=value,
                            parent=parent)
    return get_collection(ws, name)


def delete_collection(ws: Workspace, name: str, *, unpublish: bool = False) -> CollectionDeleted:
    """Delete a collection made by hand, its rules and versions; categories, column
    collections, parents of sub-collections and (unless ``unpublish``, a publisher's right)
    published collections are refused (Conflict), and so is one with a running experiment
    (its variants are versions the delete would remove)."""
    running = experiments_store.running(ws.store, name)
    if running is not None:
        raise Conflict(f"{name} has a running experiment ({running['id']}) showing its versions",
                       hint=f"stop or promote it first: POST /api/v1/experiments/{running['id']}/stop")
    out = colls.delete_collection(ws.store, name, unpublish=unpublish)
    return CollectionDeleted(id=out["name"], rules_removed=out["rules_removed"],
                             versions_removed=out["versions_removed"])


def members(ws: Workspace, name: str) -> list[str]:
    return colls.members(ws.store, name)


def add_column(ws: Workspace, column: str) -> CollectionsRefreshed:
    """Every value of manifest column ``column`` becomes a collection (kept after ingests)."""
    return CollectionsRefreshed(**colls.add_collection_column(ws.store, column))


def refresh(ws: Workspace) -> CollectionsRefreshed:
    return CollectionsRefreshed(**colls.refresh_collections(ws.store))
