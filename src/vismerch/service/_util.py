"""Small helpers the service modules share (input checks that name their field)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from vismerch.errors import InvalidInput, NotFound


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


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None or cursor == "":
        return None
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidInput("cursor", f"cursor {cursor[:40]!r} is not one this API gave out",
                           hint="pass the next_cursor of the previous page, or none for the first") from None


def require_product(store: Any, product_id: str) -> Any:
    product = store.product(product_id)
    if product is None:
        raise NotFound("product", product_id, hint="list products with: vismerch tags STORE")
    return product
