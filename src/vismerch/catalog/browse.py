"""Store-owned SQL for browsing products: filters, keyset pages and facet counts.

Pages are keyset-paginated on the product id (``WHERE id > :after ORDER BY id``), so a page
costs the same at any depth and a product added meanwhile never shifts a page already read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vismerch.catalog.store import Product, Store, _product

MULTICOLOUR_NAMES = ("multicolour", "multicolor", "multi")  # the colour filter's verdict value


@dataclass(frozen=True)
class ProductFilter:
    """Every field is optional; all the given ones must hold."""

    category: str | None = None  # case-insensitive exact category
    colour: str | None = None  # a named colour covering at least ``colour_min_share``,
    # or "multicolour" for products judged multicolour
    colour_min_share: float = 0.1
    flag: str | None = None  # a quality flag name, or "any" for any flagged product
    in_stock: bool | None = None  # True: stock unknown or > 0 (as rules see it); False: <= 0
    price_min: float | None = None
    price_max: float | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses, args = ["p.status = 'ok'"], []
        if self.category is not None:
            clauses.append("lower(p.category) = lower(?)")
            args.append(self.category)
        if self.colour is not None and self.colour.strip().lower() in MULTICOLOUR_NAMES:
            clauses.append("EXISTS (SELECT 1 FROM multicolour m WHERE m.sha256 = p.sha256)")
        elif self.colour is not None:
            clauses.append("EXISTS (SELECT 1 FROM colours c WHERE c.sha256 = p.sha256 "
                           "AND lower(c.name) = lower(?) AND c.weight >= ?)")
            args += [self.colour, self.colour_min_share]
        if self.flag == "any":
            clauses.append("EXISTS (SELECT 1 FROM quality q WHERE q.sha256 = p.sha256 AND q.flagged = 1)")
        elif self.flag is not None:
            clauses.append("EXISTS (SELECT 1 FROM quality q WHERE q.sha256 = p.sha256 "
                           "AND q.flagged = 1 AND q.name = ?)")
            args.append(self.flag)
        if self.in_stock is True:
            clauses.append("(p.stock IS NULL OR p.stock > 0)")
        elif self.in_stock is False:
            clauses.append("p.stock <= 0")
        if self.price_min is not None:
            clauses.append("p.price >= ?")
            args.append(self.price_min)
        if self.price_max is not None:
            clauses.append("p.price <= ?")
            args.append(self.price_max)
        return " AND ".join(clauses), args


def page(store: Store, flt: ProductFilter, after: str | None, limit: int) -> tuple[list[Product], bool]:
    """Up to ``limit`` products with id > ``after`` matching ``flt``, and whether more follow."""
    where, args = flt.where()
    if after is not None:
        where += " AND p.id > ?"
        args.append(after)
    rows = store.db.execute(
        "SELECT p.*, i.width, i.height FROM products p LEFT JOIN images i ON i.sha256 = p.sha256 "
        f"WHERE {where} ORDER BY p.id LIMIT ?", (*args, limit + 1)).fetchall()
    return [_product(r) for r in rows[:limit]], len(rows) > limit


def count(store: Store, flt: ProductFilter) -> int:
    where, args = flt.where()
    return int(store.db.execute(f"SELECT COUNT(*) FROM products p WHERE {where}", args).fetchone()[0])


def multicolour_ids(store: Store, ids: list[str]) -> set[str]:
    """The ids given that are judged multicolour."""
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    rows = store.db.execute(
        "SELECT p.id FROM products p JOIN multicolour m ON m.sha256 = p.sha256 "
        f"WHERE p.id IN ({marks})", ids).fetchall()
    return {r[0] for r in rows}


def dominant_colours(store: Store, ids: list[str]) -> dict[str, str]:
    """Product id -> its dominant (rank 0) colour name, for the ids given."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = store.db.execute(
        "SELECT p.id, c.name FROM products p JOIN colours c ON c.sha256 = p.sha256 AND c.rank = 0 "
        f"WHERE p.id IN ({marks})", ids).fetchall()
    return {r[0]: r[1] for r in rows}


