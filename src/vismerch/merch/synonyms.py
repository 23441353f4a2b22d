"""Synonyms for search queries.

Synonyms (``SYNONYM_KINDS``) widen the query before the search: ``equivalent`` terms each
stand for the others (``sofa, couch, settee``); a ``one-way`` synonym lets a term stand for
others but not back (``tee`` -> ``t-shirt``: a search for ``tee`` also looks for
``t-shirt``; one for ``t-shirt`` does not look for ``tee``). A term matches whole words.
Expansion is one level (a synonym's synonyms are not followed) and gives at most
``MAX_VARIANTS`` queries, the original first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from vismerch.errors import InvalidInput
from vismerch.merch.queryrules import MAX_PATTERN, normalise
from vismerch.registry import Registry

MAX_VARIANTS = 5  # the original query and at most 4 rewrites: each is one search


@dataclass
class Synonym:
    id: int
    kind: str
    synonyms: tuple[str, ...]  # normalised
    term: str | None = None  # one-way: the term that expands
    enabled: bool = True
    note: str | None = None
    created_at: str | None = None


SYNONYM_KINDS: Registry[type[SynonymKind]] = Registry("synonym_kinds")


class SynonymKind:
    name: ClassVar[str]
    help: ClassVar[str]

    @staticmethod
    def validate(syn: Synonym) -> None:
        raise TypeError("a synonym kind defines validate")

    @staticmethod
    def rewrites(syn: Synonym) -> Iterable[tuple[str, list[str]]]:
        """(term, what it may be replaced by) pairs."""
        raise TypeError("a synonym kind defines rewrites")

    @staticmethod
    def describe(syn: Synonym) -> str:
        return " = ".join(syn.synonyms)


def _synonym_kind(cls: type[SynonymKind]) -> type[SynonymKind]:
    SYNONYM_KINDS.register(cls.name, cls)
    return cls


@_synonym_kind
class Equivalent(SynonymKind):
    name, help = "equivalent", "each term stands for every other"

    @staticmethod
    def validate(syn: Synonym) -> None:
        if syn.term:
            raise InvalidInput("term", "equivalent synonyms have no term; list them all in synonyms")
        if len(set(syn.synonyms)) < 2:
            raise InvalidInput("synonyms", "equivalent synonyms need at least two different terms")

    @staticmethod
    def rewrites(syn: Synonym) -> Iterable[tuple[str, list[str]]]:
        for term in syn.synonyms:
            yield term, [t for t in syn.synonyms if t != term]


@_synonym_kind
class OneWay(SynonymKind):
    name, help = "one-way", "the term stands for the synonyms, not the other way round"

    @staticmethod
    def validate(syn: Synonym) -> None:
        if not syn.term:
            raise InvalidInput("term", "a one-way synonym needs the term that expands")
        if not [t for t in syn.synonyms if t != syn.term]:
            raise InvalidInput("synonyms", "a one-way synonym needs at least one synonym other than its term")

    @staticmethod
    def rewrites(syn: Synonym) -> Iterable[tuple[str, list[str]]]:
        yield syn.term or "", [t for t in syn.synonyms if t != syn.term]

    @staticmethod
    def describe(syn: Synonym) -> str:
        return f"{syn.term} -> {', '.join(syn.synonyms)}"


def validate_synonym(syn: Synonym) -> None:
    if syn.kind not in SYNONYM_KINDS.names():
        raise InvalidInput("kind", f"unknown synonym kind {syn.kind!r}",
                           hint="kinds: " + ", ".join(SYNONYM_KINDS.names()))
    for term in [*syn.synonyms, *([syn.term] if syn.term else [])]:
        if not term or len(term) > MAX_PATTERN:
            raise InvalidInput("synonyms", f"each term must be 1 to {MAX_PATTERN} characters")
    SYNONYM_KINDS.get(syn.kind).validate(syn)


def expand(query: str, synonyms: Iterable[Synonym]) -> tuple[list[str], list[dict[str, Any]]]:
    """The queries to search (the normalised original first, at most MAX_VARIANTS) and which
    synonym made each rewrite."""
    base = normalise(query)
    variants, used = [base], []
    padded = f" {base} "
    kinds = {name: SYNONYM_KINDS.get(name) for name in SYNONYM_KINDS.names()}
    for syn in sorted(synonyms, key=lambda s: s.id):
        # most sets name no word of the query: skip them before building their rewrites
        if not syn.enabled or syn.kind not in kinds or \
                not any(f" {t} " in padded for t in (*syn.synonyms, syn.term) if t):
            continue
        for term, others in kinds[syn.kind].rewrites(syn):
            if not term or f" {term} " not in padded:
                continue
            for other in others:
                variant = padded.replace(f" {term} ", f" {other} ", 1).strip()
                if variant not in variants and len(variants) < MAX_VARIANTS:
                    variants.append(variant)
                    used.append({"synonym": syn.id, "term": term, "query": variant})
    return variants, used
