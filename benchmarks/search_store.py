"""A store of N synthetic products for the search benchmark (benchmarks/serve.py --mode search).

No images and no feature shards: products are rows, and the indexes a server reads are
built straight from numpy vectors with the index code and settings ingest uses: the colour
similarity index (374-d, clustered) and the search bundle (palettes of 1 to 3 colours around
the retail swatches of ``data/colours.csv``, a dominant one covering 50-95 %, title vectors
384-d clustered by colour and category). One ``shards`` row per backend names what the
indexes were made from, so the server finds them current. A million products take a few
minutes on two cores, most of it the two IVF indexes.

    PYTHONPATH=src .venv/bin/python benchmarks/search_store.py STORE N
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

CATEGORIES = ("tops", "dresses", "shoes", "bags", "hats", "coats", "skirts", "scarves", "belts", "socks")


def swatches() -> tuple[list[str], np.ndarray]:
    """(names, Lab) of the retail colour table's swatches."""
    from vismerch.features.colour import load_colour_table

    table = load_colour_table()
    names = list(table.names)
    return names, np.asarray(table.lab[: len(names)], np.float32)


def palettes(rng: np.random.Generator, n: int, lab: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dominant swatch, (n, 5, 3) Lab palettes with NaN padding, (n, 5) weights)."""
    popularity = 1.0 / np.arange(1, len(lab) + 1) ** 0.8  # a few colours are most of a catalog
    popularity /= popularity.sum()
    family = rng.choice(len(lab), size=(n, 3), p=popularity)
    colours = lab[family] + rng.normal(0, 4, (n, 3, 3)).astype(np.float32)
    count = rng.integers(1, 4, n)
    dominant = rng.uniform(0.5, 0.95, n)
    weight = np.zeros((n, 5), np.float32)
    weight[:, 0] = np.where(count == 1, 1.0, dominant)
    rest = 1.0 - weight[:, 0]
    weight[:, 1] = np.where(count == 2, rest, np.where(count == 3, rest * 0.6, 0.0))
    weight[:, 2] = np.where(count == 3, rest * 0.4, 0.0)
    out = np.full((n, 5, 3), np.nan, np.float32)
    out[:, :3] = colours
    out[weight == 0] = np.nan
    return family[:, 0], out, weight


def clustered(rng: np.random.Generator, labels: np.ndarray, centres: np.ndarray, spread: float) -> np.ndarray:
    x = centres[labels] + spread * rng.standard_normal((len(labels), centres.shape[1]), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def build(store_path: Path, n: int, seed: int = 0) -> dict:
    """Write the store's products, then its similarity index and search bundle built from
    the numpy vectors with the settings in effect; timings in seconds."""
    import gc

    from vismerch.catalog.store import Store
    from vismerch.config import load_settings
    from vismerch.features.base import create_backend, fingerprint_key
    from vismerch.features.text import TextBackend
    from vismerch.indexes import catalog
    from vismerch.indexes.palette import PaletteIndex
    from vismerch.indexes.stored import build_index

    rng = np.random.default_rng(seed)
    names, lab = swatches()
    settings = load_settings()
    colour_fp = fingerprint_key(create_backend("colour").fingerprint)
    text_fp = fingerprint_key(TextBackend().fingerprint)
    timings: dict[str, float | str] = {}
    t = time.perf_counter()
    main, pal, weight = palettes(rng, n, lab)
    category = np.arange(n) % len(CATEGORIES)
    ids = [f"p{i:07d}" for i in range(n)]
    store = Store.open(store_path, create=True)
    try:
        with store.transaction() as con:
            con.executemany(
                "INSERT INTO products (id, image_path, sha256, status, title, category, price, stock, "
                "sales, attributes) VALUES (?,?,?,?,?,?,?,?,?,?)",
                ((pid, f"/synthetic/{pid}.png", f"{i:064x}", "ok",
                  f"{names[c]} {CATEGORIES[g][:-1]} {i}", CATEGORIES[g], 10.0 + i % 190, float(i % 7),
                  float(i % 500), "{}")
                 for i, (pid, c, g) in enumerate(zip(ids, main.tolist(), category.tolist(), strict=True))))
            for backend, fp in (("colour", colour_fp), ("text", text_fp)):  # what the indexes were made from
                con.execute("INSERT INTO shards (backend, fingerprint, spec_key, path, n) VALUES (?,?,?,?,?)",
                            (backend, fp, json.dumps({"backend": backend}), f"synthetic/{backend}", n))
        timings["products_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        centres = rng.standard_normal((512, 374), dtype=np.float32)
        vectors = clustered(rng, rng.integers(0, 512, n), centres, 0.8)
        index = build_index(vectors, ids, settings, meta={"fingerprint": colour_fp})
        index.save(store.path / "index", "colour")
        del vectors, index
        gc.collect()
        timings["similarity_index_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        centres = rng.standard_normal((len(lab) * len(CATEGORIES), 384), dtype=np.float32)
        titles = build_index(clustered(rng, main * len(CATEGORIES) + category, centres, 0.6), ids, settings,
                             meta={"fingerprint": text_fp})
        timings["title_index_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        names_of = sorted(CATEGORIES)
        code = np.array([names_of.index(c) for c in CATEGORIES], np.int32)[category]
        bundle = catalog.CatalogIndex(ids, code, names_of, (np.arange(n) % 7).astype(np.float32),
                                      PaletteIndex.build(np.arange(n), pal, weight), titles, text_fp,
                                      catalog.data_key(store))
        catalog.save(bundle, store.path)
        timings["palette_index_and_save_s"] = round(time.perf_counter() - t, 1)
        timings["index_kind"] = titles.kind
    finally:
        store.close()
    return timings


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1]), int(sys.argv[2]))), flush=True)
