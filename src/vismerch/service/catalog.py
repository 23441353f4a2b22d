"""Products: filtered pages, facets, detail, thumbnails, tags, errors."""

from __future__ import annotations

from vismerch.catalog import browse
from vismerch.catalog.thumbs import Thumbnail
from vismerch.errors import InvalidInput
from vismerch.service._util import check_k, decode_cursor, encode_cursor, require_product
from vismerch.service.models import (
    ColourTag,
    ErrorRow,
    FacetCount,
    Facets,
    ProductDetail,
    ProductPage,
    ProductSummary,
    QualityMetric,
    TagRow,
    Titles,
)
from vismerch.service.paging import Page, decode_key, encode_key
from vismerch.service.workspace import Workspace

DEFAULT_LIMIT = 50
MAX_LIMIT = 200  # a page is capped: larger asks get this many and a cursor


def product_filter(ws: Workspace, *, category: str | None = None, colour: str | None = None,
                   flag: str | None = None, in_stock: bool | None = None,
                   price_min: float | None = None, price_max: float | None = None) -> browse.ProductFilter:
    from vismerch.errors import InvalidInput

    if price_min is not None and price_max is not None and price_min > price_max:
        raise InvalidInput("price_min", f"price_min {price_min:g} is above price_max {price_max:g}")
    return browse.ProductFilter(category=category, colour=colour, flag=flag, in_stock=in_stock,
                                price_min=price_min, price_max=price_max,
                                colour_min_share=float(ws.settings.search_colour_min_share))


def _summaries(ws: Workspace, products: list) -> list[ProductSummary]:
    ids = [p.id for p in products]
    colours = browse.dominant_colours(ws.store, ids)
    multi = browse.multicolour_ids(ws.store, ids)
    flags = browse.flag_names(ws.store, ids)
    return [ProductSummary(id=p.id, title=p.title, category=p.category, brand=p.brand, price=p.price,
                           stock=p.stock, colour=colours.get(p.id), multicolour=p.id in multi,
                           flags=flags.get(p.id, []))
            for p in products]


def list_products(ws: Workspace, *, cursor: str | None = None, limit: int = DEFAULT_LIMIT,
                  **filters) -> ProductPage:
    """One page of products in id order. Filters: category, colour, flag (a flag name or
    ``any``), in_stock, price_min, price_max. ``limit`` is capped at MAX_LIMIT."""
    limit = min(check_k(limit, "limit", maximum=10**9), MAX_LIMIT)
    flt = product_filter(ws, **filters)
    products, more = browse.page(ws.store, flt, decode_cursor(cursor), limit)
    return ProductPage(items=_summaries(ws, products), limit=limit, total=browse.count(ws.store, flt),
                       next_cursor=encode_cursor(products[-1].id) if more and products else None)


def facets(ws: Workspace, **filters) -> Facets:
    """Counts by category, dominant colour, flag and stock state under the same filters."""
    from vismerch.features.colournames import load_colour_table

    flt = product_filter(ws, **filters)
    raw = browse.facets(ws.store, flt)
    table = load_colour_table()

    def swatch(name: str) -> str | None:
        at = table.index(name)
        return None if at is None else table.hexes[at]

    return Facets(**{k: [FacetCount(value=v, count=n, hex=swatch(v) if k == "colour" else None)
                         for v, n in rows] for k, rows in raw.items()},
                  total=browse.count(ws.store, flt))


def titles(ws: Workspace, ids: list[str]) -> Titles:
    """The titles of the products named (unknown ids are left out)."""
    if any(len(i) > 500 for i in ids):
        raise InvalidInput("ids", "a product id is at most 500 characters")
    return Titles(titles=browse.titles(ws.store, list(dict.fromkeys(ids))))


def product_detail(ws: Workspace, product_id: str, *, similar_k: int = 8,
                   similar_mode: str | None = None) -> ProductDetail:
    """One product with its colours, every quality metric, duplicate group and similar items
    (by ``similar_mode``, as ``search.similar`` takes it)."""
    from vismerch.service import duplicates, search

    p = require_product(ws.store, product_id)
    quality = [QualityMetric(**m) for m in browse.quality_metrics(ws.store, product_id)]
    colours = [ColourTag(**c) for c in browse.product_colours(ws.store, product_id)]
    group_id = browse.dup_group_of(ws.store, product_id)
    if similar_mode is not None and similar_mode not in search.SIMILAR_MODES:
        raise InvalidInput("similar_mode", f"give one of {', '.join(search.SIMILAR_MODES)}")
    similar, answered = [], None
    if p.status == "ok" and similar_k > 0:
        try:
            found = search.similar(ws, product_id, k=similar_k, mode=similar_mode)
            similar, answered = found.hits, found.similar_mode
        except Exception:  # a store without vectors still shows the product
            similar = []
    return ProductDetail(
        id=p.id, title=p.title, category=p.category, brand=p.brand, price=p.price, stock=p.stock,
        colour=colours[0].name if colours else None,
        multicolour=browse.is_multicolour(ws.store, product_id),
        flags=[m.name for m in quality if m.flagged],
        description=p.description, sales=p.sales, created_at=p.created_at, width=p.width,
        height=p.height, attributes=p.attributes, colours=colours, quality=quality,
        duplicate_group=duplicates.get_group(ws, group_id) if group_id is not None else None,
        similar=similar, similar_mode=answered, has_thumbnail=ws.store.has_thumbnail(product_id))


def thumbnail(ws: Workspace, product_id: str) -> Thumbnail:
    """The stored thumbnail of a product (found by id, never by a client-given path)."""
    from vismerch.errors import NotFound

    require_product(ws.store, product_id)
    thumb = ws.store.thumbnail(product_id)
    if thumb is None:
        raise NotFound("thumbnail", product_id, f"product {product_id!r} has no thumbnail",
                       hint="thumbnails are made at ingest (thumb_size > 0)")
    return thumb


def tags(ws: Workspace) -> list[TagRow]:
    """Colour names and raised quality flags of every ok product."""
    return [TagRow(**row) for row in ws.store.tags()]


def errors(ws: Workspace) -> list[ErrorRow]:
    """Images that were refused, with the reason."""
    return [ErrorRow(**row) for row in ws.store.errors()]


def errors_page(ws: Workspace, cursor: str | None, limit: int) -> Page[ErrorRow]:
    """A page of refused images by product id (keyset in SQL: a feed with 300k broken URLs
    is read a page at a time)."""
    after = decode_key(cursor)
    if after is not None and not isinstance(after, str):
        raise InvalidInput("cursor", "cursor: not a cursor of the refused images")
    rows = [ErrorRow(**row) for row in ws.store.errors(after, limit + 1)]
    more = len(rows) > limit
    return Page[ErrorRow](items=rows[:limit],
                          next_cursor=encode_key(rows[limit - 1].product_id) if more else None)
