"""Derived data rebuilt after every ingest from what is committed: the catalog audit,
the similarity indexes, duplicate groups and collection membership. Each step is
idempotent, so a run killed here simply redoes it next time."""

from __future__ import annotations

import json

import numpy as np

from vismerch.catalog.store import Features, Product, Store, write_description
from vismerch.config import Settings

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
            for sha, named, mixed, judged in zip(shas, colours, multi, flags, strict=True):
                write_description(con, sha, named, judged, mixed)
    store.set_meta(DESCRIBE_KEY, key)
    return len(shas)


def refresh_indexes(store: Store, settings: Settings,
                    loaded: dict[str, Features] | None = None) -> dict[str, object]:
    """One FAISS index per backend (newest fingerprint) under ``index/``; returns them.
    ``loaded``: features the caller already read, by backend."""
    from vismerch.search.index import VectorIndex

    built: dict[str, object] = {}
    for backend in store.feature_backends():
        features = (loaded or {}).get(backend) or store.load_features(backend)
        if not len(features):
            continue
        index = VectorIndex.build(
            features.vectors.astype(np.float32),
            features.ids,
            exact_max=settings.index_exact_max,
            hnsw_m=settings.index_hnsw_m,
            ef_construction=settings.index_ef_construction,
            ef_search=settings.index_ef_search,
            meta={"fingerprint": features.fingerprint},
        )
        index.save(store.path / "index", backend)
        built[backend] = index
    return built


def refresh_duplicates(store: Store, features: Features, settings: Settings, index=None,
                       products: list[Product] | None = None) -> int:
    """Near-duplicate groups from perceptual hashes confirmed by colour-vector cosine."""
    from vismerch.merch.dedup import find_duplicate_groups

    groups = []
    if len(features) > 1:
        flags = store.quality()
        penalty = np.array([len(flags.get(pid, [])) for pid in features.ids], dtype=np.float32)
        dims = {p.id: (p.width or 0) * (p.height or 0) for p in products or store.products()}
        resolution = np.array([dims.get(pid, 0) for pid in features.ids], dtype=np.float64)
        groups = find_duplicate_groups(
            features.ids,
            features.columns["phash"].astype(np.uint64),
            features.vectors.astype(np.float32),
            structure=features.columns.get("structure"),
            min_structure=settings.dup_structure,
            max_hamming=settings.dup_hash_distance,
            min_cosine=settings.dup_cosine,
            crop_hamming=settings.dup_crop_hamming,
            crop_cosine=settings.dup_crop_cosine,
            max_neighbours=settings.dup_neighbours,
            index=index,
            exact_max=settings.index_exact_max,
            quality_penalty=penalty,
            resolution=resolution,
        )
    with store.transaction() as con:
        con.execute("DELETE FROM dup_groups")
        con.executemany(
            "INSERT INTO dup_groups (group_id, product_id, representative) VALUES (?,?,?)",
            [
                (g.group, member, int(member == g.representative))
                for g in groups
                for member in g.members
            ],
        )
        from vismerch.catalog.reviews import apply_dup_reviews

        dropped = apply_dup_reviews(con)  # merchandisers' decisions outlive the recomputed groups
    return len(groups) - dropped


def refresh_derived(store: Store, settings: Settings) -> dict[str, object]:
    features = store.load_features("colour")
    products = store.products()
    redescribed = refresh_descriptions(store, features, settings, products)  # before dedup: it reads flags
    indexes = refresh_indexes(store, settings, {"colour": features})
    out: dict[str, object] = {
        "redescribed": redescribed,
        "audit": refresh_audit(store, features, settings, products),
        "indexes": {name: len(index) for name, index in indexes.items()},
        "duplicate_groups": refresh_duplicates(
            store, features, settings, indexes.get("colour"), products
        ),
    }
    from vismerch.merch.collections import product_records, refresh_collections

    refresh_collections(store, product_records(store, products))  # after dedup: records carry groups
    store.set_meta("derived", json.dumps(out, default=str))
    return out
