"""Builders shared by the merchandising tests: tiny stores written straight through SQL
(no images, no ingest) and synthetic look-alike catalogs for the pure arrangement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from vismerch.catalog.shards import write_shard
from vismerch.catalog.store import Store

FIELDS = ("title", "description", "category", "brand", "price", "stock", "sales", "created_at")


def build_store(path: Path, products: list[dict[str, Any]], *,
                vectors: dict[str, np.ndarray] | None = None,
                colours: dict[str, str] | None = None,
                flags: dict[str, list[str]] | None = None,
                dups: list[tuple[int, list[str], str]] | None = None,
                refresh: bool = True) -> Store:
    """A store holding ``products`` (dicts with id + product fields; other keys become
    attributes), optional colour-backend vectors, dominant colours, quality flags and
    duplicate groups ``(group, members, representative)``."""
    store = Store.open(path, create=True)
    with store.transaction() as con:
        for p in products:
            attrs = {k: v for k, v in p.items() if k not in FIELDS and k != "id"}
            con.execute(
                "INSERT INTO products (id, image_path, sha256, status, title, description, category,"
                " brand, price, stock, sales, created_at, attributes) VALUES "
                "(?, ?, ?, 'ok', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (p["id"], f"/nowhere/{p['id']}.jpg", f"sha-{p['id']}",
                 *[p.get(k) for k in FIELDS], json.dumps(attrs)))
            con.execute("INSERT INTO images (sha256, width, height, bytes, format) VALUES "
                        "(?, 800, 800, 1000, 'jpeg')", (f"sha-{p['id']}",))
        for pid, name in (colours or {}).items():
            con.execute("INSERT INTO colours (sha256, rank, name, hex, weight) VALUES "
                        "(?, 0, ?, '#000000', 0.9)", (f"sha-{pid}", name))
        for pid, names in (flags or {}).items():
            for name in names:
                con.execute("INSERT INTO quality (sha256, name, value, flagged) VALUES "
                            "(?, ?, 1.0, 1)", (f"sha-{pid}", name))
        for group, members, rep in dups or []:
            for m in members:
                con.execute("INSERT INTO dup_groups (group_id, product_id, representative) "
                            "VALUES (?, ?, ?)", (group, m, int(m == rep)))
    if vectors:
        ids = sorted(vectors)
        shas = [f"sha-{i}" for i in ids]
        mat = np.stack([vectors[i] for i in ids]).astype(np.float32)
        rel = write_shard(store.path, "colour", "part-0", shas, mat, {})
        with store.transaction() as con:
            shard = con.execute(
                "INSERT INTO shards (backend, fingerprint, spec_key, path, n, run_id) VALUES "
                "('colour', 'test-fp', 'colour', ?, ?, NULL)", (rel, len(ids))).lastrowid
            con.executemany(
                "INSERT INTO features (backend, fingerprint, sha256, shard_id, row) VALUES "
                "('colour', 'test-fp', ?, ?, ?)", [(s, shard, k) for k, s in enumerate(shas)])
    if refresh:
        from vismerch.merch.collections import refresh_collections

        refresh_collections(store)
    return store


def unit(rng: np.random.Generator, dim: int) -> np.ndarray:
    v = rng.standard_normal(dim)
    return v / np.linalg.norm(v)


def lookalike_catalog(n_styles: int = 30, per_style: int = 4, dim: int = 32, seed: int = 0,
                      tight: float = 0.15) -> dict[str, Any]:
    """Styles of look-alikes (pairwise cosine ~0.97) whose members sell alike, so the
    plain score order puts look-alikes side by side."""
    rng = np.random.default_rng(seed)
    ids, scores, vecs, fams = [], [], [], []
    families = ["red", "blue", "green", "neutral", "yellow", "pink"]
    for s in range(n_styles):
        centre = unit(rng, dim)
        base = rng.uniform(0.2, 1.0)
        for m in range(per_style):
            v = centre + tight * rng.standard_normal(dim) / np.sqrt(dim)
            ids.append(f"S{s:03d}-{m}")
            scores.append(base + rng.normal(0, 0.01))
            vecs.append(v / np.linalg.norm(v))
            fams.append(families[(s + m) % len(families)])
    return {"ids": ids, "scores": np.array(scores), "vectors": np.array(vecs, np.float32),
            "colour_family": fams}
