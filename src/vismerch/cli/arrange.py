"""Commands for collections and grid arrangement: collections, arrange, rules.

    vismerch collections STORE [--json] [--create NAME --where EXPR [--parent NAME] | --from-column COL]
    vismerch arrange STORE --collection dresses --columns 4 [--columns-set 2,3,4,5]
                     --mode mix|flow|plain [--at DATE] [--preview out.png] [--html out.html]
                     [--save NAME] [--json]
    vismerch rules add|update|list|remove|enable|disable|log|revert STORE ...
                     (add: [--starts DATE] [--ends DATE] [--reach collection|subtree])
    (versions: cli/versions.py)

The collections, arrange and rules commands only parse, call ``vismerch.service`` and render.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.output import JsonOpt, StoreArg
from vismerch.cli.output import done as _done
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import say as _say
from vismerch.cli.output import table as _table
from vismerch.rules.kinds import kind_names

CollectionOpt = Annotated[str | None, typer.Option("--collection", "-c",
                                                   help="Collection name (see `vismerch collections`).")]


# ---------------------------------------------------------------- collections


def _workspace(store: Path):
    """The store with settings and caches (the service layer's view of it); settings from
    the root --config/--setting, env and TOML like every command (cli.context)."""
    from vismerch.cli.context import open_workspace

    return open_workspace(store, {})


def collections_cmd(
    store: StoreArg,
    create: Annotated[str | None, typer.Option(
        "--create", help="Create a collection with this name.")] = None,
    where: Annotated[str | None, typer.Option(
        "--where", help=
            'With --create: a rule, e.g. \'category == "dress" and price < 120\'.')] = None,
    parent: Annotated[str | None, typer.Option(
        "--parent", help=
            "With --create: make it a sub-collection of this one (its products are the "
            "parent's that match --where; all of them without). Rules with reach subtree on "
            "the parent apply to it too.")] = None,
    column: Annotated[str | None, typer.Option(
        "--column", help="With --create: a manifest column ...")] = None,
    value: Annotated[str | None, typer.Option(
        "--value", help="... and the value it must have.")] = None,
    from_column: Annotated[str | None, typer.Option(
        "--from-column", help=
            "Make every value of this manifest column a collection (kept up to date after each "
            "ingest).")] = None,
    delete: Annotated[str | None, typer.Option(
        "--delete", help="Delete this collection and the rules scoped to it (not a category).")] = None,
    members: Annotated[str | None, typer.Option(
        "--members", help="List the products of this collection.")] = None,
    refresh: Annotated[bool, typer.Option(
        "--refresh", help="Re-evaluate every membership now.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """List collections with their sizes; create, refresh or delete them."""
    from vismerch.errors import UsageError
    from vismerch.service import collections as service

    ws = _workspace(store)
    if create:
        if where is None and column is None and parent is None:
            raise UsageError("--create needs --where EXPR, --column COL --value VALUE or --parent NAME")
        made = service.create_collection(ws, create, where=where, parent=parent, column=column,
                                         value=value)
        _done(made.model_dump(), json_out,
              f"created [bold]{_safe(made.id)}[/] ({made.kind}"
              + (f", in {_safe(made.parent)}" if made.parent else "") + f"): {made.size} products")
        return
    _other_collection_action(ws, from_column, delete, members, refresh, json_out)


def _other_collection_action(ws, from_column: str | None, delete: str | None, members: str | None,
                             refresh: bool, json_out: bool) -> None:
    """``vismerch collections`` without --create: add from a column, delete, members, list."""
    from vismerch.service import collections as service

    if from_column:
        out = service.add_column(ws, from_column)
        _done(out.model_dump(), json_out,
              f"collections from column {_safe(from_column)}: created "
              f"{_safe(', '.join(out.created) or 'none')}")
        return
    if delete:
        gone = service.delete_collection(ws, delete, unpublish=True)  # the store's operator
        _done(gone.model_dump(), json_out,
              f"deleted {_safe(delete)} ({gone.rules_removed} scoped rules, "
              f"{gone.versions_removed} versions removed)")
        return
    if members:
        ids = service.members(ws, members)
        _done(ids, json_out, _safe("\n".join(ids) or "(empty)"))
        return
    if refresh:
        service.refresh(ws)
    rows = service.list_collections(ws)
    if json_out:
        _print_json([{"name": r.id, **r.model_dump()} for r in rows])
        return
    _table("collections", ["name", "size", "kind", "parent", "definition", "published"],
           [[r.id, r.size, r.kind + (" (auto)" if r.auto else ""), r.parent or "",
             json.dumps(r.definition), r.published_version or ""] for r in rows])


# ---------------------------------------------------------------- arrange


ColumnsSetOpt = Annotated[str | None, typer.Option(
    "--columns-set", help="Other widths to optimise at once, e.g. 2,3,4,5 (mobile to desktop).")]
ModeOpt = Annotated[str, typer.Option(
    "--mode", help=
        "mix (spread colours), flow (colour blocks and gradients) or plain (rules and score "
        "only).")]
WeightsOpt = Annotated[str | None, typer.Option(
    "--weights", help="Score blend, e.g. sales=0.5,revenue=0.3,newness=0.2.")]
LookalikeBackendOpt = Annotated[str | None, typer.Option(
    "--backend", help="Vectors for look-alikes (default: a neural backend if ingested, else colour).")]
QualityGateOpt = Annotated[bool, typer.Option(
    "--quality-gate/--no-quality-gate", help=
        "Keep products with quality flags below the first screen unless pinned.")]
DuplicatesOpt = Annotated[str, typer.Option(
    "--duplicates", help=
        "Near-duplicates: space (apart), collapse (show the representative only) or off.")]
AtOpt = Annotated[str | None, typer.Option(
    "--at", help=
        "Apply the rules as they will be (or were) active then, e.g. 2026-12-10 (default: now).")]
PreviewOpt = Annotated[Path | None, typer.Option("--preview", help="Write a PNG mosaic of the first rows.")]
HtmlOpt = Annotated[Path | None, typer.Option("--html", help="Write an HTML page with a width switcher.")]
SaveOpt = Annotated[str | None, typer.Option(
    "--save", help="Save the arrangement as a version with this name.")]
PublishOpt = Annotated[bool, typer.Option("--publish", help="With --save: publish that version.")]
FullOpt = Annotated[bool, typer.Option(
    "--full", help="With --json: the whole report (breakpoints, conflicts, business), not only the slots.")]


def arrange_cmd(
    store: StoreArg,
    collection: Annotated[str, typer.Option("--collection", "-c", help="Collection to arrange.")],
    columns: Annotated[int, typer.Option("--columns", help="Grid columns of the main layout.")] = 4,
    columns_set: ColumnsSetOpt = None, mode: ModeOpt = "mix", weights: WeightsOpt = None,
    backend: LookalikeBackendOpt = None, quality_gate: QualityGateOpt = True,
    duplicates: DuplicatesOpt = "space", at: AtOpt = None,
    preview: PreviewOpt = None, html_out: HtmlOpt = None,
    rows: Annotated[int, typer.Option("--rows", help="Rows in the PNG preview.")] = 3,
    save: SaveOpt = None, publish_it: PublishOpt = False, full: FullOpt = False,
    limit: Annotated[int, typer.Option("--limit", help="Slots shown in the table (JSON lists all).")] = 24,
    json_out: JsonOpt = False,
) -> None:
    """Arrange a collection for a grid: business first, no look-alike neighbours, explained."""
    from vismerch.rules import parse_stamp
    from vismerch.service import arrangements

    if publish_it and not save:
        from vismerch.errors import UsageError

        raise UsageError("--publish needs --save NAME (only a saved version can be published)",
                         hint=f"vismerch arrange {store} --collection {collection} --save NAME --publish")
    ws = _workspace(store)
    st = ws.store
    result = arrangements.arrange(ws, collection, columns=columns, columns_set=columns_set,
                                  mode=mode, weights=weights, backend=backend,
                                  quality_gate=quality_gate, duplicates=duplicates,
                                  at=parse_stamp(at, "at"))
    arr = result.arrangement
    saved = None
    if save:  # through the service: --publish also rewrites the storefront grid
        from vismerch.service import versions

        saved = versions.save_order(ws, collection, save, result,
                                    publish=publish_it).model_dump(exclude={"items", "ids"})
    if preview or html_out:
        _write_previews(st, result, collection, mode, (columns, rows), (preview, html_out))
    if json_out:
        if full:
            _print_json({**result.as_dict(), "saved": saved, "rules_applied": result.applied})
        else:
            _print_json([{"position": s.position, "id": s.id, "reason": s.reason, "kind": s.kind,
                          "score": round(s.score, 6)} for s in arr.slots])
        return
    _print_arrangement(result, collection, mode, limit)
    if saved:
        _say(f"saved version [bold]{_safe(save)}[/]" + (" and published it" if publish_it else ""))
    for path in (preview, html_out):
        if path:
            _say(f"wrote {_safe(path)}")


def _write_previews(st, result, collection: str, mode: str, grid: tuple[int, int],
                    paths: tuple[Path | None, Path | None]) -> None:
    """The PNG mosaic of the first ``grid`` (columns, rows) and the HTML page, at ``paths``
    (preview, html) where given."""
    from vismerch.arrange.preview import Lookalikes, html_page, lookalike_pairs, mosaic

    arr, (columns, rows), (preview, html_out) = result.arrangement, grid, paths
    tau = float(arr.params["lookalike_cosine"])
    vectors = result.vectors(arr.ids)
    if preview:
        mosaic(st, arr.ids, columns, rows, title=f"{collection} · {mode} · {columns} columns",
               lookalikes=lookalike_pairs(vectors, columns, tau, columns * rows)).save(preview)
    if html_out:
        Path(html_out).write_text(html_page(st, result.slots(), list(arr.params["columns"]),
                                            title=f"{collection} ({mode})",
                                            lookalikes=Lookalikes(vectors, tau)))


def _print_arrangement(result, collection: str, mode: str, limit: int) -> None:
    """The slots, the business and look-alike figures, and what the rules did."""
    arr = result.arrangement
    _table(f"{collection}: {len(arr.ids)} products, {mode}, widths {arr.params['columns']}",
           ["pos", "id", "kind", "reason"],
           [[s.position, s.id, s.kind, s.reason] for s in arr.slots[:limit]])
    b = arr.business
    _say(f"business (DCG of the first {b['depth']}): {b['ratio']:.1%} of the plain order")
    _table("look-alike neighbours in the first positions, worst width first",
           ["columns", "arranged", "plain order", "worst pair"],
           [[r.columns, r.in_depth, r.plain_in_depth,
             (f"{r.pairs[0]['a']}/{r.pairs[0]['b']} at {r.pairs[0]['positions']}"
              f" cos {r.pairs[0]['cosine']}") if r.pairs else ""] for r in arr.breakpoints])
    if result.applied:
        _say("rules applied: " + ", ".join(f"#{i}" for i in result.applied))
    if result.hidden:
        _say(f"hidden by rules: {len(result.hidden)} products")
    if arr.collapsed:
        _say(f"near-duplicates collapsed into {len(arr.collapsed)} representatives")
    for c in result.conflicts:
        _say(f"[yellow]conflict[/] rule #{c['rule']} ({c['kind']}): {_safe(c['resolution'])}")
    for e in result.events:
        _say(f"[cyan]{e['kind']}[/] rule #{e['rule']}: {_safe(e['product'])}"
             + (f" -> {_safe(e['substitute'])}" if e.get("substitute") else ""))


# ---------------------------------------------------------------- rules

rules_app = typer.Typer(help="Merchandising rules: " + ", ".join(kind_names()) + ".",
                        no_args_is_help=True)
RuleIdArg = Annotated[int, typer.Argument(help="Rule id.")]
StartsOpt = Annotated[str | None, typer.Option(
    "--starts", help="Applies from then: a date (2026-12-01, UTC midnight) or RFC 3339 time.")]
EndsOpt = Annotated[str | None, typer.Option(
    "--ends", help="Applies until then, exclusive (2026-12-24 = up to the end of the 23rd, UTC).")]
ReachOpt = Annotated[str | None, typer.Option(
    "--reach", help="collection (that page only) or subtree (its sub-collections too).")]


def _rule_rows(rules: list) -> list[list]:
    return [[r.id, r.kind, r.collection or "(global)",
             r.description.split(": ", 1)[1] if ": " in r.description else r.description,
             r.reach if r.collection else "", r.starts_at or "", r.ends_at or "",
             "yes" if r.active else ("disabled" if not r.enabled else "no")] for r in rules]


_RULE_COLUMNS = ["id", "kind", "collection", "what", "reach", "starts", "ends", "active"]


@rules_app.command("add")
def rules_add(
    store: StoreArg,
    kind: Annotated[str, typer.Argument(help=" | ".join(kind_names()))],
    collection: CollectionOpt = None,
    where: Annotated[str | None, typer.Option(
        "--where", help="Condition for boost, bury and hide.")] = None,
    product: Annotated[str | None, typer.Option("--product", help="Pin: the product id.")] = None,
    position: Annotated[int | None, typer.Option(
        "--position", help="Pin: 1-based position.")] = None,
    factor: Annotated[float | None, typer.Option(
        "--factor", help="Boost/bury strength 0-100: percent of the collection's positions the "
                         "products move (100: to the top or bottom); default per kind.")] = None,
    oos: Annotated[str, typer.Option(
        "--oos", help=
            "Pin when out of stock: release, substitute (most similar in stock) or keep.")] = "release",
    starts: StartsOpt = None,
    ends: EndsOpt = None,
    reach: ReachOpt = None,
    note: Annotated[str | None, typer.Option(
        "--note", help="Free text shown with the rule.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Add a rule, scoped to --collection or global; --starts/--ends schedule it."""
    from vismerch.service import rules

    rule = rules.add_rule(_workspace(store), kind, collection=collection, where=where,
                          product=product, position=position, factor=factor, oos_policy=oos,
                          note=note, starts_at=starts, ends_at=ends, reach=reach or "collection")
    _done(rule.model_dump(), json_out, f"added {_safe(rule.description)}"
          + ("" if rule.active else " (not active now)"))


@rules_app.command("update")
def rules_update(
    store: StoreArg,
    rule_id: RuleIdArg,
    where: Annotated[str | None, typer.Option("--where", help="New condition.")] = None,
    product: Annotated[str | None, typer.Option("--product", help="Pin: new product id.")] = None,
    position: Annotated[int | None, typer.Option("--position", help="Pin: new position.")] = None,
    factor: Annotated[float | None, typer.Option("--factor", help="New strength 0-100.")] = None,
    starts: StartsOpt = None,
    ends: EndsOpt = None,
    reach: ReachOpt = None,
    always: Annotated[bool, typer.Option(
        "--always", help="Remove the start and end dates.")] = False,
    note: Annotated[str | None, typer.Option("--note", help="New note.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Change some fields of a rule (the others stay)."""
    from vismerch.service import rules

    given = {"where": where, "product": product, "position": position, "factor": factor,
             "starts_at": starts, "ends_at": ends, "reach": reach, "note": note}
    changes = {k: v for k, v in given.items() if v is not None}
    if always:
        changes.update(starts_at=None, ends_at=None)
    rule = rules.update_rule(_workspace(store), rule_id, changes)
    _done(rule.model_dump(), json_out, f"updated {_safe(rule.description)}")


@rules_app.command("list")
def rules_list(
    store: StoreArg,
    collection: CollectionOpt = None,
    active: Annotated[bool | None, typer.Option(
        "--active/--inactive", help="Only rules in force now (or only those not).",
        show_default=False)] = None,
    json_out: JsonOpt = False,
) -> None:
    """List rules; with --collection every rule that reaches its page (its own, the subtree
    rules of its parents and the global ones)."""
    from vismerch.service import rules as service

    ws = _workspace(store)
    rules = (service.rules_for_collection(ws, collection) if collection is not None
             else service.list_rules(ws))
    if active is not None:
        rules = [r for r in rules if r.active == active]
    if json_out:
        _print_json([r.model_dump() for r in rules])
        return
    _table("rules", _RULE_COLUMNS, _rule_rows(rules))


@rules_app.command("remove")
def rules_remove(store: StoreArg, rule_id: RuleIdArg) -> None:
    """Delete a rule."""
    from vismerch.service import rules

    rules.delete_rule(_workspace(store), rule_id)
    _say(f"removed rule #{rule_id}")


@rules_app.command("enable")
def rules_enable(store: StoreArg, rule_id: RuleIdArg) -> None:
    """Turn a rule back on."""
    from vismerch.service import rules

    rules.set_enabled(_workspace(store), rule_id, True)
    _say(f"enabled rule #{rule_id}")


@rules_app.command("disable")
def rules_disable(store: StoreArg, rule_id: RuleIdArg) -> None:
    """Turn a rule off without deleting it."""
    from vismerch.service import rules

    rules.set_enabled(_workspace(store), rule_id, False)
    _say(f"disabled rule #{rule_id}")


@rules_app.command("log")
def rules_log(store: StoreArg, collection: CollectionOpt = None, json_out: JsonOpt = False) -> None:
    """Out-of-stock pins released or substituted (each substitution can be reverted)."""
    from vismerch.service import rules

    rows = rules.rule_log(_workspace(store), collection)
    if json_out:
        _print_json([r.model_dump() for r in rows])
        return
    _table("rule log", ["id", "when", "collection", "rule", "kind", "product", "substitute",
                        "reverted"],
           [[r.id, r.created_at, r.collection, r.rule_id, r.kind, r.product_id,
             r.substitute_id, r.reverted_at or ""] for r in rows])


@rules_app.command("revert")
def rules_revert(store: StoreArg, log_id: Annotated[int, typer.Argument(
    help="Rule-log id of a substitution.")]) -> None:
    """Undo a substitution: the pin keeps its own (out-of-stock) product again."""
    from vismerch.service import rules

    row = rules.revert_substitution(_workspace(store), log_id)
    _say(f"reverted: rule #{row.rule_id} keeps {_safe(row.product_id)} in "
         f"{_safe(row.collection)}")


def register(app: typer.Typer) -> None:
    app.command("collections")(collections_cmd)
    app.command("arrange")(arrange_cmd)
    app.add_typer(rules_app, name="rules")
