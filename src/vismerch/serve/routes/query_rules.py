"""Search-query merchandising: query rules and synonyms (CRUD), a before/after preview of
a search, and the report of zero-result and low-click queries. ``GET /search`` applies the
rules and synonyms (service.search.text)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel

from vismerch.serve.auth import require
from vismerch.serve.routes.common import Paging, workspace
from vismerch.service import query_rules as service
from vismerch.service.models import Done, SearchResult
from vismerch.service.models_queries import (
    QueryReport,
    QueryRuleIn,
    QueryRuleOut,
    QueryRulePatch,
    SynonymIn,
    SynonymOut,
    SynonymPatch,
)
from vismerch.service.paging import Page, paginate

router = APIRouter(tags=["search merchandising"])
viewer = Depends(require("viewer"))
merchandiser = Depends(require("merchandiser"))
Id = Annotated[int, Path(ge=1, le=2**62)]
Stamp = Annotated[str | None, Query(max_length=40, description="Date or RFC 3339 time")]


class Preview(BaseModel):
    before: SearchResult
    after: SearchResult


@router.get("/query-rules", response_model=Page[QueryRuleOut], summary="Query rules by id")
def list_rules(request: Request, paging: Paging,
               query: Annotated[str | None, Query(max_length=200,
                                                  description="Only rules matching this query")] = None,
               active: Annotated[bool | None, Query(description="In force now (or not)")] = None,
               _: object = viewer) -> Page[QueryRuleOut]:
    found = service.list_rules(workspace(request), query=query, active=active)
    if query is not None:  # most specific first: page in that order
        order = {r.id: i for i, r in enumerate(found)}
        return paginate(found, lambda r: [order[r.id]], *paging)
    return paginate(found, lambda r: [r.id], *paging)


@router.post("/query-rules", response_model=QueryRuleOut, status_code=201, summary="Add a query rule")
def add_rule(request: Request, body: QueryRuleIn, _: object = merchandiser) -> QueryRuleOut:
    return service.add_rule(workspace(request), **body.model_dump())


@router.get("/query-rules/{rule_id}", response_model=QueryRuleOut, summary="One query rule")
def get_rule(request: Request, rule_id: Id, _: object = viewer) -> QueryRuleOut:
    return service.get_rule(workspace(request), rule_id)


@router.patch("/query-rules/{rule_id}", response_model=QueryRuleOut, summary="Change fields of a query rule")
def update_rule(request: Request, rule_id: Id, body: QueryRulePatch,
                _: object = merchandiser) -> QueryRuleOut:
    return service.update_rule(workspace(request), rule_id, body.model_dump(exclude_unset=True))


@router.delete("/query-rules/{rule_id}", response_model=Done, summary="Delete a query rule")
def delete_rule(request: Request, rule_id: Id, _: object = merchandiser) -> Done:
    service.delete_rule(workspace(request), rule_id)
    return Done(detail={"id": rule_id})


@router.get("/synonyms", response_model=Page[SynonymOut], summary="Synonyms by id")
def list_synonyms(request: Request, paging: Paging, _: object = viewer) -> Page[SynonymOut]:
    return paginate(service.list_synonyms(workspace(request)), lambda s: [s.id], *paging)


@router.post("/synonyms", response_model=SynonymOut, status_code=201, summary="Add synonyms")
def add_synonym(request: Request, body: SynonymIn, _: object = merchandiser) -> SynonymOut:
    return service.add_synonym(workspace(request), **body.model_dump())


@router.get("/synonyms/{synonym_id}", response_model=SynonymOut, summary="One synonym set")
def get_synonym(request: Request, synonym_id: Id, _: object = viewer) -> SynonymOut:
    return service.get_synonym(workspace(request), synonym_id)


@router.patch("/synonyms/{synonym_id}", response_model=SynonymOut, summary="Change a synonym set")
def update_synonym(request: Request, synonym_id: Id, body: SynonymPatch,
                   _: object = merchandiser) -> SynonymOut:
    return service.update_synonym(workspace(request), synonym_id, body.model_dump(exclude_unset=True))


@router.delete("/synonyms/{synonym_id}", response_model=Done, summary="Delete a synonym set")
def delete_synonym(request: Request, synonym_id: Id, _: object = merchandiser) -> Done:
    service.delete_synonym(workspace(request), synonym_id)
    return Done(detail={"id": synonym_id})


@router.get("/search/preview", response_model=Preview,
            summary="A text search without and with query rules and synonyms (at a date)")
def preview(request: Request,
            q: Annotated[str, Query(min_length=1, max_length=500, description="Text query")],
            colour: Annotated[str | None, Query(max_length=100)] = None,
            category: Annotated[str | None, Query(max_length=200)] = None,
            k: Annotated[int, Query(ge=1, le=200)] = 12,
            at: Stamp = None, _: object = viewer) -> Preview:
    from vismerch.service.search import query_preview

    return Preview(**query_preview(workspace(request), q, k=k, colour=colour, category=category, at=at))


@router.get("/search/report", response_model=QueryReport,
            summary="Frequent zero-result and low-click queries over a window (from search events)")
def report(request: Request, since: Stamp = None, until: Stamp = None,
           min_searches: Annotated[int, Query(ge=1, le=1_000_000)] = 2,
           max_click_rate: Annotated[float, Query(ge=0, le=1)] = 0.1,
           limit: Annotated[int, Query(ge=1, le=1000)] = 20, _: object = viewer) -> QueryReport:
    return service.report(workspace(request), since=since, until=until, min_searches=min_searches,
                          max_click_rate=max_click_rate, limit=limit)
