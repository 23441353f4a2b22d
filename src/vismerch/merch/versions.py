"""Arrangement versions: save, list, diff, publish, roll back, export.

A version is an immutable, named order of one collection (with each slot's reason and
the options that made it). Publishing marks the version a storefront should show;
``arrangement_publications`` keeps every publish and rollback, so the published version
is a stack: publish pushes, rollback pops (or pops back to a named version). Exports are
the ``(position, product id)`` pairs a storefront sync needs, as CSV or JSON.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vismerch.catalog.store import utc_timestamp
from vismerch.errors import Conflict, NotFound, UsageError
from vismerch.merch.collections import check_name, get_collection

PUBLISHED = "published"  # alias for the collection's published version


def _items_of(result: Any) -> tuple[list[list[str]], dict[str, Any], dict[str, Any]]:
    """(items, params, summary) from a CollectionArrangement, an Arrangement or a list of ids."""
    if hasattr(result, "arrangement"):  # CollectionArrangement
        arr = result.arrangement
        return ([[s.id, s.reason] for s in arr.slots], dict(result.params), result.summary())
    if hasattr(result, "slots"):  # Arrangement
        return ([[s.id, s.reason] for s in result.slots], dict(result.params),
                {"business": result.business})
    ids = [str(i) for i in result]
    return [[i, ""] for i in ids], {}, {}


def save_version(store: Any, collection: str, name: str, result: Any, *,
                 params: dict[str, Any] | None = None, publish: bool = False) -> dict[str, Any]:
    """Save an arranged order under ``name`` (unique per collection); with ``publish``,
    publish it in the same transaction (a kill leaves both or neither). Saving with
    ``publish`` again under the name of an unpublished version with the same order
    finishes an interrupted save-and-publish instead of failing on the name."""
    get_collection(store, collection)
    check_name(name)
    if name == PUBLISHED:
        raise UsageError(f"{PUBLISHED!r} is reserved (it names the published version)")
    items, stored_params, summary = _items_of(result)
    if len({i for i, _ in items}) != len(items):
        raise UsageError("a version cannot list a product twice")
    existing = store.db.execute("SELECT id, items FROM arrangement_versions WHERE collection = ? "
                                "AND name = ?", (collection, name)).fetchone()
    if existing is not None:
        stack = _stack(store, collection)
        unfinished = (publish and json.loads(existing["items"]) == items
                      and (not stack or stack[-1] != existing["id"]))
        if not unfinished:
            raise Conflict(f"{collection} already has a version named {name!r}",
                           hint="versions are immutable: save under a new name")
    with store.transaction() as con:
        if existing is None:
            version_id = int(con.execute(
                "INSERT INTO arrangement_versions (collection, name, created_at, params, items, summary)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (collection, name, utc_timestamp(),
                 json.dumps({**stored_params, **(params or {})}, default=str),
                 json.dumps(items), json.dumps(summary, default=str)),
            ).lastrowid)
        else:
            version_id = int(existing["id"])
        if publish:
            con.execute("INSERT INTO arrangement_publications (collection, version_id, action, at) "
                        "VALUES (?, ?, 'publish', ?)", (collection, version_id, utc_timestamp()))
    return {"id": version_id, "collection": collection, "name": name, "size": len(items),
            "published": publish}


def _stack(store: Any, collection: str) -> list[int]:
    """Replay publications: publish pushes, rollback pops back to its version."""
    stack: list[int] = []
    rows = store.db.execute("SELECT version_id, action FROM arrangement_publications "
                            "WHERE collection = ? ORDER BY id", (collection,)).fetchall()
    for row in rows:
        if row["action"] == "publish":
            stack.append(int(row["version_id"]))
        else:
            while stack and stack[-1] != int(row["version_id"]):
                stack.pop()
    return stack


def _row(store: Any, collection: str, name: str) -> Any:
    get_collection(store, collection)
    if name == PUBLISHED:
        stack = _stack(store, collection)
        if not stack:
            raise UsageError(f"{collection} has no published version",
                             hint=f"publish one: vismerch versions publish STORE {collection} NAME")
        return store.db.execute("SELECT * FROM arrangement_versions WHERE id = ?",
                                (stack[-1],)).fetchone()
    row = store.db.execute("SELECT * FROM arrangement_versions WHERE collection = ? AND name = ?",
                           (collection, name)).fetchone()
    if row is None:
        known = [r[0] for r in store.db.execute(
            "SELECT name FROM arrangement_versions WHERE collection = ? ORDER BY id", (collection,))]
        raise NotFound("version", name, f"{collection} has no version named {name!r}",
                       hint="versions: " + (", ".join(known) if known else "none saved yet"))
    return row


def get_version(store: Any, collection: str, name: str) -> dict[str, Any]:
    """A saved version with its items ``[{position, id, reason}]``."""
    row = _row(store, collection, name)
    items = json.loads(row["items"])
    stack = _stack(store, collection)
    return {"id": row["id"], "collection": row["collection"], "name": row["name"],
            "created_at": row["created_at"], "params": json.loads(row["params"]),
            "summary": json.loads(row["summary"] or "{}"),
            "published": bool(stack and stack[-1] == row["id"]),
            "items": [{"position": k + 1, "id": pid, "reason": reason}
                      for k, (pid, reason) in enumerate(items)]}


def list_versions(store: Any, collection: str | None = None) -> list[dict[str, Any]]:
    """``[{id, collection, name, created_at, size, published}]`` oldest first."""
    sql, args = "SELECT id, collection, name, created_at, items FROM arrangement_versions", ()
    if collection is not None:
        get_collection(store, collection)
        sql, args = sql + " WHERE collection = ?", (collection,)
    rows = store.db.execute(sql + " ORDER BY id", args).fetchall()
    tops: dict[str, int | None] = {}
    out = []
    for r in rows:
        if r["collection"] not in tops:
            stack = _stack(store, r["collection"])
            tops[r["collection"]] = stack[-1] if stack else None
        out.append({"id": r["id"], "collection": r["collection"], "name": r["name"],
                    "created_at": r["created_at"], "size": len(json.loads(r["items"])),
                    "published": tops[r["collection"]] == r["id"]})
    return out


def diff_orders(a: Sequence[str], b: Sequence[str]) -> dict[str, Any]:
    """Moved / added / removed products from order ``a`` to order ``b`` (1-based positions)."""
    pos_a = {pid: k + 1 for k, pid in enumerate(a)}
    pos_b = {pid: k + 1 for k, pid in enumerate(b)}
    moved = [{"id": pid, "from": pos_a[pid], "to": p, "delta": p - pos_a[pid]}
             for pid, p in pos_b.items() if pid in pos_a and pos_a[pid] != p]
    moved.sort(key=lambda m: (-abs(m["delta"]), m["to"]))
    return {
        "moved": moved,
        "added": [{"id": pid, "position": p} for pid, p in pos_b.items() if pid not in pos_a],
        "removed": [{"id": pid, "position": p} for pid, p in pos_a.items() if pid not in pos_b],
        "unchanged": sum(1 for pid, p in pos_b.items() if pos_a.get(pid) == p),
    }


def diff_versions(store: Any, collection: str, a: str, b: str) -> dict[str, Any]:
    """What changed from version ``a`` to version ``b`` (either may be ``published``)."""
    va, vb = get_version(store, collection, a), get_version(store, collection, b)
    out = diff_orders([i["id"] for i in va["items"]], [i["id"] for i in vb["items"]])
    return {"collection": collection, "from": va["name"], "to": vb["name"], **out}


def publish(store: Any, collection: str, name: str) -> dict[str, Any]:
    row = _row(store, collection, name)
    with store.transaction() as con:
        con.execute("INSERT INTO arrangement_publications (collection, version_id, action, at) "
                    "VALUES (?, ?, 'publish', ?)", (collection, row["id"], utc_timestamp()))
        _write_grid(con, store, collection, row)
    return {"collection": collection, "published": row["name"], "id": row["id"]}


def _write_grid(con: Any, store: Any, collection: str, row: Any) -> None:
    """The storefront's precomputed copy of the newly published version."""
    from vismerch.catalog.grids import write_grid

    ids = [pid for pid, _ in json.loads(row["items"])]
    write_grid(con, store, collection, int(row["id"]), row["name"], ids)


