"""Shopper event kinds and the checks every event passes, whatever door it came in by.

An event kind is a registered class that names what it requires beyond the common fields
(a purchase needs revenue and currency); the API, the importers and the docs read the
registry, so adding a kind is one class here. ``check`` turns one raw event (a dict as
the API receives it) into a row of the log's columns, or a ``Refusal`` naming the field.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import pyarrow as pa

from vismerch.registry import Registry

EVENT_KINDS: Registry[type[EventKind]] = Registry("event_kinds")

# the log's columns; ts is microseconds since the epoch (UTC)
LOG_SCHEMA = pa.schema([
    ("event_id", pa.string()), ("type", pa.string()), ("ts", pa.timestamp("us", tz="UTC")),
    ("visitor", pa.string()), ("collection", pa.string()), ("version_id", pa.int64()),
    ("position", pa.int32()), ("columns", pa.int16()), ("product_id", pa.string()),
    ("quantity", pa.int32()), ("revenue", pa.float64()), ("currency", pa.string()),
    ("experiment", pa.string()), ("variant", pa.string()), ("source", pa.string()),
    ("query", pa.string()), ("results", pa.int32()),  # search events, and clicks on their results
])
COLUMNS = tuple(LOG_SCHEMA.names)
MAX_ID = 128
MAX_TEXT = 200
MAX_POSITION = 100_000
MAX_COLUMNS = 12
MAX_QUANTITY = 10_000
MAX_REVENUE = 1e9
MAX_RESULTS = 1_000_000
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_CURRENCY = re.compile(r"^[A-Z]{3}$")


@dataclass(frozen=True)
class Refusal:
    index: int
    field: str
    reason: str  # stable code: missing, wrong-type, out-of-range, unknown-product, future-timestamp, ...
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "field": self.field, "reason": self.reason, "message": self.message}


class EventKind:
    """One kind of shopper event; subclasses say what else they need."""

    name: ClassVar[str]
    help: ClassVar[str]
    needs_quantity: ClassVar[bool] = False
    needs_revenue: ClassVar[bool] = False
    needs_product: ClassVar[bool] = True
    is_search: ClassVar[bool] = False  # needs the query and its result count; no product


def event_kind(cls: type[EventKind]) -> type[EventKind]:
    EVENT_KINDS.register(cls.name, cls)
    return cls


@event_kind
class Impression(EventKind):
    name, help = "impression", "the product was shown to the visitor (in view) at a position"


@event_kind
class Click(EventKind):
    name, help = "click", "the visitor opened the product from the grid (or, with query, from search results)"


@event_kind
class AddToCart(EventKind):
    name, help = "add_to_cart", "the visitor put the product in the cart (quantity, default 1)"
    needs_quantity = True


@event_kind
class Purchase(EventKind):
    name, help = "purchase", "the visitor bought the product (quantity, revenue and currency required)"
    needs_quantity = needs_revenue = True


@event_kind
class Search(EventKind):
    name, help = "search", "the visitor searched (query and results, the number of results, required)"
    needs_product, is_search = False, True


def kind_names() -> list[str]:
    return EVENT_KINDS.names()


class _Bad(Exception):
    def __init__(self, field: str, reason: str, message: str):
        self.field, self.reason, self.message = field, reason, message


def _text(raw: dict, field: str, *, required: bool, limit: int = MAX_TEXT) -> str | None:
    value = raw.get(field)
    if value is None:
        if required:
            raise _Bad(field, "missing", f"{field} is required")
        return None
    if not isinstance(value, str):
        raise _Bad(field, "wrong-type", f"{field} must be a string")
    if not value or len(value) > limit:
        raise _Bad(field, "out-of-range", f"{field} must be 1 to {limit} characters")
    return value


def _int(raw: dict, field: str, low: int, high: int, *, required: bool = False) -> int | None:
    value = raw.get(field)
    if value is None:
        if required:
            raise _Bad(field, "missing", f"{field} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(field, "wrong-type", f"{field} must be an integer")
    if not low <= value <= high:
        raise _Bad(field, "out-of-range", f"{field} must be between {low} and {high}")
    return value


def parse_ts(value: Any, now: datetime, future_slack_s: float) -> datetime:
    """An RFC 3339 string (UTC unless it has an offset) or epoch milliseconds -> aware UTC."""
    if isinstance(value, bool) or value is None:
        raise _Bad("ts", "missing" if value is None else "wrong-type", "ts is required: RFC 3339 or epoch ms")
    if isinstance(value, int | float):
        if not math.isfinite(value) or not 0 < value < 1e14:
            raise _Bad("ts", "out-of-range", "ts as a number is epoch milliseconds")
        ts = datetime.fromtimestamp(value / 1000.0, tz=UTC)
    elif isinstance(value, str) and len(value) <= 40:
        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
        except ValueError:
            raise _Bad("ts", "wrong-type", f"ts {value!r} is not an RFC 3339 time") from None
        ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    else:
        raise _Bad("ts", "wrong-type", "ts must be an RFC 3339 string or epoch milliseconds")
    if ts < EARLIEST:
        raise _Bad("ts", "out-of-range", "ts is before 2000-01-01")
    if (ts - now).total_seconds() > future_slack_s:
        raise _Bad("ts", "future-timestamp", f"ts {ts.isoformat()} is in the future")
    return ts


def _experiment(raw: dict) -> str | None:
    """The storefront answer's experiment id: an integer, or the same as text."""
    value = raw.get("experiment")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return str(value)
    return _text(raw, "experiment", required=False, limit=32)


