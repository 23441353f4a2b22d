"""Commands for saved arrangements, over ``service.versions``:

    vismerch versions list|show|diff|publish|rollback|export STORE ...

The CLI is one person at a terminal, so its writes skip the If-Match checks the HTTP API
makes (publish and rollback still rewrite the storefront grid in the same transaction).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from vismerch.cli.output import JsonOpt, StoreArg
from vismerch.cli.output import print_json as _print_json
from vismerch.cli.output import safe as _safe
from vismerch.cli.output import say as _say
from vismerch.cli.output import table as _table

versions_app = typer.Typer(help="Saved arrangements: list, show, diff, publish, roll back, export.",
                           no_args_is_help=True)
CollectionArg = Annotated[str, typer.Argument(help="Collection name.")]
CollectionOpt = Annotated[str | None, typer.Option("--collection", "-c",
                                                   help="Collection name (see `vismerch collections`).")]


def _workspace(store: Path):
    from vismerch.cli.context import open_workspace

    return open_workspace(store, {})  # root --config/--setting, env and TOML apply


@versions_app.command("list")
def versions_list(store: StoreArg, collection: CollectionOpt = None, json_out: JsonOpt = False) -> None:
    """Saved versions, oldest first (the published one is marked)."""
    from vismerch.service import versions

    with _workspace(store) as ws:
        rows = versions.list_versions(ws, collection).versions if collection else versions.list_all(ws)
    if json_out:
        _print_json([r.model_dump() for r in rows])
        return
    _table("versions", ["collection", "name", "created", "size", "published", "state"],
           [[r.collection, r.name, r.created_at, r.size, "yes" if r.published else "",
             "draft" if r.editable else "locked"] for r in rows])


@versions_app.command("show")
def versions_show(store: StoreArg, collection: CollectionArg,
                  name: Annotated[str, typer.Argument(help="Version name or `published`.")],
                  json_out: JsonOpt = False) -> None:
    """One version's slots with their reasons."""
    from vismerch.service import versions

    with _workspace(store) as ws:
        v = versions.get_version(ws, collection, name)
    if json_out:
        _print_json(v.model_dump())
        return
    _table(f"{collection} / {v.name}", ["pos", "id", "reason"],
           [[i.position, i.id, i.reason] for i in v.items])


@versions_app.command("diff")
def versions_diff(store: StoreArg, collection: CollectionArg,
                  a: Annotated[str, typer.Argument(help="From version (or `published`).")],
                  b: Annotated[str, typer.Argument(help="To version.")],
                  json_out: JsonOpt = False) -> None:
    """Products moved, added and removed between two versions."""
    from vismerch.service import versions

    with _workspace(store) as ws:
        d = versions.diff(ws, collection, a, b)
    if json_out:
        _print_json(d.model_dump(by_alias=True))
        return
    rows = [[m.id, "moved", m.from_, m.to] for m in d.moved]
    rows += [[x.id, "added", "", x.position] for x in d.added_at]
    rows += [[x.id, "removed", x.position, ""] for x in d.removed_from]
    _table(f"{collection}: {a} -> {b} ({d.unchanged} unchanged)", ["id", "change", "from", "to"], rows)


@versions_app.command("publish")
def versions_publish(store: StoreArg, collection: CollectionArg,
                     name: Annotated[str, typer.Argument(help="Version to publish.")]) -> None:
    """Mark a version as the one the storefront shows (and rewrite its storefront grid)."""
    from vismerch.service import versions

    with _workspace(store) as ws:
        out = versions.publish(ws, collection, name)
    _say(f"published {_safe(collection)} / {_safe(out.published)}")


@versions_app.command("rollback")
def versions_rollback(store: StoreArg, collection: CollectionArg,
                      to: Annotated[str | None, typer.Option(
                          "--to", help=
                              "An earlier published version (default: the previous one).")] = None) -> None:
    """Publish again the previously published version."""
    from vismerch.service import versions

    with _workspace(store) as ws:
        out = versions.rollback(ws, collection, to)
    _say(f"rolled back {_safe(collection)} to {_safe(out.published)}")


@versions_app.command("export")
def versions_export(
    store: StoreArg, collection: CollectionArg,
    name: Annotated[str, typer.Argument(
        help="Version (default: the published one).")] = "published",
    fmt: Annotated[str, typer.Option("--format", help="csv or json.")] = "csv",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="File to write (default: stdout).")] = None,
    spreadsheet: Annotated[bool, typer.Option(
        "--spreadsheet-safe/--raw", help=
            "CSV: prefix cells starting with = + - @ tab or CR with ' so a spreadsheet shows "
            "them instead of running them; --raw keeps ids byte for byte for machine sync.")] = True,
) -> None:
    """Export (position, product id, title) for syncing to a storefront."""
    from vismerch.service import versions

    with _workspace(store) as ws:
        text = versions.export(ws, collection, name, fmt, spreadsheet=spreadsheet).text
    if out is None:
        sys.stdout.write(text)
    else:
        # newline="" keeps the CSV writer's line endings (and any quoted CR) byte for byte
        with Path(out).open("w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        _say(f"wrote {_safe(out)}")


def register(app: typer.Typer) -> None:
    app.add_typer(versions_app, name="versions")
