"""Typed results of the service layer (pydantic: the HTTP layer reuses them as its
OpenAPI response models, the CLI renders them or dumps ``model_dump()`` as JSON)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from vismerch.service.models_queries import Merchandising


class Hit(BaseModel):
    id: str
    score: float


class ColourTag(BaseModel):
    name: str
    hex: str
    weight: float


class QualityMetric(BaseModel):
    name: str
    value: float
    flagged: bool = True


class ProductSummary(BaseModel):
    id: str
    title: str | None = None
    category: str | None = None
    brand: str | None = None
    price: float | None = None
    stock: float | None = None
    colour: str | None = Field(None, description="Dominant named colour of the image.")
    multicolour: bool = Field(False, description="No single named colour covers a clear majority "
                              "of the product (setting multicolour_max_weight).")
    flags: list[str] = Field(default_factory=list, description="Raised quality flags.")


class ProductPage(BaseModel):
    items: list[ProductSummary]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; null at the end.")
    limit: int
    total: int = Field(description="Products matching the filters (all pages).")


class FacetCount(BaseModel):
    value: str
    count: int
    hex: str | None = None  # a colour value's swatch (#rrggbb from the colour table); null elsewhere


class Titles(BaseModel):
    titles: dict[str, str | None] = Field(description="Product id -> title; unknown ids absent")


class Facets(BaseModel):
    category: list[FacetCount]
    colour: list[FacetCount]
    flag: list[FacetCount]
    stock: list[FacetCount]
    total: int


class DupReview(BaseModel):
    decision: Literal["keep", "distinct"]
    keep: str | None = None
    by: str | None = None
    at: str
    complete: bool = Field(description="Every pair of the group's members has a decision.")


class DupGroup(BaseModel):
    group: int
    representative: str | None
    members: list[str]
    status: Literal["pending", "reviewed"]
    review: DupReview | None = None


class ProductDetail(ProductSummary):
    description: str | None = None
    sales: float | None = None
    created_at: str | None = None
    width: int | None = None
    height: int | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    colours: list[ColourTag] = Field(default_factory=list)
    quality: list[QualityMetric] = Field(default_factory=list, description="Every measured metric.")
    duplicate_group: DupGroup | None = None
    similar: list[Hit] = Field(default_factory=list)
    similar_mode: Literal["colour", "style", "both"] | None = Field(
        None, description="The vectors that ranked `similar` (null: the store has no style vectors)")
    has_thumbnail: bool = False


class TagRow(BaseModel):
    id: str
    colours: list[ColourTag]
    multicolour: bool = False
    flags: list[QualityMetric]


class AttributeTag(BaseModel):
    name: str
    score: float
    source: str | None = Field(None, description="label, few-shot or zero-shot.")


class AttributeTagRow(BaseModel):
    id: str
    tags: list[AttributeTag]
    model_config = {"extra": "allow"}


class ErrorRow(BaseModel):
    product_id: str
    image_path: str
    reason: str
    detail: str


class QueueItem(BaseModel):
    queue: Literal["quality", "audit"]
    product_id: str
    item: str = Field(description="The flag name (quality) or the audit kind (audit).")
    value: float | None = Field(None, description="Measured value (quality) or CIEDE2000 distance (audit).")
    listed: str | None = None
    observed: str | None = None
    status: Literal["open", "resolved", "ignored"]
    note: str | None = None
    by: str | None = None
    at: str | None = None


# collections, rules and previews: models_merch.py; versions: models_versions.py;
# experiments: models_experiments.py; jobs and plans keep theirs in their modules


class Done(BaseModel):
    """Acknowledgement of a write that returns nothing else."""

    ok: bool = True
    detail: dict[str, Any] = Field(default_factory=dict)


class SearchResult(BaseModel):
    mode: Literal["text", "colour", "hybrid", "similar", "image"]
    query: str | None = None
    colour: str | None = None
    similar_mode: Literal["colour", "style", "both"] | None = Field(
        None, description="Similar items: the vectors that ranked them (null: one named backend's)")
    hits: list[Hit]
    redirect: str | None = Field(None, description="A query rule sends this query to this collection")
    merchandising: Merchandising | None = Field(None, description="What query rules and synonyms did")
