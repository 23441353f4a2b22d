"""Duplicate groups from confirmed pairs.

Groups are connected components (transitive: a~b and b~c put a, b, c together), except
that two images kept ``apart`` (dupes/confirm.py: the same shot in another colour) never
share a group: ``split_apart`` leaves out the weakest links that would join them. The
representative has the fewest quality flags (lowest ``quality_penalty``), then the largest
``resolution``, then the smallest id. Groups are numbered from 1 in order of representative
id; members list the representative first, then the others by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vismerch.dupes.hashsearch import unique_sorted


@dataclass(frozen=True)
class DupGroup:
    group: int
    representative: str
    members: list[str]


def connected_components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Component label (the smallest member position) of each of n nodes, edges (i, j).

    Vectorised union-find: hook each edge's larger root under the smaller, then compress
    paths fully; repeat until no edge joins two roots.
    """
    parent = np.arange(n)
    i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
    while i.size:
        ri, rj = parent[i], parent[j]
        differ = ri != rj
        i, j, ri, rj = i[differ], j[differ], ri[differ], rj[differ]
        if not i.size:
            break
        np.minimum.at(parent, np.maximum(ri, rj), np.minimum(ri, rj))
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
    return parent


def group_pairs(ids: list[str], i: np.ndarray, j: np.ndarray, *, quality_penalty: Any = None,
                resolution: Any = None) -> list[DupGroup]:
    """Duplicate groups (>= 2 members) of ``ids`` from confirmed pairs (positions i, j);
    see the module docstring."""
    n = len(ids)
    i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
    if i.size == 0:
        return []
    labels = connected_components(n, i, j)
    nodes = unique_sorted(np.concatenate([i, j]))
    penalty = np.zeros(n) if quality_penalty is None else np.asarray(quality_penalty, float)
    res = np.zeros(n) if resolution is None else np.asarray(resolution, float)
    penalty, res = np.nan_to_num(penalty, nan=np.inf), np.nan_to_num(res, nan=-np.inf)
    by_label: dict[int, list[int]] = {}
    for node in nodes.tolist():
        by_label.setdefault(int(labels[node]), []).append(node)
    groups = []
    for members in by_label.values():
        rep = min(members, key=lambda p: (penalty[p], -res[p], ids[p]))
        rest = sorted(ids[p] for p in members if p != rep)
        groups.append((ids[rep], [ids[rep], *rest]))
    groups.sort()
    return [DupGroup(g, rep, members) for g, (rep, members) in enumerate(groups, start=1)]



def split_apart(n: int, i: np.ndarray, j: np.ndarray, strength: np.ndarray,
                apart_i: np.ndarray, apart_j: np.ndarray) -> np.ndarray:
    """bool per edge (i, j): kept, so that no component holds both ends of an apart pair.
    Components without such a pair keep every edge; inside the others the edges are taken
    strongest first (``strength``) and one that would join an apart pair is left out."""
    keep = np.ones(i.size, bool)
    if not i.size or not np.size(apart_i):
        return keep
    labels = connected_components(n, i, j)
    apart_i, apart_j = np.asarray(apart_i, np.int64), np.asarray(apart_j, np.int64)
    inside = labels[apart_i] == labels[apart_j]
    bad = unique_sorted(labels[apart_i][inside])
    if not bad.size:
        return keep
    edges = np.flatnonzero(np.isin(labels[i], bad))
    edges = edges[np.argsort(-np.asarray(strength)[edges], kind="stable")]
    keep[edges] = _joinable(i[edges].tolist(), j[edges].tolist(),
                            zip(apart_i[inside].tolist(), apart_j[inside].tolist(), strict=True))
    return keep


def _joinable(ii: list[int], jj: list[int], apart) -> list[bool]:
    """Union-find over edges in order, refusing an edge whose two sets hold an apart pair."""
    parent: dict[int, int] = {}
    members: dict[int, set[int]] = {}
    never: dict[int, set[int]] = {}
    for a, b in apart:
        never.setdefault(a, set()).add(b)
        never.setdefault(b, set()).add(a)

    def root(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    out = []
    for a, b in zip(ii, jj, strict=True):
        ra, rb = root(a), root(b)
        if ra != rb:
            small, big = sorted((ra, rb), key=lambda r: len(members.get(r, (r,))))
            mine, theirs = members.pop(small, {small}), members.get(big, {big})
            if any(never.get(x, set()) & theirs for x in mine):
                members[small] = mine
                out.append(False)
                continue
            parent[small] = big
            members[big] = theirs | mine
        out.append(True)
    return out
