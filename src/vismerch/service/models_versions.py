"""Typed results of ``service.versions`` (pydantic; the HTTP layer's response models).

ETags are given as sent in headers (``"v12-3"`` with the quotes), so a client can pass a
body's ``etag`` straight back as ``If-Match``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class VersionSummary(BaseModel):
    name: str
    id: int
    collection: str
    created_at: str
    created_by: str | None = Field(None, description="API key id (or null from the CLI)")
    updated_at: str | None = None
    updated_by: str | None = None
    revision: int = Field(description="Goes up with every edit of the draft")
    size: int = Field(description="Products in the order")
    published: bool = Field(description="The version the storefront shows now")
    editable: bool = Field(description="A draft never published (published versions never change)")
    etag: str = Field(description='"v<id>-<revision>": pass as If-Match to edit this draft')


class VersionSlot(BaseModel):
    position: int
    id: str
    reason: str = ""


class VersionDetail(VersionSummary):
    ids: list[str] = Field(description="Product ids by position")
    items: list[VersionSlot] = Field(description="The same order, each with why it is there")
    params: dict[str, Any] = Field(default_factory=dict, description="The arrangement options")
    summary: dict[str, Any] = Field(default_factory=dict)


class VersionList(BaseModel):
    collection: str
    etag: str = Field(description="The collection's publication state: pass as If-Match to publish "
                                  "or roll back")
    published: str | None = Field(None, description="Name of the published version")
    versions: list[VersionSummary]


class VersionMove(BaseModel):
    id: str
    from_: int = Field(alias="from")
    to: int
    delta: int
    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class VersionPosition(BaseModel):
    id: str
    position: int


class VersionDiff(BaseModel):
    collection: str
    a: str = Field(description="From this version")
    b: str = Field(description="To this version")
    moved: list[VersionMove]
    added: list[str] = Field(description="Ids in b, not in a")
    removed: list[str] = Field(description="Ids in a, not in b")
    added_at: list[VersionPosition] = Field(description="Added ids with their position in b")
    removed_from: list[VersionPosition] = Field(description="Removed ids with their position in a")
    unchanged: int
    shifted: int = Field(0, description="Ids kept in order whose position changed anyway (by moves, "
                                        "additions or removals around them); not in moved")


class Publication(BaseModel):
    collection: str
    published: str = Field(description="The version the storefront shows now")
    version_id: int
    etag: str = Field(description="The new publication state (If-Match for the next publish or rollback)")
    grid_etag: str = Field(description="ETag base of the storefront grid now served")


class VersionExport(BaseModel):
    collection: str
    version: str
    format: str
    media_type: str
    filename: str
    text: str


class VersionExportItem(BaseModel):
    position: int
    id: str
    title: str | None = None


class VersionExportJson(BaseModel):
    """The JSON export's body."""

    collection: str
    version: str
    created_at: str
    published: bool
    items: list[VersionExportItem]
