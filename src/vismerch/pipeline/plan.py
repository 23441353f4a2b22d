"""Source records -> deterministic, picklable tasks, skipping what is committed.

An image is skipped when its file is unchanged since it was hashed (same size and
mtime, so the bytes need not be read again) and its SHA-256 already has features for
every backend asked for. Everything else goes into a task; the worker re-hashes it and
encodes only what is missing for that content hash. A URL always goes into a task (the
driver makes no requests); it carries its last ``ETag``/``Last-Modified`` when its
features are complete, and the worker's conditional request skips it on 304.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from vismerch.catalog.reading import FileRefused, FolderGuard, check_image_file
from vismerch.catalog.sources import ProductRecord
from vismerch.catalog.store import Store
from vismerch.pipeline.tasks import Task, TaskItem


@dataclass
class Plan:
    tasks: list[Task]
    skipped: list[ProductRecord]
    missing: list[ProductRecord]  # files that do not exist
    # files that must not be read: links out of the folder, FIFOs and devices, too large
    refused: list[tuple[ProductRecord, FileRefused]] = field(default_factory=list)

    @property
    def n_items(self) -> int:
        return sum(len(t.items) for t in self.tasks)


def featured_shas(store: Store, spec_keys: list[str]) -> dict[str, tuple[str, ...]]:
    """sha256 -> the backend spec keys it already has committed features for."""
    out: dict[str, list[str]] = {}
    if not spec_keys:
        return {}
    marks = ",".join("?" * len(spec_keys))
    rows = store.db.execute(
        f"SELECT DISTINCT f.sha256, s.spec_key FROM features f JOIN shards s ON s.id = f.shard_id "
        f"WHERE s.spec_key IN ({marks})",
        spec_keys,
    ).fetchall()
    for sha, key in rows:
        out.setdefault(sha, []).append(key)
    return {k: tuple(v) for k, v in out.items()}


def remote_validators(store: Store) -> dict[str, tuple[str, str | None, str | None]]:
    """url -> (sha256, etag, last_modified) of its last committed download."""
    return {row[0]: tuple(row[1:]) for row in store.db.execute(
        "SELECT url, sha256, etag, last_modified FROM remote_images").fetchall()}


def _url_item(record: ProductRecord, row, validators, featured, spec_keys: list[str]) -> TaskItem:
    """A URL is always asked for (only the server knows whether it changed); the request is
    conditional when the product's last download is committed with every feature asked
    for, so an unchanged image is answered 304 and nothing is downloaded or decoded."""
    item = TaskItem(record.id, record.image_url, None, None)
    if (
        validators is not None
        and (validators[1] or validators[2])
        and row is not None
        and row["status"] == "ok"
        and row["image_path"] == record.image_url
        and row["sha256"] == validators[0]
        and set(spec_keys) <= set(featured.get(row["sha256"], ()))
    ):
        return TaskItem(record.id, record.image_url, None, None, etag=validators[1],
                        last_modified=validators[2], sha256=row["sha256"])
    return item


def task_step(n_items: int, task_size: int, workers: int = 1) -> int:
    """Images per task: at most ``task_size``; with several workers, the fewest tasks of
    that size rounded up to a multiple of ``workers`` and the images spread evenly over
    them, so that the workers finish together instead of one running the last (or a
    short last) task alone: 2,000 images on 2 workers are 8 tasks of 250, not 7 of 256
    and one of 208; 16 images are 2 tasks of 8, not 1."""
    size = max(1, task_size)
    if workers <= 1 or n_items <= 0:
        return size
    tasks = -(-n_items // size)
    tasks = -(-tasks // workers) * workers
    return max(1, -(-n_items // tasks))


def plan_tasks(
    records: list[ProductRecord], store: Store, spec_keys: list[str], task_size: int,
    root: Path | None = None, max_bytes: int | None = None, workers: int = 1,
) -> Plan:
    """``root``: the source folder (links leading out of it are refused); ``max_bytes``:
    files larger than this are refused without being read; ``workers``: how many run the
    tasks (``task_step``)."""
    featured = featured_shas(store, spec_keys)
    known = {
        row["id"]: row
        for row in store.db.execute(
            "SELECT id, image_path, sha256, status, file_size, file_mtime FROM products"
        ).fetchall()
    }
    items: list[TaskItem] = []
    skipped: list[ProductRecord] = []
    missing: list[ProductRecord] = []
    refused: list[tuple[ProductRecord, FileRefused]] = []
    hints: list[str | None] = []
    validators = remote_validators(store) if any(r.image_url for r in records) else {}
    guard = FolderGuard(root) if root is not None else None
    for record in records:
        if record.image_url is not None:
            row = known.get(record.id)
            items.append(_url_item(record, row, validators.get(record.image_url), featured, spec_keys))
            hints.append(row["sha256"] if row is not None else None)
            continue
        try:
            stat = os.stat(record.image_path)
        except OSError:
            missing.append(record)
            continue
        problem = check_image_file(record.image_path, stat, guard, max_bytes)
        if problem is not None:
            refused.append((record, problem))
            continue
        row = known.get(record.id)
        if (
            row is not None
            and row["status"] == "ok"
            and row["image_path"] == str(record.image_path)
            and row["file_size"] == stat.st_size
            and row["file_mtime"] == stat.st_mtime
            and row["sha256"]
            and set(spec_keys) <= set(featured.get(row["sha256"], ()))
        ):
            skipped.append(record)
            continue
        items.append(TaskItem(record.id, str(record.image_path), stat.st_size, stat.st_mtime))
        hints.append(row["sha256"] if row is not None else None)
    tasks = _tasks(items, hints, featured, task_step(len(items), task_size, workers))
    return Plan(tasks=tasks, skipped=skipped, missing=missing, refused=refused)


def _tasks(items: list[TaskItem], hints: list[str | None], featured: dict[str, tuple[str, ...]],
           step: int) -> list[Task]:
    """Items in tasks of ``step``. The worker learns an image's hash only after reading it:
    each task gets the features its items' previous hashes have (a touched-but-unchanged file
    then skips encoding) instead of the whole store's map."""
    tasks = []
    for i, start in enumerate(range(0, len(items), step)):
        featured_here = {
            sha: featured[sha] for sha in hints[start:start + step] if sha and sha in featured
        }
        tasks.append(Task(index=i, items=items[start:start + step], featured=featured_here))
    return tasks
