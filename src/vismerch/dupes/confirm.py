"""Confirm candidate pairs (dupes/candidates.py) by the signature rules.

A pair is a duplicate when the product's colour is the same up to a light edit (mean a*b*
and L*, dupes/colourcheck.py), its layout correlates at least ``structure`` and its fine
detail at least ``detail`` (or its layout alone at least ``layout_alone``), as they are
or by the crop region search (dupes/match.py), it is not a mirror (unless
``allow_mirror``), and, for pairs that line up as they are, no 8x8 colour cell changed
beyond what one global light edit explains (``colour_cell``: a colourway that recolours
part of the product).
"""

from __future__ import annotations

import numpy as np

from vismerch.dupes import colourcheck, match
from vismerch.dupes.model import DupRules, Signatures


def confirm(sigs: Signatures, i: np.ndarray, j: np.ndarray, rules: DupRules,
            ) -> tuple[np.ndarray, np.ndarray]:
    """(ok mask, structure score) for candidate pairs (i, j)."""
    ab, lightness = sigs.tone
    same_colour = colourcheck.colour_agrees(ab, lightness, i, j, max_ab=rules.colour_ab,
                                            ab_share=rules.colour_ab_share, max_l=rules.colour_l)
    score = np.full(i.size, -1.0, np.float32)
    detail = np.full(i.size, -1.0, np.float32)
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
        # aligned as they are: the 8x8 colour cells must agree up to a global light edit
        aligned = as_is >= rules.structure
        if aligned.any():
            resid = colourcheck.cell_colour_residual(sigs.colour, i[check][aligned],
                                                     j[check][aligned])
            plain[np.flatnonzero(aligned)[resid > rules.colour_cell]] = -1.0
        score[check], detail[check] = plain, fine
    # fine detail decides between layout and layout_alone; above that the layout alone
    # does (a copy shrunk in its frame keeps its layout but loses the finest detail)
    ok = (score >= rules.layout_alone) | ((score >= rules.structure) & (detail >= rules.detail))
    return ok, score
