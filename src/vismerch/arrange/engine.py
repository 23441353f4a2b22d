"""Visual grid arrangement: sell first, look balanced, explain every slot.

``arrange`` is a pure function over arrays (ids, scores, vectors, colour families,
categories/brands, quality flags, duplicate groups, pins). It maximises a DCG-like
position-weighted business score minus penalties for

- look-alike neighbours (vector cosine ≥ a threshold), side by side and one above the
  other, at *every* width asked for at once (one order is shown at 2, 3, 4, 5 columns);
- runs of one colour family (mode ``mix``) or breaks in colour (mode ``flow``: colour
  blocks and gradients along the reading order);
- rows dominated by one category or brand (more than half the row);
- near-duplicates (the same photo on several products) close to each other.

How: greedy slot filling. The unplaced products stay in score order; each free slot
takes the candidate of the next ``window`` unplaced ones with the best
``score − λ·σ·penalty`` (σ = the score spread near the top, so λ is unit-free), ties by
score rank then id. Pinned slots are filled first and never move. A product is placed
at most ``window`` slots after its place in the plain (rules-only) order, which bounds
how far diversity can push a good product down. A local swap pass then repairs
remaining look-alike neighbours. A business floor (default 98 % of the plain order's
DCG over the first 48 positions) is checked on the first screens: if diversity would
cost more, the strongest λ that keeps the floor is found by bisection, redoing only
that prefix. Products with quality flags stay below the first screen unless pinned.
Penalties are read from small per-slot tables with one numpy gather per term: 10,000
products take about 0.4 s of one core.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vismerch.arrange.explain import (
    BreakpointReport,
    SkipCause,
    breakpoint_reports,
    dcg,
    slot_reason,
)
from vismerch.arrange.greedy import Greedy, Problem, Tables, repair
from vismerch.arrange.scoring import sort_by_score
from vismerch.errors import UsageError

MODES = ("mix", "flow")
DUPLICATE_POLICIES = ("space", "collapse", "off")

# hue angle of each colour family (flow mode: distance between neighbours along the wheel)
_FAMILY_HUE = {"red": 0.0, "brown": 25.0, "orange": 30.0, "yellow": 55.0, "green": 120.0,
               "blue": 215.0, "purple": 275.0, "pink": 330.0}


@dataclass
class ArrangeOptions:
    """Knobs of the arrangement; the defaults are what the CLI and API use."""

    lookalike_cosine: float = 0.9  # neighbours at least this similar count as look-alikes
    window: int = 32  # candidates considered per slot (and the most a product may wait)
    strength: float = 1.0  # λ: how much score (in units of the top spread) a penalty is worth
    lookalike_weight: float = 1.0
    colour_weight: float = 0.3
    dominance_weight: float = 0.3
    duplicate_weight: float = 2.0
    quality_gate: bool = True  # flagged products stay below the first screen unless pinned
    first_screen: int | None = None  # positions; default two rows of the widest grid
    duplicates: str = "space"  # space | collapse | off
    duplicate_gap: int | None = None  # positions; default twice the widest grid
    business_floor: float = 0.98  # keep ≥ this share of the plain order's DCG@depth
    business_depth: int = 48
    repair_depth: int = 480  # the swap pass looks at the first positions only

    def validate(self) -> None:
        if not 0.0 < self.lookalike_cosine <= 1.0:
            raise UsageError(f"look-alike cosine must be in (0, 1], got {self.lookalike_cosine}")
        if self.window < 1:
            raise UsageError(f"window must be ≥ 1, got {self.window}")
        if self.duplicates not in DUPLICATE_POLICIES:
            raise UsageError(f"unknown duplicates policy {self.duplicates!r}",
                             hint="choose one of: " + ", ".join(DUPLICATE_POLICIES))
        if not 0.0 <= self.business_floor <= 1.0:
            raise UsageError(f"business floor must be in [0, 1], got {self.business_floor}")


@dataclass
class Slot:
    position: int  # 1-based
    id: str
    reason: str
    kind: str  # pinned | score | diversity | quality
    score: float
    rank: int  # 1-based rank by score alone
    plain_position: int  # 1-based position in the plain (rules only) order

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.position, "id": self.id, "reason": self.reason,
                "kind": self.kind, "score": round(self.score, 6), "rank": self.rank,
                "plain_position": self.plain_position}


@dataclass
class Arrangement:
    """The result: the order, one explained slot per position, and the measurements."""

    ids: list[str]
    order: np.ndarray  # indices into the input arrays
    plain_order: np.ndarray
    slots: list[Slot]
    breakpoints: list[BreakpointReport]
    business: dict[str, float]
    collapsed: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "slots": [s.as_dict() for s in self.slots],
            "breakpoints": [b.as_dict() for b in self.breakpoints],
            "business": self.business, "collapsed": self.collapsed,
            "warnings": self.warnings, "params": self.params,
        }


def _codes(values: Sequence[Any] | None, n: int) -> tuple[np.ndarray, list[Any]]:
    """Labels -> int codes (-1 for missing), plus the code -> label list."""
    if values is None:
        return np.full(n, -1, np.int64), []
    if len(values) != n:
        raise UsageError(f"expected {n} labels, got {len(values)}")
    table: dict[Any, int] = {}
    get = table.setdefault
    codes = [
        -1 if v is None or v == "" or v == -1 or (isinstance(v, float) and math.isnan(v))
        else get(v.casefold() if isinstance(v, str) else v, len(table))
        for v in values
    ]
    out = np.array(codes, np.int64).reshape(n)
    labels = [None] * len(table)
    for k, c in table.items():
        labels[c] = k
    return out, labels


def _flow_distance(labels: list[Any]) -> np.ndarray:
    """Family x family distance in [0, 1] along the colour wheel; neutrals sit at 0.5."""
    k = len(labels)
    dist = np.ones((k + 1, k + 1), np.float32)  # last row/col: unknown family
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            if a == b:
                dist[i, j] = 0.0
            elif a in _FAMILY_HUE and b in _FAMILY_HUE:
                d = abs(_FAMILY_HUE[a] - _FAMILY_HUE[b]) % 360.0
                dist[i, j] = min(d, 360.0 - d) / 180.0
            else:
                dist[i, j] = 0.5
    dist[k, :] = dist[:, k] = 0.0  # unknown colour: no opinion
    return dist


# ---------------------------------------------------------------- public API


@dataclass
class Products:
    """What ``arrange`` orders: aligned per-product inputs (index i everywhere is ``ids[i]``).

    ``scores``: business score, higher first. ``vectors``: L2-normalised, (n, d); None
    disables the look-alike term. ``colour_family`` (e.g. "blue"), ``category`` and
    ``brand`` labels; ``flagged`` (quality flags, named per index by ``flag_names``);
    ``duplicate_group`` (-1 = none) with ``representative`` marking each group's hero."""

    ids: Sequence[str]
    scores: Sequence[float] | np.ndarray
    vectors: np.ndarray | None = None
    colour_family: Sequence[str | None] | None = None
    category: Sequence[str | None] | None = None
    brand: Sequence[str | None] | None = None
    flagged: Sequence[bool] | np.ndarray | None = None
    flag_names: Mapping[int, Sequence[str]] | None = None
    duplicate_group: Sequence[int] | np.ndarray | None = None
    representative: Sequence[bool] | np.ndarray | None = None


