"""Vector index: FAISS over L2-normalised float32 vectors with string ids (inner product = cosine).

Exact (``IndexFlatIP``) up to ``exact_max`` vectors; above, HNSW (``IndexHNSWFlat``, inner
product) or an inverted file (``IndexIVFFlat``: k-means cells, ``nprobe`` of them searched),
which builds a million vectors in a minute on two cores where HNSW takes many. Filters (an
allowed mask or set of ids) go to FAISS as an ``IDSelectorBitmap`` in the
search parameters; HNSW can miss allowed items when the filter is very selective, so small
allowed sets are scored exactly, and any query that comes back short is redone exactly: a
search returns ``min(k, number allowed)`` results, always.

On disk an index is ``<name>.faiss`` plus ``<name>.ids.json`` (ids, kind, dim, count and
caller metadata), each written to a temp name and renamed. The loader checks that the two
agree, so an interrupted rebuild is detected rather than served.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from vismerch.errors import StoreError, UsageError

FORMAT_VERSION = 1
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 64
HNSW_EF_SEARCH = 64
IVF_NPROBE = 32
IVF_MAX_LISTS = 1024
IVF_TRAIN_PER_LIST = 24  # k-means samples per cell: ample for cells that are only searched
APPROXIMATE = ("hnsw", "ivf")
# Allowed sets up to this size are scored exactly from the stored vectors (cheap and never
# short); larger ones go through the HNSW graph with a selector.
SUBSET_EXACT_MAX = 20_000

Allowed = np.ndarray | Iterable[str] | None


@dataclass(frozen=True)
class Tuning:
    """How an index above ``exact_max`` is built: ``large`` "hnsw" (graph degree, build and
    query breadth) or "ivf" (cells searched per query)."""

    large: str = "hnsw"
    hnsw_m: int = HNSW_M
    ef_construction: int = HNSW_EF_CONSTRUCTION
    ef_search: int = HNSW_EF_SEARCH
    nprobe: int = IVF_NPROBE


def _as_matrix(vectors: Any, what: str) -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise UsageError(f"{what} must be a 2-D array (n, dim), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise UsageError(f"{what} contain NaN or infinite values")
    arr = np.ascontiguousarray(arr).copy()
    faiss.normalize_L2(arr)  # idempotent on normalised input; zero rows stay zero
    return arr


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise top-k of a (n, m) score matrix: (scores, columns), best first."""
    n, m = scores.shape
    k = min(k, m)
    if k == 0:
        return np.zeros((n, 0), np.float32), np.zeros((n, 0), np.int64)
    cols = np.argpartition(-scores, k - 1, axis=1)[:, :k] if k < m else np.tile(np.arange(m), (n, 1))
    part = np.take_along_axis(scores, cols, axis=1)
    order = np.argsort(-part, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(cols, order, axis=1)


def locality_order(vectors: np.ndarray, min_rows: int = 20_000, seed: int = 0) -> np.ndarray:
    """A permutation of ``vectors``' rows that puts near vectors next to each other (by
    k-means cluster, ~1,000 rows each). Searching a whole catalog's vectors against an HNSW
    index in this order is 2-3x faster with the same results (each query's search is
    independent of the others): consecutive queries visit the same graph nodes, which stay
    in cache. Below ``min_rows`` the identity (the index fits in cache anyway)."""
    n = len(vectors)
    if n < min_rows:
        return np.arange(n)
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    k = int(np.clip(n // 1000, 16, 1024))
    km = faiss.Kmeans(x.shape[1], k, niter=8, seed=seed, spherical=True, verbose=False)
    km.train(np.ascontiguousarray(x[:: max(1, n // (64 * k))]))
    _, label = km.index.search(x, 1)
    return np.argsort(label[:, 0], kind="stable")


def search_all(index: Any, vectors: np.ndarray, k: int, batch: int = 8_192
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every row of ``vectors`` as a query against ``index`` (a VectorIndex): (query rows,
    result positions, scores), flattened, -1 positions (fewer than k results) included. An
    HNSW index is queried in ``locality_order``."""
    hnsw = getattr(index, "kind", "") == "hnsw"
    order = locality_order(vectors) if hnsw else np.arange(len(vectors))
    queries, rows, scores = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.float32)]
    for s in range(0, len(vectors), batch):
        q = order[s:s + batch]
        got_scores, got_rows = index.search_positions(vectors[q], k)
        queries.append(np.repeat(q, got_rows.shape[1]))
        rows.append(got_rows.reshape(-1).astype(np.int64, copy=False))
        scores.append(got_scores.reshape(-1))
    return np.concatenate(queries), np.concatenate(rows), np.concatenate(scores)


class VectorIndex:
    """A FAISS inner-product index whose rows are named by string ids.

    Build with :meth:`build`, query with :meth:`search` (ids and scores) or
    :meth:`search_positions` (arrays), persist with :meth:`save` / :meth:`load`.
    """

    def __init__(self, index: Any, ids: Sequence[str], kind: str, meta: dict | None = None,
                 device: str = "cpu"):
        if index.ntotal != len(ids):
            raise StoreError(f"index holds {index.ntotal} vectors but {len(ids)} ids")
        self.index = index
        self.ids: list[str] = list(ids)
        self.kind = kind
        self.meta: dict = dict(meta or {})
        self._positions: dict[str, int] | None = None
        self._gpu, self._gpu_resources = _maybe_gpu(index, kind, device)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def build(cls, vectors: Any, ids: Sequence[str], *, exact_max: int = 50_000,
              tuning: Tuning | None = None, device: str = "cpu", meta: dict | None = None,
              ) -> VectorIndex:
        """Index ``vectors`` (n, dim) named by ``ids``; exact when n <= ``exact_max``, else
        ``tuning.large`` ("hnsw" or "ivf")."""
        tuning = tuning or Tuning()
        ids = [str(i) for i in ids]
        raw = np.asarray(vectors, dtype=np.float32)
        if raw.size == 0 and not ids:
            arr = np.zeros((0, raw.shape[1] if raw.ndim == 2 else 1), np.float32)
        else:
            arr = _as_matrix(raw, "vectors")
        if arr.shape[0] != len(ids):
            raise UsageError(f"{arr.shape[0]} vectors but {len(ids)} ids")
        if len(set(ids)) != len(ids):
            raise UsageError("index ids must be unique", hint="one vector per product id")
        dim = int(arr.shape[1])
        if len(ids) <= exact_max:
            index = faiss.IndexFlatIP(dim)
            kind = "exact"
        elif tuning.large == "ivf":
            return cls(_ivf(arr, tuning.nprobe), ids, "ivf", meta, device)
        elif tuning.large != "hnsw":
            raise UsageError(f"unknown index kind {tuning.large!r}", hint="hnsw or ivf")
        else:
            index = faiss.IndexHNSWFlat(dim, tuning.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = tuning.ef_construction
            index.hnsw.efSearch = tuning.ef_search
            kind = "hnsw"
        if len(ids):
            index.add(arr)
        return cls(index, ids, kind, meta, device)

    # -- properties ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @property
    def positions(self) -> dict[str, int]:
        """Row of every id (built on first use, then kept)."""
        if self._positions is None:
            self._positions = {v: i for i, v in enumerate(self.ids)}
        return self._positions

    def position(self, item_id: str) -> int:
        """Row of ``item_id``; UsageError when it is not indexed."""
        try:
            return self.positions[item_id]
        except KeyError:
            raise UsageError(f"unknown id {item_id!r}: it is not in the index",
                             hint="check the product id, or re-run ingest") from None

    def vectors_at(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored (normalised) vectors of the given rows, float32 (m, dim)."""
        pos = np.asarray(positions, dtype=np.int64).reshape(-1)
        if pos.size == 0:
            return np.zeros((0, self.dim), np.float32)
        return self.index.reconstruct_batch(pos).astype(np.float32, copy=False)

    # -- search -------------------------------------------------------------------------
    def allowed_mask(self, allowed: Allowed) -> np.ndarray | None:
        """Normalise ``allowed`` (bool mask over rows, or ids) to a bool mask, or None for all."""
        if allowed is None:
            return None
        if isinstance(allowed, list | tuple) and allowed and isinstance(allowed[0], bool | np.bool_):
            allowed = np.asarray(allowed, dtype=bool)
        if isinstance(allowed, np.ndarray) and allowed.dtype == bool:
            if allowed.shape != (len(self),):
                raise UsageError(f"allowed mask has shape {allowed.shape}, expected ({len(self)},)")
            return allowed
        positions = self.positions
        mask = np.zeros(len(self), dtype=bool)
        rows = [positions[i] for i in allowed if i in positions]
        mask[rows] = True
        return mask

    def search_positions(self, queries: Any, k: int, allowed: Allowed = None,
                         ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows) arrays of shape (n, k'), k' = min(k, allowed count); best first."""
        q = _as_matrix(queries, "queries")
        if len(self) == 0:
            return np.zeros((q.shape[0], 0), np.float32), np.zeros((q.shape[0], 0), np.int64)
        if q.shape[1] != self.dim:
            raise UsageError(f"query dimension {q.shape[1]} does not match index dimension {self.dim}")
        mask = self.allowed_mask(allowed)
        n_allowed = len(self) if mask is None else int(mask.sum())
        k = max(0, min(int(k), n_allowed))
        if k == 0 or q.shape[0] == 0:
            return np.zeros((q.shape[0], k), np.float32), np.zeros((q.shape[0], k), np.int64)
        if mask is None:
            target = self._gpu if self._gpu is not None else self.index
            scores, rows = target.search(q, k, params=self._params(k))
        elif self.kind in APPROXIMATE and n_allowed <= SUBSET_EXACT_MAX:
            return self._subset_exact(q, k, np.flatnonzero(mask))
        else:
            scores, rows = self._search_selected(q, k, mask)
        return self._fill_short(q, k, mask, scores, rows)

    def search(self, queries: Any, k: int, allowed: Allowed = None,
               ) -> list[list[tuple[str, float]]]:
        """For each query, up to ``k`` (id, cosine) pairs, best first, among ``allowed``."""
        scores, rows = self.search_positions(queries, k, allowed)
        return [[(self.ids[r], float(s)) for s, r in zip(srow, rrow, strict=True) if r >= 0]
                for srow, rrow in zip(scores, rows, strict=True)]

    def _params(self, k: int, sel: Any = None, exhaustive: bool = False) -> Any:
        if self.kind == "hnsw":
            ef = max(int(self.index.hnsw.efSearch), 2 * k)
            return faiss.SearchParametersHNSW(sel=sel, efSearch=ef)
        if self.kind == "ivf":
            nprobe = self.index.nlist if exhaustive else int(self.index.nprobe)
            return faiss.SearchParametersIVF(sel=sel, nprobe=nprobe)
        return None if sel is None else faiss.SearchParameters(sel=sel)

    def _search_selected(self, q: np.ndarray, k: int, mask: np.ndarray,
                         ) -> tuple[np.ndarray, np.ndarray]:
        bitmap = np.packbits(mask, bitorder="little")  # must outlive the search call
        return self.index.search(q, k, params=self._params(k, faiss.IDSelectorBitmap(bitmap)))

    def _subset_exact(self, q: np.ndarray, k: int, rows: np.ndarray,
                      ) -> tuple[np.ndarray, np.ndarray]:
        sub = self.vectors_at(rows)
        scores, cols = top_k(q @ sub.T, k)
        return scores.astype(np.float32), rows[cols]

    def _fill_short(self, q: np.ndarray, k: int, mask: np.ndarray | None,
                    scores: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Redo exactly any query that HNSW or IVF answered with fewer than k results."""
        short = (rows < 0).any(axis=1)
        if self.kind not in APPROXIMATE or not short.any():
            return scores, rows
        bitmap = None if mask is None else np.packbits(mask, bitorder="little")
        sel = None if bitmap is None else faiss.IDSelectorBitmap(bitmap)
        if self.kind == "ivf":  # every cell searched: exact
            s2, r2 = self.index.search(q[short], k, params=self._params(k, sel, exhaustive=True))
        else:
            storage = faiss.downcast_index(self.index.storage)
            s2, r2 = storage.search(q[short], k, params=None if sel is None else
                                    faiss.SearchParameters(sel=sel))
        scores, rows = scores.copy(), rows.copy()
        scores[short], rows[short] = s2, r2
        return scores, rows

    # -- persistence --------------------------------------------------------------------
    def save(self, directory: str | Path, name: str) -> Path:
        """Write ``<name>.faiss`` and ``<name>.ids.json`` atomically; returns the .faiss path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        index_path = directory / f"{name}.faiss"
        ids_path = directory / f"{name}.ids.json"
        tag = f".tmp-{os.getpid()}"
        tmp_index = index_path.with_name(index_path.name + tag)
        tmp_ids = ids_path.with_name(ids_path.name + tag)
        try:
            faiss.write_index(self.index, str(tmp_index))
            doc = {"version": FORMAT_VERSION, "kind": self.kind, "dim": self.dim,
                   "count": len(self), "meta": self.meta, "ids": self.ids}
            tmp_ids.write_text(json.dumps(doc))
            os.replace(tmp_index, index_path)
            os.replace(tmp_ids, ids_path)
        finally:
            for tmp in (tmp_index, tmp_ids):
                tmp.unlink(missing_ok=True)
        return index_path

    @classmethod
    def load(cls, directory: str | Path, name: str, device: str = "cpu",
             ef_search: int | None = None, nprobe: int | None = None) -> VectorIndex:
        """Read an index written by :meth:`save`; StoreError when missing or inconsistent.

        ``ef_search`` / ``nprobe`` override the HNSW / IVF query breadth saved with the index.
        """
        directory = Path(directory)
        index_path = directory / f"{name}.faiss"
        ids_path = directory / f"{name}.ids.json"
        hint = "rebuild it: run `vismerch ingest` on the store again"
        if not index_path.exists() or not ids_path.exists():
            raise StoreError(f"no index {name!r} in {directory}", hint=hint)
        try:
            doc = json.loads(ids_path.read_text())
            index = faiss.read_index(str(index_path))
        except (OSError, ValueError, RuntimeError) as exc:
            raise StoreError(f"cannot read index {index_path}: {exc}", hint=hint) from exc
        if doc.get("version") != FORMAT_VERSION:
            raise StoreError(f"index {index_path} has format {doc.get('version')!r}, "
                             f"expected {FORMAT_VERSION}", hint=hint)
        if index.ntotal != doc["count"] or len(doc["ids"]) != doc["count"] or index.d != doc["dim"]:
            raise StoreError(f"index {index_path} and its id map disagree "
                             f"({index.ntotal} vectors, {len(doc['ids'])} ids)", hint=hint)
        if ef_search is not None and doc["kind"] == "hnsw":
            index.hnsw.efSearch = int(ef_search)
        if doc["kind"] == "ivf":
            index.make_direct_map()  # vectors_at reconstructs rows by position
            if nprobe is not None:
                index.nprobe = int(nprobe)
        return cls(index, doc["ids"], doc["kind"], doc.get("meta"), device)


def _ivf(arr: np.ndarray, nprobe: int) -> Any:
    """An inverted-file index over ``arr``: about sqrt(n) k-means cells (at most
    ``IVF_MAX_LISTS``) trained on a sample, inner product, ``nprobe`` cells searched."""
    n, dim = arr.shape
    nlist = int(np.clip(np.sqrt(n), 1, IVF_MAX_LISTS))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.max_points_per_centroid = IVF_TRAIN_PER_LIST
    index.cp.min_points_per_centroid = 1  # a small catalog: no warning, its cells are searched
    step = max(1, n // (nlist * IVF_TRAIN_PER_LIST))
    index.train(np.ascontiguousarray(arr[::step]))
    index.add(arr)
    index.make_direct_map()
    index.nprobe = min(int(nprobe), nlist)
    return index


def _maybe_gpu(index: Any, kind: str, device: str) -> tuple[Any, Any]:
    """A GPU copy of an exact index for unfiltered searches, when faiss has GPUs and device is cuda.

    HNSW and filtered searches stay on the CPU index (FAISS GPU has neither).
    """
    if kind != "exact" or not str(device).startswith("cuda") or index.ntotal == 0:
        return None, None
    get_num_gpus = getattr(faiss, "get_num_gpus", None)
    if get_num_gpus is None or get_num_gpus() == 0 or not hasattr(faiss, "StandardGpuResources"):
        return None, None
    gpu_id = int(str(device).split(":", 1)[1]) if ":" in str(device) else 0
    resources = faiss.StandardGpuResources()
    return faiss.index_cpu_to_gpu(resources, gpu_id, index), resources
