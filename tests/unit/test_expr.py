"""The safe expression language: semantics, and errors that point at the column."""

from __future__ import annotations

import pytest

from vismerch.errors import UsageError
from vismerch.merch.expr import evaluate, parse, tokenize

DRESS = {"id": "P1", "category": "Dress", "price": 99.0, "stock": 3, "brand": "Acme",
         "flags": ["blur"], "colours": ["navy", "white"], "title": "Navy midi dress",
         "attributes": {"margin": "0.42", "Season": "SS24"}}


@pytest.mark.parametrize("text, expected", [
    ('category == "dress" and price < 120 and stock > 0', True),
    ('category == "dress" and price < 90', False),
    ("price >= 99 and price <= 99", True),
    ('brand != "acme"', False),
    ('brand in ["zenith", "ACME"]', True),
    ('brand not in ["zenith", "acme"]', False),
    ('"blur" in flags', True),
    ('"dark" in flags', False),
    ('"midi" in title', True),
    ("not (stock > 0)", False),
    ("stock > 0 or price > 1000 and false", True),  # and binds tighter than or
    ("(stock > 0 or price > 1000) and false", False),
    ("margin > 0.4", True),  # attribute, numeric string compared as a number
    ("attributes.margin < 0.5", True),
    ("season == 'ss24'", True),  # case-insensitive field name and value
    ("missing == null", True),
    ("missing > 3", False),  # a missing value never orders
    ("missing < 3", False),
    ("not missing", True),
    ("price > -1", True),
    ("price == 99", True),
    ("true", True),
    ("`category` == 'dress'", True),
])
def test_semantics(text, expected):
    assert evaluate(text, DRESS) is expected


def test_parse_once_evaluate_many():
    expr = parse("stock > 0")
    assert [expr({"stock": s}) for s in (0, 1, None, "2", "x")] == [False, True, False, True, False]
    assert [name for name, _ in expr.fields] == ["stock"]


def caret_column(message: str) -> int:
    """The 1-based column the caret line points at (the expression line is indented 4)."""
    lines = message.split("\n")
    return len(lines[2]) - 4


@pytest.mark.parametrize("text, column, words", [
    ("price < ", 9, "expected a value after '<'"),
    ('category == "dress" and', 24, "after 'and'"),
    ("price = 3", 7, "use =="),
    ("(stock > 0", 11, "close the '(' at column 1"),
    ("brand in [1, 2", 15, "close the '['"),
    ('brand == "acme', 10, "unterminated quote"),
    ("price < 3 stock", 11, "unexpected 'stock'"),
    ("price ! 3", 7, "unexpected character '!'"),
    ("", 1, "empty expression"),
    ('brand in ["a", b]', 16, "after ','"),
    ("stock not 3", 7, "expected 'in' after 'not'"),
    ('__import__("os")', 11, "unexpected '('"),  # no calls: nothing can run
])
def test_syntax_errors_point_at_the_column(text, column, words):
    with pytest.raises(UsageError) as info:
        parse(text)
    message = info.value.message
    assert f"column {column}:" in message
    assert words in message
    assert caret_column(message) == column
    assert message.split("\n")[2].strip() == "^"
    assert info.value.exit_code == 2


def test_unknown_field_points_at_it():
    expr = parse('category == "dress" and prize < 120')
    with pytest.raises(UsageError) as info:
        expr.check_fields({"category", "price"})
    assert "unknown field 'prize'" in info.value.message
    assert caret_column(info.value.message) == 25
    assert "price" in info.value.hint


def test_tokens_keep_positions():
    tokens = tokenize('a >= "x y"')
    assert [(t.kind, t.value, t.pos) for t in tokens] == [
        ("name", "a", 0), ("op", ">=", 2), ("string", "x y", 5), ("end", None, 10)]


def test_attributes_prefix_reads_the_manifest_column():
    record = {"colour": "navy", "attributes": {"colour": "black", "Fit": "slim"}}
    assert evaluate('colour == "navy"', record)  # the derived (detected) field
    assert evaluate('attributes.colour == "black"', record)  # the manifest's column
    assert evaluate('attr.fit == "slim"', record)
    parse("attributes.fit == 1").check_fields({"fit"})  # known through its bare name


def test_escaped_quotes_in_strings():
    assert evaluate(r'title == "say \"hi\""', {"title": 'say "hi"'}) is True


@pytest.mark.parametrize("literal", ["9" * 400, "1e400", "9" * 5000, "1.5e309"])
def test_numbers_outside_float_range_are_refused_at_their_column(literal):
    text = f"price < {literal}"
    with pytest.raises(UsageError) as err:
        parse(text)
    assert "outside the range of a float" in err.value.message and "column 9" in err.value.message


def test_evaluation_errors_never_escape_evaluate_but_probe_reports_them():
    """A record value no rule can order (an int past float range) matches nothing instead of
    raising; ``probe``, used when a rule is saved, reports an evaluation error instead."""
    expr = parse("price < 10")
    assert expr.evaluate({"price": 10**400}) is False
    assert expr.probe({"price": 10**400}) is False  # huge ints are not numbers: no order

    class Hostile(dict):
        def get(self, *_):
            raise RuntimeError("boom")

    assert expr.evaluate(Hostile()) is False
    with pytest.raises(UsageError, match="fails on a sample product"):
        expr.probe(Hostile())
