"""Small helpers the service modules share (input checks that name their field)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from vismerch.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from vismerch.catalog.store import Store

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: dict[str, Any]) -> M:
    """``data`` as ``model`` (what the API checks), or InvalidInput naming the first bad field:
    the CLI's way to the same checks as the API's request bodies."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or "input"
        raise InvalidInput(field, f"{field}: {err.get('msg', 'invalid')}") from None


def check_k(k: int, field: str = "k", maximum: int = 1000) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidInput(field, f"{field} must be a whole number of at least 1, got {k!r}")
    if k > maximum:
        raise InvalidInput(field, f"{field} must be at most {maximum}, got {k}")
    return k


def check_choice(value: Any, choices: tuple[str, ...], field: str) -> str:
    if value not in choices:
        raise InvalidInput(field, f"{field} must be one of {', '.join(choices)}, got {value!r}")
    return value


# A cursor is base64url(check + payload), where check is 4 bytes of a SHA-256 over the
# payload: a cursor this API gave out decodes, anything else (garbage, a truncated or
# hand-edited one) is refused with a 422 naming the field instead of quietly meaning
# "some other page".
_CURSOR_CHECK = 4
_CURSOR_CHARS = re.compile(r"[A-Za-z0-9_-]+")


def _cursor_check(payload: bytes) -> bytes:
    return hashlib.sha256(b"vismerch-cursor\0" + payload).digest()[:_CURSOR_CHECK]


def encode_token(payload: bytes) -> str:
    """A cursor string for ``payload`` (see decode_token)."""
    return base64.urlsafe_b64encode(_cursor_check(payload) + payload).decode().rstrip("=")


def decode_token(cursor: str, field: str = "cursor") -> bytes:
    """The payload of a cursor encode_token made; InvalidInput naming ``field`` otherwise."""
    raw = b""
    if _CURSOR_CHARS.fullmatch(cursor or "") and len(cursor) % 4 != 1:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            raw = b""
    if len(raw) <= _CURSOR_CHECK or raw[:_CURSOR_CHECK] != _cursor_check(raw[_CURSOR_CHECK:]):
        raise InvalidInput(field, f"{field} {cursor[:40]!r} is not a cursor this API gave out",
                           hint="pass the next_cursor of the previous page, or none for the first")
    return raw[_CURSOR_CHECK:]


def encode_cursor(last_id: str) -> str:
    return encode_token(last_id.encode())


def decode_cursor(cursor: str | None, field: str = "cursor") -> str | None:
    """The last id of the previous page; None for the first page; 422 naming ``field`` for
    anything this API did not give out."""
    if cursor is None or cursor == "":
        return None
    try:
        return decode_token(cursor, field).decode()
    except UnicodeDecodeError:
        raise InvalidInput(field, f"{field} {cursor[:40]!r} is not a cursor this API gave out") from None


def require_product(store: Store, product_id: str) -> Any:
    product = store.product(product_id)
    if product is None:
        raise NotFound("product", product_id, hint="list products with: vismerch tags STORE")
    return product


def parse_time(text: str | None, field: str) -> datetime | None:
    """An RFC 3339 time or a date (UTC unless it has an offset) -> aware UTC datetime; None
    for empty; InvalidInput naming ``field`` otherwise."""
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(field, f"{field} {text!r} is not a date or RFC 3339 time") from None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