@dataclass
class _Prepared:
    """``Products`` checked and turned into arrays (labels as integer codes, -1 = none)."""

    ids: list[str]
    score: np.ndarray
    vec: np.ndarray | None
    fam: np.ndarray
    fam_labels: list[Any]
    cat: np.ndarray
    brd: np.ndarray
    flag: np.ndarray
    group: np.ndarray  # compacted group ids
    rep: np.ndarray


def arrange(products: Products, *, pins: Mapping[int, int] | None = None,
            columns: int | Sequence[int] = 4, mode: str = "mix", options: ArrangeOptions | None = None,
            notes: Mapping[int, Sequence[str]] | None = None,
            pin_notes: Mapping[int, str] | None = None) -> Arrangement:
    """Arrange ``products`` for a grid shown at the width(s) ``columns``.

    ``pins`` maps a 0-based slot to a product index and always wins. ``notes[i]`` adds rule
    explanations to a product's reason (``pin_notes[i]`` to a pinned one's). Returns the
    order with a reason for every slot and per-width reports.
    """
    opts = options or ArrangeOptions()
    opts.validate()
    if mode not in MODES:
        raise UsageError(f"unknown arrangement mode {mode!r}", hint="choose mix or flow")
    widths = tuple(dict.fromkeys(int(c) for c in ([columns] if isinstance(columns, int)
                                                  else columns)))
    if not widths or min(widths) < 1:
        raise UsageError(f"columns must be positive integers, got {columns!r}")
    inp = _prepare(products)
    pins = _checked_pins(pins, len(inp.ids))
    pinned_items = set(pins.values())
    keep, collapsed = np.ones(len(inp.ids), bool), {}
    if opts.duplicates == "collapse" and (inp.group >= 0).any():
        keep, collapsed = _collapse(inp, pinned_items)
    rank_order, rank = _ranks(inp.score, inp.ids)
    n_slots = int(keep.sum())
    warnings: list[str] = []
    pins = _clamp_pins(pins, n_slots, inp.ids, warnings)
    items = np.array([i for i in rank_order if keep[i] and int(i) not in pinned_items], np.int64)
    pb = _problem(inp, rank, items, pins, keep, widths, mode, opts)
    order, plain_order, causes, business = _search(pb, opts)
    slots = _explain(pb, order, plain_order, causes, products.flag_names or {}, notes or {},
                     pin_notes or {})
    vec, ids = inp.vec, inp.ids
    reports = breakpoint_reports(
        [ids[i] for i in order], vec[order] if vec is not None else None,
        vec[plain_order] if vec is not None else None, widths, opts.lookalike_cosine, pb.business_depth)
    return Arrangement(
        ids=[ids[i] for i in order], order=order, plain_order=plain_order, slots=slots,
        breakpoints=reports, business=business, collapsed=collapsed, warnings=warnings,
        params={"columns": list(widths), "mode": mode, "first_screen": pb.first_screen,
                "lookalike_cosine": opts.lookalike_cosine, "window": opts.window,
                "duplicates": opts.duplicates, "quality_gate": opts.quality_gate,
                "business_floor": opts.business_floor},
    )


