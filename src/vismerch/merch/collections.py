"""Collections: named sets of products that get arranged as one category page.

Three kinds, all stored in ``collections`` / ``collection_members``:

- ``category``: every category in the catalog is a collection from the start, named by
  its slug (``Summer Dresses`` -> ``summer-dresses``);
- ``column``: one collection per distinct value of a manifest column. The columns
  ``collection`` / ``collections`` (values split on ``;``, ``|`` or ``,``) are always
  used; ``add_collection_column`` registers more (``season`` -> ``season-ss24`` ...);
- ``rule``: products matching an expression (``merch.expr``), e.g.
  ``category == "dress" and price < 120 and stock > 0``.

``refresh_collections(store)`` re-evaluates every membership from the committed catalog;
the ingest driver calls it after each run, so membership follows the catalog. Products
are evaluated as records: their manifest fields, their attributes, and derived fields
(``colour``, ``colours``, ``multicolour``, ``colour_family``, ``flags``, ``flagged``, ``in_stock``,
``duplicate``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from vismerch.catalog import collections as db
from vismerch.errors import Conflict, InvalidInput, NotFound, UsageError
from vismerch.merch.expr import parse

if TYPE_CHECKING:
    from vismerch.catalog.store import Store

CORE_FIELDS = ("id", "title", "description", "category", "brand", "price", "stock", "sales",
               "created_at", "width", "height", "sha256", "image_path")
DERIVED_FIELDS = ("colour", "colours", "multicolour", "colour_family", "flags", "flagged", "in_stock",
                  "duplicate", "representative", "attributes")
DEFAULT_COLUMNS = ("collection", "collections")
_COLUMNS_META = "merch.collection_columns"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_SPLIT_RE = re.compile(r"[;|,]")
log = logging.getLogger(__name__)


def slug(text: Any) -> str | None:
    """``"Summer Dresses!"`` -> ``"summer-dresses"``; None when nothing is left."""
    if text is None:
        return None
    out = re.sub(r"[^0-9a-z]+", "-", str(text).strip().casefold()).strip("-")
    return out or None


def check_name(name: str, field: str = "name") -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or len(name) > 200:
        raise InvalidInput(field, f"bad name {str(name)[:60]!r}",
                           hint="up to 200 letters, digits, '-', '_' or '.', starting with a "
                                "letter or digit")
    return name


# ---------------------------------------------------------------- product records


def product_records(store: Store, products: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """One dict per ok product (id order) with every field an expression may use."""
    from vismerch.features.colourtable import family_of

    products = store.products() if products is None else products
    colours = store.colours()
    multi = store.multicolour()
    flags = store.quality()
    dup_of: dict[str, tuple[int, bool]] = {}
    for g in store.dup_groups():
        for m in g["members"]:
            dup_of[m] = (g["group"], m == g["representative"])
    records = []
    for p in products:
        attrs = dict(p.attributes or {})
        rec: dict[str, Any] = {k: v for k, v in attrs.items() if isinstance(k, str)}
        for name in CORE_FIELDS:
            rec[name] = getattr(p, name, None)
        names = [c["name"] for c in colours.get(p.id, [])]
        flagged = [f["name"] for f in flags.get(p.id, [])]
        group = dup_of.get(p.id)
        rec.update({
            "attributes": attrs,
            "colour": names[0] if names else None,
            "colours": names,
            "multicolour": p.id in multi,
            "colour_family": family_of(names[0]) if names else None,
            "flags": flagged,
            "flagged": bool(flagged),
            "in_stock": p.stock is None or p.stock > 0,
            "duplicate": group is not None,
            "representative": bool(group and group[1]),
            "duplicate_group": group[0] if group else None,
        })
        if "colour" in attrs or "color" in attrs:  # the listed colour stays reachable
            rec["listed_colour"] = attrs.get("colour", attrs.get("color"))
        records.append(rec)
    return records


def known_fields(records: Iterable[dict[str, Any]]) -> set[str]:
    fields = set(CORE_FIELDS) | set(DERIVED_FIELDS) | {"listed_colour", "duplicate_group"}
    for rec in records:
        fields.update(k for k in rec.get("attributes", {}) if isinstance(k, str))
    return fields


# ---------------------------------------------------------------- membership


def _values(value: Any) -> list[str]:
    """A column cell -> its collection values (lists and ``a; b`` strings split)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in _SPLIT_RE.split(str(value)) if v.strip()]


def _column_value(rec: dict[str, Any], column: str) -> Any:
    if column in rec:
        return rec[column]
    folded = column.casefold()
    for key, value in rec.get("attributes", {}).items():
        if key.casefold() == folded:
            return value
    return None


