"""Arrangement versions: list, save a draft from the current arrangement, get, edit a
draft's order, diff, publish, roll back, export (CSV/JSON).

Optimistic concurrency: every version has an ETag ``"v<id>-<revision>"`` (an edit bumps
the revision) and every collection a publication-state ETag ``"p<n>"`` (``n``: its newest
publish or rollback). Edits take the version's ETag, publish and rollback the state's;
the check runs inside the write's own transaction (``catalog.versions_store``), so of two
writers that read the same ETag exactly one wins and the other gets ``Stale`` (HTTP 412)
with nothing changed. ``expect=None`` skips the check (the CLI: one person at a terminal);
the HTTP layer always passes one (a missing If-Match is its 428).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from vismerch.arrange import versions as pure
from vismerch.arrange.versions import PUBLISHED
from vismerch.catalog import collections as db_collections
from vismerch.catalog import experiments_store as xstore
from vismerch.catalog import versions_store as vstore
from vismerch.catalog.grids import grid_etag_only
from vismerch.errors import Conflict, InvalidInput, NotFound, Stale
from vismerch.service.models_versions import (
    Publication,
    VersionDetail,
    VersionDiff,
    VersionExport,
    VersionList,
    VersionMove,
    VersionPosition,
    VersionSlot,
    VersionSummary,
)
from vismerch.service.workspace import Workspace

MAX_IDS = 100_000  # a hand-edited order longer than any collection is a mistake
_VERSION_TAG = re.compile(r"^v(\d+)-(\d+)$")
_STATE_TAG = re.compile(r"^p(\d+)$")


def version_etag(version_id: int, revision: int) -> str:
    return f'"v{version_id}-{revision}"'


def state_etag(state: int) -> str:
    return f'"p{state}"'


def _tags(expect: str | Sequence[str]) -> list[str]:
    """If-Match values without quotes or ``W/`` (a header may list several)."""
    parts = expect.split(",") if isinstance(expect, str) else list(expect)
    return [p.strip().removeprefix("W/").strip('"') for p in parts if p.strip()]


def _expected(expect: str | Sequence[str] | None, pattern: re.Pattern, current: tuple[int, ...],
              what: str, current_tag: str, stale: str) -> tuple[int, ...] | None:
    """The ETag numbers the caller expects: the current ones when any listed tag matches
    them (the store re-checks atomically), else Stale saying ``stale``. None when no check
    was asked."""
    if expect is None:
        return None
    tags = _tags(expect)
    parsed = [tuple(int(g) for g in m.groups()) for m in map(pattern.match, tags) if m]
    if current in parsed:
        return current
    if not parsed:
        raise InvalidInput("If-Match", f"If-Match {', '.join(tags) or '(empty)'} is not an ETag of "
                                       f"{what}", hint=f"send the ETag {current_tag}")
    shown = ", ".join(f'"{t}"' for t in tags)
    raise Stale(f"{stale} (you sent If-Match {shown}, it is now {current_tag})",
                current_etag=current_tag.strip('"'))


def _expected_version(row: dict[str, Any], expect: str | Sequence[str] | None, stale: str) -> int | None:
    """The revision the caller expects of version ``row`` (None: no check)."""
    label = f"{row['collection']} / {row['name']}"
    got = _expected(expect, _VERSION_TAG, (row["id"], row["revision"]), label,
                    version_etag(row["id"], row["revision"]),
                    f"{label} was edited since you read it; {stale}")
    return None if got is None else got[1]


def _expected_state(ws: Workspace, collection: str, expect: str | Sequence[str] | None) -> int | None:
    """The publication state the caller expects (None: no check)."""
    current = vstore.publication_state(ws.store, collection)
    got = _expected(expect, _STATE_TAG, (current,), f"the publication of {collection}", state_etag(current),
                    f"{collection} was published or rolled back since you read it; nothing was changed")
    return None if got is None else got[0]


# -- reads ------------------------------------------------------------------------------


def _summary(row: dict[str, Any], top: int | None) -> dict[str, Any]:
    return {"name": row["name"], "id": row["id"], "collection": row["collection"],
            "created_at": row["created_at"], "created_by": row["created_by"],
            "updated_at": row["updated_at"], "updated_by": row["updated_by"],
            "revision": row["revision"], "published": row["id"] == top,
            "editable": not row["ever_published"], "etag": version_etag(row["id"], row["revision"])}


def list_versions(ws: Workspace, collection: str) -> VersionList:
    """The collection's versions, oldest first, with its publication-state ETag."""
    store = ws.store
    vstore.require_collection(store, collection)
    stack = vstore.published_stack(store, collection)
    top = stack[-1] if stack else None
    rows = vstore.list_rows(store, collection)
    versions = [VersionSummary(**_summary(r, top), size=r["size"]) for r in rows]
    return VersionList(collection=collection, etag=state_etag(vstore.publication_state(store, collection)),
                       published=next((v.name for v in versions if v.published), None), versions=versions)


