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
import re
from collections.abc import Iterable, Sequence
from typing import Any

from vismerch.catalog.store import utc_timestamp
from vismerch.errors import Conflict, NotFound, UsageError
from vismerch.merch.expr import parse

CORE_FIELDS = ("id", "title", "description", "category", "brand", "price", "stock", "sales",
               "created_at", "width", "height", "sha256", "image_path")
DERIVED_FIELDS = ("colour", "colours", "multicolour", "colour_family", "flags", "flagged", "in_stock",
                  "duplicate", "representative", "attributes")
DEFAULT_COLUMNS = ("collection", "collections")
_COLUMNS_META = "merch.collection_columns"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_SPLIT_RE = re.compile(r"[;|,]")


def slug(text: Any) -> str | None:
    """``"Summer Dresses!"`` -> ``"summer-dresses"``; None when nothing is left."""
    if text is None:
        return None
    out = re.sub(r"[^0-9a-z]+", "-", str(text).strip().casefold()).strip("-")
    return out or None


def check_name(name: str) -> str:
    if not name or not _NAME_RE.match(name):
        raise UsageError(f"bad collection name {name!r}",
                         hint="use letters, digits, '-', '_' or '.', starting with a letter or digit")
    return name


# ---------------------------------------------------------------- product records


def product_records(store: Any, products: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """One dict per ok product (id order) with every field an expression may use."""
    from vismerch.merch.arrange import family_of

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


def _members(kind: str, definition: dict[str, Any], index: _Index) -> list[str]:
    if kind == "category":
        return index.category(definition["category"])
    if kind == "column":
        return index.column(definition["column"], definition["value"])
    if kind == "rule":
        expr = parse(definition["where"])
        return [r["id"] for r in index.records if expr.evaluate(r)]
    raise UsageError(f"unknown collection kind {kind!r}")


def _column_collection_name(column: str, value: str) -> str | None:
    value_slug = slug(value)
    if value_slug is None:
        return None
    if column.casefold() in DEFAULT_COLUMNS:
        return value_slug
    return f"{slug(column)}-{value_slug}"


def collection_columns(store: Any) -> list[str]:
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


def refresh_collections(store: Any, records: Sequence[dict[str, Any]] | None = None
                        ) -> dict[str, Any]:
    """Create the catalog's own collections and re-evaluate every membership.

    Called by the ingest driver after each run. Auto collections that lost all their
    products are removed unless rules or saved versions refer to them. Returns
    ``{"collections": {name: size}, "created": [...], "removed": [...], "skipped": [...]}``.
    """
    records = product_records(store) if records is None else records
    existing = {row["name"]: row for row in store.db.execute("SELECT * FROM collections")}
    wanted = _wanted_auto(records, collection_columns(store))
    stamp = utc_timestamp()
    index = _Index(records)
    created, removed, skipped = [], [], []
    sizes: dict[str, int] = {}
    with store.transaction() as con:
        for name, (kind, definition) in sorted(wanted.items()):
            row = existing.get(name)
            if row is None:
                con.execute(
                    "INSERT INTO collections (name, kind, definition, auto, created_at)"
                    " VALUES (?, ?, ?, 1, ?)", (name, kind, json.dumps(definition), stamp))
                existing[name] = {"name": name, "kind": kind, "definition": json.dumps(definition),
                                  "auto": 1}
                created.append(name)
            elif row["auto"] and (row["kind"], json.loads(row["definition"])) != (kind, definition):
                skipped.append(name)  # two catalog sources want one name: the first one keeps it
        for name, row in sorted(existing.items()):
            members = _members(row["kind"], json.loads(row["definition"]), index)
            if not members and row["auto"] and name not in wanted and not _referenced(con, name):
                con.execute("DELETE FROM collections WHERE name = ?", (name,))
                removed.append(name)
                continue
            con.execute("DELETE FROM collection_members WHERE collection = ?", (name,))
            con.executemany("INSERT INTO collection_members (collection, product_id) VALUES (?, ?)",
                            [(name, pid) for pid in members])
            con.execute("UPDATE collections SET refreshed_at = ? WHERE name = ?", (stamp, name))
            sizes[name] = len(members)
    return {"collections": sizes, "created": created, "removed": removed, "skipped": skipped}


def _referenced(con: Any, name: str) -> bool:
    return bool(
        con.execute("SELECT 1 FROM rules WHERE scope = ? LIMIT 1", (name,)).fetchone()
        or con.execute("SELECT 1 FROM arrangement_versions WHERE collection = ? LIMIT 1",
                       (name,)).fetchone()
    )


# ---------------------------------------------------------------- CRUD


def list_collections(store: Any) -> list[dict[str, Any]]:
    """``[{name, size, kind, definition, auto}]`` sorted by name."""
    rows = store.db.execute(
        "SELECT c.name, c.kind, c.definition, c.auto, c.parent, COUNT(m.product_id) AS size "
        "FROM collections c LEFT JOIN collection_members m ON m.collection = c.name "
        "GROUP BY c.name ORDER BY c.name").fetchall()
    return [{"name": r["name"], "size": int(r["size"]), "kind": r["kind"],
             "definition": json.loads(r["definition"]), "auto": bool(r["auto"]),
             "parent": r["parent"]} for r in rows]


def get_collection(store: Any, name: str) -> dict[str, Any]:
    row = store.db.execute("SELECT * FROM collections WHERE name = ?", (name,)).fetchone()
    if row is None:
        names = [r[0] for r in store.db.execute("SELECT name FROM collections ORDER BY name")]
        close = [n for n in names if name.casefold() in n or n in name.casefold()][:5]
        raise NotFound(
            "collection", name, f"no collection named {name!r}",
            hint=("did you mean: " + ", ".join(close)) if close else
            ("collections: " + ", ".join(names[:12]) if names else
             "ingest a catalog first; every category becomes a collection"))
    return {"name": row["name"], "kind": row["kind"], "definition": json.loads(row["definition"]),
            "auto": bool(row["auto"]), "parent": row["parent"]}


def ancestors(store: Any, name: str) -> list[str]:
    """The parent chain of a collection, nearest first (a cycle stops the walk)."""
    out: list[str] = []
    current = name
    while True:
        row = store.db.execute("SELECT parent FROM collections WHERE name = ?", (current,)).fetchone()
        if row is None or row[0] is None or row[0] in out or row[0] == name:
            return out
        out.append(row[0])
        current = row[0]


def members(store: Any, name: str) -> list[str]:
    get_collection(store, name)
    rows = store.db.execute("SELECT product_id FROM collection_members WHERE collection = ? "
                            "ORDER BY product_id", (name,)).fetchall()
    return [r[0] for r in rows]


def create_collection(store: Any, name: str, *, where: str | None = None,
                      column: str | None = None, value: str | None = None,
                      category: str | None = None, parent: str | None = None) -> dict[str, Any]:
    """Create a rule (``where``), column (``column`` + ``value``) or category collection
    and fill it at once. Unknown fields in ``where`` are an error pointing at them."""
    check_name(name)
    if sum(x is not None for x in (where, column, category)) != 1:
        raise UsageError("give exactly one of: where (an expression), column + value, category")
    records = product_records(store)
    if where is not None:
        expr = parse(where)
        expr.check_fields(known_fields(records))
        kind, definition = "rule", {"where": where}
    elif column is not None:
        if value is None:
            raise UsageError("a column collection needs a value", hint="--value VALUE")
        kind, definition = "column", {"column": column, "value": value}
    else:
        cat = slug(category)
        if cat is None:
            raise UsageError(f"bad category {category!r}")
        kind, definition = "category", {"category": cat}
    if store.db.execute("SELECT 1 FROM collections WHERE name = ?", (name,)).fetchone():
        raise Conflict(f"a collection named {name!r} already exists",
                       hint="pick another name or delete it first")
    if parent is not None:
        get_collection(store, parent)
    found = _members(kind, definition, _Index(records))
    stamp = utc_timestamp()
    with store.transaction() as con:
        con.execute("INSERT INTO collections (name, kind, definition, auto, created_at, "
                    "refreshed_at, parent) VALUES (?, ?, ?, 0, ?, ?, ?)",
                    (name, kind, json.dumps(definition), stamp, stamp, parent))
        con.executemany("INSERT INTO collection_members (collection, product_id) VALUES (?, ?)",
                        [(name, pid) for pid in found])
    return {"name": name, "kind": kind, "definition": definition, "size": len(found), "parent": parent}


def add_collection_column(store: Any, column: str) -> dict[str, Any]:
    """Make every value of manifest column ``column`` a collection (now and after ingests)."""
    if not column.strip():
        raise UsageError("empty column name")
    extra = json.loads(store.get_meta(_COLUMNS_META) or "[]")
    if column not in extra and column.casefold() not in DEFAULT_COLUMNS:
        extra.append(column)
        store.set_meta(_COLUMNS_META, json.dumps(extra))
    return refresh_collections(store)


def delete_collection(store: Any, name: str) -> dict[str, Any]:
    """Delete a collection, its members and the rules scoped to it (versions are kept)."""
    get_collection(store, name)
    with store.transaction() as con:
        rules = con.execute("DELETE FROM rules WHERE scope = ?", (name,)).rowcount
        con.execute("DELETE FROM collection_members WHERE collection = ?", (name,))
        con.execute("DELETE FROM collections WHERE name = ?", (name,))
    return {"name": name, "rules_removed": rules}
