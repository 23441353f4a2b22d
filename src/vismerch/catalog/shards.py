"""Parquet feature shards: written to a temp name and renamed, so a shard file either
exists whole or not at all. A shard counts only once ``store.sqlite`` names it."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger("vismerch.shards")


def _to_arrow(array: np.ndarray) -> pa.Array:
    """N-D numpy -> nested fixed-size lists (first axis = rows)."""
    flat = pa.array(np.ascontiguousarray(array).reshape(-1))
    for size in reversed(array.shape[1:]):
        flat = pa.FixedSizeListArray.from_arrays(flat, size)
    return flat


def shard_columns(sha256: list[str], vectors: np.ndarray, columns: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    """What ``read_shard`` returns for the shard ``write_shard`` writes from the same
    arguments (vectors stored as float16), without the file."""
    out = {"sha256": np.array(sha256, dtype=object), "vector": vectors.astype(np.float16)}
    out.update((key, np.asarray(array)) for key, array in sorted(columns.items()))
    return out


def write_shard(
    store_path: Path,
    backend: str,
    name: str,
    sha256: list[str],
    vectors: np.ndarray,
    columns: dict[str, np.ndarray],
    sync: bool = True,
) -> str:
    """Write one shard atomically; return its path relative to the store. ``sync=False``
    leaves the fsync to whoever commits it (``sync_file``; the ingest driver does, so
    that a worker never waits on the disk)."""
    rel = Path("features") / backend / f"{name}.parquet"
    final = store_path / rel
    final.parent.mkdir(parents=True, exist_ok=True)
    data = {"sha256": pa.array(sha256, pa.string()), "vector": _to_arrow(vectors.astype(np.float16))}
    for key, array in sorted(columns.items()):
        data[key] = _to_arrow(np.asarray(array))
    table = pa.table(data)
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    if sync:  # the bytes reach the disk before the name does
        sync_file(tmp)
    os.replace(tmp, final)
    return rel.as_posix()


def sync_file(path: Path) -> None:
    """fsync a file's bytes to the disk (a read-only descriptor is enough on POSIX)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Columns older shards hold that nothing reads: ``structure`` (1 KiB per image: the 32x32
# luma of the duplicate rules before the box signatures, dupes/). Shards written since lack it.
RETIRED_COLUMNS = frozenset({"structure"})


def read_shard(path: Path, columns: list[str] | None = None, threads: bool = True
               ) -> dict[str, np.ndarray]:
    """A shard's columns as numpy arrays; fixed-size list columns become 2-D/3-D arrays.
    One file through ``ParquetFile``: ``pq.read_table`` goes through the dataset API, whose
    import alone costs ~0.1 s in every process that reads a shard."""
    with pq.ParquetFile(path) as parquet:
        if columns is None:  # columns no code reads any more stay on disk, unread
            columns = [c for c in parquet.schema_arrow.names if c not in RETIRED_COLUMNS]
        table = parquet.read(columns=columns, use_threads=threads)
    out: dict[str, np.ndarray] = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        shape: list[int] = []
        while pa.types.is_fixed_size_list(column.type):
            size = column.type.list_size
            shape.append(size)
            # the child values as they lie (``flatten`` imports pyarrow.compute: ~0.1 s
            # in a process that did not need it); a sliced or nullable list still flattens
            if column.offset == 0 and column.null_count == 0:
                column = column.values.slice(0, len(column) * size)
            else:
                column = column.flatten()
        array = column.to_numpy(zero_copy_only=False)
        if shape:
            array = array.reshape((-1, *shape))
        out[name] = array
    return out


def shard_problem(path: Path, expected_rows: int | None = None) -> str | None:
    """Why a shard file cannot be used (missing, unreadable, wrong row count), or None.
    Reads only the Parquet footer."""
    try:
        rows = pq.read_metadata(path).num_rows
    except FileNotFoundError:
        return "missing"
    except (OSError, pa.ArrowException) as exc:
        return f"unreadable ({exc})"
    if expected_rows is not None and rows != expected_rows:
        return f"holds {rows} rows, not {expected_rows}"
    return None