def _prepare(p: Products) -> _Prepared:
    ids = [str(i) for i in p.ids]
    n = len(ids)
    if len(set(ids)) != n:
        raise UsageError("product ids must be unique")
    score = np.asarray(p.scores, np.float64).reshape(-1)
    if score.size != n:
        raise UsageError(f"expected {n} scores, got {score.size}")
    vec = None
    if p.vectors is not None and n:
        vec = np.ascontiguousarray(np.asarray(p.vectors, np.float32))
        if vec.ndim != 2 or vec.shape[0] != n:
            raise UsageError(f"vectors must be (n, d) with n={n}, got {vec.shape}")
    fam, fam_labels = _codes(p.colour_family, n)
    for name in ("flagged", "duplicate_group", "representative"):
        values = getattr(p, name)
        if values is not None and len(values) != n:
            raise UsageError(f"{name} has {len(values)} entries for {n} products")
    group = (np.full(n, -1, np.int64) if p.duplicate_group is None
             else np.asarray(p.duplicate_group, np.int64).reshape(-1))
    group = np.where(group >= 0, group, -1)
    if group.max(initial=-1) >= 0:  # compact group ids so per-group arrays stay small
        _, compact = np.unique(group, return_inverse=True)
        group = np.where(group >= 0, compact - (1 if (group < 0).any() else 0), -1)
    return _Prepared(
        ids=ids, score=np.nan_to_num(score, nan=0.0), vec=vec, fam=fam, fam_labels=fam_labels,
        cat=_codes(p.category, n)[0], brd=_codes(p.brand, n)[0],
        flag=np.zeros(n, bool) if p.flagged is None else np.asarray(p.flagged, bool).reshape(-1),
        group=group,
        rep=np.zeros(n, bool) if p.representative is None else np.asarray(p.representative, bool))


def _checked_pins(pins: Mapping[int, int] | None, n: int) -> dict[int, int]:
    out = {int(slot): int(item) for slot, item in (pins or {}).items()}
    for slot, item in out.items():
        if slot < 0:
            raise UsageError(f"pin slot {slot} is negative (slots count from 0 here)")
        if not 0 <= item < n:
            raise UsageError(f"pin at slot {slot} names product index {item}, outside 0..{n - 1}")
    if len(set(out.values())) != len(out):
        raise UsageError("a product is pinned to two slots; resolve the rules first")
    return out


