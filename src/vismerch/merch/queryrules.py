"""Search-query merchandising: query rules and synonyms applied to one search's hits.

Queries and patterns are compared in a normal form (``normalise``): Unicode NFKD with the
accents dropped, case folded, runs of whitespace made one space, trimmed. So ``"  Robe
ÉTÉ "`` and ``"robe ete"`` are the same query.

A rule matches a query by one of the registered match kinds (``MATCH_KINDS``):

- ``exact``: the query is the pattern;
- ``contains``: the pattern's words occur in the query as whole consecutive words
  (``dress`` matches ``red dress`` but not ``dresses``);
- ``prefix``: the query starts with the pattern, as characters (``dre`` matches ``dress``);
- ``glob``: the whole query matches the pattern, where ``*`` is any run of characters and
  ``?`` one character (``red * dress`` matches ``red summer dress``).

A rule does one of the registered kinds (``QUERY_RULE_KINDS``): ``pin`` one product at a
1-based position (added to the results if the search did not find it), ``hide`` products,
``boost`` / ``bury`` products by ``factor`` (0-100: the hits' scores are scaled to [0, 1]
by rank and factor/100 is added or taken away, so 100 moves a boosted product above every
other), or ``redirect`` to a collection (the answer carries the collection; the hits stay).
Outside its ``starts_at`` / ``ends_at`` window (RFC 3339 UTC, the end exclusive) or when
disabled a rule does nothing.

Conflicts are resolved deterministically and each is reported in the explanation: the
more specific rule wins (exact, then prefix, then contains, then glob; then the longer
pattern; then the newer rule, higher id). This decides between two redirects, two pins on
one slot and two pins of one product. A pin of a hidden product loses to the hide.

Synonyms, which widen the query before the search, are in ``merch.synonyms``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vismerch.errors import InvalidInput
from vismerch.registry import Registry

MAX_PATTERN = 200


def normalise(text: str) -> str:
    """The form queries and patterns are compared in (see the module docstring)."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(plain.casefold().split())


# ---------------------------------------------------------------- match kinds

MATCH_KINDS: Registry[type[MatchKind]] = Registry("query_match_kinds")


class MatchKind:
    """How a rule's pattern is compared with a normalised query."""

    name: ClassVar[str]
    help: ClassVar[str]
    specificity: ClassVar[int]  # higher wins a conflict

    @staticmethod
    def matches(pattern: str, query: str) -> bool:
        raise TypeError("a match kind defines matches")


def _match_kind(cls: type[MatchKind]) -> type[MatchKind]:
    MATCH_KINDS.register(cls.name, cls)
    return cls


@_match_kind
class Exact(MatchKind):
    name, help, specificity = "exact", "the query is the pattern", 4

    @staticmethod
    def matches(pattern: str, query: str) -> bool:
        return query == pattern


@_match_kind
class Prefix(MatchKind):
    name, help, specificity = "prefix", "the query starts with the pattern", 3

    @staticmethod
    def matches(pattern: str, query: str) -> bool:
        return query.startswith(pattern)


@_match_kind
class Contains(MatchKind):
    name, help, specificity = "contains", "the pattern's words occur as whole words in the query", 2

    @staticmethod
    def matches(pattern: str, query: str) -> bool:
        return f" {pattern} " in f" {query} "


@_match_kind
class Glob(MatchKind):
    name, help, specificity = "glob", "the whole query matches; * is any run, ? one character", 1

    @staticmethod
    def matches(pattern: str, query: str) -> bool:
        return _glob_regex(pattern).fullmatch(query) is not None


_GLOBS: dict[str, re.Pattern[str]] = {}


def _glob_regex(pattern: str) -> re.Pattern[str]:
    found = _GLOBS.get(pattern)
    if found is None:
        body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
        found = _GLOBS.setdefault(pattern, re.compile(body, re.DOTALL))
    return found


# ---------------------------------------------------------------- rules


@dataclass
class QueryRule:
    id: int
    kind: str
    query: str  # the normalised pattern
    match: str = "exact"
    products: tuple[str, ...] = ()
    position: int | None = None  # pin: 1-based
    factor: float | None = None  # boost / bury: 0..100
    collection: str | None = None  # redirect target
    enabled: bool = True
    note: str | None = None
    starts_at: str | None = None
    ends_at: str | None = None
    created_at: str | None = None

    def active(self, at: str) -> bool:
        """Enabled and inside its dates at ``at`` (RFC 3339 UTC stamps compare as text)."""
        return self.enabled and (self.starts_at is None or self.starts_at <= at) and \
            (self.ends_at is None or at < self.ends_at)

    def matches(self, normalised_query: str) -> bool:
        return MATCH_KINDS.get(self.match).matches(self.query, normalised_query)

    def rank(self) -> tuple[int, int, int]:
        """Sort key of conflict resolution: larger wins."""
        return (MATCH_KINDS.get(self.match).specificity, len(self.query), self.id)

    def describe(self) -> str:
        return f"rule #{self.id}: {QUERY_RULE_KINDS.get(self.kind).describe(self)} " \
               f"for queries {self.match} {self.query!r}"


