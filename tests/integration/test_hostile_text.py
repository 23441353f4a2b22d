"""Catalog text is data, never markup or terminal control: ids, titles and rule text that
look like rich markup or carry escape sequences print literally in every table and in
the error printer, and nothing reaches the terminal raw."""

from __future__ import annotations

import pytest

from vismerch.cli import main
from vismerch.testing import small_catalog
from vismerch.testing.catalog import make_manifest, read_manifest_rows

BOLD = "[bold red]SKU-1"
CLOSER = "[/x]SKU-2"
ESCAPE = "\x1b[31mSKU-3\x1b]0;pwned\x07"
ESCAPE_SHOWN = "\\x1b[31mSKU-3\\x1b]0;pwned\\x07"
BROKEN = "[/y]broken"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    cat = small_catalog(root / "cat", n=6, seed=4, corrupt=False, flawed=False, duplicates=False)
    rows = read_manifest_rows(cat.manifest_path)
    for row in rows:
        row["category"] = "dress"
    rows[0]["id"], rows[1]["id"], rows[2]["id"] = BOLD, CLOSER, ESCAPE
    rows[3]["title"] = "[/z] closing tag in a title"
    (root / "cat" / "broken.jpg").write_bytes(b"<html>not an image</html>")
    rows.append({**rows[4], "id": BROKEN, "image": "broken.jpg"})
    manifest = make_manifest(root / "cat" / "hostile.csv", rows)
    path = root / "store"
    assert main(["ingest", str(manifest), "--store", str(path), "--workers", "1", "--json"]) == 0
    return path


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Wide enough that no id folds across lines (the check looks for whole ids)."""
    from vismerch.cli import output

    monkeypatch.setattr(output.console, "width", 300)


def _run(capsys, args, code=0):
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == code, (args, out, err)
    assert "\x1b" not in out + err  # no raw escape reaches the terminal
    return out + err


def test_tables_show_ids_literally(store, capsys):
    s = str(store)
    for args in (["tags", s], ["quality", s, "--all"], ["similar", s, BOLD, "-k", "5"],
                 ["search", s, "--colour", "red", "-k", "6"], ["collections", s, "--members", "dress"]):
        out = _run(capsys, args)
        if args[0] in ("tags", "collections"):
            assert BOLD in out and CLOSER in out and ESCAPE_SHOWN in out, (args, out)
    assert BROKEN in _run(capsys, ["errors", s])


def test_arrange_versions_rules_and_collections_show_text_literally(store, capsys):
    s = str(store)
    out = _run(capsys, ["arrange", s, "--collection", "dress", "--save", "v1"])
    assert BOLD in out and CLOSER in out and ESCAPE_SHOWN in out
    out = _run(capsys, ["versions", "show", s, "dress", "v1"])
    assert BOLD in out and CLOSER in out
    out = _run(capsys, ["rules", "add", s, "bury", "--where", 'title == "[/w] x"'])
    assert "[/w] x" in out
    assert "[/w] x" in _run(capsys, ["rules", "list", s])
    out = _run(capsys, ["collections", s, "--create", "odd", "--where", 'title == "[/v][bold]"'])
    assert "odd" in out
    assert "[/v][bold]" in _run(capsys, ["collections", s])


def test_error_printer_shows_ids_literally(store, capsys):
    out = _run(capsys, ["similar", str(store), "[/q]nope[bold]"], code=2)
    assert "[/q]nope[bold]" in out
    out = _run(capsys, ["similar", str(store), "\x1b[2Jgone"], code=2)
    assert "\\x1b[2Jgone" in out
