"""Settings for a command, the same way for every command.

Precedence: table default < TOML file < ``VISMERCH_*`` environment < flags. The TOML file
is the command's own ``--config`` if it has one (``ingest --config``, kept as an alias),
else the root ``vismerch --config FILE``, else ``VISMERCH_CONFIG``. Flags are the root
``--setting NAME=VALUE`` options, then the command's own flags (a flag left unset is None
and overrides nothing, so env and TOML show through).

A command calls one of::

    settings = command_settings({"tag_threshold": threshold})     # Settings
    ws = open_workspace(store, {"device": device})                # service Workspace

and passes the result on; it never calls ``load_settings`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vismerch.config import Settings, load_settings
from vismerch.errors import UsageError


@dataclass(frozen=True)
class RootOptions:
    """What the root callback parsed."""

    config: Path | None = None
    overrides: dict[str, str] = field(default_factory=dict)


# set by the root callback on every run (typer vendors its own click, whose current-context
# lookup is private, so the callback hands its options over here)
_ROOT: ContextVar[RootOptions | None] = ContextVar("vismerch_root_options", default=None)


def set_root_options(options: RootOptions) -> Any:
    """Called by the root callback; returns the token ``reset_root_options`` takes."""
    return _ROOT.set(options)


def reset_root_options(token: Any) -> None:
    _ROOT.reset(token)


def parse_setting_flags(items: list[str] | None) -> dict[str, str]:
    """``["name=value", ...]`` -> ``{name: value}``; values are coerced by ``load_settings``."""
    from vismerch.config import SETTINGS

    known = {s.name for s in SETTINGS}
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--setting {item!r}: expected NAME=VALUE",
                             hint="vismerch --setting tag_threshold=0.4 tags STORE --attribute pattern")
        if name not in known:
            raise UsageError(f"--setting {item!r}: unknown setting {name!r}", hint="see docs/settings.md")
        out[name] = value
    return out


def root_options() -> RootOptions:
    """The root options of the command being run (defaults outside a CLI run)."""
    return _ROOT.get() or RootOptions()


def command_settings(flags: Mapping[str, Any] | None = None, *, config: Path | None = None) -> Settings:
    """The settings for this command: default < TOML (``config``, else root ``--config``,
    else ``VISMERCH_CONFIG``) < env < root ``--setting`` < ``flags`` (None values skipped)."""
    root = root_options()
    overrides: dict[str, Any] = dict(root.overrides)
    overrides.update({k: v for k, v in (flags or {}).items() if v is not None})
    return load_settings(toml_path=config or root.config, overrides=overrides)


def open_workspace(store: Path, flags: Mapping[str, Any] | None = None, *,
                   config: Path | None = None, writable: bool = False) -> Any:
    """The service ``Workspace`` over ``store`` with ``command_settings(flags)``. Read-only
    until the first write (``writable=False``), so read commands work on a read-only store."""
    from vismerch.service.workspace import Workspace

    return Workspace.open(store, command_settings(flags, config=config), writable=writable)
