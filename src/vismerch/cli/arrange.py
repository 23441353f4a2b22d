"""Commands for collections and grid arrangement: collections, arrange, rules.

    vismerch collections STORE [--json] [--create NAME --where EXPR | --from-column COL]
    vismerch arrange STORE --collection dresses --columns 4 [--columns-set 2,3,4,5]
                     --mode mix|flow [--preview out.png] [--html out.html] [--save NAME] [--json]
    vismerch rules add|list|remove|enable|disable|log|revert STORE ...
    (versions: cli/versions.py)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.output import JsonOpt, StoreArg
from vismerch.cli.output import done as _done
from vismerch.cli.output import open_store as _open
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import say as _say
from vismerch.cli.output import table as _table

CollectionOpt = Annotated[str | None, typer.Option("--collection", "-c",
                                                   help="Collection name (see `vismerch collections`).")]


# ---------------------------------------------------------------- collections


def collections_cmd(
    store: StoreArg,
    create: Annotated[str | None, typer.Option(
        "--create", help="Create a collection with this name.")] = None,
    where: Annotated[str | None, typer.Option(
        "--where", help=
            'With --create: a rule, e.g. \'category == "dress" and price < 120\'.')] = None,
    column: Annotated[str | None, typer.Option(
        "--column", help="With --create: a manifest column ...")] = None,
    value: Annotated[str | None, typer.Option(
        "--value", help="... and the value it must have.")] = None,
    from_column: Annotated[str | None, typer.Option(
        "--from-column", help=
            "Make every value of this manifest column a collection (kept up to date after each "
            "ingest).")] = None,
    delete: Annotated[str | None, typer.Option(
        "--delete", help="Delete this collection and the rules scoped to it.")] = None,
    members: Annotated[str | None, typer.Option(
        "--members", help="List the products of this collection.")] = None,
    refresh: Annotated[bool, typer.Option(
        "--refresh", help="Re-evaluate every membership now.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """List collections with their sizes; create, refresh or delete them."""
    from vismerch.errors import UsageError
    from vismerch.merch import collections as colls

    st = _open(store)
    if create:
        if where is None and column is None:
            raise UsageError("--create needs --where EXPR or --column COL --value VALUE")
        made = colls.create_collection(st, create, where=where, column=column, value=value)
        _done(made, json_out,
              f"created [bold]{_safe(made['name'])}[/] ({made['kind']}): {made['size']} products")
        return
    if from_column:
        out = colls.add_collection_column(st, from_column)
        _done(out, json_out,
              f"collections from column {_safe(from_column)}: created "
              f"{_safe(', '.join(out['created']) or 'none')}")
        return
    if delete:
        out = colls.delete_collection(st, delete)
        _done(out, json_out, f"deleted {_safe(delete)} ({out['rules_removed']} scoped rules removed)")
        return
    if members:
        ids = colls.members(st, members)
        _done(ids, json_out, _safe("\n".join(ids) or "(empty)"))
        return
    if refresh:
        colls.refresh_collections(st)
    rows = colls.list_collections(st)
    if json_out:
        _print_json(rows)
        return
    _table("collections", ["name", "size", "kind", "definition"],
           [[r["name"], r["size"], r["kind"] + (" (auto)" if r["auto"] else ""),
             json.dumps(r["definition"])] for r in rows])


# ---------------------------------------------------------------- arrange


def arrange_cmd(
    store: StoreArg,
    collection: Annotated[str, typer.Option("--collection", "-c", help="Collection to arrange.")],
    columns: Annotated[int, typer.Option("--columns", help="Grid columns of the main layout.")] = 4,
    columns_set: Annotated[str | None, typer.Option(
        "--columns-set", help=
            "Other widths to optimise at once, e.g. 2,3,4,5 (mobile to desktop).")] = None,
    mode: Annotated[str, typer.Option(
        "--mode", help="mix (spread colours) or flow (colour blocks and gradients).")] = "mix",
    weights: Annotated[str | None, typer.Option(
        "--weights", help="Score blend, e.g. sales=0.5,revenue=0.3,newness=0.2.")] = None,
    backend: Annotated[str | None, typer.Option(
        "--backend", help=
            "Vectors for look-alikes (default: a neural backend if ingested, else colour).")] = None,
    quality_gate: Annotated[bool, typer.Option(
        "--quality-gate/--no-quality-gate", help=
            "Keep products with quality flags below the first screen unless pinned.")] = True,
    duplicates: Annotated[str, typer.Option(
        "--duplicates", help=
            "Near-duplicates: space (apart), collapse (show the representative only) or off.")] = "space",
    preview: Annotated[Path | None, typer.Option(
        "--preview", help="Write a PNG mosaic of the first rows.")] = None,
    html_out: Annotated[Path | None, typer.Option(
        "--html", help="Write an HTML page with a width switcher.")] = None,
    rows: Annotated[int, typer.Option("--rows", help="Rows in the PNG preview.")] = 3,
    save: Annotated[str | None, typer.Option(
        "--save", help="Save the arrangement as a version with this name.")] = None,
    publish_it: Annotated[bool, typer.Option(
        "--publish", help="With --save: publish that version.")] = False,
    full: Annotated[bool, typer.Option(
        "--full", help=
            "With --json: the whole report (breakpoints, conflicts, business), not only the slots.")] = False,
    limit: Annotated[int, typer.Option(
        "--limit", help="Slots shown in the table (JSON lists all).")] = 24,
    json_out: JsonOpt = False,
) -> None:
    """Arrange a collection for a grid: business first, no look-alike neighbours, explained."""
    from vismerch.config import load_settings
    from vismerch.merch.layout import arrange_collection
    from vismerch.merch.preview import html_page, lookalike_pairs, mosaic

    if publish_it and not save:
        from vismerch.errors import UsageError

        raise UsageError("--publish needs --save NAME (only a saved version can be published)",
                         hint=f"vismerch arrange {store} --collection {collection} --save NAME --publish")
    st = _open(store)
    result = arrange_collection(st, collection, columns=columns, columns_set=columns_set,
                                mode=mode, weights=weights, backend=backend,
                                quality_gate=quality_gate, duplicates=duplicates,
                                settings=load_settings())
    arr = result.arrangement
    saved = None
    if save:  # through the service: --publish also rewrites the storefront grid
        from vismerch.service import versions
        from vismerch.service.workspace import Workspace

        with Workspace.open(store) as ws:
            saved = versions.save_order(ws, collection, save, result,
                                        publish=publish_it).model_dump(exclude={"items", "ids"})
    if preview or html_out:
        tau = float(arr.params["lookalike_cosine"])
        vectors = result.vectors(arr.ids)
        if preview:
            mosaic(st, arr.ids, columns, rows, title=f"{collection} · {mode} · {columns} columns",
                   lookalikes=lookalike_pairs(vectors, columns, tau, columns * rows)).save(preview)
        if html_out:
            Path(html_out).write_text(html_page(st, result.slots(), list(arr.params["columns"]),
                                                title=f"{collection} ({mode})", vectors=vectors,
                                                threshold=tau))
    if json_out:
        if full:
            _print_json({**result.as_dict(), "saved": saved})
        else:
            _print_json([{"position": s.position, "id": s.id, "reason": s.reason, "kind": s.kind,
                          "score": round(s.score, 6)} for s in arr.slots])
        return
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
    if result.hidden:
        _say(f"hidden by rules: {len(result.hidden)} products")
    if arr.collapsed:
        _say(f"near-duplicates collapsed into {len(arr.collapsed)} representatives")
    for c in result.conflicts:
        _say(f"[yellow]conflict[/] rule #{c['rule']} ({c['kind']}): {_safe(c['resolution'])}")
    for e in result.events:
        _say(f"[cyan]{e['kind']}[/] rule #{e['rule']}: {_safe(e['product'])}"
             + (f" -> {_safe(e['substitute'])}" if e.get("substitute") else ""))
    if saved:
        _say(f"saved version [bold]{_safe(save)}[/]" + (" and published it" if publish_it else ""))
    for path in (preview, html_out):
        if path:
            _say(f"wrote {_safe(path)}")


# ---------------------------------------------------------------- rules

rules_app = typer.Typer(help="Merchandising rules: pin, boost, bury, hide, bury-out-of-stock.",
                        no_args_is_help=True)


@rules_app.command("add")
def rules_add(
    store: StoreArg,
    kind: Annotated[str, typer.Argument(help="pin | boost | bury | hide | bury-out-of-stock")],
    collection: CollectionOpt = None,
    where: Annotated[str | None, typer.Option(
        "--where", help="Condition for boost, bury and hide.")] = None,
    product: Annotated[str | None, typer.Option("--product", help="Pin: the product id.")] = None,
    position: Annotated[int | None, typer.Option(
        "--position", help="Pin: 1-based position.")] = None,
    factor: Annotated[float | None, typer.Option(
        "--factor", help="Boost/bury strength 0-100 (default 50; bury-out-of-stock 100).")] = None,
    oos: Annotated[str, typer.Option(
        "--oos", help=
            "Pin when out of stock: release, substitute (most similar in stock) or keep.")] = "release",
    note: Annotated[str | None, typer.Option(
        "--note", help="Free text shown with the rule.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Add a rule, scoped to --collection or global."""
    from vismerch.merch.rules import add_rule

    rule = add_rule(_open(store), kind, scope=collection, condition=where, product_id=product,
                    position=position, factor=factor, oos_policy=oos, note=note)
    _done(rule.as_dict(), json_out, f"added {_safe(rule.describe())}")


