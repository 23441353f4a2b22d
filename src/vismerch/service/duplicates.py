"""Near-duplicate groups and the review decisions on them (keep one / not duplicates),
which persist and survive every re-derive (``dupes.reviews``)."""

from __future__ import annotations

from vismerch.dupes import reviews
from vismerch.errors import InvalidInput, NotFound
from vismerch.service._util import check_choice
from vismerch.service.models import DupGroup, DupReview
from vismerch.service.workspace import Workspace

STATUSES = ("all", "pending", "reviewed")


def _group(raw: dict, review: dict | None) -> DupGroup:
    return DupGroup(group=raw["group"], representative=raw["representative"], members=raw["members"],
                    status="reviewed" if review and review["complete"] else "pending",
                    review=DupReview(**review) if review else None)


def list_groups(ws: Workspace, status: str = "all") -> list[DupGroup]:
    """Duplicate groups with their representative and review state."""
    check_choice(status, STATUSES, "status")
    decided = reviews.group_reviews(ws.store)
    groups = [_group(g, decided.get(g["group"])) for g in ws.store.dup_groups()]
    return [g for g in groups if status == "all" or g.status == status]


def get_group(ws: Workspace, group_id: int) -> DupGroup:
    for g in ws.store.dup_groups():
        if g["group"] == group_id:
            return _group(g, reviews.group_reviews(ws.store).get(group_id))
    raise NotFound("duplicate group", group_id, hint="list them with: vismerch dupes STORE")


def review_group(ws: Workspace, group_id: int, decision: str, *, keep: str | None = None,
                 by: str | None = None) -> DupGroup | None:
    """``keep``: they are duplicates and ``keep`` (default: the current representative) is
    the one grids show. ``distinct``: not duplicates; the group is dissolved (returns None)
    and stays dissolved after re-derives while no new member joins it."""
    check_choice(decision, reviews.DUP_DECISIONS, "decision")
    group = get_group(ws, group_id)
    if decision == "keep":
        keep = keep or group.representative
        if keep not in group.members:
            raise InvalidInput("keep", f"{keep!r} is not a member of duplicate group {group_id}",
                               hint="members: " + ", ".join(group.members))
    elif keep is not None:
        raise InvalidInput("keep", "keep goes with decision=keep, not distinct")
    reviews.record(ws.store, group.members, decision, keep, by)
    if decision == "distinct":
        return None
    return get_group(ws, group_id)
