"""The HTML report: one self-contained file (thumbnails and plots inlined as data URIs)."""

from __future__ import annotations

import base64
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape

from vismerch.catalog.store import Store
from vismerch.report import plots

if TYPE_CHECKING:
    from vismerch.config import Settings

# Sections are capped so a million-product store still gives a readable file.
MAX_TAG_ROWS = 400
MAX_FLAGGED = 300
MAX_GROUPS = 150
SIMILAR_SAMPLES = 8
SIMILAR_K = 8


def _data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


class _Thumbs:
    """Product id -> inlined thumbnail (cached, empty string when missing)."""

    def __init__(self, store: Store):
        self.store = store
        self.cache: dict[str, str] = {}

    def __call__(self, product_id: str) -> str:
        if product_id not in self.cache:
            thumb = self.store.thumbnail(product_id)
            self.cache[product_id] = _data_uri(thumb.data, thumb.media_type) if thumb else ""
        return self.cache[product_id]


def _similar_strips(store: Store, ids: list[str], style: str | None,
                    settings: Settings | None = None) -> list[dict[str, Any]]:
    """"More like this" for a sample of ``ids`` in the service's default mode: same style by
    the ``style`` backend's whitened vectors where the store has them, else the default's."""
    from vismerch.indexes.stored import similarity_index
    from vismerch.merch.similar import similar_items

    if not ids:
        return []
    index = (similarity_index(store, style, settings, whitened=True) if style
             else similarity_index(store, None, settings))  # read once for every strip
    step = max(1, len(ids) // SIMILAR_SAMPLES)
    return [
        {"id": pid, "similar": [
            {"id": i, "score": round(float(score), 4)}
            for i, score in similar_items(index, None, pid, SIMILAR_K)
        ]}
        for pid in ids[::step][:SIMILAR_SAMPLES]
    ]


def _largest_collection(store: Store) -> str | None:
    """The largest collection with at least 8 products (the arranged example)."""
    from vismerch.merch.collections import list_collections

    sizes = [(c["size"], c["name"]) for c in list_collections(store) if c["size"] >= 8]
    return max(sizes)[1] if sizes else None


def arranged_collection(store: Store, collection: str | None = None,
                        settings: Settings | None = None) -> dict[str, Any] | None:
    """One arranged collection (default: the largest), before (score order) and after
    (vismerch), with the look-alike neighbour counts per grid width."""
    from vismerch.arrange.preview import arranged_before_after

    try:
        collection = collection or _largest_collection(store)
        if collection is None:
            return None
        result = arranged_before_after(store, collection, columns=4, columns_set=(2, 3, 4, 5),
                                       settings=settings)
    except Exception as exc:  # the report must not fail because one section did
        return {"error": f"{type(exc).__name__}: {exc}"}
    for side in ("before", "after"):
        result[side]["uri"] = _data_uri(Path(result[side]["png"]).read_bytes(), "image/png")
    return result


def build_context(store: Store, collection: str | None = None, arrangement: dict[str, Any] | None = None,
                  settings: Settings | None = None) -> dict[str, Any]:
    products = store.products(status=None)
    ok = [p for p in products if p.status == "ok"]
    errors = store.errors()
    colours = store.colours()
    flagged = store.quality()
    tags = store.tags(ok, colours, flagged)
    groups = store.dup_groups()
    from vismerch.indexes.stored import style_backend

    style = style_backend(store)  # the service's default similar mode: same style where it can

    dominant = Counter()
    hexes: dict[str, str] = {}
    for cols in colours.values():
        if cols:
            dominant[cols[0]["name"]] += 1
            hexes.setdefault(cols[0]["name"], cols[0]["hex"])
    flag_counter = Counter(f["name"] for flags in flagged.values() for f in flags)
    by_reason = Counter(e["reason"] for e in errors)

    context = {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "store": str(store.path),
        "counts": {
            "products": len(products), "ingested": len(ok), "failed": len(errors),
            "duplicate_groups": len(groups), "flagged": len(flagged),
            "categories": len({p.category for p in ok if p.category}),
        },
        "errors_by_reason": sorted(by_reason.items(), key=lambda kv: -kv[1]),
        "errors": errors[:MAX_FLAGGED],
        "colour_plot": _data_uri(
            plots.colour_distribution([(n, hexes[n], c) for n, c in dominant.most_common()]), "image/png"
        ) if dominant else None,
        "flag_plot": _data_uri(plots.flag_counts(dict(flag_counter.most_common())), "image/png")
        if flag_counter else None,
        "tags": tags[:MAX_TAG_ROWS],
        "tags_total": len(tags),
        "flagged": list(flagged.items())[:MAX_FLAGGED],
        "flagged_total": len(flagged),
        "groups": groups[:MAX_GROUPS],
        "groups_total": len(groups),
        "audit": store.audit()[:MAX_FLAGGED],
        "similar": _similar_strips(store, [p.id for p in ok], style, settings),
        "similar_by": ("Same style: the kind of product, whatever its colour"
                       if style else "Same colour: the colour backend's vectors"),
        "arrangement": arrangement or arranged_collection(store, collection, settings),
        "titles": {p.id: p.title or p.id for p in products},
    }
    return context


def write_report(store: Store, output: str | os.PathLike, collection: str | None = None,
                 arrangement: dict[str, Any] | None = None, settings: Settings | None = None) -> Path:
    """Write the report; ``collection`` picks the arranged example (default: the largest),
    ``arrangement`` passes one the caller already made with ``arranged_collection``;
    ``settings`` (default: the table's) arrange it."""
    env = Environment(
        loader=PackageLoader("vismerch.report", "templates"),
        autoescape=select_autoescape(["html"]),
    )
    template = env.get_template("report.html")
    context = build_context(store, collection, arrangement, settings)
    html = template.render(thumb=_Thumbs(store), data_uri=_data_uri, **context)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, output)
    return output
