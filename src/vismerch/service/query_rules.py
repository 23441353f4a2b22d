"""Search-query merchandising: query rules and synonyms (CRUD), their use by text search
(``merchandised``: synonyms widen the query, rules reorder the hits; the before/after
preview is ``service.search.query_preview``), and the report of zero-result and
low-click queries from the event log.
What the rules mean is in ``merch.queryrules``; the SQL in ``catalog.query_rules``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from vismerch.catalog import collections as db_collections
from vismerch.catalog import query_rules as db
from vismerch.catalog.store import utc_timestamp
from vismerch.errors import InvalidInput, NotFound
from vismerch.merch import queryrules as Q
from vismerch.merch import synonyms as S
from vismerch.merch.search import reciprocal_rank_fusion
from vismerch.rules import parse_stamp
from vismerch.service._util import parse_time
from vismerch.service.models_queries import (
    Merchandising,
    QueryReport,
    QueryReportRow,
    QueryRuleOut,
    SynonymOut,
)
from vismerch.service.workspace import Workspace

RULES, SYNONYMS = "query_rules", "synonyms"
_RULE_FIELDS = ("kind", "query", "match", "products", "position", "factor", "collection", "starts_at",
                "ends_at", "note", "enabled")
_SYN_FIELDS = ("kind", "synonyms", "term", "note", "enabled")
_REQUIRED = ("kind", "query", "match", "products", "enabled", "synonyms")


# ---------------------------------------------------------------- query rules


def _rule(row: dict[str, Any]) -> Q.QueryRule:
    return Q.QueryRule(row["id"], row["kind"], row["query"], row["match"], tuple(row["products"]),
                       row["position"], row["factor"], row["collection"], row["enabled"], row["note"],
                       row["starts_at"], row["ends_at"], row["created_at"])


def _rule_out(rule: Q.QueryRule, now: str) -> QueryRuleOut:
    return QueryRuleOut(id=rule.id, kind=rule.kind, query=rule.query, match=rule.match,
                        products=list(rule.products), position=rule.position, factor=rule.factor,
                        collection=rule.collection, starts_at=rule.starts_at, ends_at=rule.ends_at,
                        enabled=rule.enabled, active=rule.active(now), note=rule.note,
                        created_at=rule.created_at, description=rule.describe())


def _load_rule(ws: Workspace, rule_id: int) -> Q.QueryRule:
    row = db.get(ws.store, RULES, rule_id)
    if row is None:
        raise NotFound("query_rule", rule_id, f"no query rule #{rule_id}",
                       hint="list them with: vismerch queries rules STORE")
    return _rule(row)


def _clean_products(products: Any) -> tuple[str, ...]:
    if not isinstance(products, list | tuple) or not all(isinstance(p, str) for p in products):
        raise InvalidInput("products", "products must be a list of product ids")
    return tuple(dict.fromkeys(p.strip() for p in products if p.strip()))


def _check(ws: Workspace, rule: Q.QueryRule) -> None:
    """Validate the rule, then what it names against the store."""
    Q.validate(rule)
    if rule.kind == "redirect" and db_collections.row(ws.store, rule.collection) is None:
        raise InvalidInput("collection", f"no collection named {rule.collection!r}",
                           hint="list them with: vismerch collections STORE")
    for pid in rule.products:
        if ws.store.product(pid) is None:
            raise InvalidInput("products", f"no product {pid!r} in this store",
                               hint="name product ids the catalog has (GET /products)")


def _build(fields: dict[str, Any], rule_id: int = 0, created_at: str | None = None) -> Q.QueryRule:
    kind = fields.get("kind")
    factor = fields.get("factor")
    if factor is None and kind in Q.QUERY_RULE_KINDS.names():
        factor = Q.QUERY_RULE_KINDS.get(kind).default_factor
    return Q.QueryRule(
        rule_id, kind, Q.normalise(fields.get("query") or ""), fields.get("match") or "exact",
        _clean_products(fields.get("products") or []), fields.get("position"),
        None if factor is None else float(factor), fields.get("collection") or None,
        bool(fields.get("enabled", True)), fields.get("note"),
        parse_stamp(fields.get("starts_at"), "starts_at"), parse_stamp(fields.get("ends_at"), "ends_at"),
        created_at or utc_timestamp())


def _row(rule: Q.QueryRule) -> dict[str, Any]:
    return {"kind": rule.kind, "query": rule.query, "match": rule.match, "products": rule.products,
            "position": rule.position, "factor": rule.factor, "collection": rule.collection,
            "enabled": rule.enabled, "note": rule.note, "starts_at": rule.starts_at,
            "ends_at": rule.ends_at, "created_at": rule.created_at}


def list_rules(ws: Workspace, *, query: str | None = None, active: bool | None = None,
               at: str | None = None) -> list[QueryRuleOut]:
    """Every query rule by id; ``query``: only those that match this query (most specific
    first); ``active``: only those in force (or not) at ``at`` (default now)."""
    now = parse_stamp(at, "at") or utc_timestamp()
    rules = [_rule(r) for r in db.select(ws.store, RULES)]
    if query is not None:
        norm = Q.normalise(query)
        rules = sorted((r for r in rules if r.matches(norm)), key=Q.QueryRule.rank, reverse=True)
    return [_rule_out(r, now) for r in rules if active is None or r.active(now) == active]


def get_rule(ws: Workspace, rule_id: int) -> QueryRuleOut:
    return _rule_out(_load_rule(ws, rule_id), utc_timestamp())


def add_rule(ws: Workspace, **fields: Any) -> QueryRuleOut:
    """Validate and store a query rule (InvalidInput naming the API field on bad input)."""
    unknown = sorted(set(fields) - set(_RULE_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"a query rule has no field {unknown[0]!r}")
    rule = _build(fields)
    _check(ws, rule)
    rule.id = db.insert(ws.store, RULES, _row(rule))
    return _rule_out(rule, utc_timestamp())


def update_rule(ws: Workspace, rule_id: int, changes: dict[str, Any]) -> QueryRuleOut:
    """Change the given fields (None clears an optional one); the whole rule is checked again."""
    unknown = sorted(set(changes) - set(_RULE_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"a query rule has no field {unknown[0]!r}")
    for name in _REQUIRED:
        if name in changes and changes[name] is None:
            raise InvalidInput(name, f"{name} cannot be cleared (send a value, or leave it out)")
    old = _load_rule(ws, rule_id)
    merged = {**_row(old), "products": list(old.products), **changes}
    rule = _build(merged, rule_id, old.created_at)
    _check(ws, rule)
    db.update(ws.store, RULES, rule_id, _row(rule))
    return _rule_out(rule, utc_timestamp())


def delete_rule(ws: Workspace, rule_id: int) -> None:
    if not db.delete(ws.store, RULES, rule_id):
        raise NotFound("query_rule", rule_id, f"no query rule #{rule_id}")


# ---------------------------------------------------------------- synonyms


def _synonym(row: dict[str, Any]) -> S.Synonym:
    return S.Synonym(row["id"], row["kind"], tuple(row["synonyms"]), row["term"], row["enabled"],
                     row["note"], row["created_at"])


def _synonym_out(syn: S.Synonym) -> SynonymOut:
    text = S.SYNONYM_KINDS.get(syn.kind).describe(syn)
    return SynonymOut(id=syn.id, kind=syn.kind, term=syn.term, synonyms=list(syn.synonyms),
                      enabled=syn.enabled, note=syn.note, created_at=syn.created_at,
                      description=f"synonym #{syn.id} ({syn.kind}): {text}")


def _build_synonym(fields: dict[str, Any], syn_id: int = 0, created_at: str | None = None) -> S.Synonym:
    terms = fields.get("synonyms")
    if not isinstance(terms, list | tuple) or not all(isinstance(t, str) for t in terms):
        raise InvalidInput("synonyms", "synonyms must be a list of terms")
    term = fields.get("term")
    syn = S.Synonym(syn_id, fields.get("kind") or "", tuple(dict.fromkeys(Q.normalise(t) for t in terms)),
                    Q.normalise(term) if term else None, bool(fields.get("enabled", True)),
                    fields.get("note"), created_at or utc_timestamp())
    S.validate_synonym(syn)
    return syn


def _synonym_row(syn: S.Synonym) -> dict[str, Any]:
    return {"kind": syn.kind, "term": syn.term, "synonyms": syn.synonyms, "enabled": syn.enabled,
            "note": syn.note, "created_at": syn.created_at}


def _load_synonym(ws: Workspace, syn_id: int) -> S.Synonym:
    row = db.get(ws.store, SYNONYMS, syn_id)
    if row is None:
        raise NotFound("synonym", syn_id, f"no synonym #{syn_id}",
                       hint="list them with: vismerch queries synonyms STORE")
    return _synonym(row)


def list_synonyms(ws: Workspace) -> list[SynonymOut]:
    return [_synonym_out(_synonym(r)) for r in db.select(ws.store, SYNONYMS)]


def get_synonym(ws: Workspace, syn_id: int) -> SynonymOut:
    return _synonym_out(_load_synonym(ws, syn_id))


def add_synonym(ws: Workspace, **fields: Any) -> SynonymOut:
    unknown = sorted(set(fields) - set(_SYN_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"a synonym has no field {unknown[0]!r}")
    syn = _build_synonym(fields)
    syn.id = db.insert(ws.store, SYNONYMS, _synonym_row(syn))
    return _synonym_out(syn)


def update_synonym(ws: Workspace, syn_id: int, changes: dict[str, Any]) -> SynonymOut:
    unknown = sorted(set(changes) - set(_SYN_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"a synonym has no field {unknown[0]!r}")
    for name in ("kind", "synonyms", "enabled"):
        if name in changes and changes[name] is None:
            raise InvalidInput(name, f"{name} cannot be cleared (send a value, or leave it out)")
    old = _load_synonym(ws, syn_id)
    merged = {**_synonym_row(old), "synonyms": list(old.synonyms), **changes}
    syn = _build_synonym(merged, syn_id, old.created_at)
    db.update(ws.store, SYNONYMS, syn_id, _synonym_row(syn))
    return _synonym_out(syn)


def delete_synonym(ws: Workspace, syn_id: int) -> None:
    if not db.delete(ws.store, SYNONYMS, syn_id):
        raise NotFound("synonym", syn_id, f"no synonym #{syn_id}")


# ---------------------------------------------------------------- applied to a search

Hits = list[tuple[str, float]]


def _enabled(ws: Workspace) -> tuple[list[Q.QueryRule], list[S.Synonym]]:
    """The enabled rules and synonyms, read again only after a write (``db.revision``)."""
    revision = db.revision(ws.store)
    cached = ws.__dict__.get("_query_rules")
    if cached is None or cached[0] != revision:
        cached = (revision, [_rule(r) for r in db.select(ws.store, RULES, enabled_only=True)],
                  [_synonym(r) for r in db.select(ws.store, SYNONYMS, enabled_only=True)])
        ws.__dict__["_query_rules"] = cached
    return cached[1], cached[2]


def merchandised(ws: Workspace, query: str, run: Callable[[str, int], Hits], k: int,
                 *, at: str | None = None) -> tuple[Hits, str | None, Merchandising]:
    """Search ``query`` through ``run(text, depth)`` with the store's synonyms and query
    rules: each synonym rewrite is searched too and the rankings fused (reciprocal rank),
    then the rules in force at ``at`` (default now) that match the query reorder the hits.
    Returns the hits (at most ``k``), the redirect (or None) and what was done."""
    now = parse_stamp(at, "at") or utc_timestamp()
    all_rules, synonyms = _enabled(ws)
    rules = Q.matching(query, all_rules, now)
    variants, used = S.expand(query, synonyms)
    depth = k + Q.extra_depth(rules)
    # the shopper's own words first: a rewrite ranks a little lower than the original
    rankings = [run(query, depth)] + [run(v, depth) for v in variants[1:]]
    hits = rankings[0] if len(rankings) == 1 else \
        reciprocal_rank_fusion(rankings, weights=[1.0] + [0.8] * (len(rankings) - 1))[:depth]
    outcome = Q.apply(hits, rules, k)
    info = Merchandising(query=variants[0], searched=variants, synonyms=used, rules=outcome.matched,
                         effects=outcome.effects, conflicts=outcome.conflicts)
    return outcome.hits, outcome.redirect, info


# ---------------------------------------------------------------- report

REPORT_DAYS = 30


def report(ws: Workspace, *, since: str | None = None, until: str | None = None,
           min_searches: int = 2, max_click_rate: float = 0.1, limit: int = 20) -> QueryReport:
    """Frequent zero-result queries and frequent low-click queries in [since, until)
    (default: the last 30 days), from the event log's ``search`` and ``click`` events."""
    from vismerch.events import search_report
    from vismerch.events.query import Period
    from vismerch.service.events import event_log

    start = parse_time(since, "since") or datetime.now(UTC) - timedelta(days=REPORT_DAYS)
    end = parse_time(until, "until")
    if end is not None and end <= start:
        raise InvalidInput("until", "until must be after since")
    if isinstance(min_searches, bool) or not isinstance(min_searches, int) or min_searches < 1:
        raise InvalidInput("min_searches", "min_searches must be a whole number of at least 1")
    if not 0 <= float(max_click_rate) <= 1:
        raise InvalidInput("max_click_rate", "max_click_rate must be between 0 and 1")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidInput("limit", "limit must be between 1 and 1000")
    stats = search_report.query_stats(event_log(ws), Period(start, end))
    rows = [QueryReportRow(**r) for r in stats if r["searches"] >= min_searches]
    zero = sorted((r for r in rows if r.zero_results), key=lambda r: (-r.zero_results, r.query))
    low = sorted((r for r in rows if r.click_rate is not None and r.click_rate <= max_click_rate),
                 key=lambda r: (-r.searches, r.query))
    return QueryReport(since=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       until=end.strftime("%Y-%m-%dT%H:%M:%SZ") if end else None,
                       searches=sum(r["searches"] for r in stats),
                       zero_results=zero[:limit], low_clicks=low[:limit])
