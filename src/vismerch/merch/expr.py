"""A small, safe expression language for collection and rule conditions.

    category == "dress" and price < 120 and stock > 0
    brand in ["acme", "zenith"] and not (colour_family == "neutral" or flagged)
    "blur" in flags

Grammar (recursive descent, lowest precedence first)::

    expr     := or
    or       := and ("or" and)*
    and      := not ("and" not)*
    not      := "not" not | compare
    compare  := operand (("==" | "!=" | "<" | "<=" | ">" | ">=") operand
                         | "not"? "in" (list | operand))?
    operand  := "-"? NUMBER | STRING | true | false | null | FIELD | list | "(" expr ")"
    list     := "[" (literal ("," literal)*)? "]"

Nothing is ever ``eval``ed: the parser builds a tree of plain Python closures that read
fields from a mapping. A syntax error raises ``UsageError`` whose message shows the
expression with a caret under the offending column.

Semantics, chosen so merchandisers get what they mean:
- string equality and ``in`` ignore case (``category == "Dress"`` matches ``dress``);
- a number compared with a numeric string compares as numbers (manifest attributes are
  often strings);
- a missing field is ``null``: ordering comparisons with it are false, ``== null`` is true;
- ``x in field`` where the field holds a list tests membership (``"blur" in flags``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vismerch.errors import UsageError

Getter = Callable[[Mapping[str, Any]], Any]

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<qname>`[^`]*`)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|-)
    """,
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null"}
_UNTERMINATED = re.compile(r"""["'`]""")


@dataclass(frozen=True)
class Token:
    kind: str  # number | string | name | op | kw | end
    value: Any
    pos: int  # 0-based offset into the expression


