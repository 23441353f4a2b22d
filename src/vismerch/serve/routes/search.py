"""Search: text, colour or both (hybrid), and by an uploaded image (byte and pixel caps)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from vismerch.config import setting
from vismerch.serve.auth import require
from vismerch.serve.errors import ApiError
from vismerch.serve.routes.common import settings, workspace
from vismerch.service import search
from vismerch.service.models import SearchResult

router = APIRouter(tags=["search"])
viewer = Depends(require("viewer"))
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/webp", "application/octet-stream")


@router.get("/search", response_model=SearchResult,
            summary="Text search, colour search, or both (hybrid: text within a colour)")
def text_search(request: Request,
                q: Annotated[str | None, Query(max_length=500, description="Text query")] = None,
                colour: Annotated[
                    str | None, Query(max_length=100, description="Colour name or #hex")] = None,
                category: Annotated[str | None, Query(max_length=200)] = None,
                k: Annotated[int, Query(ge=1, le=200)] = 12,
                _: object = viewer) -> SearchResult:
    return search.text(workspace(request), q, colour=colour, category=category, k=k)


@router.get("/search/colour", response_model=SearchResult, summary="Products closest to a colour")
def colour_search(request: Request,
                  colour: Annotated[str, Query(min_length=1, max_length=100, description="Name or #hex")],
                  category: Annotated[str | None, Query(max_length=200)] = None,
                  in_stock: bool = False,
                  k: Annotated[int, Query(ge=1, le=200)] = 12,
                  _: object = viewer) -> SearchResult:
    return search.colour(workspace(request), colour, k=k, category=category, in_stock=in_stock)


async def _upload(request: Request) -> bytes:
    """The raw image body, refused (413) as soon as it passes serve_upload_max_bytes."""
    cap = int(setting(settings(request), "serve_upload_max_bytes"))
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise ApiError(413, "too_large", f"image: {int(declared):,} bytes is over the {cap:,}-byte limit",
                       field="image", hint="send a smaller image (serve_upload_max_bytes)")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise ApiError(413, "too_large", f"image: over the {cap:,}-byte limit", field="image",
                           hint="send a smaller image (serve_upload_max_bytes)")
    if not body:
        raise ApiError(422, "invalid", "image: the request body is empty; send the image bytes",
                       field="image")
    return bytes(body)


@router.post("/search/image", response_model=SearchResult,
             summary="Products most like an uploaded image (the raw bytes as the body)",
             openapi_extra={"requestBody": {"required": True, "content": {
                 t: {"schema": {"type": "string", "format": "binary"}} for t in _IMAGE_TYPES}}})
async def image_search(request: Request,
                       k: Annotated[int, Query(ge=1, le=200)] = 12,
                       category: Annotated[str | None, Query(max_length=200)] = None,
                       in_stock: bool = False,
                       _: object = viewer) -> SearchResult:
    import anyio.to_thread

    data = await _upload(request)
    _check_pixels(data, int(setting(settings(request), "serve_upload_max_pixels")))
    ws = workspace(request)
    return await anyio.to_thread.run_sync(lambda: search.by_image(
        ws, data, k=k, category=category, in_stock=in_stock, max_bytes=len(data)))


def _check_pixels(data: bytes, cap: int) -> None:
    """Refuse a query image over ``cap`` pixels from its header alone (before any decode)."""
    import io
    import warnings

    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as im:
                width, height = im.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return  # the service's safe decoder refuses it with the reason
    if width * height > cap:
        raise ApiError(422, "invalid", f"image: {width}x{height} is {width * height:,} pixels, over the "
                       f"{cap:,}-pixel limit", field="image",
                       hint="send a smaller image (serve_upload_max_pixels)")