class _Index:
    """Category and column lookups built once per refresh (not once per collection)."""

    def __init__(self, records: Sequence[dict[str, Any]]):
        self.records = records
        self._by_category: dict[str, list[str]] | None = None
        self._by_column: dict[str, dict[str, list[str]]] = {}

    def category(self, cat: str) -> list[str]:
        if self._by_category is None:
            self._by_category = {}
            for r in self.records:
                key = slug(r.get("category"))
                if key:
                    self._by_category.setdefault(key, []).append(r["id"])
        return self._by_category.get(cat, [])

    def column(self, column: str, value: str) -> list[str]:
        if column not in self._by_column:
            table: dict[str, list[str]] = {}
            for r in self.records:
                for v in dict.fromkeys(x.casefold() for x in _values(_column_value(r, column))):
                    table.setdefault(v, []).append(r["id"])
            self._by_column[column] = table
        return self._by_column[column].get(str(value).casefold(), [])


def _members(kind: str, definition: dict[str, Any], index: _Index,
             within: set[str] | None = None) -> list[str]:
    """Who belongs; ``within`` (a parent's members) bounds a sub-collection."""
    if kind == "category":
        found = index.category(definition["category"])
    elif kind == "column":
        found = index.column(definition["column"], definition["value"])
    elif kind == "rule":
        where = definition.get("where")
        try:
            expr = parse(where) if where else None
        except UsageError as exc:  # saved before the parser refused it: empty, never a crash
            log.warning("collection condition %r no longer parses: %s", where, exc.message.splitlines()[0])
            return []
        found = [r["id"] for r in index.records if expr is None or expr.evaluate(r)]
    else:
        raise UsageError(f"unknown collection kind {kind!r}")
    return found if within is None else [pid for pid in found if pid in within]


def _parents_first(rows: dict[str, dict[str, Any]]) -> list[str]:
    """Collection names ordered so every parent comes before its sub-collections."""
    def depth(name: str) -> int:
        seen, d = {name}, 0
        parent = rows[name].get("parent")
        while parent in rows and parent not in seen:
            seen.add(parent)
            d += 1
            parent = rows[parent].get("parent")
        return d
    return sorted(rows, key=lambda n: (depth(n), n))


def _column_collection_name(column: str, value: str) -> str | None:
    value_slug = slug(value)
    if value_slug is None:
        return None
    if column.casefold() in DEFAULT_COLUMNS:
        return value_slug
    return f"{slug(column)}-{value_slug}"


def collection_columns(store: Store) -> list[str]:
    extra = json.loads(store.get_meta(_COLUMNS_META) or "[]")
    return list(DEFAULT_COLUMNS) + [c for c in extra if c.casefold() not in DEFAULT_COLUMNS]