def _caret(text: str, pos: int, message: str) -> UsageError:
    """An error whose message shows the expression and a caret at ``pos`` (1-based column)."""
    column = pos + 1
    line = text.replace("\n", " ")
    return UsageError(
        f"expression error at column {column}: {message}\n    {line}\n    {' ' * pos}^",
        hint='fields compare with == != < <= > >= in [..]; join with and/or/not; '
        'strings in quotes, e.g. category == "dress" and price < 120',
    )


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; raises UsageError at the first character it cannot read."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            if _UNTERMINATED.match(text, pos):
                raise _caret(text, pos, "unterminated quote")
            if text[pos] == "=":
                raise _caret(text, pos, "use == to compare (a single = is not an operator)")
            raise _caret(text, pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        raw = m.group()
        if kind == "number":
            tokens.append(Token("number", _number(text, pos, raw), pos))
        elif kind == "string":
            tokens.append(Token("string", _unescape(raw[1:-1]), pos))
        elif kind == "qname":
            if len(raw) == 2:
                raise _caret(text, pos, "empty field name")
            tokens.append(Token("name", raw[1:-1], pos))
        elif kind == "name":
            lowered = raw.lower()
            tokens.append(Token("kw", lowered, pos) if lowered in _KEYWORDS else Token("name", raw, pos))
        elif kind == "op":
            tokens.append(Token("op", raw, pos))
        pos = m.end()
    tokens.append(Token("end", None, len(text)))
    return tokens


def _number(text: str, pos: int, raw: str) -> int | float:
    """A number literal; one a float cannot hold is refused here, so no rule stored can
    raise OverflowError later when it is compared with a record's values."""
    try:
        value = float(raw) if any(c in raw for c in ".eE") else int(raw)
        if math.isfinite(float(value)):
            return value
    except (OverflowError, ValueError):  # ValueError: ints past Python's digit limit
        pass
    shown = raw if len(raw) <= 20 else raw[:17] + "..."
    raise _caret(text, pos, f"number {shown} is outside the range of a float (about ±1.8e308)")


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


# ---------------------------------------------------------------- value semantics


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    try:
        if isinstance(value, (int, float)):
            return None if isinstance(value, float) and math.isnan(value) else float(value)
        if isinstance(value, str):
            return float(value.strip())
    except (ValueError, OverflowError):  # a record's huge int is no number a rule can order
        return None
    return None


def _norm(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        na, nb = _as_number(a), _as_number(b)
        if na is not None and nb is not None:
            return na == nb
    if isinstance(a, list):
        return [_norm(x) for x in a] == [_norm(x) for x in (b if isinstance(b, list) else [b])]
    return _norm(a) == _norm(b)


def _order(a: Any, b: Any) -> tuple[Any, Any] | None:
    """Comparable pair or None (missing values and mixed types never order)."""
    if a is None or b is None:
        return None
    na, nb = _as_number(a), _as_number(b)
    if na is not None and nb is not None and not (isinstance(a, str) and isinstance(b, str)):
        return na, nb
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold(), b.casefold()
    return None


def _member(item: Any, container: Any) -> bool:
    if container is None:
        return False
    if isinstance(container, (list, tuple, set)):
        return any(_equal(item, x) for x in container)
    if isinstance(container, str) and isinstance(item, str):
        return item.casefold() in container.casefold()
    return False


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().casefold() not in {"", "0", "false", "no", "none", "null"}
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
}
for _op, _fn in (("<", lambda x, y: x < y), ("<=", lambda x, y: x <= y),
                 (">", lambda x, y: x > y), (">=", lambda x, y: x >= y)):
    def _ordered(a: Any, b: Any, fn=_fn) -> bool:
        pair = _order(a, b)
        return pair is not None and fn(*pair)

    _COMPARE[_op] = _ordered


# ---------------------------------------------------------------- parser


@dataclass(frozen=True)
class Expression:
    """A parsed expression: ``evaluate(fields)`` returns a bool; ``fields`` lists names used."""

    text: str
    _fn: Getter
    fields: tuple[tuple[str, int], ...]  # (field name, 0-based position) in order of use

    def evaluate(self, record: Mapping[str, Any]) -> bool:
        """Never raises: a record the expression cannot judge does not match, so one odd
        value can never stop a preview or an arrangement."""
        try:
            return _truthy(self._fn(record))
        except Exception:  # defensive; ``probe`` reports such errors at save time
            return False

    def probe(self, record: Mapping[str, Any]) -> bool:
        """Evaluate once, raising UsageError when evaluation fails (checked on save)."""
        try:
            return _truthy(self._fn(record))
        except Exception as exc:
            raise UsageError(f"expression {self.text!r} fails on a sample product: "
                             f"{type(exc).__name__}: {exc}"[:500]) from None

    def __call__(self, record: Mapping[str, Any]) -> bool:
        return self.evaluate(record)

    def check_fields(self, known: set[str] | frozenset[str]) -> None:
        """Raise UsageError (with a caret) at the first field not in ``known``."""
        lowered = {k.casefold() for k in known}
        for name, pos in self.fields:
            bare = name.split(".", 1)[1] if name.casefold().startswith(("attributes.", "attr.")) \
                else name
            if bare.casefold() not in lowered:
                err = _caret(self.text, pos, f"unknown field {name!r}")
                err.hint = "known fields: " + ", ".join(sorted(known))
                raise err


MAX_DEPTH = 64  # brackets and `not`s nested deeper than this are refused (no RecursionError)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.fields: list[tuple[str, int]] = []
        self.depth = 0

    def _deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._fail(f"expression nested deeper than {MAX_DEPTH} levels")

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def _is(self, kind: str, value: Any = None) -> bool:
        t = self.tok
        return t.kind == kind and (value is None or t.value == value)

    def _advance(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def _fail(self, message: str, tok: Token | None = None) -> UsageError:
        return _caret(self.text, (tok or self.tok).pos, message)

    def _describe(self, tok: Token) -> str:
        if tok.kind == "end":
            return "the end of the expression"
        if tok.kind == "string":
            return f"string {tok.value!r}"
        return repr(str(tok.value))

    def parse(self) -> Expression:
        if self._is("end"):
            raise self._fail("empty expression")
        fn = self._or()
        if not self._is("end"):
            raise self._fail(f"unexpected {self._describe(self.tok)}; expected and, or, or the end")
        return Expression(self.text, fn, tuple(self.fields))

    def _or(self) -> Getter:
        parts = [self._and()]
        while self._is("kw", "or"):
            self._advance()
            parts.append(self._and())
        if len(parts) == 1:
            return parts[0]
        return lambda r, ps=tuple(parts): any(_truthy(p(r)) for p in ps)

    def _and(self) -> Getter:
        parts = [self._not()]
        while self._is("kw", "and"):
            self._advance()
            parts.append(self._not())
        if len(parts) == 1:
            return parts[0]
        return lambda r, ps=tuple(parts): all(_truthy(p(r)) for p in ps)

    def _not(self) -> Getter:
        if self._is("kw", "not"):
            self._advance()
            self._deeper()
            inner = self._not()
            self.depth -= 1
            return lambda r: not _truthy(inner(r))
        return self._compare()

    def _compare(self) -> Getter:
        left = self._operand()
        t = self.tok
        if t.kind == "op" and t.value in _COMPARE:
            self._advance()
            right = self._operand(after=t)
            fn = _COMPARE[t.value]
            return lambda r: fn(left(r), right(r))
        negate = False
        if self._is("kw", "not"):
            not_tok = self._advance()
            if not self._is("kw", "in"):
                raise self._fail("expected 'in' after 'not' (compare with != for 'not equal')",
                                 not_tok)
            negate = True
        if self._is("kw", "in"):
            op = self._advance()
            right = self._operand(after=op)
            if negate:
                return lambda r: not _member(left(r), right(r))
            return lambda r: _member(left(r), right(r))
        return left

    def _operand(self, after: Token | None = None) -> Getter:
        t = self.tok
        if t.kind == "op" and t.value == "(":
            self._advance()
            self._deeper()
            inner = self._or()
            if not self._is("op", ")"):
                raise self._fail(f"expected ')' to close the '(' at column {t.pos + 1}")
            self._advance()
            self.depth -= 1
            return inner
        if t.kind == "op" and t.value == "[":
            return self._list()
        if t.kind == "name":
            self._advance()
            self.fields.append((t.value, t.pos))
            return _field_getter(t.value)
        value = self._literal(after)
        return lambda r: value

    def _literal(self, after: Token | None = None) -> Any:
        t = self.tok
        if t.kind == "op" and t.value == "-":
            self._advance()
            if not self._is("number"):
                raise self._fail("expected a number after '-'")
            return -self._advance().value
        if t.kind in ("number", "string"):
            return self._advance().value
        if t.kind == "kw" and t.value in ("true", "false", "null"):
            self._advance()
            return {"true": True, "false": False, "null": None}[t.value]
        if after is None and self.i > 0:
            after = self.tokens[self.i - 1]
        what = f" after {str(after.value)!r}" if after is not None else ""
        raise self._fail(f"expected a value{what}, found {self._describe(t)}")

    def _list(self) -> Getter:
        open_tok = self._advance()  # "["
        items: list[Any] = []
        if not self._is("op", "]"):
            while True:
                items.append(self._literal())
                if self._is("op", ","):
                    self._advance()
                    continue
                if self._is("op", "]"):
                    break
                if self._is("end"):
                    raise self._fail(f"expected ']' to close the '[' at column {open_tok.pos + 1}")
                raise self._fail(f"expected ',' or ']' in the list, found {self._describe(self.tok)}")
        self._advance()
        return lambda r: items


def _field_getter(name: str) -> Getter:
    """Look a field up exactly, then case-insensitively, then under ``attributes``."""
    folded = name.casefold()
    short = name.split(".", 1)[1] if folded.startswith(("attributes.", "attr.")) else None

    def get(record: Mapping[str, Any]) -> Any:
        attrs = record.get("attributes")
        if short is not None:  # attributes.x: the manifest's own column, never a derived field
            if isinstance(attrs, Mapping):
                if short in attrs:
                    return attrs[short]
                for key, value in attrs.items():
                    if isinstance(key, str) and key.casefold() == short.casefold():
                        return value
            return None
        if name in record:
            return record[name]
        if isinstance(attrs, Mapping) and name in attrs:
            return attrs[name]
        # case-insensitive fallback (manifest headers vary: Price, PRICE, price)
        for source in (record, attrs if isinstance(attrs, Mapping) else {}):
            for key, value in source.items():
                if isinstance(key, str) and key.casefold() == folded:
                    return value
        return None

    return get


def parse(text: str) -> Expression:
    """Parse ``text`` into an Expression; UsageError with a caret on a syntax error."""
    if not isinstance(text, str):
        raise UsageError(f"expression must be a string, got {type(text).__name__}")
    return _Parser(text).parse()


def evaluate(text: str, record: Mapping[str, Any]) -> bool:
    """Parse and evaluate once (use ``parse`` to evaluate one expression over many records)."""
    return parse(text).evaluate(record)
