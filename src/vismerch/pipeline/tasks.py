"""Picklable descriptors that travel to workers: the ingest spec and its tasks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from vismerch.config import Settings


@dataclass(frozen=True)
class BackendSpec:
    name: str
    options: tuple[tuple[str, Any], ...] = ()
    # what the options do not say about the model: a local folder's content digest, so
    # changed weights in the same folder are re-featured
    identity: str = ""

    @property
    def key(self) -> str:
        """What was asked for (name + options): plans which images still need features."""
        data = {"backend": self.name, **dict(self.options)}
        if self.identity:
            data["identity"] = self.identity
        return json.dumps(data, sort_keys=True, default=str)

    def kwargs(self) -> dict[str, Any]:
        return dict(self.options)


@dataclass(frozen=True)
class IngestSpec:
    store_path: str
    backends: tuple[BackendSpec, ...]
    settings: Settings  # the driver's, as they are: pickled as their values, equal and hashable
    device: str
    run_id: int

    def __post_init__(self) -> None:
        if not isinstance(self.settings, Settings):  # (name, value) pairs: benchmarks run older commits
            object.__setattr__(self, "settings", Settings(dict(self.settings)))


@dataclass(frozen=True)
class TaskItem:
    product_id: str
    path: str  # an absolute path, or a URL the worker downloads
    file_size: int | None
    file_mtime: float | None
    # a URL's validators from its last download, sent so that an unchanged image is
    # answered 304 and keeps ``sha256`` (set only when that hash has every feature asked for)
    etag: str | None = None
    last_modified: str | None = None
    sha256: str | None = None


@dataclass
class Task:
    index: int
    items: list[TaskItem]
    # sha256 -> backend spec keys that already have features (encode only what is missing)
    featured: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # send the shards' columns back with the result (ShardResult.columns): the driver
    # keeps them for derive instead of reading the files it was just sent
    return_columns: bool = False

    @property
    def name(self) -> str:
        return f"task-{self.index:05d}"


@dataclass
class ItemResult:
    product_id: str
    file_size: int | None
    file_mtime: float | None
    sha256: str | None = None
    width: int | None = None
    height: int | None = None
    nbytes: int | None = None
    format: str | None = None
    reason: str | None = None  # set when refused
    detail: str | None = None
    # URLs: the validators to send next time, and whether the server said 304 Not
    # Modified (the item keeps its previous sha256 and features; nothing was downloaded)
    etag: str | None = None
    last_modified: str | None = None
    unchanged: bool = False


@dataclass
class ShardResult:
    backend: str
    spec_key: str
    fingerprint: str
    path: str
    sha256: list[str]
    # the shard's columns as read_shard would return them, when the task asked for them
    columns: dict[str, Any] | None = None


@dataclass
class TaskResult:
    index: int
    items: list[ItemResult] = field(default_factory=list)
    shards: list[ShardResult] = field(default_factory=list)
    colours: dict[str, list[tuple[str, str, float]]] = field(default_factory=dict)
    multicolour: dict[str, bool] = field(default_factory=dict)  # sha256 -> verdict
    quality: dict[str, list[tuple[str, float, bool]]] = field(default_factory=dict)
    # where each thumbnail was packed (catalog/thumbs.PackedThumb), for the driver to commit
    thumbs: list[Any] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    error: str | None = None  # a task-level failure (the driver retries or records it)
