"""The `vismerch` command line. Thin: parse, call one API function, render with rich.

Each module of this package adds its commands through a ``register(app)`` function listed in
``_COMMAND_MODULES``, so this file stays small.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="vismerch",
    help="GPU-accelerated visual merchandising: ingest, tag, dedup, search, arrange, plan.\n\n"
         "Settings (docs/settings.md): table default < --config TOML < VISMERCH_* environment "
         "< flags (--setting NAME=VALUE, or a command's own flag).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(
        "--config", help="Settings TOML file for every command (default: $VISMERCH_CONFIG); "
        "see docs/settings.md.")] = None,
    setting: Annotated[list[str] | None, typer.Option(
        "--setting", help="NAME=VALUE: set any setting for this run, above env and TOML "
        "(a command's own flag for it wins); repeatable.")] = None,
) -> None:
    """Root options: they hold for whichever command follows (read by ``cli.context``)."""
    from vismerch.cli.context import RootOptions, parse_setting_flags, set_root_options

    options = RootOptions(config=config, overrides=parse_setting_flags(setting))
    ctx.obj = options
    token = set_root_options(options)
    ctx.call_on_close(lambda: _reset(token))


def _reset(token) -> None:
    from vismerch.cli.context import reset_root_options

    reset_root_options(token)


# modules whose ``register(app)`` adds commands (light imports only: heavy ones live in the commands)
_COMMAND_MODULES: tuple[str, ...] = (
    "vismerch.cli.core",
    "vismerch.cli.plan",
    "vismerch.cli.arrange",
    "vismerch.cli.versions",
    "vismerch.cli.serve",
    "vismerch.cli.keys",
    "vismerch.cli.events",
    "vismerch.cli.experiments",
    "vismerch.cli.queries",
)


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # area not built yet
                continue
            raise
        module.register(app)


_register_all()


# merchandising writes: one audit row each
AUDITED = ("collections", "rules", "arrange", "versions", "experiments")


def _os_user() -> str:
    import getpass
    import os

    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no name for this uid (a bare container)
        return f"uid {os.getuid()}"


def _audit_scope(argv: list[str]):
    """The audit context of a merchandising command: its first write transaction records the
    OS user and the command line (catalog/audit_context.py); any other command: none."""
    import contextlib

    from vismerch.catalog.audit_context import audited

    words = [a for a in argv if not a.startswith("-")]
    root_values = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--config", "--setting")}
    words = [w for w in words if w not in root_values]
    if not words or words[0] not in AUDITED:
        return contextlib.nullcontext()
    two = words[0] in ("rules", "versions", "experiments")
    action = "vismerch " + " ".join(words[:2] if two else words[:1])
    row = {"actor": f"os:{_os_user()}", "action": action, "role": "cli",
           "detail": {"argv": [a[:500] for a in argv[:50]]}}
    return audited(lambda: row)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 failed job, 2 bad usage)."""
    import sys

    from vismerch.errors import VismerchError

    try:
        with _audit_scope(list(sys.argv[1:] if argv is None else argv)):
            rc = app(args=argv, standalone_mode=False)
    except VismerchError as exc:
        from rich.console import Console

        from vismerch.cli.output import safe

        err = Console(stderr=True)
        err.print(f"[bold red]error:[/] {safe(exc.message)}")  # messages quote catalog data
        if exc.hint:
            err.print(f"  [yellow]hint:[/] {safe(exc.hint)}")
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # click usage errors
        return int(exc.code or 0)
    except Exception as exc:  # click.UsageError and friends carry exit_code
        code = getattr(exc, "exit_code", None)
        if code is not None and hasattr(exc, "show"):
            exc.show()
            return code
        raise
    # with standalone_mode=False click hands back the code of a typer.Exit(n)
    return rc if isinstance(rc, int) else 0

