"""What every command shares: the STORE argument, --json, and how results are printed."""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()

StoreArg = Annotated[Path, typer.Argument(help="Store directory (made by `vismerch ingest`).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


# bidirectional overrides and isolates reorder what a terminal shows (Trojan-Source style)
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def visible(text: str) -> str:
    """Control characters (ESC, CR, NUL, ...) and bidi overrides as ``\\x1b``-style escapes,
    so catalog data can neither drive the terminal nor hide text; newlines stay."""
    if text.isprintable():
        return text
    return "".join(
        ch if ch == "\n" or (ch not in _BIDI and unicodedata.category(ch) != "Cc")
        else (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        for ch in text
    )


def safe(value: Any) -> str:
    """Data shown through rich: control characters made visible, markup escaped, so an id
    like ``[bold red]x`` or ``[/x]`` prints as written."""
    return escape(visible("" if value is None else str(value)))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table; long cells fold instead of being cut."""
    out = Table(title=safe(title))
    for column in columns:
        out.add_column(safe(column), overflow="fold")
    for row in rows:
        out.add_row(*[safe(c) for c in row])
    console.print(out)


def say(text: str) -> None:
    """A line of rich markup: data interpolated into it goes through ``safe``."""
    console.print(text)


def done(data: Any, json_out: bool, text: str) -> None:
    """The result as JSON with --json, else one line for people."""
    if json_out:
        print_json(data)
    else:
        say(text)
