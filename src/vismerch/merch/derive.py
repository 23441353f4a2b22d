"""Derived data rebuilt after every ingest from what is committed: the catalog audit,
the similarity indexes, duplicate groups and collection membership. Each step is
idempotent, so a run killed here simply redoes it next time."""

from __future__ import annotations

import json

import numpy as np

from vismerch.catalog.store import Features, Product, Store, write_descriptions
from vismerch.config import Settings
from vismerch.features.base import has_capability

AUDIT_COLUMNS = ("colour", "color")


def refresh_audit(store: Store, features: Features, settings: Settings,
                  products: list[Product] | None = None) -> int:
    """Flag products whose listed colour disagrees with the image's dominant colour."""
    row_of = {pid: i for i, pid in enumerate(features.ids)}
    listed_by_row: dict[int, str] = {}
    for product in products if products is not None else store.products():
        listed = next((product.attributes.get(c) for c in AUDIT_COLUMNS if product.attributes.get(c)), None)
        if listed and product.id in row_of:
            listed_by_row[row_of[product.id]] = str(listed)
    rows_idx = sorted(listed_by_row)
    rows = []
    if rows_idx:  # imports torch: only when some product lists a colour
        from vismerch.features.colour import load_colour_table
        from vismerch.features.quality import audit_listed_colours

        results = audit_listed_colours(
            [listed_by_row[i] for i in rows_idx],
            features.columns["palette_lab"][rows_idx],
            features.columns["palette_weight"][rows_idx],
            load_colour_table(),
            settings.audit_colour_delta,
        )
        rows = [
            (features.ids[i], "colour", r.listed, r.observed, float(r.distance))
            for i, r in zip(rows_idx, results, strict=True)
            if r is not None and r.disagrees
        ]
    with store.transaction() as con:
        con.execute("DELETE FROM audit WHERE kind = 'colour'")
        con.executemany(
            "INSERT INTO audit (product_id, kind, listed, observed, distance) VALUES (?,?,?,?,?)", rows
        )
    return len(rows)


DESCRIBE_KEY = "describe_key"  # meta: the rules and settings that judged the stored flags


def refresh_descriptions(store: Store, features: Features, settings: Settings,
                         products: list[Product] | None = None) -> int:
    """Re-derive every image's colour names and quality flags from its stored metrics when
    the rules or settings behind them changed since they were judged; returns how many
    images were re-judged (0 when nothing changed)."""
    from vismerch.features.describe import describe, describe_key

    key = describe_key(settings)
    if store.get_meta(DESCRIBE_KEY) == key:
        return 0
    by_id = {p.id: p for p in (products if products is not None else store.products())}
    sizes: dict[str, tuple[int, int]] = {}
    rows: dict[str, int] = {}  # one row per image: products with identical bytes share it
    for i, pid in enumerate(features.ids):
        product = by_id.get(pid)
        if product is not None and product.sha256 and product.width is not None:
            rows.setdefault(product.sha256, i)
            sizes[product.sha256] = (product.width, product.height)
    shas = list(rows)
    if shas:
        take = np.array([rows[sha] for sha in shas])
        columns = {name: values[take] for name, values in features.columns.items()}
        colours, multi, flags = describe(columns, [sizes[sha] for sha in shas], settings)
        with store.transaction() as con:
            write_descriptions(con, [(sha, named, judged, mixed) for sha, named, mixed, judged
                                     in zip(shas, colours, multi, flags, strict=True)])
    store.set_meta(DESCRIBE_KEY, key)
    return len(shas)


def refresh_indexes(store: Store, settings: Settings,
                    loaded: dict[str, Features] | None = None,
                    preread: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, object]:
    """One FAISS index per backend (newest fingerprint) under ``index/``, and a whitened one
    where the backend asks for it (``indexes.stored.backend_indexes``); returns them by name.
    ``loaded``: features the caller already read, by backend; ``preread``: shards already
    read (see ``Store.load_features``)."""
    from vismerch.indexes.stored import backend_indexes

    built: dict[str, object] = {}
    for backend in store.feature_backends():
        features = (loaded or {}).get(backend) or store.load_features(backend, preread=preread)
        if not len(features):
            continue
        for name, index in backend_indexes(backend, features, settings).items():
            index.save(store.path / "index", name)
            built[name] = index
    return built


def refresh_derived(store: Store, settings: Settings,
                    preread: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, object]:
    """Every derived view, from what is committed. ``preread``: feature shards the caller
    already read (ingest reads each task's shard as it commits), by store-relative path."""
    from vismerch.dupes.refresh import refresh_duplicates

    features = store.load_features("colour", preread=preread)
    products = store.products()
    redescribed = refresh_descriptions(store, features, settings, products)  # before dedup: it reads flags
    indexes = refresh_indexes(store, settings, {"colour": features}, preread)
    out: dict[str, object] = {
        "redescribed": redescribed,
        "audit": refresh_audit(store, features, settings, products),
        "indexes": {name: len(index) for name, index in indexes.items()},
        "duplicate_groups": refresh_duplicates(
            store, features, settings, products,
            {name: ix for name, ix in indexes.items() if has_capability(name, "neural")},
        ),
    }
    from vismerch.merch.collections import product_records, refresh_collections

    refresh_collections(store, product_records(store, products))  # after dedup: records carry groups
    from vismerch.indexes import catalog as search_bundle

    bundle = search_bundle.refresh(store, settings, features, products)  # titles encoded here, once
    out["search_index"] = {"products": len(bundle), "titles": len(bundle.titles or ())}
    store.set_meta("derived", json.dumps(out, default=str))
    return out
