"""Rule kinds: one registered class per kind, the single place that says what a kind needs,
how it is described and what it does to a page.

The API's ``Literal`` of kinds, the CLI's help, the workbench's rule form (``GET
/api/v1/rules/kinds``) and ``docs/rules.md`` are all made from ``KINDS``. A new kind is a
subclass here, decorated with ``@register`` (see docs/rules.md for the files it touches).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from vismerch.errors import InvalidInput


class Rule(Protocol):
    """What a kind reads of a rule (``rules.model.Rule``; named here so that the kinds,
    which the model imports, need not import it back)."""

    kind: str
    where: str | None
    product: str | None
    position: int | None
    factor: float
    oos_policy: str

OUT_OF_STOCK = "stock <= 0"
OOS_POLICIES = ("release", "substitute", "keep")  # what a pin does when its product is out of stock
KINDS: dict[str, RuleKind] = {}


def register(cls: type[RuleKind]) -> type[RuleKind]:
    """Add a kind to the registry under ``cls.name`` (once)."""
    if cls.name in KINDS:
        raise ValueError(f"rule kind {cls.name!r} is registered twice")
    KINDS[cls.name] = cls()
    return cls


def kind_names() -> tuple[str, ...]:
    return tuple(KINDS)


def get_kind(name: str) -> RuleKind:
    """The registered kind, or InvalidInput naming ``kind``."""
    kind = KINDS.get(name)
    if kind is None:
        raise InvalidInput("kind", f"unknown rule kind {name!r}", hint="kinds: " + ", ".join(KINDS))
    return kind


class RuleKind:
    """What every kind declares. ``target``: ``product`` (a pin: one product at a position)
    or ``condition`` (the products an expression matches). ``direction``: +1 moves the matches
    up by ``factor`` percent of the collection, -1 down, 0 no move."""

    name: ClassVar[str]
    summary: ClassVar[str]
    target: ClassVar[str] = "condition"
    direction: ClassVar[int] = 0
    hides: ClassVar[bool] = False
    default_factor: ClassVar[float] = 0.0
    fixed_condition: ClassVar[str | None] = None  # the kind's own condition (no `where`)

    def condition(self, rule: Rule) -> str | None:
        return self.fixed_condition or rule.where

    @property
    def uses_factor(self) -> bool:
        return self.direction != 0

    def validate(self, rule: Rule) -> None:
        if self.uses_factor and not 0 <= rule.factor <= 100:
            raise InvalidInput("factor", f"strength must be between 0 and 100, got {rule.factor:g}",
                               hint="the percent of the collection's positions the products move")
        if self.target == "condition" and self.fixed_condition is None and not rule.where:
            raise InvalidInput("where", f"a {self.name} rule needs a condition",
                               hint='--where \'brand == "acme"\'')

    def what(self, rule: Rule) -> str:
        """The rule's effect in words (without its scope)."""
        if self.uses_factor:
            return f"{self.name.split('-')[0]} {rule.factor:g} where {self.condition(rule)}"
        return f"{self.name} where {self.condition(rule)}"

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "summary": self.summary, "target": self.target,
                "uses_factor": self.uses_factor, "default_factor": self.default_factor,
                "hides": self.hides, "fixed_condition": self.fixed_condition}


@register
class Pin(RuleKind):
    name = "pin"
    summary = "Put one product at a 1-based position (oos_policy says what happens out of stock)."
    target = "product"

    def validate(self, rule: Rule) -> None:
        if not rule.product:
            raise InvalidInput("product", "a pin needs a product id", hint="--product ID")
        if rule.position is None or int(rule.position) < 1:
            raise InvalidInput("position", f"a pin needs a position ≥ 1, got {rule.position}",
                               hint="positions count from 1 (top left)")
        if rule.oos_policy not in OOS_POLICIES:
            raise InvalidInput("oos_policy", f"unknown out-of-stock policy {rule.oos_policy!r}",
                               hint="choose one of: " + ", ".join(OOS_POLICIES))

    def what(self, rule: Rule) -> str:
        return f"pin {rule.product} to {rule.position}"


@register
class Boost(RuleKind):
    name = "boost"
    summary = "Move the matching products up by a strength: percent of the collection's positions."
    direction = 1
    default_factor = 50.0


@register
class Bury(RuleKind):
    name = "bury"
    summary = "Move the matching products down by a strength (100: to the bottom)."
    direction = -1
    default_factor = 50.0


@register
class Hide(RuleKind):
    name = "hide"
    summary = "Take the matching products off the page (a pin on one of them is ignored)."
    hides = True


@register
class BuryOutOfStock(RuleKind):
    name = "bury-out-of-stock"
    summary = f"Bury the products out of stock ({OUT_OF_STOCK}); on by default (rules_bury_out_of_stock)."
    direction = -1
    default_factor = 100.0
    fixed_condition = OUT_OF_STOCK