def _wanted_auto(records: Sequence[dict[str, Any]], columns: Sequence[str]
                 ) -> dict[str, tuple[str, dict[str, Any]]]:
    """Collections the catalog itself defines: categories and collection-column values."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for rec in records:
        cat = slug(rec.get("category"))
        if cat:
            out.setdefault(cat, ("category", {"category": cat}))
    for column in columns:
        for rec in records:
            for value in _values(_column_value(rec, column)):
                name = _column_collection_name(column, value)
                if name:
                    out.setdefault(name, ("column", {"column": column, "value": value}))
    return out


def refresh_collections(store: Store, records: Sequence[dict[str, Any]] | None = None
                        ) -> dict[str, Any]:
    """Create the catalog's own collections and re-evaluate every membership.

    Called by the ingest driver after each run. Auto collections that lost all their
    products are removed unless rules, saved versions or sub-collections refer to them. A
    sub-collection's members are always a subset of its parent's. Returns
    ``{"collections": {name: size}, "created": [...], "removed": [...], "skipped": [...]}``.
    """
    records = product_records(store) if records is None else records
    existing = db.rows(store)
    wanted = _wanted_auto(records, collection_columns(store))
    new, skipped = {}, []
    for name, (kind, definition) in sorted(wanted.items()):
        row = existing.get(name)
        if row is None:
            new[name] = (kind, definition)
            existing[name] = {"name": name, "kind": kind, "definition": definition, "auto": True,
                              "parent": None}
        elif row["auto"] and (row["kind"], row["definition"]) != (kind, definition):
            skipped.append(name)  # two catalog sources want one name: the first one keeps it
    index = _Index(records)
    found: dict[str, list[str]] = {}
    droppable = []
    for name in _parents_first(existing):
        row = existing[name]
        parent = row.get("parent")
        within = set(found[parent]) if parent in found else None
        found[name] = _members(row["kind"], row["definition"], index, within)
        if not found[name] and row["auto"] and name not in wanted:
            droppable.append(name)
    removed = db.apply_refresh(store, new, found, droppable)
    sizes = {name: len(ids) for name, ids in sorted(found.items()) if name not in removed}
    return {"collections": sizes, "created": sorted(new), "removed": removed, "skipped": skipped}


# ---------------------------------------------------------------- CRUD


def list_collections(store: Store) -> list[dict[str, Any]]:
    """``[{name, size, kind, definition, auto, parent, published_version}]`` sorted by name."""
    return db.with_sizes(store)


def get_collection(store: Store, name: str) -> dict[str, Any]:
    """``{name, kind, definition, auto, parent}``; NotFound with close names otherwise."""
    row = db.row(store, name)
    if row is None:
        known = db.names(store)
        close = [n for n in known if name.casefold() in n or n in name.casefold()][:5]
        raise NotFound(
            "collection", name, f"no collection named {name!r}",
            hint=("did you mean: " + ", ".join(close)) if close else
            ("collections: " + ", ".join(known[:12]) if known else
             "ingest a catalog first; every category becomes a collection"))
    return row


def ancestors(store: Store, name: str) -> list[str]:
    """The parent chain of a collection, nearest first (a cycle stops the walk)."""
    out: list[str] = []
    current = name
    while True:
        parent = db.parent_of(store, current)
        if parent is None or parent in out or parent == name:
            return out
        out.append(parent)
        current = parent


def members(store: Store, name: str) -> list[str]:
    get_collection(store, name)
    return db.member_ids(store, name)


def create_collection(store: Store, name: str, *, where: str | None = None,
                      column: str | None = None, value: str | None = None,
                      category: str | None = None, parent: str | None = None) -> dict[str, Any]:
    """Create a rule (``where``), column (``column`` + ``value``) or category collection
    and fill it at once. With ``parent`` it is a sub-collection: its members are the
    parent's that match (no definition at all: every member of the parent). Unknown
    fields in ``where`` are an error pointing at them."""
    check_name(name, "id")
    given = sum(x is not None for x in (where, column, category))
    if given > 1 or (given == 0 and parent is None):
        raise InvalidInput("where", "give exactly one of: where (an expression), column + value, "
                           "category" + ("" if given else " (or a parent to take all of its products)"))
    if parent is not None and db.row(store, parent) is None:
        raise InvalidInput("parent", f"no collection named {parent!r} to be the parent",
                           hint="list them with: vismerch collections STORE")
    records = product_records(store)
    if column is not None:
        if value is None:
            raise InvalidInput("value", "a column collection needs a value", hint="--value VALUE")
        kind, definition = "column", {"column": column, "value": value}
    elif category is not None:
        cat = slug(category)
        if cat is None:
            raise InvalidInput("category", f"bad category {category!r}")
        kind, definition = "category", {"category": cat}
    else:
        if where is not None:
            try:
                expr = parse(where)
                expr.check_fields(known_fields(records))
                for sample in ({}, *records[:1]):  # an evaluation error is refused now, not in every preview
                    expr.probe(sample)
            except InvalidInput:
                raise
            except UsageError as exc:
                raise InvalidInput("where", exc.message, exc.hint) from None
        kind, definition = "rule", {"where": where}
    if db.row(store, name) is not None:
        raise Conflict(f"a collection named {name!r} already exists",
                       hint="pick another name or delete it first")
    within = set(db.member_ids(store, parent)) if parent is not None else None
    found = _members(kind, definition, _Index(records), within)
    db.insert(store, name, kind, definition, parent, found)
    return {"name": name, "kind": kind, "definition": definition, "size": len(found), "parent": parent}


def add_collection_column(store: Store, column: str) -> dict[str, Any]:
    """Make every value of manifest column ``column`` a collection (now and after ingests)."""
    if not column.strip():
        raise InvalidInput("column", "empty column name")
    extra = json.loads(store.get_meta(_COLUMNS_META) or "[]")
    if column not in extra and column.casefold() not in DEFAULT_COLUMNS:
        extra.append(column)
        store.set_meta(_COLUMNS_META, json.dumps(extra))
    return refresh_collections(store)


def delete_collection(store: Store, name: str, *, unpublish: bool = False) -> dict[str, Any]:
    """Delete a collection, its members, the rules scoped to it and its versions (a published
    one only with ``unpublish``, which takes its storefront grid down in the same transaction).
    The catalog's own collections (categories, column values) come back at every ingest,
    and a parent would orphan its sub-collections: both are refused (Conflict)."""
    row = get_collection(store, name)
    if row["auto"]:
        raise Conflict(f"{name!r} is a {row['kind']} collection made from the catalog; it cannot be "
                       "deleted (the next ingest would make it again)",
                       hint="hide its products with a rule instead")
    children = db.children_of(store, name)
    if children:
        raise Conflict(f"{name!r} has sub-collections: {', '.join(children[:10])}",
                       hint="delete the sub-collections first")
    n_rules, n_versions = db.delete(store, name, unpublish=unpublish)
    return {"name": name, "rules_removed": n_rules, "versions_removed": n_versions}
