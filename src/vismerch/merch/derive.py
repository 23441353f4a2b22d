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
    """One FAISS index per backend (newest fingerprint) under ``index/``; returns them.
    ``loaded``: features the caller already read, by backend; ``preread``: shards already
    read (see ``Store.load_features``)."""
    from vismerch.indexes.stored import build_index

    built: dict[str, object] = {}
    for backend in store.feature_backends():
        features = (loaded or {}).get(backend) or store.load_features(backend, preread=preread)
        if not len(features):
            continue
        index = build_index(features.vectors, features.ids, settings,
                            meta={"fingerprint": features.fingerprint})
        index.save(store.path / "index", backend)
        built[backend] = index
    return built


def refresh_duplicates(store: Store, features: Features, settings: Settings, index=None,
                       products: list[Product] | None = None,
                       other_indexes: dict[str, object] | None = None) -> int:
    """Near-duplicate groups: images with a box signature by the signature rules
    (incrementally when only new images arrived, merch/dupfind.py), images without one
    (features written before it existed) by the legacy hash + vector + structure rules
    among themselves. ``other_indexes``: vector indexes of other backends (neural ones)
    whose nearest neighbours join the candidates."""
    from vismerch.features.dupsig import has_signature
    from vismerch.merch.dedup import DupPairs, group_pairs

    products = products if products is not None else store.products()
    ids = features.ids
    pair_i: list[np.ndarray] = [np.zeros(0, np.int64)]
    pair_j: list[np.ndarray] = [np.zeros(0, np.int64)]
    groups = []
    if len(features) > 1:
        by_id = {p.id: p for p in products}
        cols = features.columns
        has = (has_signature(cols["dup_box"]) if "dup_box" in cols
               else np.zeros(len(ids), bool))
        if has.sum() > 1:
            rows = np.flatnonzero(has)
            i, j = _signature_pairs(store, features, rows, by_id, settings, other_indexes or {})
            pair_i.append(rows[i])
            pair_j.append(rows[j])
        if (~has).sum() > 1:
            rows = np.flatnonzero(~has)
            i, j = _legacy_pairs(features, rows, settings, index)
            pair_i.append(rows[i])
            pair_j.append(rows[j])
        i, j = np.concatenate(pair_i), np.concatenate(pair_j)
        flags = store.quality()
        penalty = np.array([len(flags.get(pid, [])) for pid in ids], dtype=np.float32)
        resolution = np.array([(by_id[pid].width or 0) * (by_id[pid].height or 0)
                               if pid in by_id else 0 for pid in ids], dtype=np.float64)
        none = np.zeros(i.size)
        groups = group_pairs(ids, DupPairs(i, j, none, none), quality_penalty=penalty,
                             resolution=resolution)
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


DUP_RULES_VERSION = 2  # bump when merch/dupmatch.py or dupfind.py judge pairs differently
INCREMENTAL_MAX_SHARE = 0.5  # more new/changed images than this share: search everything


def dedup_key(settings: Settings, backends: list[str]) -> str:
    """What the stored pairs were judged under: the rules version, the dup_* settings and
    the extra candidate backends. Any change means a full recompute."""
    values = {k: v for k, v in settings.as_dict().items() if k.startswith("dup_")}
    return json.dumps({"version": DUP_RULES_VERSION, "settings": values,
                       "backends": sorted(backends)}, sort_keys=True)


