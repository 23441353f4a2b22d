"""Store-level arrangement of one collection: members -> scores -> rules -> grid.

``arrange_collection(store, "dresses", columns=4)`` loads the collection's products, their
business scores (``merch.scoring``), visual vectors (a neural backend when the store has
one, else ``colour``), dominant colour families, quality flags and duplicate groups,
applies the rules that apply (``vismerch.rules``), arranges the visible products
(``merch.arrange``) and logs out-of-stock pin substitutions. Nothing is saved unless
``service.versions.save_order`` is called with the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from vismerch import rules as rules_mod
from vismerch.arrange.engine import Arrangement, ArrangeOptions, Products, arrange
from vismerch.arrange.scoring import score_products
from vismerch.catalog.store import utc_timestamp
from vismerch.config import setting as _setting
from vismerch.errors import UsageError
from vismerch.features.base import list_backends
from vismerch.merch import collections as colls

if TYPE_CHECKING:
    from vismerch.catalog.store import Store
    from vismerch.config import Settings


@dataclass
class CollectionArrangement:
    """An arranged collection: the grid plus what the rules did."""

    collection: str
    arrangement: Arrangement
    hidden: list[dict[str, Any]] = field(default_factory=list)  # {id, rules[, duplicate_of]}
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # substitutions, releases
    backend: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    member_vectors: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)
    records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    applied: list[int] = field(default_factory=list)  # rules that changed something
    base: Any = field(default=None, repr=False, compare=False)  # scoring.Scores of the members
    adjusted: np.ndarray | None = field(default=None, repr=False, compare=False)  # after rules
    rows: dict[str, int] = field(default_factory=dict, repr=False, compare=False)  # id -> row

    def score_parts(self, pid: str) -> dict[str, float]:
        """A member's weighted business signals and ``rules`` (its boost/bury adjustment)."""
        i = self.rows.get(pid)
        if self.base is None or self.adjusted is None or i is None:
            return {}
        parts = {k: round(w * float(self.base.signals[k][i]), 6) for k, w in self.base.weights.items()}
        parts["rules"] = round(float(self.adjusted[i] - self.base.score[i]), 6)
        return parts

    @property
    def ids(self) -> list[str]:
        return self.arrangement.ids

    def vectors(self, ids: Sequence[str]) -> np.ndarray | None:
        """The visual vectors the arrangement used, for ``ids`` (collection members), as
        ``collection_vectors`` gives them: no second read of the feature shards."""
        if self.member_vectors is None:
            return None
        if not ids:
            dim = next((len(v) for v in self.member_vectors.values()), 0)
            return np.zeros((0, dim), np.float32)
        return np.stack([self.member_vectors[i] for i in ids])

    def slots(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self.arrangement.slots]

    def summary(self) -> dict[str, Any]:
        return {"collection": self.collection, "size": len(self.ids),
                "business": self.arrangement.business,
                "breakpoints": [b.as_dict() for b in self.arrangement.breakpoints],
                "hidden": self.hidden, "conflicts": self.conflicts, "events": self.events,
                "collapsed": self.arrangement.collapsed, "warnings": self.arrangement.warnings,
                "backend": self.backend, "params": self.params}

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary(), "slots": self.slots()}


def collection_vectors(store: Store, ids: Sequence[str], backend: str | None,
                       load: Callable[[str], Any] | None = None) -> np.ndarray | None:
    """(n, d) L2-normalised vectors aligned with ``ids``; zero rows for products without.
    ``load(backend)`` gives the features (default ``store.load_features``; a long-lived
    process passes its cache so the shards are read once per ingest, not per call)."""
    if backend is None:
        return None
    features = (load or store.load_features)(backend)
    if not len(features):
        return None
    row = {pid: i for i, pid in enumerate(features.ids)}
    out = np.zeros((len(ids), features.vectors.shape[1]), np.float32)
    for i, pid in enumerate(ids):
        j = row.get(pid)
        if j is not None:
            out[i] = features.vectors[j]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def implicit_rules(settings: Settings | None, rules: Sequence[rules_mod.Rule]) -> list[rules_mod.Rule]:
    """The rules a setting adds to every page: out-of-stock products buried to the bottom
    (``rules_bury_out_of_stock``) unless a bury-out-of-stock rule already reaches it."""
    if not _setting(settings, "rules_bury_out_of_stock") or \
            any(r.kind == "bury-out-of-stock" for r in rules):
        return []
    return [rules_mod.Rule(0, "bury-out-of-stock", factor=100.0)]


