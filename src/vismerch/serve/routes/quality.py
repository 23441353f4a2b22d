"""Review queues: image-quality flags and the listed-colour audit, resolved or ignored (in bulk)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, Field

from vismerch.serve.auth import Principal, require
from vismerch.serve.routes.common import Paging, workspace
from vismerch.service import quality
from vismerch.service.models import QueueItem
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["queues"])
Queue = Annotated[Literal["quality", "audit"], Path(description="quality flags or the colour audit")]


class ItemRef(BaseModel):
    product_id: str = Field(min_length=1, max_length=500)
    item: str = Field(min_length=1, max_length=100, description="Flag name (quality) or audit kind")


class Decision(BaseModel):
    items: list[ItemRef] = Field(min_length=1, max_length=1000)
    decision: Literal["resolved", "ignored"] | None = Field(description="null reopens the items")
    note: str | None = Field(None, max_length=2000)


@router.get("/queues/{queue}", response_model=Page[QueueItem],
            summary="Items of a review queue, by product and item")
def items(request: Request, queue: Queue, paging: Paging,
          status: Literal["open", "resolved", "ignored", "all"] = "open",
          _: object = Depends(require("viewer"))) -> Page[QueueItem]:
    return paginate(quality.queue(workspace(request), queue, status), lambda i: [i.product_id, i.item],
                    *paging)


@router.post("/queues/{queue}/decisions", response_model=list[QueueItem],
             summary="Resolve, ignore or reopen one or many queue items")
def decide(request: Request, queue: Queue, body: Decision,
           who: Principal = Depends(require("merchandiser"))) -> list[QueueItem]:
    ws = workspace(request)
    return [quality.decide(ws, queue, ref.product_id, ref.item, body.decision, note=body.note, by=who.key_id)
            for ref in body.items]