def _signature_pairs(store: Store, features: Features, rows: np.ndarray, by_id: dict,
                     settings: Settings, other_indexes: dict[str, object],
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Confirmed pairs (positions into ``rows``) by the signature rules: only the new or
    changed images are searched (against all) when the last search's state matches."""
    from vismerch.catalog import dupstate
    from vismerch.merch import dupfind

    cols = features.columns
    ids = [features.ids[r] for r in rows.tolist()]
    shas = [by_id[pid].sha256 if pid in by_id else "" for pid in ids]
    aspect = np.array([(by_id[pid].width or 1) / (by_id[pid].height or 1) if pid in by_id
                       else 1.0 for pid in ids], dtype=np.float32)
    sigs = dupfind.Signatures(cols["dup_box"][rows], cols["dup_sig"][rows],
                              cols["dup_colour"][rows], cols["dup_hash"][rows].astype(np.uint64),
                              aspect)
    rules = dupfind.DupRules.from_settings(settings)
    key = dedup_key(settings, list(other_indexes))
    row_of = {pid: r for r, pid in enumerate(ids)}
    state = dupstate.load(store.path)
    new = None
    if state is not None and state.key == key:
        before = dict(zip(state.ids, state.shas, strict=True))
        changed = np.array([before.get(pid) != sha for pid, sha in zip(ids, shas, strict=True)])
        if changed.sum() <= INCREMENTAL_MAX_SHARE * len(ids):
            new = np.flatnonzero(changed)
    timings: dict[str, float] = {}
    if new is None:  # first search, or the rules changed: everything
        ci, cj = dupfind.candidates_all(sigs, rules, settings.index_exact_max, timings)
        extra = [dupfind.index_candidates(ix, row_of, rules.neighbours)
                 for ix in other_indexes.values()]
        keep_i = keep_j = np.zeros(0, np.int64)
    else:
        ci, cj = dupfind.candidates_new(sigs, new, rules, timings)
        extra = [dupfind.index_candidates(ix, row_of, rules.neighbours, new)
                 for ix in other_indexes.values()]
        old_a, old_b = state.pairs_by_id()
        unchanged = ~changed
        ka = np.array([row_of.get(v, -1) for v in old_a], dtype=np.int64)
        kb = np.array([row_of.get(v, -1) for v in old_b], dtype=np.int64)
        ok = (ka >= 0) & (kb >= 0)
        ok[ok] &= unchanged[ka[ok]] & unchanged[kb[ok]]
        keep_i, keep_j = ka[ok], kb[ok]
    if extra:
        ci = np.concatenate([ci, *(e[0] for e in extra)])
        cj = np.concatenate([cj, *(e[1] for e in extra)])
        ci, cj = dupfind._unique_pairs(ci, cj, len(ids))
    confirmed, _ = dupfind.confirm(sigs, ci, cj, rules)
    i = np.concatenate([keep_i, ci[confirmed]])
    j = np.concatenate([keep_j, cj[confirmed]])
    dupstate.save(store.path, dupstate.DupState(key, ids, shas, i, j))
    store.set_meta("dedup_last", json.dumps({"mode": "full" if new is None else "incremental",
                                             "searched": len(ids) if new is None else int(new.size),
                                             "candidates": int(ci.size), "pairs": int(i.size)}))
    return i, j


def _legacy_pairs(features: Features, rows: np.ndarray, settings: Settings, index,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs among images without a box signature, by the rules before it existed."""
    from vismerch.merch.dedup import duplicate_pairs

    cols = features.columns
    structure = cols.get("structure")
    pairs = duplicate_pairs(
        [features.ids[r] for r in rows.tolist()],
        cols["phash"][rows].astype(np.uint64),
        features.vectors[rows].astype(np.float32),
        structure=None if structure is None else structure[rows],
        min_structure=settings.dup_structure,
        max_hamming=settings.dup_hash_distance,
        min_cosine=settings.dup_cosine,
        crop_hamming=settings.dup_crop_hamming,
        crop_cosine=settings.dup_crop_cosine,
        max_neighbours=settings.dup_neighbours,
        index=index,
        exact_max=settings.index_exact_max,
    )
    return pairs.i, pairs.j


def refresh_derived(store: Store, settings: Settings,
                    preread: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, object]:
    """Every derived view, from what is committed. ``preread``: feature shards the caller
    already read (ingest reads each task's shard as it commits), by store-relative path."""
    features = store.load_features("colour", preread=preread)
    products = store.products()
    redescribed = refresh_descriptions(store, features, settings, products)  # before dedup: it reads flags
    indexes = refresh_indexes(store, settings, {"colour": features}, preread)
    out: dict[str, object] = {
        "redescribed": redescribed,
        "audit": refresh_audit(store, features, settings, products),
        "indexes": {name: len(index) for name, index in indexes.items()},
        "duplicate_groups": refresh_duplicates(
            store, features, settings, indexes.get("colour"), products,
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
