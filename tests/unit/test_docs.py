"""Generated docs must match the code: a new setting or flag without docs fails here."""

from __future__ import annotations

from pathlib import Path

from vismerch.docs_gen import cli_markdown, settings_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_settings_doc_is_current():
    assert (DOCS / "settings.md").read_text() == settings_markdown(), "run: python -m vismerch.docs_gen"


def test_cli_doc_is_current():
    assert (DOCS / "cli.md").read_text() == cli_markdown(), "run: python -m vismerch.docs_gen"


def test_every_setting_has_help():
    from vismerch.config import SETTINGS

    assert all(s.help.strip() for s in SETTINGS)


def test_rule_kinds_doc_is_current():
    from vismerch.docs_gen import rules_markdown

    text = (DOCS / "rules.md").read_text()
    assert text == rules_markdown(text), "run: python -m vismerch.docs_gen"
    assert "| `bury-out-of-stock` |" in text
