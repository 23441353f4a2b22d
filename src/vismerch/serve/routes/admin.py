"""Admin: API keys (create shows the key once; list; revoke) and the audit log of writes,
through ``service/keys.py``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from vismerch.serve.auth import require
from vismerch.serve.routes.common import Paging, page_limit, workspace
from vismerch.service import keys
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["admin"])
admin = Depends(require("admin"))


class KeyInfo(BaseModel):
    id: str
    role: str
    name: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    active: bool


class NewKey(BaseModel):
    role: Literal["viewer", "merchandiser", "publisher", "admin", "storefront"]
    name: str | None = Field(None, max_length=200)
    expires: str | None = Field(None, description="Lifetime such as 30d, 12h, 90m or 2w; none = never",
                                pattern=r"^[1-9]\d{0,5}[mhdw]$")


class CreatedKey(KeyInfo):
    key: str = Field(description="The key itself: shown only now, only its salted hash is kept")


class AuditEntry(BaseModel):
    id: int
    at: str
    actor: str
    role: str | None
    action: str
    target: str | None
    status: int | None
    detail: dict[str, Any] | None


class AuditPage(BaseModel):
    items: list[AuditEntry]
    next_after: int | None = Field(description="Pass as ?after= for the next page; null at the end")


@router.get("/keys", response_model=Page[KeyInfo], summary="API keys (never their secrets), by id")
def list_keys(request: Request, paging: Paging, _: object = admin) -> Page[dict[str, Any]]:
    return paginate([k.as_dict() for k in keys.list_keys(workspace(request))], lambda k: [k["id"]], *paging)


@router.post("/keys", response_model=CreatedKey, status_code=201, summary="Make an API key (shown once)")
def create_key(request: Request, new: NewKey, _: object = admin) -> dict[str, Any]:
    return keys.create(workspace(request), new.role, expires=new.expires, name=new.name).as_dict()


@router.delete("/keys/{key_id}", response_model=KeyInfo, summary="Revoke a key (takes effect at once)")
def revoke_key(request: Request, key_id: Annotated[str, Path(max_length=64)], _: object = admin
               ) -> dict[str, Any]:
    return keys.revoke(workspace(request), key_id).as_dict()


class Refusals(BaseModel):
    counts: dict[str, int] = Field(description='Refusals by status and code since this process started: '
                                               '"401 unauthenticated", "403 csrf", "429 auth_throttled", ...')


@router.get("/audit/refusals", response_model=Refusals,
            summary="Refused requests (401, 403 and CSRF, 429) counted by status and code")
def refusals(request: Request, _: object = admin) -> Refusals:
    return Refusals(counts=dict(request.app.state.refusals))


@router.get("/audit", response_model=AuditPage, summary="The audit log of writes, oldest first")
def audit(request: Request,
          after: Annotated[int, Query(ge=0, le=2**62, description="Cursor: entries after this id")] = 0,
          limit: Annotated[int, Query(ge=1, le=1000)] = 100,
          actor: Annotated[str | None, Query(max_length=64, description="Only this key id")] = None,
          _: object = admin) -> dict[str, Any]:
    limit = page_limit(request, limit)
    items = keys.audit_entries(workspace(request), after=after, limit=limit, actor=actor)
    return {"items": items, "next_after": items[-1]["id"] if len(items) == limit else None}