def _search(raw: dict, kind: type[EventKind]) -> tuple[str | None, int | None]:
    """The query (normalised as query rules compare it) and, for a search, its result count."""
    from vismerch.merch.queryrules import normalise

    text = _text(raw, "query", required=kind.is_search)
    query = normalise(text) if text is not None else None
    if text is not None and not query:
        raise _Bad("query", "out-of-range", "query must have a character other than spaces")
    results = _int(raw, "results", 0, MAX_RESULTS, required=kind.is_search)
    return query, results if kind.is_search else None


def _money(raw: dict, kind: type[EventKind]) -> tuple[int | None, float | None, str | None]:
    quantity = _int(raw, "quantity", 1, MAX_QUANTITY)
    if kind.needs_quantity and quantity is None:
        quantity = 1
    revenue, currency = raw.get("revenue"), raw.get("currency")
    if kind.needs_revenue:
        if revenue is None:
            raise _Bad("revenue", "missing", "a purchase needs revenue")
        if currency is None:
            raise _Bad("currency", "missing", "a purchase needs currency (ISO 4217, e.g. EUR)")
    if revenue is not None:
        if isinstance(revenue, bool) or not isinstance(revenue, int | float):
            raise _Bad("revenue", "wrong-type", "revenue must be a number")
        if not math.isfinite(revenue) or not 0 <= revenue <= MAX_REVENUE:
            raise _Bad("revenue", "out-of-range", f"revenue must be between 0 and {MAX_REVENUE:g}")
        revenue = float(revenue)
    if currency is not None and (not isinstance(currency, str) or not _CURRENCY.match(currency)):
        raise _Bad("currency", "wrong-type", "currency must be an ISO 4217 code such as EUR")
    return quantity, revenue, currency


def check(raw: Any, *, now: datetime, future_slack_s: float, known_product: Any) -> dict[str, Any]:
    """One API event -> a log row (visitor still raw); raises ``_Bad`` (see ``check_batch``)."""
    if not isinstance(raw, dict):
        raise _Bad("event", "wrong-type", "each event must be a JSON object")
    event_id = _text(raw, "event_id", required=True, limit=MAX_ID)
    kind_name = _text(raw, "type", required=True, limit=32)
    try:
        kind = EVENT_KINDS.get(kind_name)
    except Exception:
        raise _Bad("type", "unknown-type", f"type must be one of: {', '.join(kind_names())}") from None
    product_id = _text(raw, "product_id", required=kind.needs_product, limit=1000)
    if product_id is not None and not known_product(product_id):
        raise _Bad("product_id", "unknown-product", f"no product {product_id!r} in this store")
    query, results = _search(raw, kind)
    quantity, revenue, currency = _money(raw, kind)
    return {
        "event_id": event_id, "type": kind.name,
        "ts": parse_ts(raw.get("ts"), now, future_slack_s),
        "visitor": _text(raw, "visitor", required=True),
        "collection": _text(raw, "collection", required=False),
        "version_id": _int(raw, "version_id", 1, 2**62),
        "position": _int(raw, "position", 1, MAX_POSITION),
        "columns": _int(raw, "columns", 1, MAX_COLUMNS),
        "product_id": product_id, "quantity": quantity, "revenue": revenue, "currency": currency,
        "experiment": _experiment(raw),
        "variant": _text(raw, "variant", required=False),
        "query": query, "results": results,
    }


def check_batch(events: list[Any], *, now: datetime, future_slack_s: float,
                known_product: Any) -> tuple[list[dict[str, Any]], list[int], list[Refusal]]:
    """Rows of the good events, their indexes in ``events``, and one refusal per bad one."""
    rows, kept, refused = [], [], []
    for i, raw in enumerate(events):
        try:
            rows.append(check(raw, now=now, future_slack_s=future_slack_s, known_product=known_product))
            kept.append(i)
        except _Bad as bad:
            refused.append(Refusal(i, bad.field, bad.reason, bad.message))
    return rows, kept, refused
