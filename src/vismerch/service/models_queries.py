"""Typed results and bodies of search-query merchandising (``service.query_rules``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

_ID = Field(max_length=500)


class QueryRuleIn(BaseModel):
    kind: str = Field(max_length=20, description="pin | hide | boost | bury | redirect")
    query: str = Field(max_length=200, description="The query or pattern (compared normalised)")
    match: str = Field("exact", max_length=20, description="exact | prefix | contains | glob")
    products: list[str] = Field(default_factory=list, max_length=200,
                                description="pin: one product; hide, boost, bury: one or more")
    position: int | None = Field(None, ge=1, le=10_000, description="pin: 1-based position")
    factor: float | None = Field(None, ge=0, le=100, description="boost, bury: 0-100 (default 50)")
    collection: str | None = Field(None, max_length=200, description="redirect: the collection")
    starts_at: str | None = Field(None, max_length=40, description="Date or RFC 3339 time")
    ends_at: str | None = Field(None, max_length=40, description="Exclusive")
    note: str | None = Field(None, max_length=2000)
    enabled: bool = True


class QueryRulePatch(BaseModel):
    """The fields to change; a field sent as null clears an optional one."""

    kind: str | None = Field(None, max_length=20)
    query: str | None = Field(None, max_length=200)
    match: str | None = Field(None, max_length=20)
    products: list[str] | None = Field(None, max_length=200)
    position: int | None = Field(None, ge=1, le=10_000)
    factor: float | None = Field(None, ge=0, le=100)
    collection: str | None = Field(None, max_length=200)
    starts_at: str | None = Field(None, max_length=40)
    ends_at: str | None = Field(None, max_length=40)
    note: str | None = Field(None, max_length=2000)
    enabled: bool | None = None


class QueryRuleOut(BaseModel):
    id: int
    kind: str
    query: str
    match: str
    products: list[str]
    position: int | None = None
    factor: float | None = None
    collection: str | None = None
    starts_at: str | None = None
    ends_at: str | None = None
    enabled: bool
    active: bool = Field(description="Enabled and inside its dates now")
    note: str | None = None
    created_at: str | None = None
    description: str


class SynonymIn(BaseModel):
    kind: str = Field(max_length=20, description="equivalent | one-way")
    synonyms: list[str] = Field(max_length=50, description="The terms (one-way: what the term stands for)")
    term: str | None = Field(None, max_length=200, description="one-way: the term that expands")
    note: str | None = Field(None, max_length=2000)
    enabled: bool = True


class SynonymPatch(BaseModel):
    kind: str | None = Field(None, max_length=20)
    synonyms: list[str] | None = Field(None, max_length=50)
    term: str | None = Field(None, max_length=200)
    note: str | None = Field(None, max_length=2000)
    enabled: bool | None = None


class SynonymOut(BaseModel):
    id: int
    kind: str
    term: str | None = None
    synonyms: list[str]
    enabled: bool
    note: str | None = None
    created_at: str | None = None
    description: str


class QueryEffect(BaseModel):
    rule: int | None = None
    action: str = Field(description="pinned | hidden | boosted | buried | redirect")
    product: str | None = None
    position: int | None = None
    factor: float | None = None
    collection: str | None = None


class QueryConflict(BaseModel):
    rule: int = Field(description="The rule that lost")
    winner: int | None = None
    product: str | None = None
    reason: str


class SynonymUse(BaseModel):
    synonym: int
    term: str
    query: str


class Merchandising(BaseModel):
    """What query rules and synonyms did to one search."""

    query: str = Field(description="The query as compared (normalised)")
    searched: list[str] = Field(description="The queries searched: the original, then synonym rewrites")
    synonyms: list[SynonymUse] = []
    rules: list[int] = Field(description="Ids of the rules in force that matched, most specific first")
    effects: list[QueryEffect] = []
    conflicts: list[QueryConflict] = []


class QueryReportRow(BaseModel):
    query: str
    searches: int
    zero_results: int = Field(description="Searches that found nothing")
    clicks: int = Field(description="Clicks on results of this query")
    click_rate: float | None = Field(None, description="clicks / searches that found something")
    avg_results: float | None = None
    last_seen: str | None = None


class QueryReport(BaseModel):
    since: str | None = None
    until: str | None = None
    searches: int = Field(description="Searches in the window")
    zero_results: list[QueryReportRow] = Field(description="Frequent queries that found nothing, most first")
    low_clicks: list[QueryReportRow] = Field(
        description="Frequent queries with results but a click rate under the threshold, most searched first")