def read_shard_or_none(path: Path, columns: list[str] | None = None, threads: bool = True
                       ) -> dict[str, np.ndarray] | None:
    """``read_shard``, or None (with a warning naming the file) when the file is missing or
    damaged: reads go on without its rows, and the next ingest re-features them."""
    try:
        return read_shard(path, columns, threads)
    except (OSError, pa.ArrowException, ValueError) as exc:
        log.warning("feature shard %s is missing or damaged (%s): its products are left out "
                    "until the next `vismerch ingest` re-features them", path, exc)
        return None


def gather_rows(store_path: Path, wanted: list[tuple[str, int]],
                preread: dict[str, dict[str, np.ndarray]] | None = None
                ) -> tuple[np.ndarray | None, dict[str, np.ndarray], list[int]]:
    """The shard rows ``wanted`` ((shard path relative to the store, row), in output order):
    the ``vector`` column (None when no shard could be read), the other columns, and the
    output positions whose shard is missing or damaged. ``preread``: shards already read, by
    path; those used are taken out."""
    by_shard: dict[str, list[int]] = {}
    for i, (path, _) in enumerate(wanted):
        by_shard.setdefault(path, []).append(i)
    vectors: np.ndarray | None = None
    columns: dict[str, np.ndarray] = {}
    lost: list[int] = []
    for shard_path, positions in by_shard.items():
        take = np.array([wanted[i][1] for i in positions])
        data = (preread or {}).pop(shard_path, None) or read_shard_or_none(store_path / shard_path)
        if data is None or any(len(a) <= int(take.max()) for a in data.values()):
            lost.extend(positions)
            continue
        for name, array in data.items():
            if name == "sha256":
                continue
            picked = array[take]
            if name == "vector":
                if vectors is None:
                    vectors = np.zeros((len(wanted),) + picked.shape[1:], np.float32)
                vectors[positions] = picked
            else:
                if name not in columns:
                    columns[name] = np.zeros((len(wanted),) + picked.shape[1:], picked.dtype)
                columns[name][positions] = picked
    return vectors, columns, lost


def drop_broken_shards(store_path: Path, con) -> list[tuple[str, str]]:
    """Inside the caller's transaction: forget every shard whose file is missing or damaged
    (its ``features`` rows and its ``shards`` row), so the next plan re-features the images
    it held. Returns ``[(path, problem)]``; the damaged files become orphans."""
    dropped = []
    for shard_id, rel, n in con.execute("SELECT id, path, n FROM shards ORDER BY id").fetchall():
        problem = shard_problem(store_path / rel, n)
        if problem is not None:
            con.execute("DELETE FROM features WHERE shard_id = ?", (shard_id,))
            con.execute("DELETE FROM shards WHERE id = ?", (shard_id,))
            dropped.append((rel, problem))
    return dropped


def record_shard(con, backend: str, fingerprint: str, spec_key: str, path: str, sha256: list[str],
                 run_id: int | None = None) -> int:
    """Inside the caller's transaction: the shard row, and a ``features`` row pointing every
    image hash at its row in the shard. Returns the shard id."""
    shard_id = con.execute(
        "INSERT INTO shards (backend, fingerprint, spec_key, path, n, run_id) VALUES (?,?,?,?,?,?)",
        (backend, fingerprint, spec_key, path, len(sha256), run_id),
    ).lastrowid
    con.executemany(
        "INSERT OR REPLACE INTO features (backend, fingerprint, sha256, shard_id, row) VALUES (?,?,?,?,?)",
        [(backend, fingerprint, sha, shard_id, row) for row, sha in enumerate(sha256)],
    )
    return shard_id


def remove_orphans(store_path: Path, known: set[str]) -> int:
    """Delete shard files (and temp files) that no committed row names: leftovers of a
    run killed between rename and commit. Returns how many were removed."""
    removed = 0
    root = store_path / "features"
    if not root.exists():
        return 0
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(store_path).as_posix()
        if path.name.endswith(".tmp") or (path.suffix == ".parquet" and rel not in known):
            path.unlink(missing_ok=True)
            removed += 1
    return removed
