"""The change history in words: who changed what, when, read from the audit log of writes.

Each kind of write is a registered ``Describer`` (its method and path pattern, and how it
reads the audited request body), so "POST /api/v1/rules {kind: pin, ...}" reads "Pinned
Blue dress (p17) at position 3 in dresses". Only writes that succeeded are told; key
management shows to admins only.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from vismerch.catalog import access, browse
from vismerch.errors import NotFound
from vismerch.service.workspace import Workspace

API = "/api/v1"
SCAN_BATCH = 500
SCAN_MAX = 20_000  # audit rows read at most for one page of a filtered history


class Change(BaseModel):
    id: int = Field(description="The audit row; pass as `before` for older changes")
    at: str
    who: str = Field(description="The key's name and id")
    key_id: str
    role: str | None
    kind: str = Field(description="rule, version, publish, collection, review, queue, experiment, job, key "
                                  "or other (a write without its own wording)")
    collection: str | None
    text: str = Field(description="What was done, in words")


class ChangePage(BaseModel):
    items: list[Change]
    next_before: int | None = Field(None, description="Pass as `before` for the next (older) page")


class Describer(ABC):
    """One kind of write: ``method`` and ``pattern`` (a regex over the path after /api/v1)
    pick it; ``describe`` gives (text, collection)."""

    registry: ClassVar[list[type[Describer]]] = []
    method: ClassVar[str]
    pattern: ClassVar[str]
    kind: ClassVar[str]
    admin_only: ClassVar[bool] = False

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.regex = re.compile(cls.pattern + r"\Z")
        Describer.registry.append(cls)

    def __init__(self, names: _Names):
        self.names = names

    @abstractmethod
    def describe(self, path: dict[str, str], body: dict[str, Any]) -> tuple[str, str | None]:
        """(what was done, in words; the collection it changed, or None)."""


class _Names:
    """Product titles and rule scopes, looked up once per page of history."""

    def __init__(self, ws: Workspace, product_ids: set[str]):
        self.ws = ws
        self.titles = browse.titles(ws.store, sorted(product_ids))

    def product(self, pid: Any) -> str:
        title = self.titles.get(str(pid))
        return f"{title} ({pid})" if title and title != pid else str(pid)

    def rule_collection(self, rule_id: str) -> str | None:
        from vismerch.service import rules

        try:
            return rules.get_rule(self.ws, int(rule_id)).collection
        except (NotFound, ValueError):
            return None  # deleted since


def _where(collection: str | None) -> str:
    return f" in {collection}" if collection else " in every collection"


def _dates(body: dict[str, Any]) -> str:
    start, end = body.get("starts_at"), body.get("ends_at")
    if not (start or end):
        return ""
    return f", from {start or 'now'}" + (f" until {end}" if end else "")


class AddRule(Describer):
    method, pattern, kind = "POST", r"/rules", "rule"

    def describe(self, path, body):
        kind, coll = body.get("kind"), body.get("collection")
        if kind == "pin":
            text = f"Pinned {self.names.product(body.get('product'))} at position {body.get('position')}"
        elif kind == "hide":
            text = f"Hid products where {body.get('where')}"
        elif kind in ("boost", "bury"):
            strength = f" (strength {body['factor']:g})" if body.get("factor") is not None else ""
            verb = "Boosted" if kind == "boost" else "Buried"
            text = f"{verb} products where {body.get('where')}{strength}"
        else:
            text = f"Added a {kind} rule"
        return text + _where(coll) + _dates(body), coll


class ChangeRule(Describer):
    method, pattern, kind = "PATCH", r"/rules/(?P<rule>\d+)", "rule"

    def describe(self, path, body):
        coll = self.names.rule_collection(path["rule"])
        if set(body) == {"enabled"}:
            return f"{'Enabled' if body['enabled'] else 'Disabled'} rule #{path['rule']}", coll
        fields = ", ".join(f"{k} to {v if v is not None else 'none'}" for k, v in sorted(body.items()))
        return f"Changed rule #{path['rule']}: {fields}", coll


class RemoveRule(Describer):
    method, pattern, kind = "DELETE", r"/rules/(?P<rule>\d+)", "rule"

    def describe(self, path, body):
        return f"Removed rule #{path['rule']}", None


class SaveDraft(Describer):
    method, pattern, kind = "POST", r"/collections/(?P<c>[^/]+)/versions", "version"

    def describe(self, path, body):
        return f"Saved draft {body.get('name', '')} of {path['c']}".replace("  ", " "), path["c"]


class EditDraft(Describer):
    method, pattern, kind = "PUT", r"/collections/(?P<c>[^/]+)/versions/(?P<v>[^/]+)", "version"

    def describe(self, path, body):
        n = len(body.get("ids") or [])
        return f"Reordered draft {path['v']} of {path['c']} ({n} products)", path["c"]


class Publish(Describer):
    method, pattern, kind = "POST", r"/collections/(?P<c>[^/]+)/publish", "publish"

    def describe(self, path, body):
        return f"Published {body.get('version')} of {path['c']}: shoppers see it now", path["c"]


class Rollback(Describer):
    method, pattern, kind = "POST", r"/collections/(?P<c>[^/]+)/rollback", "publish"

    def describe(self, path, body):
        return f"Rolled back {path['c']} to the version published before", path["c"]


class AddCollection(Describer):
    method, pattern, kind = "POST", r"/collections", "collection"

    def describe(self, path, body):
        name = body.get("id") or body.get("name")
        return f"Created collection {name}", name


class DeleteCollection(Describer):
    method, pattern, kind = "DELETE", r"/collections/(?P<c>[^/]+)", "collection"

    def describe(self, path, body):
        return f"Deleted collection {path['c']}", path["c"]


class ReviewDuplicates(Describer):
    method, pattern, kind = "POST", r"/duplicates/(?P<g>\d+)/review", "review"

    def describe(self, path, body):
        if body.get("decision") == "distinct":
            return f"Marked duplicate group {path['g']} as not duplicates", None
        keep = f"{self.names.product(body['keep'])}" if body.get("keep") else "the representative"
        return f"Kept {keep} of duplicate group {path['g']}; its copies leave the grids", None


class QueueDecision(Describer):
    method, pattern, kind = "POST", r"/queues/(?P<q>[^/]+)/decisions", "queue"

    def describe(self, path, body):
        items = body.get("items") or []
        verb = "Accepted" if body.get("decision") == "resolved" else "Ignored"
        what = ", ".join(f"{it.get('item')} of {self.names.product(it.get('product_id'))}"
                         for it in items[:3])
        more = f" and {len(items) - 3} more" if len(items) > 3 else ""
        return f"{verb} in the {path['q']} queue: {what}{more}", None


class StartExperiment(Describer):
    method, pattern, kind = "POST", r"/experiments", "experiment"

    def describe(self, path, body):
        coll = body.get("collection")
        return f"Started an experiment on {coll}: {' vs '.join(body.get('variants') or [])}", coll


class EndExperiment(Describer):
    method, pattern, kind = "POST", r"/experiments/(?P<x>\d+)/(?P<verb>stop|promote)", "experiment"

    def describe(self, path, body):
        if path["verb"] == "stop":
            return f"Stopped experiment {path['x']}", None
        return f"Published the {body.get('variant') or 'winning'} variant of experiment {path['x']}", None


class StartJob(Describer):
    method, pattern, kind = "POST", r"/jobs", "job"

    def describe(self, path, body):
        return f"Started an ingest job from {body.get('source')}", None


class MakeKey(Describer):
    method, pattern, kind, admin_only = "POST", r"/keys", "key", True

    def describe(self, path, body):
        return f"Made a {body.get('role')} key {body.get('name') or ''}".rstrip(), None


class RevokeKey(Describer):
    method, pattern, kind, admin_only = "DELETE", r"/keys/(?P<k>[^/]+)", "key", True

    def describe(self, path, body):
        return f"Revoked key {path['k']}", None


class AnyOtherWrite(Describer):
    """A write no describer above knows (a route added later): told plainly, never dropped.
    Registered last, so every specific describer is tried first."""

    method, pattern, kind = "*", r"(?P<path>/.*)", "other"
    VERBS: ClassVar[dict[str, str]] = {"POST": "Made a change at", "PUT": "Replaced", "PATCH": "Changed",
                                       "DELETE": "Deleted"}

    def describe(self, path, body):
        inside = re.match(r"/collections/([^/]+)", path["path"])
        coll = body.get("collection") or (inside.group(1) if inside else None)
        return f"{self.VERBS.get(path['_method'], path['_method'])} {API}{path['path']}", coll


def _match(method: str, path: str) -> tuple[type[Describer], dict[str, str]] | None:
    for cls in Describer.registry:
        if cls.method in (method, "*") and (m := cls.regex.match(path)):
            return cls, {**m.groupdict(), "_method": method}
    return None


def _parsed(row: dict[str, Any]) -> tuple[type[Describer], dict[str, str], dict[str, Any]] | None:
    method, _, path = row["action"].partition(" ")
    if not path.startswith(API + "/"):
        return None  # the web app's sign-in and other non-API writes
    found = _match(method, path[len(API):])
    if found is None:
        return None
    body = (row.get("detail") or {}).get("body")
    return found[0], found[1], body if isinstance(body, dict) else {}


def _product_ids(body: dict[str, Any]) -> set[str]:
    ids = {body[k] for k in ("product", "keep") if isinstance(body.get(k), str)}
    ids |= {it.get("product_id") for it in body.get("items") or [] if isinstance(it, dict)} - {None}
    return ids


def history(ws: Workspace, *, collection: str | None = None, before: int | None = None,
            limit: int = 50, admin: bool = False) -> ChangePage:
    """Changes newest first (older ones: ``before`` = the last id given); ``collection``
    keeps the changes to that collection only."""
    from urllib.parse import unquote

    keys = access.key_names(ws.store)
    items: list[Change] = []
    scanned, cursor, exhausted = 0, before, False
    while len(items) < limit and scanned < SCAN_MAX:
        rows = access.audit_done_newest(ws.store, before=cursor, limit=SCAN_BATCH)
        scanned += len(rows)
        if not rows:
            exhausted = True
            break
        parsed = [(row, _parsed(row)) for row in rows]
        names = _Names(ws, set().union(*(_product_ids(p[2]) for _, p in parsed if p)))
        for row, p in parsed:
            cursor = row["id"]
            if p is None or (p[0].admin_only and not admin):
                continue
            text, coll = p[0](names).describe({k: unquote(v or "") for k, v in p[1].items()}, p[2])
            if collection is not None and coll != collection:
                continue
            name = keys.get(row["actor"])
            items.append(Change(id=row["id"], at=row["at"], key_id=row["actor"], role=row["role"],
                                who=f"{name} ({row['actor']})" if name else row["actor"],
                                kind=p[0].kind, collection=coll, text=text))
            if len(items) == limit:
                break
    more = not exhausted and (len(items) == limit or scanned >= SCAN_MAX)
    return ChangePage(items=items, next_before=cursor if more and cursor is not None else None)
