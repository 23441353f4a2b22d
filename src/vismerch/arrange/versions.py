"""Arrangement versions, the pure part: names, orders, diffs and export rendering.

A version is a named order of one collection (each slot with its reason and the options
that made it). Drafts can be reordered; once published a version never changes, so a
rollback shows exactly what was shown before. The store side (SQL, the publication
history, the storefront grid) is ``catalog.versions_store``; the service that combines
them is ``service.versions``. Nothing here reads or writes a store.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from vismerch.errors import InvalidInput

PUBLISHED = "published"  # alias for the collection's published version
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,119}$")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as a formula


def check_version_name(name: str, field: str = "name") -> str:
    """A version name: letters, digits, ``-``, ``_``, ``.``; ``published`` is reserved."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidInput(field, f"bad version name {name!r}",
                           hint="use up to 120 letters, digits, '-', '_' or '.', starting with a "
                                "letter or digit")
    if name == PUBLISHED:
        raise InvalidInput(field, f"{PUBLISHED!r} is reserved (it names the published version)")
    return name


def items_of(result: Any) -> tuple[list[list[str]], dict[str, Any], dict[str, Any]]:
    """(items ``[[id, reason], ...]``, params, summary) from a CollectionArrangement, an
    Arrangement or a plain sequence of product ids."""
    if hasattr(result, "arrangement"):  # CollectionArrangement
        arr = result.arrangement
        return ([[s.id, s.reason] for s in arr.slots], dict(result.params), result.summary())
    if hasattr(result, "slots"):  # Arrangement
        return ([[s.id, s.reason] for s in result.slots], dict(result.params),
                {"business": result.business})
    ids = [str(i) for i in result]
    return [[i, ""] for i in ids], {}, {}


def reorder(items: Sequence[Sequence[str]], ids: Sequence[str]) -> list[list[str]]:
    """A draft's items in the order ``ids``: a product that stays where it was keeps its
    reason, one that moved or is new says so."""
    before = {pid: (k + 1, reason) for k, (pid, reason) in enumerate(items)}
    out = []
    for k, pid in enumerate(ids, start=1):
        if pid not in before:
            out.append([pid, "added by hand"])
        elif before[pid][0] == k:
            out.append([pid, before[pid][1]])
        else:
            out.append([pid, f"moved by hand from {before[pid][0]}"])
    return out


def check_ids(ids: Sequence[Any], known: Iterable[str] | None = None, field: str = "ids",
              where: str = "this store") -> list[str]:
    """A hand-made order: product id strings, none twice, each in ``known`` (the products
    of ``where``) when given."""
    seen: set[str] = set()
    for k, pid in enumerate(ids):
        if not isinstance(pid, str) or not pid:
            raise InvalidInput(f"{field}[{k}]", f"{field}[{k}] must be a product id, got {pid!r}")
        if pid in seen:
            raise InvalidInput(f"{field}[{k}]", f"{pid!r} is listed twice (a grid shows a product once)")
        seen.add(pid)
    if known is not None:
        known = set(known)
        for k, pid in enumerate(ids):
            if pid not in known:
                raise InvalidInput(f"{field}[{k}]", f"{pid!r} is not a product of {where}")
    return list(ids)


def diff_orders(a: Sequence[str], b: Sequence[str]) -> dict[str, Any]:
    """Moved / added / removed products from order ``a`` to order ``b`` (1-based positions).

    ``moved`` is a minimal edit: the products kept in both whose order relative to the others
    changed, i.e. all but a longest run that stays in order (one product dragged from 50 to 1
    is one move, not 49 shifted places). Among equally long runs, the one keeping the most
    products at their very position wins. ``shifted``: the others whose index changed anyway
    (by an insertion, a removal or a move around them)."""
    pos_a = {pid: k + 1 for k, pid in enumerate(a)}
    pos_b = {pid: k + 1 for k, pid in enumerate(b)}
    common = [pid for pid in a if pid in pos_b]
    stay = _longest_kept_run(common, pos_a, pos_b)
    moved = [{"id": pid, "from": pos_a[pid], "to": pos_b[pid], "delta": pos_b[pid] - pos_a[pid]}
             for pid in common if pid not in stay]
    moved.sort(key=lambda m: (-abs(m["delta"]), m["to"]))
    return {
        "moved": moved,
        "added": [{"id": pid, "position": p} for pid, p in pos_b.items() if pid not in pos_a],
        "removed": [{"id": pid, "position": p} for pid, p in pos_a.items() if pid not in pos_b],
        "unchanged": sum(1 for pid, p in pos_b.items() if pos_a.get(pid) == p),
        "shifted": sum(1 for pid in stay if pos_a[pid] != pos_b[pid]),
    }


