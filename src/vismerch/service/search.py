"""Search: by text, colour or both (hybrid), more like a product, more like an uploaded image."""

from __future__ import annotations

from typing import Any

from vismerch.errors import InvalidInput, UsageError
from vismerch.service._util import check_k, require_product
from vismerch.service.models import Hit, SearchResult
from vismerch.service.workspace import Workspace

MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # an uploaded query image; pixels are capped by max_pixels
MIN_COLOUR_SCORE = 1e-3  # under 0.1 % of the foreground near the colour is no match


def _hits(pairs: list[tuple[str, float]]) -> list[Hit]:
    return [Hit(id=i, score=round(float(s), 4)) for i, s in pairs]


def colour(ws: Workspace, colour: str, *, k: int = 12, category: str | None = None,
           in_stock: bool = False) -> SearchResult:
    """Products whose foreground is closest to a colour name or ``#hex`` (the palette index)."""
    from vismerch.features.colour import parse_colour

    check_k(k)
    try:
        lab = parse_colour(colour)
    except UsageError as exc:
        raise InvalidInput("colour", exc.message, hint=exc.hint) from None
    bundle = ws.search_index()
    rows, scores = bundle.colour_rows(lab, k, bundle.mask(category, in_stock), min_score=MIN_COLOUR_SCORE)
    return SearchResult(mode="colour", colour=colour, hits=_hits(bundle.named(rows, scores)))


def text(ws: Workspace, query: str | None = None, *, colour: str | None = None,
         category: str | None = None, k: int = 12, merchandise: bool = True,
         at: str | None = None) -> SearchResult:
    """Text search (neural image vectors and product titles, fused), constrained to a
    colour when one is given (hybrid); a colour alone is a colour search. With
    ``merchandise`` the store's synonyms and query rules (in force at ``at``, default now)
    apply (``service.query_rules``)."""
    from vismerch.merch.semantic import semantic_search

    check_k(k)
    if not (query and query.strip()) and not colour:
        raise InvalidInput("query", "give a text query, a colour, or both",
                           hint="vismerch search STORE --colour navy")
    if not (query and query.strip()):
        return globals()["colour"](ws, colour, k=k, category=category)
    if colour is not None:
        from vismerch.features.colour import parse_colour

        try:
            parse_colour(colour)
        except UsageError as exc:
            raise InvalidInput("colour", exc.message, hint=exc.hint) from None
    def run(text: str, depth: int) -> list[tuple[str, float]]:
        return semantic_search(ws.store, text, colour=colour, category=category, k=depth,
                               settings=ws.settings, device=ws.settings.device, cache=ws)

    mode = "hybrid" if colour else "text"
    if not merchandise:
        return SearchResult(mode=mode, query=query, colour=colour, hits=_hits(run(query, k)))
    from vismerch.service.query_rules import merchandised

    hits, redirect, info = merchandised(ws, query, run, k, at=at)
    return SearchResult(mode=mode, query=query, colour=colour, hits=_hits(hits), redirect=redirect,
                        merchandising=info)


def query_preview(ws: Workspace, query: str, *, k: int = 12, colour: str | None = None,
                  category: str | None = None, at: str | None = None) -> dict[str, Any]:
    """The same search without and with query merchandising (at ``at``, default now)."""
    before = text(ws, query, colour=colour, category=category, k=k, merchandise=False)
    after = text(ws, query, colour=colour, category=category, k=k, at=at)
    return {"before": before, "after": after}


SIMILAR_MODES = ("colour", "style", "both")


def similar_modes(ws: Workspace) -> list[str]:
    """The similar-item modes the store can answer: colour always; style and both where it
    has style vectors (a neural backend's, else the ``style`` backend's)."""
    return ["colour", "style", "both"] if _style_backend(ws) else ["colour"]


def _style_backend(ws: Workspace) -> str | None:
    """The vectors that answer "same style" (``indexes.stored.style_backend``)."""
    from vismerch.indexes.stored import style_backend

    return style_backend(ws.store)


