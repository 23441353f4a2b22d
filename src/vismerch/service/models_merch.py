"""Typed results of the collections, rules and arrangements services (pydantic: the HTTP
layer uses them as request/response models, so they show in ``/openapi.json``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from vismerch.rules.kinds import kind_names

RuleKind = Literal[kind_names()]  # type: ignore[valid-type]  # from the registry (rules.kinds)
Reach = Literal["collection", "subtree"]
OosPolicy = Literal["release", "substitute", "keep"]


class Collection(BaseModel):
    id: str = Field(description="The collection's name (a category's slug for categories).")
    kind: Literal["category", "column", "rule"]
    parent: str | None = Field(None, description="The collection this one is a sub-collection of.")
    size: int = Field(description="Products in it now.")
    where: str | None = Field(None, description="The expression of a rule collection.")
    published_version: str | None = Field(None, description="Name of the published arrangement.")
    auto: bool = Field(False, description="Made from the catalog (categories, column values).")
    definition: dict[str, Any] = Field(default_factory=dict)


class CollectionIn(BaseModel):
    id: str = Field(min_length=1, max_length=200, description="Name: letters, digits, - _ .")
    where: str | None = Field(None, max_length=4000,
                              description='e.g. category == "dress" and price < 120')
    parent: str | None = Field(None, max_length=200,
                               description="Make it a sub-collection: its products are the "
                                           "parent's that match `where` (all of them without).")


class CollectionDeleted(BaseModel):
    id: str
    rules_removed: int
    versions_removed: int = Field(0, description="Its arrangement versions (and, if it was "
                                                 "published, its storefront grid) went with it")


class CollectionsRefreshed(BaseModel):
    collections: dict[str, int]
    created: list[str]
    removed: list[str]
    skipped: list[str]


class Rule(BaseModel):
    id: int
    kind: RuleKind
    collection: str | None = Field(None, description="Scope; null = every collection.")
    product: str | None = Field(None, description="Pin: the product.")
    position: int | None = Field(None, description="Pin: 1-based position.")
    where: str | None = Field(None, description="Boost, bury, hide: the condition.")
    factor: float = 0.0
    starts_at: str | None = Field(None, description="RFC 3339 UTC; null = always.")
    ends_at: str | None = Field(None, description="RFC 3339 UTC, exclusive; null = never ends.")
    reach: Reach = "collection"
    active: bool = Field(description="Enabled and inside its start/end dates now.")
    enabled: bool = True
    oos_policy: OosPolicy = "release"
    note: str | None = None
    created_at: str | None = None
    inherited_from: str | None = Field(
        None, description="In a collection's rule list: the parent collection a subtree rule "
                          "comes from (null for its own and global rules).")
    description: str = ""


class RuleIn(BaseModel):
    kind: RuleKind
    collection: str | None = Field(None, max_length=200)
    product: str | None = Field(None, max_length=500)
    position: int | None = Field(None, ge=1, le=1_000_000)
    where: str | None = Field(None, max_length=4000)
    factor: float | None = Field(None, ge=0, le=100,
                                 description="Boost/bury strength: percent of the collection's "
                                             "positions the products move (default: the kind's)")
    starts_at: str | None = Field(None, max_length=40, description="Date or RFC 3339 time")
    ends_at: str | None = Field(None, max_length=40, description="Exclusive")
    reach: Reach = "collection"
    oos_policy: OosPolicy = "release"
    note: str | None = Field(None, max_length=2000)
    enabled: bool = True


class RulePatch(BaseModel):
    """The fields to change; a field sent as null clears it."""

    kind: RuleKind | None = None
    collection: str | None = Field(None, max_length=200)
    product: str | None = Field(None, max_length=500)
    position: int | None = Field(None, ge=1, le=1_000_000)
    where: str | None = Field(None, max_length=4000)
    factor: float | None = Field(None, ge=0, le=100)
    starts_at: str | None = Field(None, max_length=40)
    ends_at: str | None = Field(None, max_length=40)
    reach: Reach | None = None
    oos_policy: OosPolicy | None = None
    note: str | None = Field(None, max_length=2000)
    enabled: bool | None = None


class RuleLogRow(BaseModel):
    id: int
    rule_id: int
    collection: str
    kind: str
    product_id: str
    substitute_id: str | None = None
    position: int | None = None
    created_at: str
    reverted_at: str | None = None


class Score(BaseModel):
    total: float = Field(description="The score the arrangement ranked by (rules included).")
    parts: dict[str, float] = Field(
        description="Weighted business signals (sales, revenue, margin, newness, stock) and "
                    "`rules`, the boost/bury adjustment.")


class PreviewSlot(BaseModel):
    position: int = Field(description="1-based, the same at every width (rows fill left to right).")
    id: str
    title: str | None = None
    category: str | None = None
    price: float | None = None
    stock: float | None = None
    colour: str | None = None
    thumbnail_url: str | None = None
    pinned: bool = False
    substituted_for: str | None = Field(
        None, description="An out-of-stock pinned product this one stands in for.")
    flags: list[str] = Field(default_factory=list)
    lookalike_at: list[int] = Field(
        default_factory=list, description="Widths at which a neighbour looks alike.")
    kind: str = Field(description="pinned | score | diversity | quality")
    reasons: list[str]
    score: Score


class PreviewIn(BaseModel):
    columns: list[int] = Field(default_factory=lambda: [2, 3, 4, 5], min_length=1, max_length=12,
                               description="Widths to arrange for at once, 1-12 each.")
    mode: Literal["mix", "flow", "plain"] = Field(
        "mix", description="mix: spread colours; flow: colour blocks; plain: rules and score only.")
    offset: int = Field(0, ge=0, le=10_000_000)
    limit: int = Field(48, ge=1, le=1000, description="Slots in this page (capped).")
    at: str | None = Field(None, max_length=40,
                           description="Apply rules as active at this date or RFC 3339 time "
                                       "(default now): preview a scheduled pin or boost.")


class Preview(BaseModel):
    collection: str
    total: int = Field(description="Slots in the whole arrangement.")
    columns: list[int]
    mode: str
    offset: int
    limit: int
    slots: list[PreviewSlot]
    rules: list[int] = Field(description="Ids of the rules that changed this arrangement.")
    business_share: float = Field(description="Business (DCG of the first positions) kept, "
                                              "relative to the plain score order.")
    hidden: int = Field(0, description="Products hidden by rules.")
    conflicts: list[dict[str, Any]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    backend: str | None = None


class RuleKindInfo(BaseModel):
    """A registered rule kind, as the workbench's rule form builds itself from."""

    name: str
    summary: str
    target: Literal["product", "condition"]
    uses_factor: bool
    default_factor: float
    hides: bool
    fixed_condition: str | None = None


class RuleConflict(BaseModel):
    kind: str = Field(description="same-slot | pinned-twice | pin-on-hidden")
    rule: int = Field(description="The stored rule it conflicts with.")
    description: str
    message: str


class RuleCheck(BaseModel):
    ok: bool = Field(description="False when the rule is invalid or conflicts with another.")
    conflicts: list[RuleConflict] = Field(default_factory=list)


class RuleCheckIn(RuleIn):
    id: int | None = Field(None, ge=1, le=2**62, description="Checking an edit of this rule.")


class ProductField(BaseModel):
    name: str
    type: Literal["number", "text", "boolean", "list"]
    values: list[str] = Field(default_factory=list, description="Common values (text fields).")


class MatchCount(BaseModel):
    matches: int
    total: int = Field(description="Products looked at (the collection's, or the catalog's).")
    sample: list[dict[str, Any]] = Field(default_factory=list,
                                         description="Up to 8 matches: {id, title}.")
