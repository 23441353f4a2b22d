"""Near-duplicate groups and their review decisions (keep one / not duplicates), which persist."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, Field

from vismerch.serve.auth import Principal, require
from vismerch.serve.routes.common import Paging, workspace
from vismerch.service import duplicates
from vismerch.service.models import DupGroup
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["duplicates"])
GroupId = Annotated[int, Path(ge=0, le=2**62)]


class Review(BaseModel):
    decision: Literal["keep", "distinct"] = Field(
        description="keep: duplicates, show `keep`; distinct: not duplicates")
    keep: str | None = Field(None, max_length=500, description="With keep: the product grids show")


class ReviewResult(BaseModel):
    dissolved: bool = Field(description="True when the group was marked not duplicates")
    group: DupGroup | None


@router.get("/duplicates", response_model=Page[DupGroup],
            summary="Duplicate groups and their review state, by group")
def list_groups(request: Request, paging: Paging, status: Literal["all", "pending", "reviewed"] = "all",
                _: object = Depends(require("viewer"))) -> Page[DupGroup]:
    return paginate(duplicates.list_groups(workspace(request), status), lambda g: [g.group], *paging)


@router.get("/duplicates/{group_id}", response_model=DupGroup, summary="One duplicate group")
def get_group(request: Request, group_id: GroupId, _: object = Depends(require("viewer"))) -> DupGroup:
    return duplicates.get_group(workspace(request), group_id)


@router.post("/duplicates/{group_id}/review", response_model=ReviewResult,
             summary="Keep one product of a group, or mark it not duplicates")
def review(request: Request, group_id: GroupId, body: Review,
           who: Principal = Depends(require("merchandiser"))) -> ReviewResult:
    group = duplicates.review_group(workspace(request), group_id, body.decision, keep=body.keep,
                                    by=who.key_id)
    return ReviewResult(dissolved=group is None, group=group)


