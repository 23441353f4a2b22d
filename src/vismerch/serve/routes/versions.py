"""Arrangement versions of a collection: list, save a draft, read, edit a draft (If-Match),
diff, publish and roll back (If-Match on the publication state), export CSV/JSON.

ETags: a version's is ``"v<id>-<revision>"`` (GET/PUT answer it in ``ETag``); the list's
``ETag`` header is the collection's publication state, which publish and rollback need as
``If-Match`` so two publishers never silently overwrite each other. A write without
If-Match is 428, with a stale one 412 (nothing changed).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from pydantic import BaseModel, Field, field_validator

from vismerch.serve.auth import Principal, require
from vismerch.serve.errors import ApiError
from vismerch.serve.routes.common import Paging, workspace
from vismerch.service import versions
from vismerch.service.models_versions import (
    Publication,
    VersionDetail,
    VersionDiff,
    VersionExportJson,
    VersionSummary,
)
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["versions"])
Collection = Annotated[str, Path(min_length=1, max_length=200, description="Collection id")]
Name = Annotated[str, Path(min_length=1, max_length=120, description="Version name, or `published`")]
IfMatch = Annotated[str | None, Header(max_length=2000, description="The ETag you read (required)")]
Width = Annotated[int, Field(ge=1, le=12)]


class NewVersion(BaseModel):
    name: str = Field(min_length=1, max_length=120, description="Unique in the collection")
    columns: list[Width] | None = Field(
        None, min_length=1, max_length=12,
        description="Grid widths to optimise at once, e.g. [2,3,4,5] (the first is the main one; a "
                    "single number is taken as [n]); default [4]")
    mode: str = Field("mix", max_length=20, description="mix (spread colours) or flow (colour blocks)")

    @field_validator("columns", mode="before")
    @classmethod
    def _one_width(cls, value: object) -> object:
        return [value] if isinstance(value, int) and not isinstance(value, bool) else value


class NewOrder(BaseModel):
    ids: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        max_length=versions.MAX_IDS, description="Product ids by position")


class PublishBody(BaseModel):
    version: str = Field(min_length=1, max_length=120, description="Version name to publish")
    version_etag: str | None = Field(
        None, max_length=200,
        description="Optional: the version's ETag as you reviewed it (412 if edited since)")


class RollbackBody(BaseModel):
    to: str | None = Field(None, min_length=1, max_length=120,
                           description="An earlier published version (default: the one before)")


def _if_match(header: str | None) -> str:
    """The If-Match a write needs: 428 when missing (or ``*``, which would overwrite blindly)."""
    if header is None or not header.strip():
        raise ApiError(428, "precondition_required", "If-Match is required: send the ETag you read",
                       field="If-Match",
                       hint="GET the version (or the collection's versions list, to publish) and send "
                            "its ETag header as If-Match")
    if header.strip() == "*":
        raise ApiError(428, "precondition_required",
                       "If-Match: * is not accepted here; send the ETag you read", field="If-Match")
    return header


def _etag(response: Response, tag: str) -> None:
    response.headers["ETag"] = tag


@router.get("/collections/{collection}/versions", response_model=Page[VersionSummary],
            summary="Saved versions, oldest first (ETag header: the publication state, If-Match for "
                    "publish/rollback)")
def list_versions(request: Request, response: Response, collection: Collection, paging: Paging,
                  _: object = Depends(require("viewer"))) -> Page[VersionSummary]:
    out = versions.list_versions(workspace(request), collection)
    _etag(response, out.etag)
    return paginate(out.versions, lambda v: [v.id], *paging)


@router.post("/collections/{collection}/versions", response_model=VersionDetail, status_code=201,
             summary="Save the current arrangement as a draft version")
def save_draft(request: Request, response: Response, collection: Collection, body: NewVersion,
               who: Principal = Depends(require("merchandiser"))) -> VersionDetail:
    out = versions.save_draft(workspace(request), collection, body.name, columns=body.columns,
                              mode=body.mode, by=who.key_id)
    _etag(response, out.etag)
    return out


@router.get("/collections/{collection}/versions/{name}", response_model=VersionDetail,
            summary="One version with its order (ETag header)")
def get_version(request: Request, response: Response, collection: Collection, name: Name,
                _: object = Depends(require("viewer"))) -> VersionDetail:
    out = versions.get_version(workspace(request), collection, name)
    _etag(response, out.etag)
    return out


@router.put("/collections/{collection}/versions/{name}", response_model=VersionDetail,
            summary="Replace a draft's order (If-Match: the version's ETag; published versions: 409)")
def edit_draft(request: Request, response: Response, collection: Collection, name: Name, body: NewOrder,
               if_match: IfMatch = None, who: Principal = Depends(require("merchandiser"))) -> VersionDetail:
    out = versions.edit_draft(workspace(request), collection, name, body.ids, expect=_if_match(if_match),
                              by=who.key_id)
    _etag(response, out.etag)
    return out


@router.get("/collections/{collection}/diff", response_model=VersionDiff,
            summary="Products moved, added and removed from version a to version b")
def diff(request: Request, collection: Collection,
         a: Annotated[str, Query(min_length=1, max_length=120, description="From version (or published)")],
         b: Annotated[str, Query(min_length=1, max_length=120, description="To version (or published)")],
         _: object = Depends(require("viewer"))) -> VersionDiff:
    return versions.diff(workspace(request), collection, a, b)


@router.post("/collections/{collection}/publish", response_model=Publication,
             summary="Publish a version (If-Match: the publication state from the versions list)")
def publish(request: Request, response: Response, collection: Collection, body: PublishBody,
            if_match: IfMatch = None, _: object = Depends(require("publisher"))) -> Publication:
    out = versions.publish(workspace(request), collection, body.version, expect=_if_match(if_match),
                           version_etag_seen=body.version_etag)
    _etag(response, out.etag)
    return out


@router.post("/collections/{collection}/rollback", response_model=Publication,
             summary="Show the previously published version again (If-Match: the publication state)")
def rollback(request: Request, response: Response, collection: Collection, body: RollbackBody | None = None,
             if_match: IfMatch = None, _: object = Depends(require("publisher"))) -> Publication:
    out = versions.rollback(workspace(request), collection, body.to if body else None,
                            expect=_if_match(if_match))
    _etag(response, out.etag)
    return out


@router.get("/collections/{collection}/versions/{name}/export", response_class=Response,
            summary="A version as CSV (formula cells neutralised) or JSON, as a file",
            responses={200: {"description": "The export file", "model": VersionExportJson,
                             "content": {"text/csv": {"schema": {"type": "string"}}}}})
def export(request: Request, collection: Collection, name: Name,
           format: Annotated[str, Query(pattern="^(csv|json)$", description="csv or json")] = "csv",  # noqa: A002
           _: object = Depends(require("viewer"))) -> Response:
    out = versions.export(workspace(request), collection, name, format)
    return Response(out.text, media_type=out.media_type,
                    headers={"Content-Disposition": f'attachment; filename="{out.filename}"'})
