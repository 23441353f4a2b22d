"""Search-query merchandising, over ``service.query_rules``:

    vismerch queries rules STORE [--query Q] [--json]
    vismerch queries add STORE KIND QUERY [--match M] [--product ID ...] [--position N]
                         [--factor F] [--collection C] [--starts --ends] [--note]
    vismerch queries remove|enable|disable STORE RULE_ID
    vismerch queries synonyms STORE [--json]
    vismerch queries synonym-add STORE KIND TERM... [--term T]
    vismerch queries synonym-remove STORE ID
    vismerch queries preview STORE QUERY [--at] [-k]
    vismerch queries report STORE [--since --until] [--min-searches] [--max-click-rate] [--json]
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.output import JsonOpt, StoreArg
from vismerch.cli.output import done as _done
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import say as _say
from vismerch.cli.output import table as _table

queries_app = typer.Typer(help="Search-query merchandising: query rules (pin, hide, boost, bury, "
                               "redirect), synonyms, and the zero-result / low-click report.",
                          no_args_is_help=True)


def _workspace(store: Path):
    from vismerch.cli.context import open_workspace

    return open_workspace(store, {})


@queries_app.command("rules")
def rules_list(store: StoreArg,
               query: Annotated[str | None, typer.Option(
                   "--query", "-q", help="Only the rules that match this query.")] = None,
               json_out: JsonOpt = False) -> None:
    """Query rules by id (with --query: those matching it, most specific first)."""
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        rules = query_rules.list_rules(ws, query=query)
    if json_out:
        _print_json([r.model_dump() for r in rules])
        return
    _table("query rules", ["id", "what", "starts", "ends", "active"],
           [[r.id, r.description.split(": ", 1)[1], r.starts_at or "", r.ends_at or "",
             "yes" if r.active else ("disabled" if not r.enabled else "no")] for r in rules])


@queries_app.command("add")
def rules_add(
    store: StoreArg,
    kind: Annotated[str, typer.Argument(help="pin | hide | boost | bury | redirect")],
    query: Annotated[str, typer.Argument(help="The query or pattern (compared without case or accents).")],
    match: Annotated[str, typer.Option("--match", help="exact | prefix | contains | glob")] = "exact",
    product: Annotated[list[str] | None, typer.Option(
        "--product", help="A product id (pin: one; hide, boost, bury: repeat for more).")] = None,
    position: Annotated[int | None, typer.Option("--position", help="Pin: 1-based position.")] = None,
    factor: Annotated[float | None, typer.Option("--factor", help="Boost/bury 0-100 (default 50).")] = None,
    collection: Annotated[str | None, typer.Option("--collection", help="Redirect: the collection.")] = None,
    starts: Annotated[str | None, typer.Option("--starts", help="From then: date or RFC 3339 time.")] = None,
    ends: Annotated[str | None, typer.Option("--ends", help="Until then, exclusive.")] = None,
    note: Annotated[str | None, typer.Option("--note", help="Free text shown with the rule.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Add a query rule; --starts/--ends schedule it."""
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        rule = query_rules.add_rule(ws, kind=kind, query=query, match=match, products=list(product or []),
                                    position=position, factor=factor, collection=collection,
                                    starts_at=starts, ends_at=ends, note=note)
    _done(rule.model_dump(), json_out, f"added {_safe(rule.description)}"
          + ("" if rule.active else " (not active now)"))


@queries_app.command("remove")
def rules_remove(store: StoreArg, rule_id: Annotated[int, typer.Argument(help="Query rule id.")]) -> None:
    """Delete a query rule."""
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        query_rules.delete_rule(ws, rule_id)
    _say(f"removed query rule #{rule_id}")


def _set_enabled(store: Path, rule_id: int, enabled: bool) -> None:
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        rule = query_rules.update_rule(ws, rule_id, {"enabled": enabled})
    _say(f"{'enabled' if enabled else 'disabled'} {_safe(rule.description)}")


@queries_app.command("enable")
def rules_enable(store: StoreArg, rule_id: Annotated[int, typer.Argument(help="Query rule id.")]) -> None:
    """Put a query rule back in force (inside its dates)."""
    _set_enabled(store, rule_id, True)


@queries_app.command("disable")
def rules_disable(store: StoreArg, rule_id: Annotated[int, typer.Argument(help="Query rule id.")]) -> None:
    """Stop a query rule without deleting it."""
    _set_enabled(store, rule_id, False)


