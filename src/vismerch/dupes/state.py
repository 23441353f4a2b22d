"""What the next duplicate search must look at, from what the last one saw
(``catalog/dupstate.py`` keeps that on disk): pure decisions, no I/O.

The stored pairs stay valid while the rules that judged them are the same (``dedup_key``:
the rules version, the ``dup_*`` settings, the extra candidate backends) and few images
changed; then only the new or changed images are searched, against everything, and the
stored pairs between unchanged images are kept.
"""

from __future__ import annotations

import json

import numpy as np

# bump when dupes/confirm.py or dupes/candidates.py judge pairs differently (3: pairs kept
# apart are stored with the pairs)
DUP_RULES_VERSION = 3
INCREMENTAL_MAX_SHARE = 0.5  # more new/changed images than this share: search everything


def dedup_key(settings, backends: list[str]) -> str:
    """What the stored pairs were judged under: the rules version, the dup_* settings and
    the extra candidate backends. Any change means a full recompute."""
    values = {k: v for k, v in settings.as_dict().items() if k.startswith("dup_")}
    return json.dumps({"version": DUP_RULES_VERSION, "settings": values,
                       "backends": sorted(backends)}, sort_keys=True)


def changed_rows(state, key: str, ids: list[str], shas: list[str]) -> np.ndarray | None:
    """bool per image: new or changed since ``state`` (a ``catalog.dupstate.DupState``);
    None when everything must be searched (no state, other rules, too many changes)."""
    if state is None or state.key != key:
        return None
    before = dict(zip(state.ids, state.shas, strict=True))
    changed = np.array([before.get(pid) != sha for pid, sha in zip(ids, shas, strict=True)],
                       dtype=bool)
    return changed if changed.sum() <= INCREMENTAL_MAX_SHARE * len(ids) else None


def kept_pairs(old_a: list[str], old_b: list[str], row_of: dict[str, int],
               changed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of the stored pairs (ids ``old_a``, ``old_b``): the rows (of ``row_of``) of those
    whose two images are still there, unchanged, and which those are (bool per pair)."""
    ka = np.array([row_of.get(v, -1) for v in old_a], dtype=np.int64)
    kb = np.array([row_of.get(v, -1) for v in old_b], dtype=np.int64)
    ok = (ka >= 0) & (kb >= 0)
    ok[ok] &= ~changed[ka[ok]] & ~changed[kb[ok]]
    return ka[ok], kb[ok], ok
