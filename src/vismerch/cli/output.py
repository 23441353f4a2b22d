"""What every command shares: the STORE argument, --json, and how results are printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

console = Console()

StoreArg = Annotated[Path, typer.Argument(help="Store directory (made by `vismerch ingest`).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table; long cells fold instead of being cut."""
    out = Table(title=title)
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*["" if c is None else str(c) for c in row])
    console.print(out)


def say(text: str) -> None:
    console.print(text)


def done(data: Any, json_out: bool, text: str) -> None:
    """The result as JSON with --json, else one line for people."""
    if json_out:
        print_json(data)
    else:
        say(text)


def open_store(store: Path):
    from vismerch.catalog.store import Store

    return Store.open(store)