def _ranks(score: np.ndarray, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The plain score order and each product's 0-based place in it."""
    order = sort_by_score(score, ids)
    rank = np.empty(len(ids), np.int64)
    rank[order] = np.arange(len(ids))
    return order, rank


def _collapse(inp: _Prepared, pinned_items: set[int]) -> tuple[np.ndarray, dict[str, list[str]]]:
    """Keep one product per near-duplicate group (pinned > representative > best scored);
    the shown tile stands for its group, so it takes the group's best score (in place)."""
    n, group = len(inp.ids), inp.group
    _, rank = _ranks(inp.score, inp.ids)
    keep = np.ones(n, bool)
    collapsed: dict[str, list[str]] = {}
    for g in np.unique(group[group >= 0]):
        members = np.nonzero(group == g)[0]
        if members.size < 2:
            continue
        hero = next((int(m) for m in members if int(m) in pinned_items), None)
        if hero is None:
            reps = [int(m) for m in members if inp.rep[m]]
            hero = reps[0] if reps else int(members[np.argmin(rank[members])])
        for m in members:
            if int(m) != hero and int(m) not in pinned_items:
                keep[m] = False
        collapsed[inp.ids[hero]] = sorted(inp.ids[int(m)] for m in members if not keep[m])
    best = np.full(int(group.max()) + 1, -np.inf)
    np.maximum.at(best, group[group >= 0], inp.score[group >= 0])
    heroes = np.array([i for i in range(n) if keep[i] and group[i] >= 0], np.int64)
    if heroes.size:
        inp.score[heroes] = np.maximum(inp.score[heroes], best[group[heroes]])
    return keep, collapsed


def _problem(inp: _Prepared, rank: np.ndarray, items: np.ndarray, pins: dict[int, int],
             keep: np.ndarray, widths: tuple[int, ...], mode: str, opts: ArrangeOptions) -> Problem:
    n_slots = int(keep.sum())
    widest = max(widths)
    first_screen = opts.first_screen if opts.first_screen is not None else 2 * widest
    top = inp.score[items[: 2 * max(opts.business_depth, opts.window)]]
    sigma = float(top.max() - top.min()) if top.size > 1 else 0.0
    sigma = max(sigma, 1e-6 * max(1.0, float(np.abs(inp.score).max(initial=0.0))), 1e-9)
    sentinel = np.array([-1], np.int64)
    labels = [np.concatenate([lab, sentinel]) for lab in (inp.cat, inp.brd)
              if len(np.unique(lab[keep])) > 1]  # a label shared by all changes no choice
    vec = inp.vec
    return Problem(
        ids=inp.ids, score=inp.score, gain=np.clip(inp.score, 0.0, None),
        vectors=None if vec is None else np.vstack([vec, np.zeros((1, vec.shape[1]), np.float32)]),
        family=np.concatenate([inp.fam, sentinel]),
        flow_dist=_flow_distance(inp.fam_labels) if mode == "flow" else None,
        labels=labels, flagged=inp.flag & opts.quality_gate,
        group=np.concatenate([inp.group, sentinel]), rank=rank, plain_position=None,
        items=items, pins=pins,
        n_slots=n_slots, widths=widths, mode=mode, window=opts.window,
        lookalike_cosine=opts.lookalike_cosine,
        weights={"lookalike": opts.lookalike_weight, "colour": opts.colour_weight,
                 "dominance": opts.dominance_weight, "duplicate": opts.duplicate_weight},
        duplicates=opts.duplicates, first_screen=min(first_screen, n_slots),
        dup_gap=opts.duplicate_gap or 2 * widest, sigma=sigma,
        business_floor=opts.business_floor, business_depth=opts.business_depth,
        repair_depth=opts.repair_depth,
    )


def _search(pb: Problem, opts: ArrangeOptions
            ) -> tuple[np.ndarray, np.ndarray, dict[int, SkipCause], dict[str, float]]:
    """The arranged order, the plain (rules-only) order, why products waited, and the
    business report. The business floor: if the first screens lose too much business,
    the strongest λ that keeps the floor is found by bisection (each try redoes only the
    prefix)."""
    n_slots, depth = pb.n_slots, pb.business_depth
    plain = Greedy(pb, 0.0)
    plain.run(n_slots)
    plain_order = plain.placed.copy()
    pb.plain_position = np.full(len(pb.ids), 1 << 40, np.int64)
    pb.plain_position[plain_order] = np.arange(n_slots)
    plain_dcg = dcg(pb.gain[plain_order], depth)
    floor = opts.business_floor * plain_dcg
    tables = Tables(n_slots, pb.widths, plain.pinned) if opts.strength > 0 and n_slots else None

    def attempt(lam: float) -> tuple[Greedy, bool]:
        g = Greedy(pb, lam, tables)
        g.run(depth)
        return g, lam == 0 or dcg(pb.gain[g.placed[:depth]], depth) >= floor - 1e-12

    lam = opts.strength
    greedy, ok = attempt(lam)
    if not ok:
        lo, hi, best = 0.0, lam, None
        for _ in range(7):
            mid = (lo + hi) / 2
            g, ok = attempt(mid)
            if ok:
                lo, best = mid, g
            else:
                hi = mid
        lam = lo
        greedy = best if best is not None else attempt(0.0)[0]
    greedy.run(n_slots)
    full, swaps = repair(pb, greedy.order, greedy.pinned, lam * pb.sigma, plain_dcg)
    order = full[:n_slots]
    arranged_dcg = dcg(pb.gain[order], depth)
    business = {
        "depth": depth, "plain": round(plain_dcg, 6), "arranged": round(arranged_dcg, 6),
        "ratio": round(arranged_dcg / plain_dcg, 6) if plain_dcg > 0 else 1.0,
        "strength_used": lam, "swaps": swaps,
    }
    return order, plain_order, greedy.causes, business


def _clamp_pins(pins: dict[int, int], n_slots: int, ids: list[str],
                warnings: list[str]) -> dict[int, int]:
    """Pins past the end move to the last free slots (in the order they asked for)."""
    out = {int(s): int(i) for s, i in pins.items() if 0 <= int(s) < n_slots}
    late = sorted((int(s), int(i)) for s, i in pins.items() if not 0 <= int(s) < n_slots)
    free = [s for s in range(n_slots - 1, -1, -1) if s not in out]
    for s, i in late:
        if not free:
            warnings.append(f"pin of {ids[i]} to position {s + 1} dropped: no free slot")
            continue
        slot = free.pop(0) if s >= n_slots else free.pop()
        out[slot] = i
        warnings.append(f"pin of {ids[i]} to position {s + 1} is past the end; "
                        f"placed at {slot + 1}")
    return out


def _explain(pb: Problem, order: np.ndarray, plain: np.ndarray,
             causes: dict[int, SkipCause], flag_names: Mapping[int, Sequence[str]],
             notes: Mapping[int, Sequence[str]], pin_notes: Mapping[int, str]) -> list[Slot]:
    plain_pos = np.empty(len(pb.ids), np.int64)
    plain_pos[plain] = np.arange(len(plain)) + 1
    pos_l, score_l = plain_pos.tolist(), pb.score.tolist()
    rank_l, flag_l = (pb.rank + 1).tolist(), pb.flagged.tolist()
    pinned_slots = set(pb.pins)
    slots = []
    for p, item in enumerate(order.tolist()):
        pp, is_pin, rank = pos_l[item], p in pinned_slots, rank_l[item]
        # held back by the quality gate: flagged, not pinned, and good enough for screen one
        gated = flag_l[item] and not is_pin and rank <= pb.first_screen
        kind = "pinned" if is_pin else ("diversity" if pp != p + 1 else "score")
        extra = list(notes.get(item, ()))
        if is_pin and item in pin_notes:
            extra.insert(0, pin_notes[item])
        if gated:
            names = ", ".join(flag_names.get(item, ())) or "quality flags"
            extra.append(f"flagged ({names}): held below the first screen "
                         f"(positions 1-{pb.first_screen})")
            if kind == "score":
                kind = "quality"
        reason = slot_reason(kind="pinned" if is_pin else "score", score=score_l[item],
                             rank=rank, position=p + 1, plain_position=pp,
                             cause=causes.get(item), notes=extra)
        slots.append(Slot(p + 1, pb.ids[item], reason, kind, score_l[item], rank, pp))
    return slots
