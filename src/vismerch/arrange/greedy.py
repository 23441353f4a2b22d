"""The arrangement engine: greedy slot filling over a candidate window, then swap repair.

Kept apart from ``arrange.py`` (inputs, options, results) so each file has one job.
Everything here works on integer-coded arrays prepared by ``arrange``; item index ``n``
is a sentinel (zero vector, no colour, no labels) that pads neighbour tables so the
inner loop needs no masks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from vismerch.arrange.explain import SkipCause, dcg


@dataclass
class Problem:
    ids: list[str]
    score: np.ndarray  # (n,) float64
    gain: np.ndarray  # business value for the DCG (score clipped at 0)
    vectors: np.ndarray | None  # (n + 1, d) float32, last row zero (sentinel)
    family: np.ndarray  # (n + 1,) int, -1 = unknown
    flow_dist: np.ndarray | None  # family x family distance (flow mode), last row: unknown
    labels: list[np.ndarray]  # category / brand codes (n + 1,) that vary (constant ones dropped)
    flagged: np.ndarray  # (n,) bool, only when the quality gate is on
    group: np.ndarray  # (n + 1,) int duplicate group, -1 = none
    rank: np.ndarray  # (n,) 0-based rank by score
    plain_position: np.ndarray | None  # (n,) 0-based slot in the plain order (set after it)
    items: np.ndarray  # items to place in rank order (pinned and collapsed excluded)
    pins: dict[int, int]  # slot -> item
    n_slots: int
    widths: tuple[int, ...]
    mode: str  # mix | flow
    window: int
    lookalike_cosine: float
    weights: dict[str, float]  # lookalike, colour, dominance, duplicate
    duplicates: str
    first_screen: int
    dup_gap: int
    sigma: float
    business_floor: float
    business_depth: int
    repair_depth: int


class Tables:
    """Per-slot neighbour tables over all widths; they depend only on slots and pins.

    ``nq[p]`` lists neighbour slots already filled when slot p is filled (left, up at
    each width, and pinned right/down ones), padded with the sentinel slot ``n_slots``;
    ``wl``/``wc`` are their look-alike and colour weights.
    """

    def __init__(self, n_slots: int, widths: tuple[int, ...], pinned: np.ndarray):
        k = len(widths)
        p = np.arange(n_slots)
        sent = n_slots
        pin_ext = np.append(pinned, False)
        cols_q, cols_l, cols_c = [], [], []
        left_count = sum((p % c) != 0 for c in widths)
        cols_q.append(np.where(left_count > 0, p - 1, sent))
        cols_l.append(left_count.astype(np.float32))
        cols_c.append(left_count / k)
        for c in widths:
            ok = p >= c
            cols_q.append(np.where(ok, p - c, sent))
            cols_l.append(ok.astype(np.float32))
            cols_c.append(ok * 0.5 / k)
        if pinned.any():
            right = np.minimum(p + 1, sent)
            right_count = sum(((p % c) != c - 1) for c in widths) * pin_ext[right]
            cols_q.append(np.where(right_count > 0, right, sent))
            cols_l.append(right_count.astype(np.float32))
            cols_c.append(right_count / k)
            for c in widths:
                down = np.minimum(p + c, sent)
                ok = pin_ext[down] & (p + c < n_slots)
                cols_q.append(np.where(ok, down, sent))
                cols_l.append(ok.astype(np.float32))
                cols_c.append(ok * 0.5 / k)
        self.nq = np.stack(cols_q, 1).astype(np.int64)
        self.wl = np.stack(cols_l, 1).astype(np.float32)
        self.wc = np.stack(cols_c, 1).astype(np.float32)
        # run of three in one row (mix mode): share of widths where p-1 and p-2 share p's row
        self.run_w = (sum((p % c) >= 2 for c in widths) / k).astype(np.float32)
        self.nq_list: list[list[int]] = self.nq.tolist()
        self.wc_list: list[list[float]] = self.wc.tolist()
        self.k = k


class Greedy:
    """Slot-by-slot filling; resumable so the business floor can redo the prefix."""

    def __init__(self, pb: Problem, lam: float, tables: Tables | None = None):
        self.pb = pb
        self.lam_sigma = lam * pb.sigma
        n = len(pb.score)
        self.order = np.full(pb.n_slots + 1, -1, np.int64)
        self.order[pb.n_slots] = n  # sentinel item in the sentinel slot
        for slot, item in pb.pins.items():
            self.order[slot] = item
        self.pinned = self.order[: pb.n_slots] >= 0
        self.t = tables if tables is not None or self.lam_sigma <= 0 \
            else Tables(pb.n_slots, pb.widths, self.pinned)
        self.stream: deque[int] = deque(int(i) for i in pb.items)
        # the slot by which each product must be placed: its plain position + window
        self.deadline = np.full(n, 1 << 40, np.int64)
        if pb.plain_position is not None:
            self.deadline = pb.plain_position + pb.window
        self.deferred: list[int] = []  # flagged items held back until the first screen is full
        self.pool: list[int] = []
        # duplicate groups placed in the last ``dup_gap`` slots (last entry: "no group")
        self.recent = None
        if pb.duplicates == "space" and pb.weights["duplicate"] and pb.group.max() >= 0:
            self.recent = np.zeros(int(pb.group.max()) + 2, np.int64)
        self.recent_log: deque[tuple[int, int]] = deque()
        self.order_list: list[int] = self.order.tolist()
        self.fam_list: list[int] = pb.family.tolist()
        self.fam_hit = np.zeros(int(pb.family.max(initial=-1)) + 2, np.float64)
        self.dominance = [
            (lab, lab.tolist(), np.zeros(int(lab.max(initial=-1)) + 2, np.float64))
            for lab in pb.labels
        ] if pb.weights["dominance"] else []
        self.causes: dict[int, SkipCause] = {}
        self.p = 0
        self.merged = not (pb.flagged.any() and pb.first_screen > 0)
        self._tau = pb.lookalike_cosine
        self._inv = 1.0 / max(1.0 - pb.lookalike_cosine, 1e-6)

    @property
    def placed(self) -> np.ndarray:
        return self.order[: self.pb.n_slots]

    # -- candidate pool ---------------------------------------------------------------
    def _refill(self) -> None:
        pb = self.pb
        while len(self.pool) < pb.window and self.stream:
            item = self.stream.popleft()
            if not self.merged and pb.flagged[item]:
                self.deferred.append(item)
                continue
            self.pool.append(item)

    def _merge_deferred(self) -> None:
        self.merged = True
        if self.deferred:
            rank = self.pb.rank
            self.stream = deque(sorted(self.pool + self.deferred + list(self.stream),
                                       key=lambda i: rank[i]))
            self.pool, self.deferred = [], []

    # -- penalties --------------------------------------------------------------------
    # Each term is built as a small per-label table from the few filled neighbours (plain
    # Python over <= 10 ints), then read for all candidates with one numpy gather: far
    # cheaper than candidate x neighbour comparison matrices at ~10k slots.
    def _penalties(self, p: int, cand: np.ndarray) -> dict[str, np.ndarray]:
        """Each soft penalty's value for placing each of ``cand`` at slot ``p`` (terms that
        are zero for every candidate are left out)."""
        pb, w = self.pb, self.pb.weights
        out: dict[str, np.ndarray] = {}
        nb_items = [self.order_list[q] for q in self.t.nq_list[p]]
        if pb.vectors is not None and w["lookalike"]:
            self._lookalike_term(p, cand, nb_items, out)
        if w["colour"]:
            self._colour_term(p, cand, nb_items, out)
        if self.dominance:
            pen = self._dominance_term(p, cand)
            if pen is not None:
                out["dominance"] = pen
        if self.recent is not None:
            term = self.recent[pb.group[cand]] > 0
            if term.any():
                out["duplicate"] = term.astype(np.float32)
        return out

    def _lookalike_term(self, p: int, cand: np.ndarray, nb_items: list[int],
                        out: dict[str, np.ndarray]) -> None:
        pb = self.pb
        nb = np.array(nb_items, np.int64)
        sims = pb.vectors[cand] @ pb.vectors[nb].T
        if sims.max() >= self._tau:  # most slots have no look-alike in sight
            x = (sims - self._tau) * self._inv
            out["lookalike"] = np.where(x >= 0, 1.0 + x, 0.0) @ self.t.wl[p]
            out["_sims"] = sims
            out["_nb"] = nb

    def _colour_term(self, p: int, cand: np.ndarray, nb_items: list[int],
                     out: dict[str, np.ndarray]) -> None:
        pb, t, ol = self.pb, self.t, self.order_list
        hit, fl, touched = self.fam_hit, self.fam_list, []
        for item, weight in zip(nb_items, t.wc_list[p], strict=True):
            f = fl[item]
            if f >= 0 and weight:
                hit[f] += weight
                touched.append(f)
        if pb.mode == "mix" and t.run_w[p] > 0:  # a third in a row of one family
            f = fl[ol[p - 1]]
            if f >= 0 and f == fl[ol[p - 2]]:
                hit[f] += t.run_w[p]
                touched.append(f)
        if touched:
            table = hit if pb.mode == "mix" else pb.flow_dist @ hit
            out["colour"] = table[pb.family[cand]]
            hit[touched] = 0.0

    def _dominance_term(self, p: int, cand: np.ndarray) -> np.ndarray | None:
        """One label (a colour family, a category) holding more than half of a row."""
        pb, ol = self.pb, self.order_list
        pen = None
        n, inv_k = pb.n_slots, 1.0 / self.t.k
        for lab_np, lab_list, hit in self.dominance:
            touched = []
            for c in pb.widths:
                if c < 2:
                    continue
                start = p - p % c
                counts: dict[int, int] = {}
                for q in range(start, min(start + c, n)):
                    item = ol[q]
                    if q != p and item >= 0:
                        lab = lab_list[item]
                        if lab >= 0:
                            counts[lab] = counts.get(lab, 0) + 1
                # one more of a label with c // 2 already makes it more than half the row
                for lab, count in counts.items():
                    if count >= c // 2:
                        hit[lab] += inv_k
                        touched.append(lab)
            if touched:
                term = hit[lab_np[cand]]
                pen = term if pen is None else pen + term
                hit[touched] = 0.0
        return pen

    # -- filling ----------------------------------------------------------------------
    def _place(self, p: int, item: int) -> None:
        self.order[p] = item
        self.order_list[p] = item
        if self.recent is not None:
            pb = self.pb
            g = int(pb.group[item])
            if g >= 0:
                self.recent[g] += 1
                self.recent_log.append((p, g))
            while self.recent_log and self.recent_log[0][0] < p + 1 - pb.dup_gap:
                self.recent[self.recent_log.popleft()[1]] -= 1

    def run(self, until: int) -> None:
        pb = self.pb
        weights = pb.weights
        while self.p < min(until, pb.n_slots):
            p = self.p
            if not self.merged and p >= pb.first_screen:
                self._merge_deferred()
            if self.pinned[p]:
                self._place(p, int(self.order[p]))
                self.p += 1
                continue
            self._refill()
            if not self.pool:  # only flagged products are left: they fill the first screen
                self._merge_deferred()
                self._refill()
            pick = 0
            # a product may wait at most ``window`` slots past its place in the plain order
            if self.lam_sigma > 0 and len(self.pool) > 1 \
                    and self.deadline[self.pool[0]] > p:
                cand = np.fromiter(self.pool, np.int64, len(self.pool))
                pens = self._penalties(p, cand)
                total = None
                for name, pen in pens.items():
                    if name[0] != "_":
                        term = weights[name] * pen
                        total = term if total is None else total + term
                if total is not None:
                    gain = pb.score[cand] - self.lam_sigma * total
                    pick = int(np.argmax(gain))  # pool is in rank order: ties -> better rank
                    if pick:
                        self._record_skips(p, cand, pick, pens)
            item = self.pool.pop(pick)
            self._place(p, item)
            self.p += 1

    def _record_skips(self, p: int, cand: np.ndarray, pick: int,
                      pens: dict[str, np.ndarray]) -> None:
        weights = self.pb.weights
        names = [k for k in pens if k[0] != "_"]
        for k in range(pick):
            item = int(cand[k])
            if item in self.causes:
                continue
            parts = {name: weights[name] * float(pens[name][k]) for name in names}
            kind = max(parts, key=lambda n: (parts[n], n))
            if parts[kind] <= 0:
                continue
            other, cosine = None, None
            if kind in ("lookalike", "duplicate") and "_sims" in pens:
                j = int(np.argmax(pens["_sims"][k]))
                other = self.pb.ids[int(pens["_nb"][j])] if pens["_nb"][j] < len(self.pb.ids) \
                    else None
                cosine = float(pens["_sims"][k][j])
            if kind == "colour" and self.pb.mode == "flow":
                kind = "flow"
            self.causes[item] = SkipCause(p, kind, other, cosine)


# ---------------------------------------------------------------- swap repair


def _edges(n: int, widths: tuple[int, ...], positions: tuple[int, ...]) -> np.ndarray:
    """(a, b) slot pairs, a < b, that are grid neighbours at some width and touch ``positions``."""
    edges: set[tuple[int, int]] = set()
    for p in positions:
        for c in widths:
            if p % c:
                edges.add((p - 1, p))
            if p % c != c - 1 and p + 1 < n:
                edges.add((p, p + 1))
            if p >= c:
                edges.add((p - c, p))
            if p + c < n:
                edges.add((p, p + c))
    return np.array(sorted(edges), np.int64).reshape(-1, 2)


def _edge_penalty(pb: Problem, order: np.ndarray, positions: tuple[int, ...]) -> float:
    """Look-alike + colour penalty of the edges touching ``positions`` (each edge once)."""
    e = _edges(pb.n_slots, pb.widths, positions)
    if not len(e):
        return 0.0
    # how many widths make each pair neighbours
    gap = e[:, 1] - e[:, 0]
    mult = np.zeros(len(e), np.float32)
    for c in pb.widths:
        mult += ((gap == 1) & ((e[:, 1] % c) != 0)) | (gap == c)
    a, b = order[e[:, 0]], order[e[:, 1]]
    w, k = pb.weights, len(pb.widths)
    total = 0.0
    if pb.vectors is not None and w["lookalike"]:
        sims = np.einsum("ij,ij->i", pb.vectors[a], pb.vectors[b])
        x = (sims - pb.lookalike_cosine) / max(1.0 - pb.lookalike_cosine, 1e-6)
        total += w["lookalike"] * float((np.where(x >= 0, 1.0 + x, 0.0) * mult).sum())
    if w["colour"]:
        cw = np.where(gap == 1, 1.0, 0.5) * mult / k
        fa, fb = pb.family[a], pb.family[b]
        if pb.mode == "mix":
            total += w["colour"] * float((((fa == fb) & (fa >= 0)) * cw).sum())
        elif pb.flow_dist is not None:
            total += w["colour"] * float((pb.flow_dist[fa, fb] * cw).sum())
    return total


def repair(pb: Problem, order: np.ndarray, pinned: np.ndarray, lam_sigma: float,
           plain_dcg: float) -> tuple[np.ndarray, int]:
    """Swap products that still sit next to a look-alike with a nearby product when that
    lowers the penalty by more than the score it costs. Pins, the quality gate and the
    business floor are respected; only the first ``repair_depth`` slots are visited."""
    order = order.copy()
    if pb.vectors is None or lam_sigma <= 0:
        return order, 0
    n = pb.n_slots
    depth = min(n, pb.repair_depth)
    reach = 2 * max(pb.widths) + 1
    floor = pb.business_floor * plain_dcg
    D = pb.business_depth
    tau = pb.lookalike_cosine
    V = pb.vectors
    swaps = 0
    budget = 3000  # candidate swaps evaluated at most: a page of look-alikes cannot be fixed
    for p in range(depth):
        if pinned[p] or budget <= 0:
            continue
        qs = {p - 1 if p % c else -1 for c in pb.widths} | {p - c for c in pb.widths}
        qs = [q for q in qs if q >= 0]
        if not qs or float((V[order[qs]] @ V[order[p]]).max()) < tau:
            continue
        best, best_gain = -1, 1e-9
        for q in range(max(0, p - reach), min(n, p + reach + 1)):
            if q == p or pinned[q]:
                continue
            budget -= 1
            a, b = int(order[p]), int(order[q])
            if (pb.flagged[a] and q < pb.first_screen) or (pb.flagged[b] and p < pb.first_screen):
                continue
            lo, hi = min(p, q), max(p, q)
            if pb.plain_position is not None and \
                    hi - pb.plain_position[order[lo]] > pb.window:
                continue  # would push the demoted product past its window
            cost = max(0.0, float(pb.score[order[lo]] - pb.score[order[hi]]))
            before = _edge_penalty(pb, order, (p, q))
            order[p], order[q] = b, a
            after = _edge_penalty(pb, order, (p, q))
            ok = lo >= D or dcg(pb.gain[order[: min(D, n)]], D) >= floor
            order[p], order[q] = a, b
            gain = lam_sigma * (before - after) - cost
            if ok and gain > best_gain:
                best, best_gain = q, gain
        if best >= 0:
            order[p], order[best] = order[best], order[p]
            swaps += 1
    return order, swaps