QUERY_RULE_KINDS: Registry[type[QueryRuleKind]] = Registry("query_rule_kinds")


class QueryRuleKind:
    """One kind of query rule: which fields it needs and what it does to the hits."""

    name: ClassVar[str]
    help: ClassVar[str]
    needs_products: ClassVar[bool] = True
    default_factor: ClassVar[float | None] = None
    removes: ClassVar[bool] = False  # takes products out: the search is asked for more hits

    @classmethod
    def validate(cls, rule: QueryRule) -> None:
        if cls.needs_products and not rule.products:
            raise InvalidInput("products", f"a {cls.name} rule needs at least one product id")

    @staticmethod
    def describe(rule: QueryRule) -> str:
        return f"{rule.kind} {', '.join(rule.products)}"

    @staticmethod
    def apply(rules: Sequence[QueryRule], state: _State) -> None:
        """Change ``state`` for every rule of this kind (most specific first)."""


def _rule_kind(cls: type[QueryRuleKind]) -> type[QueryRuleKind]:
    QUERY_RULE_KINDS.register(cls.name, cls)
    return cls


@dataclass
class _State:
    hits: list[tuple[str, float]]
    hidden: dict[str, int] = field(default_factory=dict)  # product -> rule id
    shift: dict[str, float] = field(default_factory=dict)  # product -> boost minus bury, 0..1 units
    pins: dict[int, tuple[str, int]] = field(default_factory=dict)  # position -> (product, rule id)
    redirect: str | None = None
    redirect_rule: int | None = None
    effects: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)


@_rule_kind
class Hide(QueryRuleKind):
    name, help, removes = "hide", "leave the products out of the results", True

    @staticmethod
    def apply(rules: Sequence[QueryRule], state: _State) -> None:
        for rule in rules:
            found = {pid for pid, _ in state.hits}
            for pid in rule.products:
                if pid in state.hidden:
                    continue
                state.hidden[pid] = rule.id
                if pid in found:
                    state.effects.append({"rule": rule.id, "action": "hidden", "product": pid})


def _check_factor(rule: QueryRule) -> None:
    if rule.factor is None or not 0 <= float(rule.factor) <= 100:
        raise InvalidInput("factor", f"factor must be between 0 and 100, got {rule.factor}")


@_rule_kind
class Boost(QueryRuleKind):
    name, help, sign, done = "boost", "move the products up by factor/100 of the score range", 1.0, "boosted"
    default_factor = 50.0

    @classmethod
    def validate(cls, rule: QueryRule) -> None:
        super().validate(rule)
        _check_factor(rule)

    @staticmethod
    def describe(rule: QueryRule) -> str:
        return f"{rule.kind} {rule.factor:g} {', '.join(rule.products)}"

    @classmethod
    def apply(cls, rules: Sequence[QueryRule], state: _State) -> None:
        found = {pid for pid, _ in state.hits}
        for rule in rules:
            for pid in rule.products:
                amount = cls.sign * float(rule.factor or 0) / 100
                state.shift[pid] = state.shift.get(pid, 0.0) + amount
                if pid in found and pid not in state.hidden:
                    state.effects.append({"rule": rule.id, "action": cls.done, "product": pid,
                                          "factor": rule.factor})


@_rule_kind
class Bury(Boost):
    name, help, sign, done = "bury", "move the products down by factor/100 of the score range", -1.0, "buried"


@_rule_kind
class Pin(QueryRuleKind):
    name, help = "pin", "put one product at a position (added when the search did not find it)"

    @classmethod
    def validate(cls, rule: QueryRule) -> None:
        if len(rule.products) != 1:
            raise InvalidInput("products", "a pin rule pins exactly one product id")
        if rule.position is None or int(rule.position) < 1:
            raise InvalidInput("position", f"a pin needs a position >= 1, got {rule.position}",
                               hint="positions count from 1 (the first result)")

    @staticmethod
    def describe(rule: QueryRule) -> str:
        return f"pin {rule.products[0]} to {rule.position}"

    @staticmethod
    def apply(rules: Sequence[QueryRule], state: _State) -> None:
        placed: dict[str, int] = {}
        for rule in rules:
            pid, pos = rule.products[0], int(rule.position or 1)
            if pid in state.hidden:
                state.conflicts.append({"rule": rule.id, "winner": state.hidden[pid], "product": pid,
                                        "reason": "the product is hidden for this query; the hide wins"})
            elif pos in state.pins:
                state.conflicts.append({"rule": rule.id, "winner": state.pins[pos][1], "product": pid,
                                        "reason": f"position {pos} is pinned by a more specific rule"})
            elif pid in placed:
                state.conflicts.append({"rule": rule.id, "winner": placed[pid], "product": pid,
                                        "reason": "the product is pinned by a more specific rule"})
            else:
                state.pins[pos], placed[pid] = (pid, rule.id), rule.id


