"""Cursor pages for every list the API answers: ``Page[T]`` (items + ``next_cursor``) and
``paginate``, which pages an ordered list by a key; the cursor is the last key given out
(checksummed, ``_util.encode_token``), so a page turn is stable when rows are added or
removed before it. Lists that can grow with the catalog (refused images) page in SQL."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from vismerch.errors import InvalidInput
from vismerch.service._util import decode_token, encode_token

T = TypeVar("T")
DEFAULT_LIMIT = 100  # a page when the caller gives no limit; serve_page_limit caps any limit


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; null at the end.")


def encode_key(key: Any) -> str:
    return encode_token(json.dumps(key, separators=(",", ":")).encode())


def decode_key(cursor: str | None, field: str = "cursor") -> Any:
    """The key an earlier page's ``next_cursor`` holds (None for the first page); InvalidInput
    naming ``field`` for anything this API did not give out."""
    if not cursor:
        return None
    try:
        return json.loads(decode_token(cursor, field))
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput(field, f"{field}: not a cursor this API gave out",
                           hint="pass the next_cursor of the previous page, or none for the first") from None


def paginate(items: Iterable[T], key: Callable[[T], list[Any]], cursor: str | None, limit: int) -> Page[T]:
    """The ``limit`` items after the cursor's key, in key order (keys: JSON lists of str/int)."""
    after = decode_key(cursor)
    if after is not None and not isinstance(after, list):
        raise InvalidInput("cursor", "cursor: not a cursor of this list")
    ordered = sorted(items, key=key)
    try:
        rest = ordered if after is None else [i for i in ordered if key(i) > after]
    except TypeError:  # a cursor of another list (keys of other types)
        raise InvalidInput("cursor", "cursor: not a cursor of this list") from None
    page = rest[:limit]
    more = len(rest) > limit
    return Page[Any](items=page, next_cursor=encode_key(key(page[-1])) if more and page else None)
