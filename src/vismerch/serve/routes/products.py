"""Products: filtered pages with a cursor, facet counts, detail, similar items, thumbnails
(by product id, never by path) and the images refused at ingest."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response

from vismerch.features.quality_flags import flag_names
from vismerch.serve.auth import THUMBNAIL_BUDGET, require
from vismerch.serve.routes.common import Paging, page_limit, workspace
from vismerch.service import catalog, search
from vismerch.service.models import ErrorRow, Facets, ProductDetail, ProductPage, SearchResult, Titles
from vismerch.service.paging import Page

router = APIRouter(tags=["products"])
viewer = Depends(require("viewer"))
ProductId = Annotated[str, Path(min_length=1, max_length=500, description="Product id")]
FlagFilter = Literal[(*flag_names(), "any")]  # the registered quality flags


def _filters(
    category: Annotated[str | None, Query(max_length=200)] = None,
    colour: Annotated[str | None, Query(max_length=100, description="A named colour, e.g. navy")] = None,
    flag: Annotated[FlagFilter | None, Query(description="A quality flag, or any for any raised")] = None,
    in_stock: Annotated[bool | None, Query()] = None,
    price_min: Annotated[float | None, Query(ge=0, le=1e12)] = None,
    price_max: Annotated[float | None, Query(ge=0, le=1e12)] = None,
) -> dict:
    return {"category": category, "colour": colour, "flag": flag, "in_stock": in_stock,
            "price_min": price_min, "price_max": price_max}


@router.get("/products", response_model=ProductPage, summary="Products, filtered, one page at a time")
def list_products(request: Request, filters: dict = Depends(_filters),
                  cursor: Annotated[str | None, Query(max_length=2000)] = None,
                  limit: Annotated[int, Query(ge=1, le=1000, description="Capped at serve_page_limit")] = 50,
                  _: object = viewer) -> ProductPage:
    return catalog.list_products(workspace(request), cursor=cursor, limit=page_limit(request, limit),
                                 **filters)


@router.get("/products/facets", response_model=Facets, summary="Counts by category, colour, flag, stock")
def facets(request: Request, filters: dict = Depends(_filters), _: object = viewer) -> Facets:
    return catalog.facets(workspace(request), **filters)


@router.get("/products/titles", response_model=Titles,
            summary="Titles of the products named (for pages that show ids: thumbnails' alt text)")
def titles(request: Request,
           ids: Annotated[list[str], Query(min_length=1, max_length=200, description="Product ids (repeat)")],
           _: object = viewer) -> Titles:
    return catalog.titles(workspace(request), ids)


# Product ids come from the retailer's catalog and may hold "/" (``SKU/123``): the id is a
# path parameter that may span segments, so the routes with a suffix come first (an id
# that itself ends in "/similar" or "/thumbnail" is reached through its page's links).
SimilarMode = Annotated[Literal["colour", "style", "both"] | None, Query(
    description="Similar items by colour, style (the kind of product: shape and structure) or both; "
                "default style where the store has style vectors")]


@router.get("/products/{product_id:path}/similar", response_model=SearchResult, summary="More like this")
def similar(request: Request, product_id: ProductId, k: Annotated[int, Query(ge=1, le=200)] = 12,
            same_category: bool = False, in_stock: bool = False, mode: SimilarMode = None,
            _: object = viewer) -> SearchResult:
    return search.similar(workspace(request), product_id, k=k, same_category=same_category,
                          in_stock=in_stock, mode=mode)


@router.get("/products/{product_id:path}/thumbnail", response_class=Response,
            summary="The product's thumbnail image (any key, storefront included)",
            responses={200: {"content": {"image/webp": {}, "image/jpeg": {}},
                             "description": "The thumbnail"}})
def thumbnail(request: Request, product_id: ProductId,
              _: object = Depends(require("storefront", THUMBNAIL_BUDGET))) -> Response:
    # a budget of their own: a scrolled grid fetches hundreds, which must not use up the API's
    thumb = catalog.thumbnail(workspace(request), product_id)
    return Response(thumb.data, media_type=thumb.media_type,
                    headers={"Cache-Control": "private, max-age=86400"})  # behind a key: no shared cache


@router.get("/products/{product_id:path}", response_model=ProductDetail,
            summary="One product: colours, quality, duplicate group, similar items")
def product(request: Request, product_id: ProductId,
            similar: Annotated[int, Query(ge=0, le=50, description="How many similar items")] = 8,
            similar_mode: SimilarMode = None, _: object = viewer) -> ProductDetail:
    return catalog.product_detail(workspace(request), product_id, similar_k=similar,
                                  similar_mode=similar_mode)


@router.get("/errors", response_model=Page[ErrorRow],
            summary="Images refused at ingest, with reasons, by product id")
def refused(request: Request, paging: Paging, _: object = viewer) -> Page[ErrorRow]:
    return catalog.errors_page(workspace(request), *paging)