def list_all(ws: Workspace) -> list[VersionSummary]:
    """Every collection's versions (the CLI's ``versions list`` without a collection)."""
    store = ws.store
    tops: dict[str, int | None] = {}
    out = []
    for r in vstore.list_rows(store):
        if r["collection"] not in tops:
            stack = vstore.published_stack(store, r["collection"])
            tops[r["collection"]] = stack[-1] if stack else None
        out.append(VersionSummary(**_summary(r, tops[r["collection"]]), size=r["size"]))
    return out


def _row(ws: Workspace, collection: str, name: str) -> dict[str, Any]:
    store = ws.store
    vstore.require_collection(store, collection)
    if name == PUBLISHED:
        stack = vstore.published_stack(store, collection)
        if not stack:
            raise NotFound("version", name, f"{collection} has no published version",
                           hint=f"publish one: vismerch versions publish STORE {collection} NAME")
        return vstore.version_by_id(store, stack[-1])
    row = vstore.version_row(store, collection, name)
    if row is None:
        known = vstore.version_names(store, collection)
        raise NotFound("version", name, f"{collection} has no version named {name!r}",
                       hint="versions: " + (", ".join(known[-20:]) if known else "none saved yet"))
    return row


def _detail(ws: Workspace, row: dict[str, Any]) -> VersionDetail:
    store = ws.store
    stack = vstore.published_stack(store, row["collection"])
    row = {**row, "ever_published": vstore.ever_published(store, row["id"])}
    items = [VersionSlot(position=k + 1, id=pid, reason=reason)
             for k, (pid, reason) in enumerate(row["items"])]
    return VersionDetail(**_summary(row, stack[-1] if stack else None), size=len(items),
                         ids=[i.id for i in items], items=items, params=row["params"],
                         summary=row["summary"])


def get_version(ws: Workspace, collection: str, name: str) -> VersionDetail:
    """One version (``published``: the one shown now) with its order and reasons."""
    return _detail(ws, _row(ws, collection, name))


def published_version(ws: Workspace, collection: str) -> VersionDetail | None:
    vstore.require_collection(ws.store, collection)
    stack = vstore.published_stack(ws.store, collection)
    return _detail(ws, vstore.version_by_id(ws.store, stack[-1])) if stack else None


def diff(ws: Workspace, collection: str, a: str, b: str) -> VersionDiff:
    """What changed from version ``a`` to version ``b`` (either may be ``published``)."""
    va, vb = _row(ws, collection, a), _row(ws, collection, b)
    d = pure.diff_orders([pid for pid, _ in va["items"]], [pid for pid, _ in vb["items"]])
    return VersionDiff(collection=collection, a=va["name"], b=vb["name"],
                       moved=[VersionMove(**m) for m in d["moved"]],
                       added=[x["id"] for x in d["added"]], removed=[x["id"] for x in d["removed"]],
                       added_at=[VersionPosition(**x) for x in d["added"]],
                       removed_from=[VersionPosition(**x) for x in d["removed"]],
                       unchanged=d["unchanged"], shifted=d["shifted"])


# -- writes -----------------------------------------------------------------------------


def save_order(ws: Workspace, collection: str, name: str, result: Any, *,
               params: dict[str, Any] | None = None, by: str | None = None, publish: bool = False,
               expect_state: str | Sequence[str] | None = None) -> VersionDetail:
    """Save an arranged order (a CollectionArrangement or a list of ids) as a draft named
    ``name``; with ``publish``, publish it in the same transaction (and the storefront grid
    with it)."""
    store = ws.store
    vstore.require_collection(store, collection)
    pure.check_version_name(name)
    items, stored_params, summary = pure.items_of(result)
    pure.check_ids([pid for pid, _ in items])
    expected = _expected_state(ws, collection, expect_state) if publish else None
    version = vstore.NewVersion(name, items, {**stored_params, **(params or {})}, summary)
    saved = vstore.insert_version(store, collection, version, by=by, publish=publish,
                                  expect_state=expected)
    return _detail(ws, vstore.version_by_id(store, saved["id"]))


