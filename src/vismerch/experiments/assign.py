"""Sticky assignment of visitors to an experiment's variants.

A visitor's bucket is a hash of (experiment id, the visitor's stored hash), uniform on
[0, 1): the same in every request, page and server process, and recomputable from the
event log (which keeps only the hashed visitor), so results never trust a client's label.
The first ``holdout`` share of buckets sees the live version and is not counted; the rest
is cut by the variants' weights.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

HOLDOUT = "holdout"


def bucket(experiment_id: int, visitor_hash: str) -> float:
    digest = hashlib.sha256(f"{int(experiment_id)}:{visitor_hash}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def pick(weights: Sequence[float], holdout: float, u: float) -> int | None:
    """The variant index for bucket ``u`` (None: the holdout)."""
    if u < holdout:
        return None
    x = (u - holdout) / (1.0 - holdout) * sum(weights)
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if x < acc:
            return i
    return len(weights) - 1


def assign(experiment: dict[str, Any], visitor_hash: str) -> dict[str, Any] | None:
    """The variant (``{name, version, version_id, weight}``) ``visitor_hash`` sees, or None
    for the holdout."""
    variants = experiment["variants"]
    i = pick([v["weight"] for v in variants], float(experiment.get("holdout") or 0.0),
             bucket(experiment["id"], visitor_hash))
    return None if i is None else variants[i]


def in_window(experiment: dict[str, Any], now: str | None = None) -> bool:
    """Has the experiment started and not yet reached its end (RFC 3339 UTC stamps)?"""
    now = now or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return experiment["starts_at"] <= now and (not experiment.get("ends_at") or now < experiment["ends_at"])
