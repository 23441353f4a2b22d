"""Confirm candidate pairs (dupes/candidates.py) by the signature rules.

A pair is a duplicate when the product's colour is the same up to a light edit (mean a*b*
and L*, dupes/colourcheck.py), its layout correlates at least ``structure`` and its fine
detail at least ``detail`` (or its layout alone at least ``layout_alone``), as they are
or by the crop region search (dupes/match.py), it is not a mirror (unless
``allow_mirror``), and, for pairs that line up as they are (not a crop the region search
lines up better), no colour cell changed beyond what one global light edit explains
(``colour_cell`` for the 8x8 cells, ``colour_fine`` for the 32x32 ones: a colourway that
recolours part of the product, or a thin product) and no hue turned round
(``colour_turn``: a dull product's colourway).

A pair lined up as it is whose cells differ by more than ``APART`` times ``colour_cell``
(``FINE_APART`` times ``colour_fine``), or whose hue turned, is
clearly another colour of the same shot (a colourway): such pairs are kept ``apart``, so
that no chain of other matches joins them in one group (dupes/groups.py ``split_apart``).
A crop (lined up by the region search only) is compared with the part of the original it
shows, resampled the same way: a hue turned round by more than ``colour_turn`` there is a
crop of a colourway, refused and kept apart too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vismerch.dupes import colourcheck, match
from vismerch.dupes.model import DupRules, Signatures

# Twice the cell tolerance: a pair this far apart is another colour, not an edit the light
# model fits badly (lined-up true copies on the real-photo set leave up to 19, one pair 29;
# 1.5x and 2x gave the same groups on OpenMoji and both real-photo seeds)
APART = 2.0
# The fine cells' fit leaves true copies less (a white balance's offset and a misplaced
# box's half cell are part of it): FINE_APART times ``colour_fine`` is another colour
FINE_APART = 1.25
# A region search this much better than the pair as it is: a crop, whose cells do not
# line up as they are (comparing them would refuse the crop for its misplaced cells)
CROP_GAIN = 0.01


@dataclass(frozen=True)
class Verdicts:
    """Per candidate pair: ``ok`` (a duplicate), ``score`` (its layout score; -1 where the
    colour rules refused it), ``strength`` (the score, plus 2 when the pair lined up as it
    is: its colour cells were compared too) and ``apart`` (the same layout, as it is or
    cropped, but clearly another colour)."""

    ok: np.ndarray
    score: np.ndarray
    strength: np.ndarray
    apart: np.ndarray


def confirm(sigs: Signatures, i: np.ndarray, j: np.ndarray, rules: DupRules,
            ) -> tuple[np.ndarray, np.ndarray]:
    """(ok mask, structure score) for candidate pairs (i, j)."""
    got = judge(sigs, i, j, rules)
    return got.ok, got.score


def _layout_ok(plain: np.ndarray, fine: np.ndarray, rules: DupRules) -> np.ndarray:
    # fine detail decides between layout and layout_alone; above that the layout alone
    # does (a copy shrunk in its frame keeps its layout but loses the finest detail)
    return (plain >= rules.layout_alone) | ((plain >= rules.structure) & (fine >= rules.detail))


def judge(sigs: Signatures, i: np.ndarray, j: np.ndarray, rules: DupRules) -> Verdicts:
    """The :class:`Verdicts` of candidate pairs (i, j) (see the module docstring)."""
    ab, lightness = sigs.tone
    same_colour = colourcheck.colour_agrees(ab, lightness, i, j, max_ab=rules.colour_ab,
                                            ab_share=rules.colour_ab_share, max_l=rules.colour_l)
    score = np.full(i.size, -1.0, np.float32)
    detail = np.full(i.size, -1.0, np.float32)
    lined_up = np.zeros(i.size, bool)
    apart = np.zeros(i.size, bool)
    check = np.flatnonzero(same_colour)
    if check.size:
        # the thresholds the scores are judged against below: the fast scores give the
        # verdicts the exact ones give (match.fast_structure_scores)
        at = match.Thresholds(layout=(rules.structure, rules.layout_alone),
                              detail=(rules.detail,), good_enough=rules.structure_plain,
                              mirrored=rules.allow_mirror)
        plain, fine, m_plain, m_fine, as_is = match.fast_structure_scores(
            sigs.sig, sigs.box, sigs.frame_aspect, i[check], j[check], at)
        if rules.allow_mirror:  # otherwise a mirrored shot must line up unmirrored: it cannot
            mirrored = m_plain > plain
            plain, fine = np.where(mirrored, m_plain, plain), np.where(mirrored, m_fine, fine)
        # aligned as they are: the colour cells must agree up to a global light edit
        aligned = np.flatnonzero((as_is >= rules.structure) & (as_is >= plain - CROP_GAIN))
        if aligned.size:
            refuse, far = _cells_differ(sigs, i[check][aligned], j[check][aligned], rules)
            same_shot = _layout_ok(plain[aligned], fine[aligned], rules)
            apart[check[aligned]] = same_shot & far
            lined_up[check[aligned]] = True
            plain[aligned[refuse]] = -1.0
        cropped = np.ones(check.size, bool)
        cropped[aligned] = False
        if rules.allow_mirror:
            cropped &= ~mirrored
        cropped = np.flatnonzero(cropped & _layout_ok(plain, fine, rules))
        if cropped.size:
            turned = _crop_turned(sigs, i[check][cropped], j[check][cropped], rules)
            apart[check[cropped[turned]]] = True
            plain[cropped[turned]] = -1.0
        score[check], detail[check] = plain, fine
    other = np.flatnonzero(~same_colour)
    if other.size:  # another mean colour: apart too when the same shot lines up as it is
        apart[other] = _apart_as_is(sigs, i[other], j[other], rules)
    ok = _layout_ok(score, detail, rules)
    return Verdicts(ok, score, np.where(lined_up, score + 2.0, score), apart)


def _crop_turned(sigs: Signatures, i: np.ndarray, j: np.ndarray, rules: DupRules
                 ) -> np.ndarray:
    """bool per pair the region search lines up (a crop): the crop's hue is turned round
    against the part of the original it shows (``colour_turn``): a crop of a colourway."""
    turned = np.zeros(i.size, bool)
    both = np.flatnonzero(colourcheck.has_chroma(sigs.chroma, i)
                          & colourcheck.has_chroma(sigs.chroma, j))
    if not both.size:
        return turned
    big, small, where = match.crop_regions(sigs.sig, sigs.box, sigs.frame_aspect, i[both],
                                           j[both])
    found = np.flatnonzero(~np.isnan(where[:, 0]))
    if not found.size:
        return turned
    # only the pairs' rows are read: the column is a store-wide memory map (2 KiB an image)
    originals = np.asarray(sigs.chroma[big[found]], np.float32)
    crops = np.asarray(sigs.chroma[small[found]], np.float32)
    grids = np.concatenate([match.region_view(originals, where[found]),
                            match.crop_view(crops, where[found])])
    n = found.size
    turn = colourcheck.hue_turn(grids, np.arange(n), n + np.arange(n))
    turned[both[found]] = turn > rules.colour_turn
    return turned


def _apart_as_is(sigs: Signatures, i: np.ndarray, j: np.ndarray, rules: DupRules,
                 ) -> np.ndarray:
    """bool per pair: its layout lines up as it is (same shot) and its colour cells differ
    by more than ``APART`` times ``colour_cell``."""
    plain, fine = match.as_is_scores(sigs.sig, sigs.box, sigs.frame_aspect, i, j,
                                     lowest=rules.structure)
    out = np.zeros(i.size, bool)
    shot = np.flatnonzero((plain >= rules.structure) & _layout_ok(plain, fine, rules))
    if shot.size:
        out[shot] = _cells_differ(sigs, i[shot], j[shot], rules)[1]
    return out


def _cells_differ(sigs: Signatures, i: np.ndarray, j: np.ndarray, rules: DupRules,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """bool per pair lined up as it is: (its cells differ beyond a light edit, so far
    that it is another colour): by the 32x32 cells where both images have them
    (``colour_fine``; a pair the 8x8 cells refuse must fit them within ``colour_cell``),
    else by the 8x8 ones (``colour_cell``)."""
    fine = colourcheck.has_chroma(sigs.chroma, i) & colourcheck.has_chroma(sigs.chroma, j)
    refuse, far = np.zeros(i.size, bool), np.zeros(i.size, bool)
    if fine.any():
        resid = colourcheck.fine_colour_residual(sigs.sig, sigs.chroma, i[fine], j[fine])
        coarse = colourcheck.cell_colour_residual(sigs.colour, i[fine], j[fine])
        # the 8x8 cells' verdict stands unless the fine fit (a white balance's offset, boxes
        # half a cell apart) explains the pair within the same tolerance
        turned = colourcheck.hue_turn(sigs.chroma, i[fine], j[fine]) > rules.colour_turn
        refuse[fine] = (resid > rules.colour_fine) | turned | (
            (coarse > rules.colour_cell) & (resid > rules.colour_cell))
        far[fine] = (resid > FINE_APART * rules.colour_fine) | turned
    if not fine.all():
        resid = colourcheck.cell_colour_residual(sigs.colour, i[~fine], j[~fine])
        refuse[~fine] = resid > rules.colour_cell
        far[~fine] = resid > APART * rules.colour_cell
    return refuse, far