def _similar_parts(ws: Workspace, mode: str | None, backend: str | None) -> tuple[str | None, list]:
    """(the mode answered, [(index, weight)]) for a similar-items request: ``backend``
    alone when named, else the mode's indexes (default: style where style vectors exist)."""
    if mode is not None and mode not in SIMILAR_MODES:
        raise InvalidInput("mode", f"unknown similar-items mode {mode!r}; give one of "
                           f"{', '.join(SIMILAR_MODES)}")
    if backend is not None and mode is None:
        return None, [(ws.similarity_index(backend), 1.0)]
    style = _style_backend(ws)
    if mode is None:
        if style is None:
            return None, [(ws.similarity_index(None), 1.0)]
        mode = "style"  # shoppers expect a dress to suggest dresses, in any colour
    if mode != "colour" and style is None:
        raise InvalidInput("mode", f"this store has no style vectors for mode {mode!r}",
                           hint="ingest again with the setting style_encoder = auto (the default)")
    if mode == "colour":
        return mode, [(ws.similarity_index("colour"), 1.0)]
    if mode == "style":
        return mode, [(ws.similarity_index(style, whitened=True), 1.0)]
    weight = min(max(float(ws.settings.similar_colour_weight), 0.0), 1.0)
    return mode, [(ws.similarity_index("colour"), weight), (ws.similarity_index(style), 1.0 - weight)]


def similar(ws: Workspace, product_id: str, *, k: int = 12, same_category: bool = False,
            in_stock: bool = False, backend: str | None = None, mode: str | None = None) -> SearchResult:
    """More like this: the k products most similar to ``product_id``, by ``mode``: colour
    (the colour backend's vectors), style (the product's kind: shape and structure) or both
    (their cosines fused, ``similar_colour_weight``); default style where the store has
    style vectors. ``backend`` alone names one backend's vectors instead."""
    from vismerch.merch.similar import fused_similar, similar_items

    check_k(k)
    product = require_product(ws.store, product_id)
    if product.status != "ok":
        raise InvalidInput("product_id", f"product {product_id!r} has no features (its image was refused)")
    answered, parts = _similar_parts(ws, mode, backend)
    bundle = ws.search_index()
    base = bundle.mask(product.category if same_category else None, in_stock)
    masks = [bundle.index_mask(index.ids, base) for index, _ in parts]
    if len(parts) == 1:
        hits = similar_items(parts[0][0], None, product_id, k, allowed_mask=masks[0])
    else:
        hits = fused_similar(parts, product_id, k, masks)
    return SearchResult(mode="similar", query=product_id, similar_mode=answered, hits=_hits(hits))


def by_image(ws: Workspace, data: bytes, *, k: int = 12, category: str | None = None,
             in_stock: bool = False, max_bytes: int = MAX_UPLOAD_BYTES) -> SearchResult:
    """Products most like an uploaded image (its bytes), by the store's visual vectors.
    Refuses more than ``max_bytes`` bytes or ``max_pixels`` pixels, and anything that is
    not a supported image, as InvalidInput on ``image``."""
    from vismerch.errors import DecodeError
    from vismerch.features.base import list_backends
    from vismerch.imaging.decode import decode_image

    check_k(k)
    if len(data) > max_bytes:
        raise InvalidInput("image", f"the image is {len(data):,} bytes; the limit is {max_bytes:,}")
    try:
        decoded = decode_image(data, working_size=int(ws.settings.working_size),
                               max_pixels=int(ws.settings.max_pixels), thumb_size=None)
    except DecodeError as exc:
        raise InvalidInput("image", f"cannot use the uploaded image: {exc.message} ({exc.reason})") from None
    index = ws.similarity_index()
    if not len(index):
        return SearchResult(mode="image", hits=[])
    backend = (index.meta or {}).get("fingerprint")
    name = ws.store.pick_backend(None, tuple(list_backends(neural=True)))
    batch = decoded.pixels[None]
    if name is not None:
        vector = ws.encoder(backend).encode_images(batch).vectors
    else:
        from vismerch.features.colour import ColourBackend

        vector = ColourBackend(settings=ws.settings).encode_images(batch).vectors
    bundle = ws.search_index()
    found = index.search(vector, k, bundle.index_mask(index.ids, bundle.mask(category, in_stock)))[0]
    return SearchResult(mode="image", hits=_hits(found))


def reindex(ws: Workspace) -> dict[str, int]:
    """Build and save the store's search indexes (title vectors included) under the writer
    lock, as an ingest's end does; counts of what they hold."""
    from vismerch.catalog.lock import writer_lock
    from vismerch.indexes import catalog

    with writer_lock(ws.path):
        bundle = catalog.refresh(ws.store, ws.settings)
    return {"products": len(bundle), "titles": len(bundle.titles or ()), "palettes": len(bundle.palettes)}
