"""`make demo` twice: the second run starts from scratch instead of clashing with the first
run's saved versions; a store that no demo made is never removed."""

from __future__ import annotations

import pytest

from vismerch.demo import clear_previous_demo
from vismerch.errors import UsageError


def test_a_previous_demos_outputs_are_cleared_and_nothing_else(tmp_path):
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "truth.json").write_text("{}")
    (tmp_path / "store" / "index").mkdir(parents=True)
    (tmp_path / "report.html").write_text("<html>")
    (tmp_path / "notes.txt").write_text("mine")
    clear_previous_demo(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    clear_previous_demo(tmp_path / "never-made")  # a new folder: nothing to do


def test_a_store_that_no_demo_made_is_refused(tmp_path):
    (tmp_path / "store").mkdir()
    with pytest.raises(UsageError, match="not a demo"):
        clear_previous_demo(tmp_path)
    assert (tmp_path / "store").is_dir()
