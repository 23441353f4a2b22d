"""The image-quality queue (raised flags) and the catalog-audit queue (listed colour vs
image), each item resolvable or ignorable; decisions persist until the image changes."""

from __future__ import annotations

from vismerch.catalog import reviews
from vismerch.errors import NotFound
from vismerch.service._util import check_choice, require_product
from vismerch.service.models import QualityMetric, QueueItem
from vismerch.service.workspace import Workspace

QUEUES = ("quality", "audit")
STATUSES = ("open", "resolved", "ignored", "all")


def quality_metrics(ws: Workspace, *, all_metrics: bool = False) -> dict[str, list[QualityMetric]]:
    """Product id -> its raised flags (or, with ``all_metrics``, every measured metric)."""
    raw = ws.store.quality(flagged_only=not all_metrics)
    return {pid: [QualityMetric(**{"flagged": True, **m}) for m in ms] for pid, ms in raw.items()}


def audit_rows(ws: Workspace) -> list[dict]:
    """Listed colours that disagree with the image: ``[{id, kind, listed, observed, distance}]``."""
    return ws.store.audit()


def queue(ws: Workspace, name: str, status: str = "open") -> list[QueueItem]:
    """The items of queue ``quality`` or ``audit`` in ``status`` (open, resolved, ignored, all)."""
    check_choice(name, QUEUES, "queue")
    check_choice(status, STATUSES, "status")
    decided = reviews.queue_decisions(ws.store, name)
    items = []
    if name == "quality":
        for pid, flags in ws.store.quality(flagged_only=True).items():
            for f in flags:
                items.append(QueueItem(queue="quality", product_id=pid, item=f["name"], value=f["value"],
                                       status="open"))
    else:
        for row in ws.store.audit():
            items.append(QueueItem(queue="audit", product_id=row["id"], item=row["kind"],
                                   value=round(float(row["distance"]), 4), listed=row["listed"],
                                   observed=row["observed"], status="open"))
    for item in items:
        d = decided.get((item.product_id, item.item))
        if d:
            item.status, item.note, item.by, item.at = d["decision"], d["note"], d["by"], d["at"]
    return [i for i in items if status == "all" or i.status == status]


def decide(ws: Workspace, name: str, product_id: str, item: str, decision: str | None, *,
           note: str | None = None, by: str | None = None) -> QueueItem:
    """Mark one queue item ``resolved`` or ``ignored`` (``None`` reopens it)."""
    check_choice(name, QUEUES, "queue")
    if decision is not None:
        check_choice(decision, reviews.QUEUE_DECISIONS, "decision")
    require_product(ws.store, product_id)
    current = {(i.product_id, i.item): i for i in queue(ws, name, "all") if i.product_id == product_id}
    if (product_id, item) not in current:
        raise NotFound(f"{name} item", f"{product_id}/{item}",
                       f"product {product_id!r} has no {name} item {item!r}",
                       hint="its items: " + (", ".join(i for _, i in current) or "none"))
    reviews.set_queue_decision(ws.store, name, product_id, item, decision, note, by)
    return next(i for i in queue(ws, name, "all") if (i.product_id, i.item) == (product_id, item))
