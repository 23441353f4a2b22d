"""Event files from other systems -> log rows: the GA4 BigQuery export, OpenSearch UBI, CSV.

Each format is a registered class whose ``source`` reads the file in DuckDB and whose
``select`` turns its rows into the log's columns plus a ``reason`` column (NULL for a good
row), so a million-row export is parsed and checked by DuckDB's JSON/CSV readers, never row
by row in Python. Ids are derived from the row's content, so importing the same file twice adds nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from vismerch.registry import Registry

FORMATS: Registry[type[EventFormat]] = Registry("event_formats")


@dataclass(frozen=True)
class ImportOptions:
    currency: str = "USD"  # when a purchase names none
    collection: str | None = None  # when a row names none (UBI has no list id)
    index_base: str = "auto"  # GA4/UBI list index: "0", "1" or "auto" (0-based if any row has 0)
    future_slack_s: float = 300.0  # an event this far past now is refused as future-timestamp


class EventFormat(ABC):
    name: ClassVar[str]
    help: ClassVar[str]

    # conditions on a row of ``src``: nothing parsed (a malformed line), or an event kind
    # vismerch does not read (a page view)
    malformed: ClassVar[str] = "FALSE"
    other: ClassVar[str] = "FALSE"

    @abstractmethod
    def source(self, path: Path) -> str:
        """SQL reading the file's rows (materialised as table ``src``)."""

    @abstractmethod
    def select(self, options: ImportOptions) -> str:
        """SQL over ``src`` with columns event_id, type, ts, visitor (raw), collection,
        version_id, position (as listed), columns, product_id, quantity, revenue, currency,
        reason; one row per event (an export row with three items is three events)."""


def event_format(cls: type[EventFormat]) -> type[EventFormat]:
    FORMATS.register(cls.name, cls)
    return cls


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _read_json(path: Path, columns: dict[str, str], extra: str = "") -> str:
    """DuckDB's reader of a JSON-lines file with these columns; a line it cannot parse is
    skipped (and counted by the caller as malformed)."""
    spec = "{" + ", ".join(f"{_lit(k)}: {_lit(v)}" for k, v in columns.items()) + "}"
    more = f", {extra}" if extra else ""
    return (f"SELECT * FROM read_json({_lit(str(path))}, format = 'newline_delimited', "
            f"columns = {spec}, ignore_errors = true{more})")


_CHECKS = """
    CASE WHEN type IS NULL THEN 'other-event'
         WHEN ts IS NULL THEN 'bad-timestamp'
         WHEN product_id IS NULL OR product_id = '' THEN 'missing-product'
         WHEN type IN ('impression', 'click') AND collection IS NULL THEN 'missing-collection'
         WHEN type = 'purchase' AND revenue IS NULL THEN 'missing-revenue'
         WHEN revenue < 0 OR quantity < 1 THEN 'out-of-range'
         WHEN position IS NOT NULL AND position < 0 THEN 'out-of-range'
         ELSE NULL END
"""


# the last step of a format whose ``typed`` rows carry quantity0/revenue0/currency0: money only
# where the event kind has it, and the refusal reason
_FINAL = f"""SELECT event_id, type, ts, visitor, collection, version_id, position, columns, product_id,
               CASE WHEN type IN ('add_to_cart', 'purchase') THEN quantity0 END AS quantity,
               CASE WHEN type = 'purchase' THEN revenue0 END AS revenue,
               CASE WHEN type = 'purchase' THEN currency0 END AS currency,
               {_CHECKS} AS reason
        FROM typed"""