@rules_app.command("list")
def rules_list(store: StoreArg, collection: CollectionOpt = None, json_out: JsonOpt = False) -> None:
    """List rules (of one collection, with the global ones, when --collection is given)."""
    from vismerch.merch.rules import list_rules

    rules = list_rules(_open(store), collection, applicable=True)
    if json_out:
        _print_json([r.as_dict() for r in rules])
        return
    _table("rules", ["id", "kind", "scope", "what", "enabled"],
           [[r.id, r.kind, r.scope or "(global)", r.describe().split(": ", 1)[1], r.enabled]
            for r in rules])


@rules_app.command("remove")
def rules_remove(store: StoreArg, rule_id: Annotated[int, typer.Argument(help="Rule id.")]) -> None:
    """Delete a rule."""
    from vismerch.merch.rules import remove_rule

    remove_rule(_open(store), rule_id)
    _say(f"removed rule #{rule_id}")


@rules_app.command("enable")
def rules_enable(store: StoreArg, rule_id: Annotated[int, typer.Argument(help="Rule id.")]) -> None:
    """Turn a rule back on."""
    from vismerch.merch.rules import set_enabled

    set_enabled(_open(store), rule_id, True)
    _say(f"enabled rule #{rule_id}")


@rules_app.command("disable")
def rules_disable(store: StoreArg, rule_id: Annotated[int, typer.Argument(
    help="Rule id.")]) -> None:
    """Turn a rule off without deleting it."""
    from vismerch.merch.rules import set_enabled

    set_enabled(_open(store), rule_id, False)
    _say(f"disabled rule #{rule_id}")


