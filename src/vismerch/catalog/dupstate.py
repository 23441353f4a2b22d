"""What the last duplicate search saw, so the next ingest only searches what is new.

``index/dup_state.npz`` in the store holds the rules key the pairs were judged under,
every image that was searched (product id and image sha256), the confirmed pairs (as
positions into those ids) with their strength, and the pairs kept apart. Written to a
temp name and renamed; a missing, damaged or foreign file simply means "search everything".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FILE = Path("index") / "dup_state.npz"


@dataclass
class DupState:
    key: str
    ids: list[str]
    shas: list[str]
    a: np.ndarray  # (P,) positions into ids
    b: np.ndarray
    strength: np.ndarray  # (P,) float32
    apart_a: np.ndarray  # (Q,) positions into ids
    apart_b: np.ndarray

    def pairs_by_id(self) -> tuple[list[str], list[str]]:
        return [self.ids[i] for i in self.a.tolist()], [self.ids[j] for j in self.b.tolist()]

    def apart_by_id(self) -> tuple[list[str], list[str]]:
        return ([self.ids[i] for i in self.apart_a.tolist()],
                [self.ids[j] for j in self.apart_b.tolist()])


def load(store_path: Path) -> DupState | None:
    path = Path(store_path) / FILE
    try:
        with np.load(path, allow_pickle=False) as z:
            return DupState(str(z["key"]), z["ids"].tolist(), z["shas"].tolist(),
                            z["a"].astype(np.int64), z["b"].astype(np.int64),
                            z["strength"].astype(np.float32), z["apart_a"].astype(np.int64),
                            z["apart_b"].astype(np.int64))
    except (OSError, KeyError, ValueError):
        return None


def save(store_path: Path, state: DupState) -> None:
    path = Path(store_path) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, key=np.array(state.key), ids=np.array(state.ids, dtype=str),
             shas=np.array(state.shas, dtype=str), a=state.a.astype(np.int64),
             b=state.b.astype(np.int64), strength=state.strength.astype(np.float32),
             apart_a=state.apart_a.astype(np.int64), apart_b=state.apart_b.astype(np.int64))
    os.replace(tmp, path)


def clear(store_path: Path) -> None:
    (Path(store_path) / FILE).unlink(missing_ok=True)
