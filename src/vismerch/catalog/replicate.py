"""Benchmark-sized stores without decoding: copies of ingested product rows."""

from __future__ import annotations

import math

from vismerch.catalog.store import Store


def replicate_products(store: Store, total: int) -> int:
    """Grow an ingested store to ``total`` products for benchmarks (the web app at 100,000
    products) by copying its ingested rows under new ids ``<id>~<n>`` with ``#n`` added to
    the title. Copies share the original's image hash, so thumbnails, colours and quality
    flags are shared too and nothing is decoded. Returns the number of rows added."""
    have = store.db.execute("SELECT COUNT(*) FROM products WHERE status = 'ok'").fetchone()[0]
    need = int(total) - int(store.db.execute("SELECT COUNT(*) FROM products").fetchone()[0])
    if have == 0 or need <= 0:
        return 0
    copies = math.ceil(need / have)
    with store.transaction() as con:
        con.execute(
            """WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?)
               INSERT INTO products (id, image_path, sha256, status, title, description, category,
                   brand, price, stock, sales, created_at, attributes, file_size, file_mtime, updated_run)
               SELECT p.id || '~' || n.k, p.image_path, p.sha256, p.status,
                   COALESCE(p.title, p.id) || ' #' || n.k, p.description, p.category, p.brand, p.price,
                   p.stock, p.sales, p.created_at, p.attributes, p.file_size, p.file_mtime, p.updated_run
               FROM n CROSS JOIN (SELECT * FROM products WHERE status = 'ok' ORDER BY id) p
               LIMIT ?""", (copies, need))
    return need