@event_format
class Ga4(EventFormat):
    name = "ga4"
    help = ("GA4 BigQuery export as JSON lines: view_item_list, select_item, add_to_cart and "
            "purchase rows, one event per item")
    malformed = "event_name IS NULL AND event_timestamp IS NULL AND user_pseudo_id IS NULL AND items IS NULL"
    other = ("event_name IS NOT NULL AND event_name NOT IN "
             "('view_item_list', 'select_item', 'add_to_cart', 'purchase')")

    def source(self, path):
        # leaf values read as text: the export writes INTEGER columns as JSON strings or numbers
        columns = {
            "event_name": "VARCHAR", "event_timestamp": "VARCHAR", "user_pseudo_id": "VARCHAR",
            "event_params": "STRUCT(key VARCHAR, value STRUCT(string_value VARCHAR, int_value VARCHAR,"
                            " float_value VARCHAR, double_value VARCHAR))[]",
            "ecommerce": "STRUCT(transaction_id VARCHAR, purchase_revenue VARCHAR)",
            "items": "STRUCT(item_id VARCHAR, item_list_id VARCHAR, item_list_index VARCHAR,"
                     " price VARCHAR, quantity VARCHAR, item_revenue VARCHAR)[]",
        }
        return _read_json(path, columns, "maximum_object_size = 16777216")

    def select(self, options):
        def param(key: str, field: str) -> str:
            return f"list_filter(event_params, lambda p: p.key = {_lit(key)})[1].value.{field}"

        return f"""
        WITH rows AS (
            SELECT event_name, event_timestamp, user_pseudo_id, ecommerce,
                   {param('grid_columns', 'int_value')} AS grid_columns,
                   {param('currency', 'string_value')} AS p_currency,
                   {param('item_list_id', 'string_value')} AS p_list,
                   {param('vismerch_version', 'int_value')} AS p_version,
                   UNNEST(items) AS item, UNNEST(range(len(items))) AS item_no
            FROM src WHERE len(items) > 0 AND NOT ({self.other})),
        typed AS (
            SELECT CASE event_name WHEN 'view_item_list' THEN 'impression' WHEN 'select_item' THEN 'click'
                        WHEN 'add_to_cart' THEN 'add_to_cart' WHEN 'purchase' THEN 'purchase' END AS type,
                   make_timestamp(TRY_CAST(event_timestamp AS BIGINT)) AS ts0,
                   user_pseudo_id AS visitor, COALESCE(item.item_list_id, p_list) AS collection,
                   TRY_CAST(p_version AS BIGINT) AS version_id,
                   TRY_CAST(item.item_list_index AS INTEGER) AS position,
                   TRY_CAST(grid_columns AS SMALLINT) AS columns, item.item_id AS product_id,
                   COALESCE(TRY_CAST(item.quantity AS INTEGER), 1) AS quantity,
                   TRY_CAST(item.price AS DOUBLE) AS price,
                   TRY_CAST(item.item_revenue AS DOUBLE) AS item_revenue,
                   COALESCE(p_currency, {_lit(options.currency)}) AS currency0,
                   'ga4:' || md5(concat_ws('|', user_pseudo_id, event_timestamp, event_name,
                                           ecommerce.transaction_id, item_no, item.item_id)) AS event_id
            FROM rows)
        SELECT event_id, type, ts0::TIMESTAMPTZ AS ts, visitor, collection, version_id, position, columns,
               product_id, CASE WHEN type IN ('add_to_cart', 'purchase') THEN quantity END AS quantity,
               CASE WHEN type = 'purchase' THEN COALESCE(item_revenue, price * quantity) END AS revenue,
               CASE WHEN type = 'purchase' THEN currency0 END AS currency,
               {_CHECKS.replace('ts IS NULL', 'ts0 IS NULL')} AS reason
        FROM typed"""


_UBI_ACTIONS = {"impression": "impression", "view": "impression", "click": "click", "product_click": "click",
                "select": "click", "add_to_cart": "add_to_cart", "purchase": "purchase"}


