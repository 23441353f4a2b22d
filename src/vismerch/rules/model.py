"""A merchandising rule as the code holds it, its validation and its dates.

A rule is scoped to one collection or global (``collection`` None). ``reach`` says how far a
scoped rule goes: ``collection`` (that page only) or ``subtree`` (every sub-collection below
it too). Optional ``starts_at`` / ``ends_at`` (RFC 3339 UTC, the end exclusive) schedule it.
What each kind needs and does is in ``rules.kinds``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from vismerch.errors import InvalidInput, UsageError
from vismerch.merch.expr import parse
from vismerch.rules.kinds import get_kind

REACHES = ("collection", "subtree")


@dataclass
class Rule:
    id: int
    kind: str
    collection: str | None = None  # its collection; None = global
    where: str | None = None  # boost, bury, hide: the products this expression matches
    product: str | None = None  # pin: the product's id
    position: int | None = None  # 1-based
    factor: float = 0.0
    oos_policy: str = "release"
    enabled: bool = True
    note: str | None = None
    created_at: str | None = None
    starts_at: str | None = None  # RFC 3339 UTC; the rule applies from then (None: always)
    ends_at: str | None = None  # ... until then, exclusive (None: never ends)
    reach: str = "collection"  # collection: that collection only; subtree: its sub-collections too

    def active(self, at: str) -> bool:
        """Enabled and inside its dates at ``at`` (an RFC 3339 UTC stamp, compared as text)."""
        return self.enabled and (self.starts_at is None or self.starts_at <= at) and \
            (self.ends_at is None or at < self.ends_at)

    @property
    def dated(self) -> bool:
        return self.starts_at is not None or self.ends_at is not None

    def describe(self) -> str:
        scope = (f" in {self.collection}" + (" and its sub-collections" if self.reach == "subtree" else "")
                 if self.collection else " (global)")
        if self.id <= 0:
            return f"{get_kind(self.kind).what(self)}{scope} (setting rules_bury_out_of_stock)"
        return f"rule #{self.id}: {get_kind(self.kind).what(self)}{scope}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate(rule: Rule) -> None:
    """Raise InvalidInput (naming the field, as the HTTP API calls it) for a rule that
    cannot work: bad kind, reach, dates, factor, expression..."""
    kind = get_kind(rule.kind)
    if rule.reach not in REACHES:
        raise InvalidInput("reach", f"unknown rule reach {rule.reach!r}",
                           hint="choose one of: " + ", ".join(REACHES))
    if rule.reach == "subtree" and not rule.collection:
        raise InvalidInput("reach", "reach subtree needs a collection scope",
                           hint="--collection NAME")
    if rule.starts_at and rule.ends_at and rule.ends_at <= rule.starts_at:
        raise InvalidInput("ends_at", f"the rule ends ({rule.ends_at}) before it starts "
                           f"({rule.starts_at})", hint="the end is exclusive and must be later")
    kind.validate(rule)
    if kind.target == "condition" and kind.fixed_condition is None:
        parse_where(rule.where or "")


def parse_where(condition: str, fields: set[str] | None = None,
                samples: Sequence[Mapping[str, Any]] = ()) -> Any:
    """The parsed expression; a syntax error (with its caret), an unknown field, or an
    evaluation that fails on a sample record, as InvalidInput naming ``where``."""
    try:
        expr = parse(condition)
        if fields is not None:
            expr.check_fields(fields)
        for record in samples:
            expr.probe(record)
        return expr
    except InvalidInput:
        raise
    except UsageError as exc:
        raise InvalidInput("where", exc.message, exc.hint) from None


def parse_stamp(value: str | None, field: str = "date") -> str | None:
    """A date (``2026-12-24``) or RFC 3339 time -> the store's UTC stamp; None stays None.
    A time without an offset is taken as UTC."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(field, f"bad date {str(value)[:40]!r}",
                           hint="use 2026-12-24 or 2026-12-24T08:00:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def applies_to(rule: Rule, collection: str | None, lineage: Sequence[str] = ()) -> bool:
    """Does ``rule`` reach ``collection``, whose parents are ``lineage`` (nearest first)?
    Global rules reach every collection; a ``collection`` rule its own scope only; a
    ``subtree`` rule its scope and every sub-collection below it."""
    return rule.collection is None or rule.collection == collection or (
        rule.reach == "subtree" and rule.collection in lineage)