@_rule_kind
class Redirect(QueryRuleKind):
    name, help, needs_products = "redirect", "send the shopper to a collection's page", False

    @classmethod
    def validate(cls, rule: QueryRule) -> None:
        if not rule.collection:
            raise InvalidInput("collection", "a redirect rule needs the collection to send shoppers to")

    @staticmethod
    def describe(rule: QueryRule) -> str:
        return f"redirect to {rule.collection}"

    @staticmethod
    def apply(rules: Sequence[QueryRule], state: _State) -> None:
        for rule in rules:
            if state.redirect is None:
                state.redirect, state.redirect_rule = rule.collection, rule.id
                state.effects.append({"rule": rule.id, "action": "redirect", "collection": rule.collection})
            else:
                state.conflicts.append({"rule": rule.id, "winner": state.redirect_rule,
                                        "reason": "another redirect is more specific"})


# hides first (a pin of a hidden product loses), then scores, then pins, then the redirect
_ORDER = ("hide", "boost", "bury", "pin", "redirect")


def validate(rule: QueryRule) -> None:
    """InvalidInput naming the API field for a rule that cannot work."""
    kind = QUERY_RULE_KINDS.get(rule.kind) if rule.kind in QUERY_RULE_KINDS.names() else None
    if kind is None:
        raise InvalidInput("kind", f"unknown query rule kind {rule.kind!r}",
                           hint="kinds: " + ", ".join(QUERY_RULE_KINDS.names()))
    if rule.match not in MATCH_KINDS.names():
        raise InvalidInput("match", f"unknown match {rule.match!r}",
                           hint="choose one of: " + ", ".join(MATCH_KINDS.names()))
    if not rule.query or len(rule.query) > MAX_PATTERN:
        raise InvalidInput("query", f"the query pattern must be 1 to {MAX_PATTERN} characters "
                           "(after trimming)")
    if rule.match == "glob" and not rule.query.strip("*?"):
        raise InvalidInput("query", "a glob of only * and ? would match every query",
                           hint="name at least one word, e.g. 'red *'")
    if rule.starts_at and rule.ends_at and rule.ends_at <= rule.starts_at:
        raise InvalidInput("ends_at", f"the rule ends ({rule.ends_at}) before it starts ({rule.starts_at})",
                           hint="the end is exclusive and must be later")
    kind.validate(rule)


# ---------------------------------------------------------------- applying


@dataclass
class Outcome:
    hits: list[tuple[str, float]]
    redirect: str | None
    matched: list[int]  # ids of the active rules that matched, most specific first
    effects: list[dict[str, Any]]
    conflicts: list[dict[str, Any]]


def matching(query: str, rules: Iterable[QueryRule], at: str) -> list[QueryRule]:
    """The rules in force at ``at`` that match ``query``, most specific first."""
    norm = normalise(query)
    kinds = {name: MATCH_KINDS.get(name) for name in MATCH_KINDS.names()}  # one lookup per kind
    found = [r for r in rules if r.active(at) and r.match in kinds and kinds[r.match].matches(r.query, norm)]
    return sorted(found, key=QueryRule.rank, reverse=True)


def extra_depth(rules: Sequence[QueryRule]) -> int:
    """How many more hits to ask the search for, so that hidden products leave room."""
    return sum(len(r.products) for r in rules if QUERY_RULE_KINDS.get(r.kind).removes)


def apply(hits: Sequence[tuple[str, float]], rules: Sequence[QueryRule], k: int) -> Outcome:
    """The hits (id, score; best first) after ``rules`` (from ``matching``), cut to ``k``.
    Scores are the search's own; pinned products not found by the search score 0."""
    state = _State(hits=list(hits))
    for name in _ORDER:
        QUERY_RULE_KINDS.get(name).apply([r for r in rules if r.kind == name], state)
    scored = _reorder(state)
    pinned_ids = {pid for pid, _ in state.pins.values()}
    rest = [h for h in scored if h[0] not in pinned_ids]
    original = dict(hits)
    out: list[tuple[str, float]] = []
    for slot in range(1, k + 1):
        if slot in state.pins:
            pid = state.pins[slot][0]
            out.append((pid, original.get(pid, 0.0)))
        elif rest:
            out.append(rest.pop(0))
        else:
            break
    placed = {pid for pid, _ in out}
    for _pos, (pid, _rule) in sorted(state.pins.items()):  # fewer hits than a pin's position
        if pid not in placed and len(out) < k:
            out.append((pid, original.get(pid, 0.0)))
            placed.add(pid)
    where = {pid: i + 1 for i, (pid, _) in enumerate(out)}
    for _pos, (pid, rule_id) in sorted(state.pins.items()):
        if pid in where:
            state.effects.append({"rule": rule_id, "action": "pinned", "product": pid,
                                  "position": where[pid]})
    return Outcome(out, state.redirect, [r.id for r in rules], state.effects, state.conflicts)


def _reorder(state: _State) -> list[tuple[str, float]]:
    """The hits without hidden ones, re-sorted by rank score plus boosts (stable)."""
    kept = [h for h in state.hits if h[0] not in state.hidden]
    if not state.shift:
        return kept
    n = len(kept)
    keyed = [(1.0 - i / max(n, 1) + state.shift.get(pid, 0.0), -i, pid, s) for i, (pid, s) in enumerate(kept)]
    keyed.sort(reverse=True)
    return [(pid, s) for _, _, pid, s in keyed]
