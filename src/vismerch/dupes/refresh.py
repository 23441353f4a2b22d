"""Near-duplicate groups of a store, rebuilt after every ingest (merch/derive.py calls
``refresh_duplicates``): candidates (dupes/candidates.py), confirmed (dupes/confirm.py),
incrementally when only new images arrived (dupes/state.py), grouped (dupes/groups.py),
then the merchandisers' review decisions re-imposed (dupes/reviews.py). The store's
tables and files are written through catalog/ (catalog/reviews.py, catalog/dupstate.py).
"""

from __future__ import annotations

import json

import numpy as np

from vismerch.catalog.store import Features, Product, Store
from vismerch.config import Settings
from vismerch.dupes import candidates, reviews, state
from vismerch.dupes.confirm import judge
from vismerch.dupes.groups import group_pairs, split_apart
from vismerch.dupes.model import DupRules, Signatures


def refresh_duplicates(store: Store, features: Features, settings: Settings,
                       products: list[Product] | None = None,
                       other_indexes: dict[str, object] | None = None) -> int:
    """Rebuild the store's duplicate groups from the images with a box signature (images
    without one, features written before it existed, join no group); the number of
    groups left after review decisions. ``other_indexes``: vector indexes of other
    backends (neural ones) whose nearest neighbours join the candidates."""
    from vismerch.catalog import reviews as review_rows
    from vismerch.dupes.signature import has_signature

    products = products if products is not None else store.products()
    ids = features.ids
    groups = []
    cols = features.columns
    has = (has_signature(cols["dup_box"]) if "dup_box" in cols and len(features)
           else np.zeros(len(ids), bool))
    if has.sum() > 1:
        by_id = {p.id: p for p in products}
        rows = np.flatnonzero(has)
        i, j, strength, ai, aj = signature_pairs(store, features, rows, by_id, settings,
                                                 other_indexes or {})
        # the same shot in another colour never shares a group, however the rest chains
        keep = split_apart(len(rows), i, j, strength, ai, aj)
        i, j = i[keep], j[keep]
        flags = store.quality()
        penalty = np.array([len(flags.get(pid, [])) for pid in ids], dtype=np.float32)
        resolution = np.array([(by_id[pid].width or 0) * (by_id[pid].height or 0)
                               if pid in by_id else 0 for pid in ids], dtype=np.float64)
        groups = group_pairs(ids, rows[i], rows[j], quality_penalty=penalty,
                             resolution=resolution)
    with store.transaction() as con:
        review_rows.replace_dup_groups(con, [(g.group, member, int(member == g.representative))
                                             for g in groups for member in g.members])
        dropped = reviews.apply(con)  # merchandisers' decisions outlive the recomputed groups
    return len(groups) - dropped


def _signatures(features: Features, rows: np.ndarray, by_id: dict,
                ) -> tuple[Signatures, list[str], list[str]]:
    """The signature columns of ``rows``, their product ids and image sha256s."""
    cols = features.columns
    ids = [features.ids[r] for r in rows.tolist()]
    shas = [by_id[pid].sha256 if pid in by_id else "" for pid in ids]
    aspect = np.array([(by_id[pid].width or 1) / (by_id[pid].height or 1) if pid in by_id
                       else 1.0 for pid in ids], dtype=np.float32)
    chroma = cols["dup_chroma"][rows] if "dup_chroma" in cols else None  # older shards: none
    sigs = Signatures(cols["dup_box"][rows], cols["dup_sig"][rows], cols["dup_colour"][rows],
                      cols["dup_hash"][rows].astype(np.uint64), aspect, chroma)
    return sigs, ids, shas


def signature_pairs(store: Store, features: Features, rows: np.ndarray, by_id: dict,
                    settings: Settings, other_indexes: dict[str, object],
                    ) -> tuple[np.ndarray, ...]:
    """Confirmed pairs (i, j: positions into ``rows``), their strength and the pairs kept
    apart (dupes/confirm.py) by the signature rules: only the new or changed images are
    searched (against all) when the last search's state matches."""
    from vismerch.catalog import dupstate

    sigs, ids, shas = _signatures(features, rows, by_id)
    rules = DupRules.from_settings(settings)
    key = state.dedup_key(settings, list(other_indexes))
    row_of = {pid: r for r, pid in enumerate(ids)}
    last = dupstate.load(store.path)
    changed = state.changed_rows(last, key, ids, shas)
    new = None if changed is None else np.flatnonzero(changed)
    timings: dict[str, float] = {}
    if new is None:  # first search, or the rules changed: everything
        ci, cj = candidates.candidates_all(sigs, rules, settings.index_exact_max, timings)
        kept = _nothing_kept()
    else:
        ci, cj = candidates.candidates_new(sigs, new, rules, timings)
        kept = _kept(last, row_of, changed)
    extra = [candidates.index_candidates(ix, row_of, rules.neighbours, new)
             for ix in other_indexes.values()]
    if extra:
        ci = np.concatenate([ci, *(e[0] for e in extra)])
        cj = np.concatenate([cj, *(e[1] for e in extra)])
        ci, cj = candidates.unique_pairs(ci, cj, len(ids))
    got = judge(sigs, ci, cj, rules)
    i = np.concatenate([kept[0], ci[got.ok]])
    j = np.concatenate([kept[1], cj[got.ok]])
    strength = np.concatenate([kept[2], got.strength[got.ok]]).astype(np.float32)
    ai = np.concatenate([kept[3], ci[got.apart]])
    aj = np.concatenate([kept[4], cj[got.apart]])
    dupstate.save(store.path, dupstate.DupState(key, ids, shas, i, j, strength, ai, aj))
    store.set_meta("dedup_last", json.dumps({"mode": "full" if new is None else "incremental",
                                             "searched": len(ids) if new is None else int(new.size),
                                             "candidates": int(ci.size), "pairs": int(i.size)}))
    return i, j, strength, ai, aj


def _nothing_kept() -> tuple[np.ndarray, ...]:
    none = np.zeros(0, np.int64)
    return none, none, np.zeros(0, np.float32), none, none


def _kept(last, row_of: dict[str, int], changed: np.ndarray) -> tuple[np.ndarray, ...]:
    """The last search's pairs (i, j, strength) and apart pairs between unchanged images."""
    ka, kb, ok = state.kept_pairs(*last.pairs_by_id(), row_of, changed)
    aa, ab, _ = state.kept_pairs(*last.apart_by_id(), row_of, changed)
    return ka, kb, last.strength[ok], aa, ab
