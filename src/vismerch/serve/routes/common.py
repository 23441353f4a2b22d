"""What the route modules share: the request's store and settings, paging, ETag helpers."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Depends, Query, Request

from vismerch.config import setting
from vismerch.errors import InvalidInput
from vismerch.serve.errors import ApiError
from vismerch.service._util import decode_token, encode_token
from vismerch.service.paging import DEFAULT_LIMIT


def store(request: Request) -> Any:
    """This thread's store of the app's workspace."""
    return request.app.state.store_of()


def workspace(request: Request) -> Any:
    return request.app.state.workspace


def settings(request: Request) -> Any:
    return request.app.state.settings


def page_limit(request: Request, limit: int) -> int:
    """``limit`` capped at the serve_page_limit setting."""
    return max(1, min(int(limit), int(setting(settings(request), "serve_page_limit"))))


def paging(request: Request,
           cursor: Annotated[str | None, Query(max_length=2000, description="The next_cursor of the "
                                               "previous page; none for the first")] = None,
           limit: Annotated[int, Query(ge=1, le=100_000, description=f"Items per page (default "
                                       f"{DEFAULT_LIMIT}; capped at serve_page_limit)")] = DEFAULT_LIMIT,
           ) -> tuple[str | None, int]:
    """``(cursor, limit)`` of a list route, the limit capped at serve_page_limit."""
    return cursor, page_limit(request, limit)


Paging = Annotated[tuple[str | None, int], Depends(paging)]


def encode_cursor(value: Any) -> str:
    """A cursor for any JSON value (checksummed: see service._util.encode_token)."""
    return encode_token(json.dumps(value, separators=(",", ":")).encode())


def decode_cursor(cursor: str | None, field: str = "cursor") -> Any:
    """The value an earlier page's ``next_cursor`` encoded; 422 naming ``field`` when it is not one."""
    if not cursor:
        return None
    try:
        return json.loads(decode_token(cursor, field))
    except (InvalidInput, ValueError, UnicodeDecodeError):
        raise ApiError(422, "invalid", f"{field}: not a cursor this API gave out", field=field,
                       hint="pass the next_cursor of the previous page, or nothing for the first") from None


def quoted(tag: str) -> str:
    return f'"{tag}"'


def etag_matches(header: str | None, tag: str) -> bool:
    """Does an If-None-Match / If-Match header name ``tag`` (or ``*``)?"""
    if not header:
        return False
    wanted = {part.strip().removeprefix("W/").strip('"') for part in header.split(",")}
    return "*" in wanted or tag in wanted
