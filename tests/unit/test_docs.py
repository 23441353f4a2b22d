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


def test_setting_help_is_one_or_two_sentences_and_the_error_hint_shorter():
    """Help longer than HELP_MAX_CHARS belongs in docs/setting-notes.md; a bad value's error
    shows the first sentence, not a paragraph."""
    import pytest

    from vismerch.config import HELP_MAX_CHARS, SETTINGS, load_settings
    from vismerch.errors import UsageError

    too_long = [(s.name, len(s.help)) for s in SETTINGS if len(s.help) > HELP_MAX_CHARS]
    assert not too_long, "shorten these and move the reasoning to docs/setting-notes.md"
    with pytest.raises(UsageError) as info:
        load_settings(env={"VISMERCH_QUALITY_BLUR_MIN": "sharp"})
    assert "quality_blur_min" in info.value.message and "'sharp'" in info.value.message
    hint = info.value.hint
    assert hint.startswith("Flag blur when edge sharpness is below this") and len(hint) < 150, hint


def test_setting_notes_name_only_settings_that_exist():
    import re

    from vismerch.config import SETTINGS

    named = re.findall(r"^## `([a-z0-9_]+)`$", (DOCS / "setting-notes.md").read_text(), re.M)
    assert named and set(named) <= {s.name for s in SETTINGS}


def test_rule_kinds_doc_is_current():
    from vismerch.docs_gen import rules_markdown

    text = (DOCS / "rules.md").read_text()
    assert text == rules_markdown(text), "run: python -m vismerch.docs_gen"
    assert "| `bury-out-of-stock` |" in text