def parse_columns(columns: int | str | Sequence[int] | None, columns_set: Any = None
                  ) -> tuple[int, ...]:
    """``4`` and ``"2,3,4,5"`` -> widths; the primary width (``columns``) comes first."""
    widths: list[int] = []
    for value in (columns, columns_set):
        if value is None or value == "":
            continue
        parts = [value] if isinstance(value, int) else (
            str(value).split(",") if isinstance(value, str) else list(value))
        for part in parts:
            try:
                c = int(str(part).strip())
            except ValueError:
                raise UsageError(f"columns must be integers, got {part!r}",
                                 hint="e.g. --columns 4 --columns-set 2,3,4,5") from None
            if not 1 <= c <= 12:
                raise UsageError(f"columns must be between 1 and 12, got {c}")
            widths.append(c)
    return tuple(dict.fromkeys(widths)) or (4,)


@dataclass(frozen=True)
class ArrangeRequest:
    """How ``arrange_collection`` arranges: for a grid of ``columns`` (and the other widths in
    ``columns_set``, optimised at once) in ``mode`` with the business ``weights``, look-alikes
    by ``backend`` (default: the store's preferred visual one). Rules apply as they are
    active at ``at`` (an RFC 3339 UTC stamp; default now), including the ``subtree`` rules of
    the collection's parents; ``log``: record out-of-stock pin substitutions.
    ``load_features``: see ``collection_vectors``. ``strength`` 0 gives the plain (rules and
    score only) order. ``behaviour``: shopper-behaviour signals by product
    (``scoring.score_products``); pins and hides apply after the score, as always."""

    columns: int | Sequence[int] | str = 4
    columns_set: Sequence[int] | str | None = None
    mode: str = "mix"
    weights: Mapping[str, float] | str | None = None
    backend: str | None = None
    quality_gate: bool = True
    duplicates: str = "space"
    log: bool = True
    at: str | None = None
    load_features: Callable[[str], Any] | None = None
    strength: float | None = None
    behaviour: Mapping[str, Mapping[str, float]] | None = None


def arrange_collection(store: Store, name: str, *, settings: Settings | None = None,
                       options: ArrangeOptions | None = None, **request: Any) -> CollectionArrangement:
    """Arrange collection ``name`` of ``store``; ``request``: the fields of ``ArrangeRequest``,
    ``options`` the engine's (default: from the settings). See the module docstring."""
    req = ArrangeRequest(**request)
    member_ids = set(colls.members(store, name))  # refuses an unknown collection
    products = [p for p in store.products() if p.id in member_ids]
    widths = parse_columns(req.columns, req.columns_set)
    if options is None:
        options = _default_options(settings, req, max(widths))
    records = colls.product_records(store, products)
    weights = req.weights or _setting(settings, "arrange_weights") or None
    base = score_products(products, weights, behaviour=req.behaviour)
    chosen = store.pick_backend(req.backend, tuple(list_backends(visual=True)))
    vectors = collection_vectors(store, [p.id for p in products], chosen, req.load_features)
    at = req.at or utc_timestamp()
    rule_list = rules_mod.list_rules(store, name, applicable=True, enabled_only=True, at=at)
    rule_list += implicit_rules(settings, rule_list)
    res = rules_mod.resolve(rule_list, records, base.score, collection=name, vectors=vectors,
                            reverted=rules_mod.reverted_pins(store, name),
                            lineage=colls.ancestors(store, name), at=at)

    copies = {} if req.duplicates == "off" else _kept_elsewhere(store, records, set(res.pins.values()))
    visible = [i for i in range(len(products)) if i not in res.hidden and i not in copies]
    result = _arrange_visible(records, visible, res, base, vectors, widths, req.mode, options)
    if req.log and res.events:
        rules_mod.log_events(store, name, res.events)
    hidden = [{"id": records[i]["id"], "rules": ids} for i, ids in sorted(res.hidden.items())]
    hidden += [{"id": records[i]["id"], "rules": [], "duplicate_of": keep}
               for i, keep in sorted(copies.items()) if i not in res.hidden]
    return CollectionArrangement(
        collection=name, arrangement=result, hidden=hidden, conflicts=res.conflicts,
        events=res.events, backend=chosen,
        params={**result.params, "weights": base.weights, "backend": chosen},
        member_vectors=None if vectors is None else dict(zip([p.id for p in products], vectors,
                                                             strict=True)),
        records={r["id"]: r for r in records}, applied=sorted(res.applied), base=base,
        adjusted=res.scores, rows={r["id"]: i for i, r in enumerate(records)},
    )


