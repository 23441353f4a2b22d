"""Feature shards: what a worker sends back with its result is what reading the file gives."""

from __future__ import annotations

import numpy as np

from vismerch.catalog.shards import read_shard, shard_columns, write_shard


def test_shard_columns_are_what_read_shard_returns(tmp_path):
    """The driver keeps the columns a task sends back (Task.return_columns) in place of
    reading its shard: same keys, dtypes, shapes and values, vectors stored as float16."""
    rng = np.random.default_rng(3)
    n = 7
    shas = [f"{i:064x}" for i in range(n)]
    vectors = rng.random((n, 12), dtype=np.float32)
    columns = {"blur": rng.random(n, dtype=np.float32),
               "dup_sig": rng.integers(0, 256, (n, 4, 4), dtype=np.uint8),
               "dup_hash": rng.integers(0, 2**63, n, dtype=np.uint64),
               "palette_lab": rng.random((n, 5, 3), dtype=np.float32)}
    rel = write_shard(tmp_path, "colour", "part", shas, vectors, columns, sync=False)
    read, sent = read_shard(tmp_path / rel), shard_columns(shas, vectors, columns)
    assert list(sent) == list(read)
    for key in read:
        assert sent[key].dtype == read[key].dtype and sent[key].shape == read[key].shape, key
        np.testing.assert_array_equal(sent[key], read[key])
    assert list(sent["sha256"]) == shas


def test_shards_written_before_a_column_retired_read_without_it(tmp_path):
    """Older shards hold the legacy 32x32 ``structure`` signature (1 KiB per image) that no
    code reads any more: reading them skips it and keeps every other column."""
    rng = np.random.default_rng(4)
    shas = [f"{i:064x}" for i in range(3)]
    vectors = rng.random((3, 4), dtype=np.float32)
    columns = {"blur": rng.random(3, dtype=np.float32),
               "structure": rng.integers(0, 256, (3, 32, 32), dtype=np.uint8)}
    rel = write_shard(tmp_path, "colour", "old", shas, vectors, columns, sync=False)
    read = read_shard(tmp_path / rel)
    assert "structure" not in read
    np.testing.assert_array_equal(read["blur"], columns["blur"])
    assert read_shard(tmp_path / rel, ["structure"])["structure"].shape == (3, 32, 32)
