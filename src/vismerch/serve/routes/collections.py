"""Collections: list, read, create (rule collections, sub-collections), delete; the rules
that reach a collection's page; and the explained, paged arrangement preview."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from vismerch.serve.auth import Principal, allowed, require
from vismerch.serve.routes.common import Paging, page_limit, workspace
from vismerch.service import arrangements, collections, rules
from vismerch.service.models_merch import (
    Collection,
    CollectionDeleted,
    CollectionIn,
    Preview,
    PreviewIn,
    Rule,
)
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["collections"])
AsOf = Annotated[str | None, Query(max_length=40, description=(
    "As of this date or RFC 3339 time (default now): rules as they will be (or were) active then"))]
viewer = Depends(require("viewer"))
merchandiser = Depends(require("merchandiser"))
CollectionId = Annotated[str, Path(min_length=1, max_length=200, description="Collection id")]


@router.get("/collections", response_model=Page[Collection], summary="Collections with their size, by id")
def list_collections(request: Request, paging: Paging, _: object = viewer) -> Page[Collection]:
    return paginate(collections.list_collections(workspace(request)), lambda c: [c.id], *paging)


@router.post("/collections", response_model=Collection, status_code=201,
             summary="Create a rule collection or a sub-collection")
def create_collection(request: Request, body: CollectionIn, _: object = merchandiser) -> Collection:
    return collections.create_collection(workspace(request), body.id, where=body.where,
                                         parent=body.parent)


@router.get("/collections/{collection}", response_model=Collection, summary="One collection")
def get_collection(request: Request, collection: CollectionId, _: object = viewer) -> Collection:
    return collections.get_collection(workspace(request), collection)


@router.delete("/collections/{collection}", response_model=CollectionDeleted,
               summary="Delete a collection made by hand (categories: 409), its rules and versions; "
                       "a published one only with a publisher key (its storefront grid goes too)")
def delete_collection(request: Request, collection: CollectionId,
                      who: Principal = merchandiser) -> CollectionDeleted:
    return collections.delete_collection(workspace(request), collection,
                                         unpublish=allowed(who.role, "publisher"))


@router.get("/collections/{collection}/rules", response_model=Page[Rule],
            summary="The rules that reach this page (own, inherited from parents, global), by id")
def collection_rules(request: Request, collection: CollectionId, paging: Paging, at: AsOf = None,
                     _: object = viewer) -> Page[Rule]:
    return paginate(rules.rules_for_collection(workspace(request), collection, at=at),
                    lambda r: [r.id], *paging)


def _read_only(request: Request) -> None:
    """A read with a body: not audited (set before the body is validated, so a bad one is
    not either); a page turn commits nothing and the arrangement kept for the collection
    stays valid (service.arrangements)."""
    request.state.read_only = True


@router.post("/collections/{collection}/preview", response_model=Preview,
             summary="Arrange for several widths at once; one page of explained slots",
             dependencies=[Depends(_read_only)])
def preview(request: Request, collection: CollectionId, body: PreviewIn, at: AsOf = None,
            _: object = viewer) -> Preview:
    prefix = str(request.scope.get("root_path", "")) + "/api/v1/products/"
    return arrangements.preview(workspace(request), collection, columns=body.columns,
                                mode=body.mode, offset=body.offset,
                                limit=page_limit(request, body.limit), at=at or body.at,
                                thumbnail_prefix=prefix)
