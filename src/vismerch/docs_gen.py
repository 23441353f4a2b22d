"""Generate docs/settings.md and docs/cli.md from the code (a test fails when stale).

    python -m vismerch.docs_gen          # rewrite both files
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def settings_markdown() -> str:
    from vismerch.config import ENV_PREFIX, SETTINGS

    lines = [
        "# Settings",
        "",
        "Generated from `vismerch.config.SETTINGS` by `python -m vismerch.docs_gen`; do not edit.",
        "",
        "Precedence, for every command: default < TOML file (`vismerch --config FILE COMMAND`, "
        f"else `VISMERCH_CONFIG`) < environment `{ENV_PREFIX}<NAME>` < flag (`vismerch --setting "
        "NAME=VALUE COMMAND`, or the command's own flag, which wins over `--setting`). A flag "
        "left out overrides nothing.",
        "",
        "Why some defaults are what they are: `docs/setting-notes.md`.",
        "",
        "A changed `quality_*` threshold or `multicolour_max_weight` re-judges every stored image "
        "on the next `vismerch ingest` from its stored metrics (nothing is decoded again); "
        "duplicate (`dup_*`) and index settings apply there too, since derived data is rebuilt "
        "after every ingest.",
        "",
        "| name | type | default | environment | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS:
        lines.append(
            f"| `{s.name}` | {s.type.__name__} | `{s.default}` | `{ENV_PREFIX}{s.name.upper()}` | {s.help} |"
        )
    return "\n".join([*lines, "", *_flags_markdown()]) + "\n"


def _flags_markdown() -> list[str]:
    from vismerch.features.quality_flags import FLAGS

    lines = ["## Quality flags", "",
             "Generated from `vismerch.features.quality_flags.FLAGS`, in the order they are reported.",
             "", "| flag | raised when | threshold |", "| --- | --- | --- |"]
    lines += [f"| `{f.name}` | {_cell(f.meaning + (f'; not when {f.unless}' if f.unless else ''))} "
              f"| `{f.setting}` |" for f in FLAGS.values()]
    return lines


def _cell(text: str) -> str:
    """Markdown table cells cannot hold a bare pipe."""
    return text.replace("|", "\\|")


def _param_row(param) -> str | None:
    """One table row per argument/option (typer vendors click, so duck-type the classes)."""
    kind = type(param).__name__
    text = getattr(param, "help", None) or ""
    if "Argument" in kind:
        return f"| `{param.name.upper()}` | argument | {_cell(text)} |"
    if "Option" in kind and param.name != "help":
        shown = param.default not in (None, False) and not getattr(param, "is_flag", False)
        default = f" (default `{param.default}`)" if shown else ""
        return f"| `{', '.join(param.opts)}` | option | {_cell(text)}{default} |"
    return None


def cli_markdown() -> str:
    import typer

    from vismerch.cli import app

    root = typer.main.get_command(app)
    lines = [
        "# Command line",
        "",
        "Generated from the Typer app by `python -m vismerch.docs_gen`; do not edit.",
        "",
    ]

    root_rows = [row for row in map(_param_row, root.params) if row]
    if root_rows:
        lines.extend(["## `vismerch` options (before the command)", "",
                      "They apply to every command: `vismerch --config shop.toml tags STORE`.", "",
                      "| name | kind | help |", "| --- | --- | --- |", *root_rows, ""])

    def walk(command, path: str) -> None:
        if hasattr(command, "commands"):
            for name in sorted(command.commands):
                walk(command.commands[name], f"{path} {name}")
            return
        lines.extend([f"## `{path}`", "", (command.help or "").strip().split("\n\n")[0], ""])
        rows = [row for row in map(_param_row, command.params) if row]
        if rows:
            lines.extend(["| name | kind | help |", "| --- | --- | --- |", *rows, ""])

    walk(root, "vismerch")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    DOCS.mkdir(exist_ok=True)
    (DOCS / "settings.md").write_text(settings_markdown())
    (DOCS / "cli.md").write_text(cli_markdown())
    print(f"wrote {DOCS / 'settings.md'} and {DOCS / 'cli.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