def published_version(store: Any, collection: str) -> dict[str, Any] | None:
    stack = _stack(store, collection)
    if not stack:
        return None
    name = store.db.execute("SELECT name FROM arrangement_versions WHERE id = ?",
                            (stack[-1],)).fetchone()[0]
    return get_version(store, collection, name)


def rollback(store: Any, collection: str, to: str | None = None) -> dict[str, Any]:
    """Publish again the version published before the current one (or ``to``, which must
    have been published earlier)."""
    get_collection(store, collection)
    stack = _stack(store, collection)
    if to is None:
        if len(stack) < 2:
            raise UsageError(f"{collection} has no earlier published version to roll back to",
                             hint="see: vismerch versions list STORE --collection " + collection)
        target = stack[-2]
    else:
        target = int(_row(store, collection, to)["id"])
        if target not in stack[:-1]:
            raise UsageError(f"version {to!r} of {collection} was not published before the "
                             "current one", hint="publish it instead: vismerch versions publish")
    with store.transaction() as con:
        con.execute("INSERT INTO arrangement_publications (collection, version_id, action, at) "
                    "VALUES (?, ?, 'rollback', ?)", (collection, target, utc_timestamp()))
        row = con.execute("SELECT * FROM arrangement_versions WHERE id = ?", (target,)).fetchone()
        _write_grid(con, store, collection, row)
    name = row["name"]
    return {"collection": collection, "published": name, "id": target}


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as a formula


def spreadsheet_safe(cell: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, prefixed with ``'`` (OWASP's
    CSV-injection advice); numbers and other text pass unchanged."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


def export_version(store: Any, collection: str, name: str = PUBLISHED, fmt: str = "csv",
                   path: str | Path | None = None, *, spreadsheet: bool = True) -> str:
    """The ``(position, product id)`` pairs of a version as CSV or JSON text; written to
    ``path`` too when given. CSV cells that start like a formula are neutralised unless
    ``spreadsheet`` is False (a machine sync that needs the ids byte for byte)."""
    fmt = fmt.lower()
    if fmt not in ("csv", "json"):
        raise UsageError(f"unknown export format {fmt!r}", hint="choose csv or json")
    version = get_version(store, collection, name)
    if fmt == "csv":
        buf = io.StringIO()
        # a bare CR in an id is not quoted by QUOTE_MINIMAL with "\n" lines, and readers
        # would split the row there: such a file quotes every cell
        bare_cr = any("\r" in item["id"] for item in version["items"])
        writer = csv.writer(buf, lineterminator="\n",
                            quoting=csv.QUOTE_NONNUMERIC if bare_cr else csv.QUOTE_MINIMAL)
        writer.writerow(["position", "product_id"])
        cell = spreadsheet_safe if spreadsheet else (lambda value: value)
        writer.writerows((item["position"], cell(item["id"])) for item in version["items"])
        text = buf.getvalue()
    else:
        text = json.dumps({"collection": collection, "version": version["name"],
                           "created_at": version["created_at"], "published": version["published"],
                           "items": [{"position": i["position"], "id": i["id"]}
                                     for i in version["items"]]}, indent=2) + "\n"
    if path is not None:
        Path(path).write_text(text)
    return text
