"""A finished task into the store: one SQLite transaction per task (shard rows, features,
images, colours, quality, product rows, errors), after its shard files and thumbnail pack
are made durable; products refused before any read; a task that failed every attempt."""

from __future__ import annotations

import json
from typing import Any

from vismerch.catalog.shards import record_shard, sync_file
from vismerch.catalog.sources import ProductRecord
from vismerch.catalog.store import Store, write_descriptions
from vismerch.catalog.thumbs import record_thumbs
from vismerch.pipeline.tasks import ItemResult, Task, TaskResult

_UPSERT_PRODUCT = """INSERT INTO products (id, image_path, sha256, status, title, description,
               category, brand, price, stock, sales, created_at, attributes, file_size, file_mtime,
               updated_run)
           VALUES (:id, :image_path, :sha256, :status, :title, :description, :category, :brand,
               :price, :stock, :sales, :created_at, :attributes, :file_size, :file_mtime, :run)
           ON CONFLICT(id) DO UPDATE SET image_path=excluded.image_path, sha256=excluded.sha256,
               status=excluded.status, title=excluded.title, description=excluded.description,
               category=excluded.category, brand=excluded.brand, price=excluded.price,
               stock=excluded.stock, sales=excluded.sales, created_at=excluded.created_at,
               attributes=excluded.attributes, file_size=excluded.file_size,
               file_mtime=excluded.file_mtime, updated_run=excluded.updated_run"""


def _product_row(record: ProductRecord, run_id: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": record.id, "image_path": record.location, "title": record.title,
        "description": record.description, "category": record.category, "brand": record.brand,
        "price": record.price, "stock": record.stock, "sales": record.sales,
        "created_at": record.created_at,
        "attributes": json.dumps(record.attributes, sort_keys=True, default=str),
        "run": run_id, **fields,
    }


def _upsert_product(con, record: ProductRecord, run_id: int, **fields: Any) -> None:
    con.execute(_UPSERT_PRODUCT, _product_row(record, run_id, **fields))


_METADATA = "title, description, category, brand, price, stock, sales, created_at, attributes"


def update_metadata(con, records: list[ProductRecord]) -> None:
    """Metadata of images that were skipped may still have changed; only rows that did
    change are written (an unchanged catalog of a million products rewrites nothing)."""
    con.executemany(
        f"UPDATE products SET ({_METADATA}) = (?,?,?,?,?,?,?,?,?) "
        f"WHERE id = ? AND ({_METADATA}) IS NOT (?,?,?,?,?,?,?,?,?)",
        [(*values, record.id, *values) for record in records
         for values in [(record.title, record.description, record.category, record.brand,
                         record.price, record.stock, record.sales, record.created_at,
                         json.dumps(record.attributes, sort_keys=True, default=str))]],
    )


def commit_task(store: Store, result: TaskResult, records: dict[str, ProductRecord], run_id: int) -> None:
    """One task in one transaction, a few statements per table (executemany), not per image."""
    images, cleared, errors, products, validators = [], [], [], [], []
    for item in result.items:
        record = records[item.product_id]
        if record.image_url is not None and item.sha256 and item.reason is None:
            validators.append((record.image_url, item))
        if item.unchanged:  # 304: the image row and features from its last download hold
            cleared.append((item.product_id,))
            products.append(_product_row(record, run_id, sha256=item.sha256, status="ok",
                                         file_size=None, file_mtime=None))
        elif item.reason is None:
            images.append((item.sha256, item.width, item.height, item.nbytes, item.format))
            cleared.append((item.product_id,))
            products.append(_product_row(record, run_id, sha256=item.sha256, status="ok",
                                         file_size=item.file_size, file_mtime=item.file_mtime))
        else:
            errors.append((item.product_id, record.location, item.sha256, item.reason,
                           item.detail, run_id))
            products.append(_product_row(record, run_id, sha256=item.sha256, status="failed",
                                         file_size=item.file_size, file_mtime=item.file_mtime))
    # the worker wrote its shards and thumbnail pack without waiting on the disk: their
    # bytes are made durable here, before the transaction that names them
    for rel in [shard.path for shard in result.shards] + sorted({t.pack for t in result.thumbs}):
        sync_file(store.path / rel)
    with store.transaction() as con:
        for shard in result.shards:
            record_shard(con, shard.backend, shard.fingerprint, shard.spec_key, shard.path,
                         shard.sha256, run_id)
        write_descriptions(con, [(sha, colours, result.quality.get(sha, []),
                                  result.multicolour.get(sha, False))
                                 for sha, colours in result.colours.items()])
        record_thumbs(con, result.thumbs)
        for url, item in validators:
            _record_validators(con, url, item, run_id)
        con.executemany("INSERT OR REPLACE INTO images (sha256, width, height, bytes, format) "
                        "VALUES (?,?,?,?,?)", images)
        con.executemany("DELETE FROM errors WHERE product_id = ?", cleared)
        con.executemany("INSERT OR REPLACE INTO errors (product_id, image_path, sha256, reason, "
                        "detail, run_id) VALUES (?,?,?,?,?,?)", errors)
        con.executemany(_UPSERT_PRODUCT, products)


def _record_validators(con, url: str, item: ItemResult, run_id: int) -> None:
    """Keep what the server said identifies this version (or forget stale validators), in
    the task's transaction: a killed run never keeps validators for uncommitted work."""
    if item.etag or item.last_modified:
        con.execute(
            "INSERT OR REPLACE INTO remote_images (url, sha256, etag, last_modified, run_id) "
            "VALUES (?,?,?,?,?)", (url, item.sha256, item.etag, item.last_modified, run_id))
    else:
        con.execute("DELETE FROM remote_images WHERE url = ?", (url,))


def record_unread(store: Store, missing: list[tuple[ProductRecord, str, str]], run_id: int) -> None:
    """Products refused before any read: (record, reason, detail)."""
    with store.transaction() as con:
        for record, reason, detail in missing:
            con.execute(
                "INSERT OR REPLACE INTO errors (product_id, image_path, sha256, reason, detail, run_id) "
                "VALUES (?,?,NULL,?,?,?)",
                (record.id, record.location, reason, detail, run_id),
            )
            _upsert_product(con, record, run_id, sha256=None, status="failed",
                            file_size=None, file_mtime=None)


def failed_task_result(task: Task, error: str) -> TaskResult:
    first_line = error.splitlines()[0] if error else "unknown error"
    return TaskResult(
        index=task.index,
        items=[
            ItemResult(i.product_id, i.file_size, i.file_mtime, reason="worker-error", detail=first_line)
            for i in task.items
        ],
    )