def _default_options(settings: Settings | None, req: ArrangeRequest, widest: int) -> ArrangeOptions:
    return ArrangeOptions(
        lookalike_cosine=float(_setting(settings, "arrange_lookalike_cosine")),
        window=int(_setting(settings, "arrange_window")),
        business_floor=float(_setting(settings, "arrange_business_floor")),
        first_screen=int(_setting(settings, "arrange_first_screen_rows")) * widest,
        quality_gate=req.quality_gate, duplicates=req.duplicates,
        strength=1.0 if req.strength is None else float(req.strength))


def _arrange_visible(records: list[dict[str, Any]], visible: list[int], res: Any, base: Any,
                     vectors: np.ndarray | None, widths: tuple[int, ...], mode: str,
                     options: ArrangeOptions) -> Arrangement:
    """The grid of the members left visible (record indexes ``visible``) after the rules
    (``res``) and settled duplicates."""
    new_index = {old: new for new, old in enumerate(visible)}
    recs = [records[i] for i in visible]
    score_notes = {new_index[i]: [base.explain(i)] for i in visible}
    for i, extra in res.notes.items():
        if i in new_index:
            score_notes[new_index[i]].extend(extra)
    shown = Products(
        [r["id"] for r in recs],
        res.scores[visible],
        vectors[visible] if vectors is not None else None,
        colour_family=[r["colour_family"] for r in recs],
        category=[r.get("category") for r in recs],
        brand=[r.get("brand") for r in recs],
        flagged=[r["flagged"] for r in recs],
        flag_names={k: r["flags"] for k, r in enumerate(recs) if r["flags"]},
        duplicate_group=[r["duplicate_group"] if r["duplicate_group"] is not None else -1
                         for r in recs],
        representative=[r["representative"] for r in recs])
    return arrange(
        shown, pins={slot: new_index[i] for slot, i in res.pins.items()},
        columns=widths, mode=mode, options=options, notes=score_notes,
        pin_notes={new_index[i]: note for i, note in res.pin_notes.items()},
    )


def _kept_elsewhere(store: Store, records: list[dict[str, Any]], pinned: set[int]) -> dict[int, str]:
    """Members (record index -> the kept product) of duplicate groups a reviewer settled with
    "keep this one": the other copies leave the grid, so the kept product never ranks below
    its copy. A copy a rule pins stays (the pin is an explicit choice)."""
    from vismerch.dupes.reviews import group_reviews

    kept = {gid: r["keep"] for gid, r in group_reviews(store).items()
            if r["decision"] == "keep" and r["keep"]}
    if not kept:
        return {}
    return {i: kept[r["duplicate_group"]] for i, r in enumerate(records)
            if r.get("duplicate_group") in kept and r["id"] != kept[r["duplicate_group"]] and i not in pinned}