@queries_app.command("synonyms")
def synonyms_list(store: StoreArg, json_out: JsonOpt = False) -> None:
    """Synonyms by id."""
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        found = query_rules.list_synonyms(ws)
    if json_out:
        _print_json([s.model_dump() for s in found])
        return
    _table("synonyms", ["id", "kind", "terms", "enabled"],
           [[s.id, s.kind, s.description.split(": ", 1)[1], "yes" if s.enabled else "no"] for s in found])


@queries_app.command("synonym-add")
def synonym_add(
    store: StoreArg,
    kind: Annotated[str, typer.Argument(help="equivalent | one-way")],
    terms: Annotated[list[str], typer.Argument(help="The terms (one-way: what --term stands for).")],
    term: Annotated[str | None, typer.Option("--term", help="One-way: the term that expands.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Add synonyms: equivalent terms stand for each other; a one-way --term stands for TERMS."""
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        syn = query_rules.add_synonym(ws, kind=kind, synonyms=list(terms), term=term)
    _done(syn.model_dump(), json_out, f"added {_safe(syn.description)}")


@queries_app.command("synonym-remove")
def synonym_remove(store: StoreArg, synonym_id: Annotated[int, typer.Argument(help="Synonym id.")]) -> None:
    """Delete a synonym set."""
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        query_rules.delete_synonym(ws, synonym_id)
    _say(f"removed synonym #{synonym_id}")


@queries_app.command("preview")
def preview(store: StoreArg, query: Annotated[str, typer.Argument(help="The text query.")],
            k: Annotated[int, typer.Option("-k", help="Results.")] = 12,
            at: Annotated[str | None, typer.Option("--at", help="Rules in force then (default now).")] = None,
            json_out: JsonOpt = False) -> None:
    """The search without and with query rules and synonyms, side by side."""
    from vismerch.service.search import query_preview

    with _workspace(store) as ws:
        both = query_preview(ws, query, k=k, at=at)
    before, after = both["before"], both["after"]
    if json_out:
        _print_json({"before": before.model_dump(), "after": after.model_dump()})
        return
    n = max(len(before.hits), len(after.hits))
    cell = lambda hits, i: hits[i].id if i < len(hits) else ""  # noqa: E731
    _table(f"search {query!r}", ["#", "before", "after"],
           [[i + 1, cell(before.hits, i), cell(after.hits, i)] for i in range(n)])
    info = after.merchandising
    if after.redirect:
        _say(f"redirect to {_safe(after.redirect)}")
    if info is not None:
        _say("searched: " + "; ".join(_safe(s) for s in info.searched))
        for c in info.conflicts:
            _say(f"conflict: rule #{c.rule} lost to #{c.winner}: {_safe(c.reason)}")


@queries_app.command("report")
def report(store: StoreArg,
           since: Annotated[str | None, typer.Option("--since", help="From (default 30 days ago).")] = None,
           until: Annotated[str | None, typer.Option("--until", help="Until, exclusive.")] = None,
           min_searches: Annotated[int, typer.Option("--min-searches", help="Queries searched fewer "
                                                     "times are left out.")] = 2,
           max_click_rate: Annotated[float, typer.Option("--max-click-rate", help="Low-click: at most this "
                                                         "many clicks per search with results.")] = 0.1,
           limit: Annotated[int, typer.Option("--limit", help="Rows per list.")] = 20,
           json_out: JsonOpt = False) -> None:
    """Frequent zero-result queries and frequent queries whose results are seldom clicked."""
    from vismerch.service import query_rules

    with _workspace(store) as ws:
        found = query_rules.report(ws, since=since, until=until, min_searches=min_searches,
                                   max_click_rate=max_click_rate, limit=limit)
    if json_out:
        _print_json(found.model_dump())
        return
    _say(f"{found.searches:,} searches since {found.since}")
    _table("zero results", ["query", "searches", "zero results", "last seen"],
           [[_safe(r.query), r.searches, r.zero_results, r.last_seen or ""] for r in found.zero_results])
    _table("low clicks", ["query", "searches", "clicks", "click rate", "avg results"],
           [[_safe(r.query), r.searches, r.clicks, f"{100 * (r.click_rate or 0):.1f}%", r.avg_results]
            for r in found.low_clicks])


def register(app: typer.Typer) -> None:
    app.add_typer(queries_app, name="queries")
