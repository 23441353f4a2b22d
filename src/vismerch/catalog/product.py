"""What a catalog says of a product: the manifest's columns, named once for the source
reader (``sources.ProductRecord``), the store (``store.Product``) and the manifest parser."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

TEXT_FIELDS = ("title", "description", "category", "brand", "created_at")
NUMERIC_FIELDS = ("price", "stock", "sales")


@dataclass(kw_only=True)
class ProductFields:
    title: str | None = None
    description: str | None = None
    category: str | None = None
    brand: str | None = None
    price: float | None = None
    stock: float | None = None
    sales: float | None = None
    created_at: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)  # every other manifest column


# a manifest's columns with a meaning of their own; any other column is an attribute
KNOWN_COLUMNS = ("id", "image", *(f.name for f in fields(ProductFields) if f.name != "attributes"))
