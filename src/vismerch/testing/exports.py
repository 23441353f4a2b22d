"""Shopper events written as other systems export them: GA4's BigQuery export and OpenSearch
UBI, as JSON lines, with the fields those exports carry that vismerch ignores, typed as the
exports type them (GA4 writes INTEGER columns as strings and the list index is a STRING).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_GA4_NAMES = {"impression": "view_item_list", "click": "select_item", "add_to_cart": "add_to_cart",
              "purchase": "purchase"}
_NOISE = {
    "event_previous_timestamp": None, "event_value_in_usd": None, "event_bundle_sequence_id": "1",
    "event_server_timestamp_offset": "512", "user_id": None, "privacy_info": {"analytics_storage": "Yes"},
    "user_properties": [], "user_first_touch_timestamp": "1700000000000000",
    "device": {"category": "desktop", "mobile_brand_name": "Apple", "operating_system": "Macintosh",
               "language": "en-gb", "web_info": {"browser": "Chrome", "browser_version": "131.0"}},
    "geo": {"continent": "Europe", "country": "France", "region": "Ile-de-France", "city": "Paris"},
    "app_info": None, "traffic_source": {"name": "(direct)", "medium": "(none)", "source": "(direct)"},
    "stream_id": "1234567890", "platform": "WEB", "is_active_user": True,
}


def _param(key: str, string: str | None = None, integer: str | None = None) -> dict[str, Any]:
    return {"key": key, "value": {"string_value": string, "int_value": integer, "float_value": None,
                                  "double_value": None}}


def ga4_row(event: dict[str, Any], *, index_base: int = 0, currency: str = "EUR") -> dict[str, Any]:
    """One canonical event as one GA4 export row (one item)."""
    micros = int(event["ts"].timestamp() * 1_000_000)
    params = [_param("page_location", "https://shop.example/c"),
              _param("ga_session_id", integer="1700000000")]
    if event.get("columns"):
        params.append(_param("grid_columns", integer=str(event["columns"])))
    if event["type"] == "purchase":
        params.append(_param("currency", event.get("currency") or currency))
    quantity = event.get("quantity") or 1
    index = None if event.get("position") is None else str(event["position"] - 1 + index_base)
    item = {"item_id": event["product_id"], "item_name": f"product {event['product_id']}",
            "item_brand": None, "item_list_id": event.get("collection"),
            "item_list_name": event.get("collection"), "item_list_index": index, "price": None,
            "quantity": str(quantity), "item_revenue": None, "coupon": None, "affiliation": None}
    if event["type"] == "purchase":
        item["item_revenue"] = event["revenue"]
        item["price"] = event["revenue"] / quantity
    row = {"event_date": event["ts"].strftime("%Y%m%d"), "event_timestamp": str(micros),
           "event_name": _GA4_NAMES[event["type"]], "event_params": params,
           "user_pseudo_id": event["visitor"],
           "ecommerce": {"transaction_id": event["event_id"] if event["type"] == "purchase" else None,
                         "purchase_revenue": event.get("revenue"), "total_item_quantity": str(quantity)},
           "items": [item], **_NOISE}
    return row


def write_ga4(events: Iterable[dict[str, Any]], path: Path, *, index_base: int = 0,
              page_views_every: int = 10) -> int:
    """Write ``events`` as a GA4 export (plus a page_view row every ``page_views_every``); rows written."""
    n = 0
    with open(path, "w") as fh:
        for i, event in enumerate(events):
            fh.write(json.dumps(ga4_row(event, index_base=index_base), separators=(",", ":")) + "\n")
            n += 1
            if page_views_every and i % page_views_every == 0:
                fh.write(json.dumps({"event_name": "page_view", "event_timestamp": "1700000000000000",
                                     "user_pseudo_id": event["visitor"], "items": [], **_NOISE}) + "\n")
                n += 1
    return n


def ubi_row(event: dict[str, Any]) -> dict[str, Any]:
    """One canonical event as an OpenSearch UBI event."""
    detail = None
    if event["type"] in ("add_to_cart", "purchase"):
        detail = {"quantity": event.get("quantity") or 1, "revenue": event.get("revenue"),
                  "currency": event.get("currency")}
    return {"application": "shop", "action_name": event["type"], "query_id": None,
            "session_id": "s-" + event["visitor"], "client_id": event["visitor"], "user_id": None,
            "timestamp": event["ts"].isoformat(), "message_type": "INFO", "message": None,
            "event_attributes": {"object": {"object_id": event["product_id"], "object_id_field": "sku",
                                            "description": None, "object_detail": detail},
                                 "position": {"ordinal": event.get("position"), "x": None, "y": None},
                                 "collection": event.get("collection"),
                                 "version_id": event.get("version_id"), "grid_columns": event.get("columns")}}


def write_ubi(events: Iterable[dict[str, Any]], path: Path) -> int:
    n = 0
    with open(path, "w") as fh:
        for event in events:
            fh.write(json.dumps(ubi_row(event), separators=(",", ":")) + "\n")
            n += 1
    return n