@rules_app.command("log")
def rules_log(store: StoreArg, collection: CollectionOpt = None, json_out: JsonOpt = False) -> None:
    """Out-of-stock pins released or substituted (each substitution can be reverted)."""
    from vismerch.merch.rules import rule_log

    rows = rule_log(_open(store), collection)
    if json_out:
        _print_json(rows)
        return
    _table("rule log", ["id", "when", "collection", "rule", "kind", "product", "substitute",
                        "reverted"],
           [[r["id"], r["created_at"], r["collection"], r["rule_id"], r["kind"], r["product_id"],
             r["substitute_id"], r["reverted_at"] or ""] for r in rows])


@rules_app.command("revert")
def rules_revert(store: StoreArg, log_id: Annotated[int, typer.Argument(
    help="Rule-log id of a substitution.")]) -> None:
    """Undo a substitution: the pin keeps its own (out-of-stock) product again."""
    from vismerch.merch.rules import revert_substitution

    row = revert_substitution(_open(store), log_id)
    _say(f"reverted: rule #{row['rule_id']} keeps {_safe(row['product_id'])} in "
         f"{_safe(row['collection'])}")


def register(app: typer.Typer) -> None:
    app.command("collections")(collections_cmd)
    app.command("arrange")(arrange_cmd)
    app.add_typer(rules_app, name="rules")
