"""Zero-shot / few-shot attribute tags (pattern, sleeve length, ...) and the merchandiser
labels that override them."""

from __future__ import annotations

from pathlib import Path

from vismerch.errors import InvalidInput
from vismerch.service._util import require_product
from vismerch.service.models import AttributeTagRow
from vismerch.service.workspace import Workspace


def set_label(ws: Workspace, product_id: str, attribute: str, label: str) -> None:
    """Record a merchandiser's label for one product and attribute (overrides zero-shot)."""
    from vismerch.merch.tagging import set_tag_label

    if not label.strip():
        raise InvalidInput("label", f"the label for {product_id!r} is empty")
    require_product(ws.store, product_id)
    set_tag_label(ws.store, product_id, attribute, label)


def attribute_tags(ws: Workspace, attribute: str, *, threshold: float | None = None,
                   vocabulary: str | Path | None = None) -> list[AttributeTagRow]:
    """Tags of ``attribute`` for every product with neural image vectors, scores at least
    ``threshold`` (default: the ``tag_threshold`` setting), on the ``device`` setting."""
    from vismerch.merch.tagging import tag_attributes

    rows = tag_attributes(ws.store, attribute=attribute, threshold=threshold, vocabulary=vocabulary,
                          settings=ws.settings, device=ws.settings.device)
    return [AttributeTagRow(**row) for row in rows]