def _longest_kept_run(common: list[str], pos_a: dict[str, int], pos_b: dict[str, int]) -> set[str]:
    """The products of ``common`` (in a's order) forming a longest subsequence increasing in
    b's order, preferring runs with more products at an unchanged position: O(n log n), a
    Fenwick tree of prefix maxima over b's positions."""
    n = len(common)
    size = max(pos_b.values(), default=0)
    # tree[i]: the best run ending at a b-position <= i, packed in one int (score * base + k + 1)
    # so comparing two is one integer comparison
    base = n + 1
    tree = [0] * (size + 1)
    best_at, back = [0] * n, [-1] * n
    for k, pid in enumerate(common):
        at, best = pos_b[pid], 0
        i = at - 1
        while i > 0:
            if tree[i] > best:
                best = tree[i]
            i -= i & -i
        # a run's length dominates; a product in place adds a tie-breaking fraction
        best_at[k] = best // base + base + (1 if pos_a[pid] == at else 0)
        back[k] = best % base - 1
        packed = best_at[k] * base + k + 1
        i = at
        while i <= size:
            if packed > tree[i]:
                tree[i] = packed
            i += i & -i
    end = max(range(n), key=best_at.__getitem__, default=-1)
    stay: set[str] = set()
    while end >= 0:
        stay.add(common[end])
        end = back[end]
    return stay


# bidi controls (an RLO shows "gpj.exe" as "exe.jpg") and control characters other than the
# tab, CR and LF that CSV quotes: dropped from exported text cells
_HIDDEN = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def spreadsheet_safe(cell: Any) -> Any:
    """A text cell without bidi or control characters, and prefixed with ``'`` when a
    spreadsheet would run it as a formula (OWASP's CSV-injection advice); numbers pass."""
    if not isinstance(cell, str):
        return cell
    cell = _HIDDEN.sub("", cell)
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


EXPORT_FORMATS = ("csv", "json")
EXPORT_COLUMNS = ("position", "product_id", "title")


def render_export(version: dict[str, Any], fmt: str, *, spreadsheet: bool = True) -> str:
    """A version (``{collection, name, created_at, published, items: [{position, id,
    title?}]}``) as CSV or JSON text. CSV cells that start like a formula are neutralised
    unless ``spreadsheet`` is False (a machine sync that needs the ids byte for byte)."""
    fmt = fmt.lower()
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput("format", f"unknown export format {fmt!r}", hint="choose csv or json")
    items = version["items"]
    if fmt == "json":
        return json.dumps({"collection": version["collection"], "version": version["name"],
                           "created_at": version["created_at"], "published": version["published"],
                           "items": [{"position": i["position"], "id": i["id"],
                                      "title": i.get("title")} for i in items]}, indent=2) + "\n"
    buf = io.StringIO()
    # a bare CR in a cell is not quoted by QUOTE_MINIMAL with "\n" lines, and readers
    # would split the row there: such a file quotes every cell
    bare_cr = any("\r" in i["id"] or "\r" in (i.get("title") or "") for i in items)
    writer = csv.writer(buf, lineterminator="\n",
                        quoting=csv.QUOTE_NONNUMERIC if bare_cr else csv.QUOTE_MINIMAL)
    writer.writerow(EXPORT_COLUMNS)
    cell = spreadsheet_safe if spreadsheet else (lambda value: value)
    writer.writerows((i["position"], cell(i["id"]), cell(i.get("title") or "")) for i in items)
    return buf.getvalue()