def flag_names(store: Store, ids: list[str]) -> dict[str, list[str]]:
    """Product id -> its raised quality flags, for the ids given."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = store.db.execute(
        "SELECT p.id, q.name FROM products p JOIN quality q ON q.sha256 = p.sha256 AND q.flagged = 1 "
        f"WHERE p.id IN ({marks}) ORDER BY p.id, q.name", ids).fetchall()
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r[1])
    return out


def facets(store: Store, flt: ProductFilter) -> dict[str, list[tuple[str, int]]]:
    """Counts of the products matching ``flt`` by category, dominant colour (plus
    ``multicolour``, the products judged so, which also count under their dominant colour),
    raised flag and stock state (``in``, ``out``, ``unknown``), largest first. Each count is
    what the same filter with that value would find."""
    where, args = flt.where()
    q = store.db.execute
    out: dict[str, list[tuple[str, int]]] = {}
    # a product without a category is in no category's count (a blank value filters nothing)
    out["category"] = [(r[0], r[1]) for r in q(
        f"SELECT p.category, COUNT(*) n FROM products p WHERE {where} "
        "AND TRIM(COALESCE(p.category, '')) != '' GROUP BY 1 ORDER BY n DESC, 1", args)]
    # a colour counts the products its filter (``ProductFilter.colour``) finds: any colour
    # covering at least colour_min_share, so a product may count under two colours
    out["colour"] = [(r[0], r[1]) for r in q(
        "SELECT c.name, COUNT(DISTINCT p.id) n FROM products p JOIN colours c ON c.sha256 = p.sha256 "
        f"AND c.weight >= ? WHERE {where} GROUP BY lower(c.name) ORDER BY n DESC, 1",
        [flt.colour_min_share, *args])]
    multi = q("SELECT COUNT(*) FROM products p JOIN multicolour m ON m.sha256 = p.sha256 "
              f"WHERE {where}", args).fetchone()[0]
    if multi:
        out["colour"] = sorted([*out["colour"], ("multicolour", int(multi))],
                               key=lambda vn: (-vn[1], vn[0]))
    out["flag"] = [(r[0], r[1]) for r in q(
        "SELECT q.name, COUNT(*) n FROM products p JOIN quality q ON q.sha256 = p.sha256 AND q.flagged = 1 "
        f"WHERE {where} GROUP BY 1 ORDER BY n DESC, 1", args)]
    out["stock"] = [(r[0], r[1]) for r in q(
        "SELECT CASE WHEN p.stock IS NULL THEN 'unknown' WHEN p.stock > 0 THEN 'in' ELSE 'out' END s,"
        f" COUNT(*) n FROM products p WHERE {where} GROUP BY 1 ORDER BY n DESC, 1", args)]
    return out


def quality_metrics(store: Store, product_id: str) -> list[dict[str, Any]]:
    """Every measured quality metric of one product: ``[{name, value, flagged}]``."""
    rows = store.db.execute(
        "SELECT q.name, q.value, q.flagged FROM products p JOIN quality q ON q.sha256 = p.sha256 "
        "WHERE p.id = ? ORDER BY q.name", (product_id,)).fetchall()
    return [{"name": r[0], "value": round(float(r[1]), 4), "flagged": bool(r[2])} for r in rows]


def is_multicolour(store: Store, product_id: str) -> bool:
    return bool(multicolour_ids(store, [product_id]))


def product_colours(store: Store, product_id: str) -> list[dict[str, Any]]:
    rows = store.db.execute(
        "SELECT c.name, c.hex, c.weight FROM products p JOIN colours c ON c.sha256 = p.sha256 "
        "WHERE p.id = ? ORDER BY c.rank", (product_id,)).fetchall()
    return [{"name": r[0], "hex": r[1], "weight": round(float(r[2]), 4)} for r in rows]


def dup_group_of(store: Store, product_id: str) -> int | None:
    row = store.db.execute("SELECT group_id FROM dup_groups WHERE product_id = ?", (product_id,)).fetchone()
    return None if row is None else int(row[0])


def titles(store: Store, ids: list[str]) -> dict[str, str | None]:
    """Product id -> its title, for the ids given that exist."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = store.db.execute(f"SELECT id, title FROM products WHERE id IN ({marks})", ids)
    return {r[0]: r[1] for r in rows}
