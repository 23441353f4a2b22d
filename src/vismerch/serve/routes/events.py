"""Shopper events in (POST /events, storefront keys and above) and collection analytics out.

A batch is answered after its good events are on disk; each bad event is refused by its
index with the field and a reason, and the rest are kept. A retried event (same
``event_id``) is counted once. The request body is read as plain JSON, not a pydantic
model, so that one bad event refuses itself rather than the whole batch.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from vismerch.serve.auth import require
from vismerch.serve.errors import ApiError
from vismerch.serve.routes.common import workspace
from vismerch.service import events as service

router = APIRouter(tags=["events"])


class EventIn(BaseModel):
    """One shopper event (documentation of the body: it is checked event by event)."""

    event_id: str = Field(max_length=128, description="Unique per event: a retry with it counts once")
    type: str = Field(description="impression | click | add_to_cart | purchase | search")
    ts: str | int = Field(description="RFC 3339 time (UTC unless an offset is given) or epoch milliseconds")
    visitor: str = Field(max_length=200, description="Opaque visitor id; stored hashed with the store's salt")
    collection: str | None = Field(None, max_length=200)
    version_id: int | None = Field(None, description="The storefront response's version_id")
    position: int | None = Field(None, ge=1, description="1-based position in the grid")
    columns: int | None = Field(None, ge=1, le=12, description="Grid width the visitor saw")
    product_id: str | None = Field(None, description="Required but for search")
    quantity: int | None = Field(None, ge=1, description="add_to_cart, purchase (default 1)")
    revenue: float | None = Field(None, ge=0, description="purchase: required")
    currency: str | None = Field(None, description="purchase: ISO 4217, required")
    experiment: int | str | None = Field(None, description="The storefront answer's experiment id")
    variant: str | None = None
    query: str | None = Field(None, max_length=200, description="search (required); click on a search result")
    results: int | None = Field(None, ge=0, description="search (required): how many results it showed")


class EventBatch(BaseModel):
    events: list[EventIn] = Field(description="At most events_batch_max (500) events")


class Refused(BaseModel):
    index: int
    field: str
    reason: str
    message: str


class BatchAnswer(BaseModel):
    accepted: int = Field(description="New events written")
    duplicates: int = Field(description="Events whose event_id was already in the log (kept once)")
    refused: list[Refused]


def _events_of(body: bytes) -> list[Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid", "the body is not valid JSON", field="body",
                       hint='send {"events": [...]}') from None
    if not isinstance(data, dict) or not isinstance(data.get("events"), list):
        raise ApiError(422, "invalid", "events: the body must be an object with an events list",
                       field="events")
    return data["events"]


@router.post("/events", response_model=BatchAnswer, summary="Record a batch of shopper events",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": EventBatch.model_json_schema(ref_template="#/components/schemas/{model}")}}}})
async def post_events(request: Request, principal: Any = Depends(require("storefront"))) -> BatchAnswer:
    events = _events_of(await request.body())
    request.state.audited_in_log = True  # each event keeps its source key in the log itself
    ws = workspace(request)
    result = await anyio.to_thread.run_sync(service.take_events, ws, events, f"api:{principal.key_id}")
    return BatchAnswer(**result.as_dict())


@router.get("/analytics/collections/{collection}", summary="A collection's funnel, slots, pins and products")
def collection_analytics(
    request: Request,
    collection: Annotated[str, Path(min_length=1, max_length=200)],
    since: Annotated[str | None, Query(max_length=40, description="RFC 3339 time or date, inclusive")] = None,
    until: Annotated[str | None, Query(max_length=40, description="RFC 3339 time or date, exclusive")] = None,
    products: Annotated[bool, Query(description="Add each product's corrected attractiveness")] = False,
    _: object = Depends(require("viewer")),
) -> dict[str, Any]:
    return service.collection_analytics(workspace(request), collection, since=since, until=until,
                                        products=products)
