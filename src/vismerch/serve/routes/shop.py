"""The storefront example page: ``/shop/?collection=C&key=<storefront key>``.

Static files shipped in ``serve/shop/``: a small shop that renders a published collection
through the storefront endpoint and sends shopper events with ``vismerch-events.js``, the
snippet ``docs/storefront-events.md`` gives storefront developers. Like the web app it is
mounted outside ``/api/v1`` and its OpenAPI, with a strict Content-Security-Policy; images
are ``blob:`` URLs, because a thumbnail is read with the key in a header, not in its URL.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from vismerch.serve.errors import ApiError

SHOP_ROOT = Path(__file__).resolve().parent.parent / "shop"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the page's URL carries the (public, read-only) key
    "Cache-Control": "no-cache",
}
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}

router = APIRouter(include_in_schema=False)


def _file(rel: str) -> Response:
    path = (SHOP_ROOT / rel).resolve()
    if not path.is_relative_to(SHOP_ROOT) or not path.is_file():
        raise ApiError(404, "not_found", f"no such shop file: {rel!r}")
    media = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return FileResponse(path, media_type=media, headers=HEADERS)


@router.get("/shop")
def shop_bare(request: Request) -> RedirectResponse:
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"/shop/{query}", status_code=307)


@router.get("/shop/")
def shop_index() -> Response:
    return _file("index.html")


@router.get("/shop/{rel:path}")
def shop_asset(rel: str) -> Response:
    return _file(rel)


def install(app: FastAPI) -> None:
    """Add the example storefront's routes to ``app``."""
    app.include_router(router)
