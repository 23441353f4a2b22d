"""Catalog whitening: vectors re-expressed in their own catalog's whitened space before they
are compared, for backends whose vectors carry the catalog's common directions (the style
backend's ImageNet features: every scene photo's background, every studio backdrop).

A direction that every product shares says little about which products are alike, yet it
dominates raw cosines. Whitening by the catalog's covariance divides each principal
direction by its spread, so the rare directions (the product's kind) count as much as the
common ones. The covariance is shrunk towards its mean variance first (``SHRINK``), which
keeps the near-empty directions of a small catalog from being blown up into noise and the
catalog's strongest directions, often its kinds of product, from being flattened away
(Jégou & Chum 2012, "Negative evidences and co-occurrences in image retrieval: the benefit
of PCA and whitening"; Ledoit & Wolf 2004 for shrinkage).
"""

from __future__ import annotations

import numpy as np

SHRINK = 4.0  # times the mean variance added to every direction's (benchmarks/RESULTS.md)
MIN_ROWS = 16  # fewer vectors estimate no covariance: they are compared as they are
FIT_MAX = 50_000  # the covariance is estimated on at most this many rows (a seeded sample)
CHUNK = 65_536  # rows transformed at a time, so a large catalog never doubles in memory
VERSION = 1  # part of an index's meta: an index built another way is rebuilt


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (an all-zero row stays zero), float32."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def fit(vectors: np.ndarray, shrink: float = SHRINK, fit_max: int = FIT_MAX,
        seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(mean (D,), projection (D, D)) whitening ``vectors`` (N, D): the shrunk covariance's
    eigenvectors, each divided by the square root of its variance plus ``shrink`` times the
    mean variance."""
    x = np.asarray(vectors, np.float64)
    if len(x) > fit_max:
        x = x[np.sort(np.random.default_rng(seed).choice(len(x), fit_max, replace=False))]
    mean = x.mean(axis=0)
    centred = x - mean
    cov = centred.T @ centred / len(x)
    lam, vecs = np.linalg.eigh(cov)
    lam = np.clip(lam, 0.0, None)
    reg = shrink * float(lam.mean())
    if reg <= 0:  # every vector the same: nothing to whiten
        return mean, np.eye(x.shape[1])
    return mean, vecs / np.sqrt(lam + reg)


def whiten(vectors: np.ndarray, shrink: float = SHRINK) -> np.ndarray:
    """``vectors`` (N, D) in their own whitened space, unit rows, float32 (module
    docstring); under ``MIN_ROWS`` rows only made unit length."""
    x = np.asarray(vectors, np.float32)
    if x.ndim != 2:
        raise ValueError(f"whiten wants (N, D) vectors, got shape {x.shape}")
    if len(x) < MIN_ROWS:
        return unit_rows(x)
    mean, proj = fit(x, shrink)
    mean, proj = mean.astype(np.float32), proj.astype(np.float32)
    return np.concatenate([unit_rows((x[s:s + CHUNK] - mean) @ proj)
                           for s in range(0, len(x), CHUNK)]) if len(x) else x
