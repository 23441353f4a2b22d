"""GET /storefront/collections/{collection}: a page of the published grid, for storefronts.

Served from the precomputed grid that publish and rollback write (``catalog.grids``), as it
is live now: dated rules that started or ended since it was arranged are applied at read
time (``service.live``). Per request a ``PRAGMA data_version`` and, when that page was
answered before, bytes from a small in-process cache, on the event loop (no thread hop); the
live grid is recomputed only when the store changes or a rule starts or ends. No model, feature
shard or arrangement is touched. Answers carry an ETag (it changes with every publish or
rollback) and Cache-Control; a matching If-None-Match gets 304.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from datetime import datetime
from typing import Annotated
from urllib.parse import quote

import anyio.to_thread
from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from pydantic import BaseModel

from vismerch.catalog import event_meta, experiments_store
from vismerch.catalog.changes import ChangeCounter
from vismerch.catalog.grids import version_grid
from vismerch.catalog.store import DB_NAME, utc_timestamp
from vismerch.events.intake import hash_visitor
from vismerch.experiments.assign import HOLDOUT, assign, in_window
from vismerch.serve.auth import require
from vismerch.serve.errors import ApiError
from vismerch.serve.routes.common import etag_matches, page_limit, quoted, store
from vismerch.service.live import LiveGrids, live_version

router = APIRouter(tags=["storefront"])
# published grids are what a public storefront shows anyway; a minute of caching, then
# revalidation with the ETag (a 304 costs one indexed query)
CACHE_CONTROL = "public, max-age=60, must-revalidate"
PRIVATE_CACHE = "private, max-age=60, must-revalidate"
_CACHE_PAGES = 2048


class GridSlot(BaseModel):
    id: str
    position: int  # 1-based over the whole grid
    row: int  # 0-based at this width
    column: int
    thumbnail: str | None  # URL of the product's thumbnail (by id); null when it has none


class StorefrontPage(BaseModel):
    collection: str
    version: str
    version_id: int  # send it with the page's shopper events (POST /api/v1/events)
    experiment: int | None = None  # the running experiment the visitor is in (send it with events)
    variant: str | None = None  # that experiment's variant the visitor sees ("holdout": the live one)
    columns: int
    offset: int
    limit: int
    total: int
    items: list[GridSlot]


class _Pages:
    """Rendered pages by (collection, publication, columns, offset, limit), LRU-bounded."""

    def __init__(self, size: int):
        self.size, self._pages = size, OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> tuple[bytes, str] | None:
        with self._lock:
            hit = self._pages.get(key)
            if hit is not None:
                self._pages.move_to_end(key)
            return hit

    def put(self, key: tuple, value: tuple[bytes, str]) -> None:
        with self._lock:
            self._pages[key] = value
            while len(self._pages) > self.size:
                self._pages.popitem(last=False)


def setup(app) -> None:
    app.state.storefront_pages = _Pages(_CACHE_PAGES)
    app.state.storefront_live = None  # service.live.LiveGrids, made on the first read
    app.state.clock = utc_timestamp  # now, as an RFC 3339 UTC stamp (tests set their own)
    app.state.storefront_salt = None  # the store's visitor salt, read once (it never changes)
    app.state.storefront_arms = _Arms()


def _render(request: Request, collection: str, columns: int, offset: int, limit: int,
            version_id: int | None = None, experiment: tuple[int, str] | None = None,
            live: dict | None = None) -> tuple[bytes, str]:
    """A page of the live grid ``live``, or of version ``version_id`` (an experiment's variant)."""
    grid = live
    if version_id is not None:  # an experiment's variant: its dated rules applied as the live grid's
        variant = version_grid(store(request), version_id)
        grid = None if variant is None else live_version(store(request), collection, variant,
                                                          request.app.state.clock())
    if grid is None:  # unpublished between the two queries
        raise ApiError(404, "not_found", f"collection {collection!r} has no published arrangement")
    ids, thumbs = grid["ids"], grid["thumbs"]
    prefix = str(request.scope.get("root_path", "")) + "/api/v1/products/"
    items = [{"id": pid, "position": k + 1, "row": k // columns, "column": k % columns,
              "thumbnail": f"{prefix}{quote(pid, safe='')}/thumbnail" if thumbs[k] else None}
             for k, pid in enumerate(ids[offset:offset + limit], start=offset)]
    page = {"collection": collection, "version": grid["version_name"], "version_id": grid["version_id"],
            "experiment": experiment[0] if experiment else None,
            "variant": experiment[1] if experiment else None, "columns": columns,
            "offset": offset, "limit": limit, "total": len(ids), "items": items}
    tag = hashlib.sha256(json.dumps([grid["etag"], columns, offset, limit, experiment]).encode()
                         ).hexdigest()[:20]
    return json.dumps(page, separators=(",", ":")).encode(), tag


@router.get("/storefront/collections/{collection}", response_model=StorefrontPage,
            summary="A page of a collection's published grid (ETag, Cache-Control)",
            responses={304: {"description": "Not modified (If-None-Match matched the ETag)"}})
async def storefront_page(
    request: Request,
    collection: Annotated[str, Path(min_length=1, max_length=200)],
    columns: Annotated[int, Query(ge=1, le=12, description="Grid width the storefront shows")] = 4,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Capped at serve_page_limit")] = 48,
    visitor: Annotated[str | None, Query(min_length=1, max_length=200, description=(
        "The shopper's opaque id (or the X-Visitor-Id header): puts them in the collection's "
        "running experiment, the same variant on every page"))] = None,
    x_visitor_id: Annotated[str | None, Header(max_length=200)] = None,
    if_none_match: Annotated[str | None, Header()] = None,
    _: object = Depends(require("storefront")),
) -> Response:
    # async with the common path inline (one primary-key read, then a cached page): a
    # storefront request pays no thread-pool hop; rendering a page not cached yet (the grid's
    # ids decoded, up to serve_page_limit slots) runs in a worker thread
    limit = page_limit(request, limit)
    live = await _live_grid(request, collection)
    if live is None:
        raise ApiError(404, "not_found", f"collection {collection!r} has no published arrangement",
                       field="collection",
                       hint=f"publish a version first: POST /api/v1/collections/{collection}/publish")
    pages: _Pages = request.app.state.storefront_pages
    arm = _experiment_arm(request, collection, visitor or x_visitor_id)
    key = (collection, live["etag"], live.get("until"), columns, offset, limit, arm)
    hit = pages.get(key)
    if hit is None:
        version_id, experiment = (None, None) if arm is None else (arm[2], arm[:2])
        hit = await anyio.to_thread.run_sync(_render, request, collection, columns, offset, limit,
                                             version_id, experiment, live)
        pages.put(key, hit)
    payload, tag = hit
    # a visitor's own variant: no shared cache may hand it to another shopper
    headers = {"ETag": quoted(tag), "Cache-Control": CACHE_CONTROL if arm is None else PRIVATE_CACHE}
    if live.get("until") is not None:  # a rule starts or ends soon: no cache may keep this past it
        age = _seconds_until(live["until"], request.app.state.clock())
        if age < 60:
            headers["Cache-Control"] = headers["Cache-Control"].replace("max-age=60", f"max-age={age}")
    if arm is not None and x_visitor_id and not visitor:
        headers["Vary"] = "X-Visitor-Id"
    if etag_matches(if_none_match, tag):
        return Response(status_code=304, headers=headers)
    return Response(payload, media_type="application/json", headers=headers)


async def _live_grid(request: Request, collection: str) -> dict | None:
    """The grid live now (dated rules applied, ``service.live``): kept between rule starts
    and ends while the store does not change, recomputed in a worker thread otherwise."""
    state = request.app.state
    if state.storefront_live is None:
        state.storefront_live = LiveGrids(store(request).path / DB_NAME)
    now = state.clock()
    grid = state.storefront_live.cached(collection, now)
    if grid is LiveGrids.MISS:
        grid = await anyio.to_thread.run_sync(
            lambda: state.storefront_live.refresh(store(request), collection, now))
    return grid


def _experiment_arm(request: Request, collection: str,
                    visitor: str | None) -> tuple[int, str, int | None] | None:
    """(experiment id, variant name, version id to serve; None = the published one) for a
    visitor of a collection with a running experiment; None without either."""
    if not visitor:
        return None
    return request.app.state.storefront_arms.arm(request, collection, visitor)


class _Arms:
    """Visitors' variants, remembered while nothing is committed to the store (``PRAGMA
    data_version``: a new, stopped or promoted experiment invalidates them), so a visitor's
    next page costs a pragma and a dict lookup rather than a query and two hashes."""

    def __init__(self, size: int = 100_000):
        self.size, self._changes, self._version = size, None, None
        self._running: dict[str, dict | None] = {}
        self._arms: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def arm(self, request: Request, collection: str, visitor: str) -> tuple[int, str, int | None] | None:
        with self._lock:
            self._check_version(request)
            if collection not in self._running:
                self._running[collection] = experiments_store.running(store(request), collection)
            exp = self._running[collection]
            if exp is None or not in_window(exp, _now()):
                return None
            key = (exp["id"], visitor)
            hit = self._arms.get(key)
            if hit is None:
                hit = _assign_arm(request, exp, visitor)
                self._arms[key] = hit
                while len(self._arms) > self.size:
                    self._arms.popitem(last=False)
            return hit

    def _check_version(self, request: Request) -> None:
        if self._changes is None:
            self._changes = ChangeCounter(store(request).path / DB_NAME)
        version = self._changes.value()
        if version is None or version != self._version:  # something was committed: forget all
            self._version = version
            self._running.clear()
            self._arms.clear()


def _seconds_until(stamp: str, now: str) -> int:
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    try:
        gap = datetime.strptime(stamp, fmt) - datetime.strptime(now, fmt)
    except ValueError:
        return 0
    return max(0, int(gap.total_seconds()))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _assign_arm(request: Request, exp: dict, visitor: str) -> tuple[int, str, int | None] | None:
    salt = request.app.state.storefront_salt or _salt(request)
    if salt is None:
        return None
    variant = assign(exp, hash_visitor(salt, visitor))
    if variant is None:
        return (exp["id"], HOLDOUT, None)
    return (exp["id"], variant["name"], int(variant["version_id"]))


def _salt(request: Request) -> str | None:
    salt = event_meta.existing_salt(store(request))
    request.app.state.storefront_salt = salt
    return salt