def save_draft(ws: Workspace, collection: str, name: str, *, columns: int | Sequence[int] | None = None,
               mode: str = "mix", by: str | None = None) -> VersionDetail:
    """Arrange ``collection`` now (rules, scores, look-alikes: as ``vismerch arrange``) and
    save the result as a draft."""
    from vismerch.arrange.engine import MODES
    from vismerch.arrange.layout import arrange_collection

    pure.check_version_name(name)
    if mode not in MODES:
        raise InvalidInput("mode", f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    widths = [columns] if isinstance(columns, int) else list(columns or [4])
    if not widths or any(isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= 12 for c in widths):
        raise InvalidInput("columns", f"columns must be widths between 1 and 12, got {columns!r}")
    vstore.require_collection(ws.store, collection)
    if vstore.version_row(ws.store, collection, name) is not None:  # before the arrangement's cost
        raise Conflict(f"{collection} already has a version named {name!r}",
                       hint="save under a new name (a draft can be edited: PUT its order)")
    from vismerch.service.arrangements import behaviour_for

    result = arrange_collection(ws.store, collection, columns=widths, mode=mode, settings=ws.settings,
                                load_features=ws.features,  # the workspace's cached vectors
                                behaviour=behaviour_for(ws, collection, None))
    return save_order(ws, collection, name, result, by=by)


def edit_draft(ws: Workspace, collection: str, name: str, ids: Sequence[str], *,
               expect: str | Sequence[str] | None, by: str | None = None) -> VersionDetail:
    """Replace a draft's order with ``ids`` (products of this store, none twice). ``expect``:
    the version's ETag as read (Stale when someone edited it since). Published versions
    never change (Conflict)."""
    if name == PUBLISHED:
        raise InvalidInput("name", "the published version cannot be edited; edit a draft")
    row = _row(ws, collection, name)
    if row["id"] in xstore.running_versions(ws.store, collection):
        raise Conflict(f"{name} is a variant of a running experiment and cannot change",
                       hint="stop or promote the experiment first, or edit a copy saved under a new name")
    revision = _expected_version(row, expect, "your edit was not saved")
    if not ids or len(ids) > MAX_IDS:
        raise InvalidInput("ids", f"ids lists {len(ids)} products; a version holds 1 to {MAX_IDS}")
    # the collection's own products only (a grid of another collection's products would go
    # live under this one's name), and of those the ok ones: a refused image has nothing to show
    members = set(db_collections.member_ids(ws.store, collection))
    known = {p.id for p in ws.store.products() if p.id in members}
    ids = pure.check_ids(ids, known, where=f"collection {collection!r}")
    items = pure.reorder(row["items"], ids)
    vstore.update_items(ws.store, row["id"], items, by=by,
                        expect_revision=revision)
    return get_version(ws, collection, name)


def _publication(ws: Workspace, collection: str, version_id: int, state: int) -> Publication:
    version = vstore.version_by_id(ws.store, version_id)
    return Publication(collection=collection, published=version["name"], version_id=version_id,
                       etag=state_etag(state), grid_etag=grid_etag_only(ws.store, collection) or "")


def publication_etag(ws: Workspace, collection: str) -> str:
    vstore.require_collection(ws.store, collection)
    return state_etag(vstore.publication_state(ws.store, collection))


def publish(ws: Workspace, collection: str, name: str, *, expect: str | Sequence[str] | None = None,
            version_etag_seen: str | None = None) -> Publication:
    """Make ``name`` the version the storefront shows (its grid is rewritten in the same
    transaction). ``expect``: the publication-state ETag as read; ``version_etag_seen``:
    optionally, the version's ETag as reviewed (Stale if the draft was edited since)."""
    row = _row(ws, collection, name)
    state = _expected_state(ws, collection, expect)
    revision = _expected_version(row, version_etag_seen, "nothing was published")
    new_state = vstore.publish(ws.store, collection, row["id"], expect_state=state, expect_revision=revision)
    return _publication(ws, collection, row["id"], new_state)


def rollback(ws: Workspace, collection: str, to: str | None = None, *,
             expect: str | Sequence[str] | None = None) -> Publication:
    """Show again the version published before the current one (or ``to``, published earlier)."""
    vstore.require_collection(ws.store, collection)
    to_id = None if to is None else int(_row(ws, collection, to)["id"])
    state = _expected_state(ws, collection, expect)
    version_id, new_state = vstore.rollback(ws.store, collection, to_id, expect_state=state)
    return _publication(ws, collection, version_id, new_state)


# -- export -----------------------------------------------------------------------------

MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


def export(ws: Workspace, collection: str, name: str = PUBLISHED, fmt: str = "csv", *,
           spreadsheet: bool = True) -> VersionExport:
    """A version's ``(position, product id, title)`` rows as CSV or JSON text, for syncing
    to a storefront. CSV cells that a spreadsheet would run as formulas are neutralised
    unless ``spreadsheet`` is False."""
    fmt = (fmt or "").lower()
    if fmt not in pure.EXPORT_FORMATS:
        raise InvalidInput("format", f"unknown export format {fmt!r}", hint="choose csv or json")
    v = get_version(ws, collection, name)
    titles = {p.id: p.title for p in ws.store.products(status=None)}
    doc = {"collection": collection, "name": v.name, "created_at": v.created_at, "published": v.published,
           "items": [{"position": s.position, "id": s.id, "title": titles.get(s.id)} for s in v.items]}
    text = pure.render_export(doc, fmt, spreadsheet=spreadsheet)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", f"{collection}-{v.name}")
    return VersionExport(collection=collection, version=v.name, format=fmt, media_type=MEDIA_TYPES[fmt],
                         filename=f"{stem}.{fmt}", text=text)