@event_format
class Ubi(EventFormat):
    name = "ubi"
    help = ("OpenSearch User Behavior Insights events as JSON lines (action_name, client_id, timestamp, "
            "event_attributes.object.object_id, event_attributes.position.ordinal)")
    malformed = "action_name IS NULL AND timestamp IS NULL AND client_id IS NULL AND event_attributes IS NULL"

    def source(self, path):
        columns = {
            "action_name": "VARCHAR", "client_id": "VARCHAR", "user_id": "VARCHAR", "query_id": "VARCHAR",
            "timestamp": "VARCHAR", "message_id": "VARCHAR",
            "event_attributes": "STRUCT(object STRUCT(object_id VARCHAR, object_detail STRUCT(price VARCHAR,"
                                " quantity VARCHAR, revenue VARCHAR, currency VARCHAR)), position STRUCT("
                                "ordinal VARCHAR), collection VARCHAR, version_id VARCHAR,"
                                " grid_columns VARCHAR)",
        }
        return _read_json(path, columns)

    def select(self, options):
        actions = " ".join(f"WHEN {_lit(k)} THEN {_lit(v)}" for k, v in _UBI_ACTIONS.items())
        default_collection = _lit(options.collection) if options.collection else "NULL"
        return f"""
        WITH typed AS (
            SELECT CASE lower(action_name) {actions} END AS type,
                   COALESCE(TRY_CAST(timestamp AS TIMESTAMPTZ),
                            make_timestamp(TRY_CAST(timestamp AS BIGINT) * 1000)::TIMESTAMPTZ) AS ts,
                   COALESCE(client_id, user_id) AS visitor,
                   COALESCE(event_attributes.collection, {default_collection}) AS collection,
                   TRY_CAST(event_attributes.version_id AS BIGINT) AS version_id,
                   TRY_CAST(event_attributes.position.ordinal AS INTEGER) AS position,
                   TRY_CAST(event_attributes.grid_columns AS SMALLINT) AS columns,
                   event_attributes.object.object_id AS product_id,
                   COALESCE(TRY_CAST(event_attributes.object.object_detail.quantity AS INTEGER), 1)
                       AS quantity0,
                   COALESCE(TRY_CAST(event_attributes.object.object_detail.revenue AS DOUBLE),
                            TRY_CAST(event_attributes.object.object_detail.price AS DOUBLE)) AS revenue0,
                   COALESCE(event_attributes.object.object_detail.currency, {_lit(options.currency)})
                       AS currency0,
                   'ubi:' || COALESCE(message_id, md5(concat_ws('|', client_id, user_id, query_id, timestamp,
                                      action_name, event_attributes.object.object_id))) AS event_id
            FROM src)
        {_FINAL}"""


@event_format
class Csv(EventFormat):
    name = "csv"
    help = ("CSV with a header of the API's event fields: event_id, type, ts (RFC 3339), visitor, "
            "collection, version_id, position, columns, product_id, quantity, revenue, currency")

    def source(self, path):
        names = ("event_id", "type", "ts", "visitor", "collection", "version_id", "position", "columns",
                 "product_id", "quantity", "revenue", "currency")
        types = "{" + ", ".join(f"{_lit(n)}: 'VARCHAR'" for n in names) + "}"
        return f"""SELECT * FROM read_csv({_lit(str(path))}, header = true, columns = {types},
                                   ignore_errors = true, strict_mode = false, null_padding = true)"""

    def select(self, options):
        return f"""
        WITH typed AS (
            SELECT 'csv:' || event_id AS event_id,
                   CASE WHEN type IN ('impression', 'click', 'add_to_cart', 'purchase') THEN type END AS type,
                   TRY_CAST(ts AS TIMESTAMPTZ) AS ts, visitor, NULLIF(collection, '') AS collection,
                   TRY_CAST(version_id AS BIGINT) AS version_id, TRY_CAST(position AS INTEGER) AS position,
                   TRY_CAST(columns AS SMALLINT) AS columns, product_id,
                   COALESCE(TRY_CAST(quantity AS INTEGER), 1) AS quantity0,
                   TRY_CAST(revenue AS DOUBLE) AS revenue0, COALESCE(NULLIF(currency, ''),
                   {_lit(options.currency)}) AS currency0
            FROM src WHERE event_id IS NOT NULL)
        {_FINAL}"""
