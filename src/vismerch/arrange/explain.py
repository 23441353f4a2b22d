"""Measures of an arranged grid and the per-slot explanations.

A grid of C columns shows an order row by row: position p sits at row p // C, column
p % C. Its neighbours are p ± 1 in the same row and p ± C. One order is shown at several
widths, so the same pair of products may be neighbours at 3 columns and not at 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def dcg(values: np.ndarray, depth: int) -> float:
    """Position-weighted business score of the first ``depth`` values (1/log2(p+2) weights)."""
    v = np.clip(np.asarray(values, np.float64)[:depth], 0.0, None)
    return float((v / np.log2(np.arange(v.size) + 2.0)).sum())


@dataclass(frozen=True)
class Adjacency:
    """Two look-alike neighbours at one width (positions 0-based)."""

    columns: int
    a: int
    b: int
    cosine: float
    direction: str  # "row" (side by side) | "column" (one above the other)


def lookalike_adjacencies(vectors: np.ndarray | None, columns: int, threshold: float,
                          depth: int | None = None) -> list[Adjacency]:
    """Neighbour pairs whose cosine ≥ ``threshold`` among the first ``depth`` positions.

    ``vectors`` are the L2-normalised vectors in display order. Worst (highest cosine) first.
    """
    if vectors is None or len(vectors) < 2 or columns < 1:
        return []
    v = np.asarray(vectors[: depth if depth else len(vectors)], np.float32)
    n = len(v)
    out: list[Adjacency] = []
    if columns > 1 and n > 1:
        sims = np.einsum("ij,ij->i", v[:-1], v[1:])
        same_row = (np.arange(1, n) % columns) != 0
        for p in np.nonzero(same_row & (sims >= threshold))[0]:
            out.append(Adjacency(columns, int(p), int(p) + 1, float(sims[p]), "row"))
    if n > columns:
        sims = np.einsum("ij,ij->i", v[:-columns], v[columns:])
        for p in np.nonzero(sims >= threshold)[0]:
            out.append(Adjacency(columns, int(p), int(p) + columns, float(sims[p]), "column"))
    out.sort(key=lambda a: (-a.cosine, a.a, a.b))
    return out


def count_lookalikes(vectors: np.ndarray | None, columns: int, threshold: float,
                     depth: int | None = None) -> int:
    return len(lookalike_adjacencies(vectors, columns, threshold, depth))


@dataclass
class BreakpointReport:
    """Look-alike neighbours of one order at one width."""

    columns: int
    in_depth: int  # pairs among the first ``depth`` positions
    total: int  # pairs anywhere on the page
    plain_in_depth: int  # the same count for the plain score order
    pairs: list[dict[str, Any]] = field(default_factory=list)  # worst first, 1-based positions

    def as_dict(self) -> dict[str, Any]:
        return {
            "columns": self.columns, "lookalikes_in_depth": self.in_depth,
            "lookalikes_total": self.total, "plain_lookalikes_in_depth": self.plain_in_depth,
            "pairs": self.pairs,
        }


def breakpoint_reports(ids: Sequence[str], vectors: np.ndarray | None,
                       plain_vectors: np.ndarray | None, widths: Sequence[int],
                       threshold: float, depth: int) -> list[BreakpointReport]:
    """One report per width, the worst width (most look-alike neighbours in depth) first."""
    reports = []
    for c in widths:
        near = lookalike_adjacencies(vectors, c, threshold, depth)
        pairs = [
            {"a": ids[a.a], "b": ids[a.b], "positions": [a.a + 1, a.b + 1],
             "cosine": round(a.cosine, 4), "direction": a.direction}
            for a in near
        ]
        reports.append(BreakpointReport(
            columns=c, in_depth=len(near),
            total=count_lookalikes(vectors, c, threshold),
            plain_in_depth=count_lookalikes(plain_vectors, c, threshold, depth),
            pairs=pairs,
        ))
    reports.sort(key=lambda r: (-r.in_depth, -r.total, r.columns))
    return reports


# ---------------------------------------------------------------- per-slot reasons


@dataclass
class SkipCause:
    """Why the greedy passed an item over at some slot (first time only)."""

    slot: int
    kind: str  # lookalike | duplicate | colour | dominance
    other: str | None = None  # the neighbour it resembled
    cosine: float | None = None


_CAUSE_TEXT = {
    "lookalike": "look-alike of {other} (cosine {cosine:.2f}) would sit next to it",
    "duplicate": "near-duplicate of {other} nearby, spaced apart",
    "colour": "balances colour (same colour family as its neighbour)",
    "flow": "keeps the colour flow (its colour family breaks the run)",
    "dominance": "the row already had too many of its category/brand",
}


def slot_reason(*, kind: str, score: float, rank: int, position: int, plain_position: int,
                cause: SkipCause | None, notes: Sequence[str] = ()) -> str:
    """One sentence: why this product is at ``position`` (all positions 1-based)."""
    parts: list[str] = []
    notes = list(notes)
    if kind == "pinned":
        by = notes.pop(0)[len("pinned "):] if notes and notes[0].startswith("pinned by ") else ""
        parts.append(f"pinned to position {position}" + (f" {by}" if by else ""))
    else:
        parts.append(f"score {score:.3f} (rank {rank})")
    parts.extend(notes)
    if kind == "pinned":
        return "; ".join(parts)
    if position > plain_position:
        if cause is not None and cause.kind == "duplicate" and cause.other is None:
            parts.append(f"moved for diversity from {plain_position} to {position}: "
                         "a near-duplicate was nearby, spaced apart")
        elif cause is not None:
            text = _CAUSE_TEXT.get(cause.kind, cause.kind).format(
                other=cause.other, cosine=cause.cosine or 0.0)
            parts.append(f"moved for diversity from {plain_position} to {position}: {text}")
        else:
            parts.append(f"shifted from {plain_position} to {position} by diversity moves above")
    elif position < plain_position:
        parts.append(f"moved up from {plain_position} to {position}: better-ranked products "
                     "were held back for diversity")
    return "; ".join(parts)
