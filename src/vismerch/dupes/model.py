"""The inputs of the duplicate search: the rules' thresholds and the signature columns."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DupRules:
    """The thresholds (settings ``dup_*``, whose defaults live with the settings: build it
    with ``from_settings``) of the signature rules."""

    structure: float
    detail: float
    layout_alone: float
    hash_radius: int
    neighbours: int
    colour_ab: float
    colour_ab_share: float
    colour_l: float
    colour_cell: float
    allow_mirror: bool
    colour_fine: float
    colour_turn: float
    structure_plain: float = 0.99  # pairs this close as they are skip the region search

    @classmethod
    def from_settings(cls, settings) -> DupRules:
        return cls(structure=settings.dup_layout, detail=settings.dup_detail,
                   layout_alone=settings.dup_layout_alone,
                   hash_radius=settings.dup_box_hash_distance,
                   neighbours=settings.dup_signature_neighbours,
                   colour_ab=settings.dup_colour_ab, colour_ab_share=settings.dup_colour_ab_share,
                   colour_l=settings.dup_colour_l, colour_cell=settings.dup_colour_cell,
                   allow_mirror=settings.dup_allow_mirror, colour_fine=settings.dup_colour_fine,
                   colour_turn=settings.dup_colour_turn)


@dataclass
class Signatures:
    """The signature columns (dupes/signature.py) of N images, rows aligned with their ids."""

    box: np.ndarray  # (N, 4) float32
    sig: np.ndarray  # (N, 32, 32) uint8
    colour: np.ndarray  # (N, 8, 8, 3)
    hash: np.ndarray  # (N,) uint64
    frame_aspect: np.ndarray  # (N,) width / height of the original image
    chroma: np.ndarray | None = None  # (N, 32, 32, 2) uint8; None, or zero rows: not stored

    def __len__(self) -> int:
        return len(self.box)

    @functools.cached_property
    def tone(self) -> tuple[np.ndarray, np.ndarray]:
        """``colourcheck.colour_summary`` of the colour cells, once (search and confirm use it)."""
        from vismerch.dupes.colourcheck import colour_summary

        return colour_summary(self.colour)
