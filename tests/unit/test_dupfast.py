"""The fast paths of the duplicate search give what the exact rules give: the batched pair
scores of dupes/match.py (per-image float16 rows) and the box-hash nearest neighbours
over distinct hashes of dupes/hashsearch.py, on generated signatures and hashes."""

from __future__ import annotations

import numpy as np
import torch

from vismerch.config import load_settings
from vismerch.dupes import colourcheck
from vismerch.dupes import match as dupmatch
from vismerch.dupes.hashsearch import hamming_nearest, hamming_neighbours, popcount
from vismerch.dupes.model import DupRules
from vismerch.indexes.vector import VectorIndex, locality_order

RULES = DupRules.from_settings(load_settings(env={}))  # the default dup_* settings
LAYOUT_AT = (RULES.structure, RULES.layout_alone)
DETAIL_AT = (RULES.detail,)


def _signatures(n: int, seed: int = 0, others: int = 6000):
    """n 32x32 signatures from 40 smooth templates (so pairs of one template look alike)
    with per-image noise; the last quarter are copies of earlier ones: light-edited, half
    of them cropped (box touching the frame, a narrower frame), a few mirrored; ``others``
    random pairs beside each copy's pair with its source."""
    rng = np.random.default_rng(seed)
    coarse = torch.from_numpy(rng.random((40, 1, 8, 8), dtype=np.float32))
    templates = torch.nn.functional.interpolate(coarse, size=(32, 32), mode="bilinear",
                                                align_corners=False)[:, 0].numpy() * 180 + 40
    noise = rng.uniform(2, 16, (n, 1, 1))  # from near copies to plain look-alikes
    sig = (templates[rng.integers(0, 40, n)] + noise * rng.standard_normal((n, 32, 32)))
    box = np.tile(np.array([0.2, 0.2, 0.8, 0.8], np.float32), (n, 1))
    aspect = np.ones(n, np.float32)
    copies = np.arange(3 * n // 4, n)
    src = rng.integers(0, 3 * n // 4, copies.size)
    light = sig[src] * rng.uniform(0.85, 1.15, (copies.size, 1, 1)) + rng.uniform(-15, 15, (
        copies.size, 1, 1))
    crop = np.arange(copies.size) % 2 == 1
    su = rng.uniform(0.75, 0.95, crop.sum())
    light[crop] = dupmatch._sample(light[crop], np.zeros((crop.sum(), 1)),
                                   np.zeros((crop.sum(), 1)), su[:, None],
                                   np.ones((crop.sum(), 1)), 32)[:, 0].reshape(-1, 32, 32)
    mirror = np.arange(copies.size) % 7 == 0
    light[mirror] = light[mirror][:, :, ::-1]
    sig[copies] = light + rng.normal(0, 2, light.shape)
    box[copies[crop]] = [0.4, 0.2, 1.0, 0.8]
    aspect[copies[crop]] = su
    pairs_i = np.concatenate([src, rng.integers(0, n, others)])
    pairs_j = np.concatenate([copies, rng.integers(0, n, others)])
    keep = pairs_i != pairs_j
    return sig.clip(0, 255).astype(np.uint8), box, aspect, pairs_i[keep], pairs_j[keep]


def _verdict(scores, mirrored: bool) -> np.ndarray:
    """dupes/confirm.confirm's structure verdict from structure_scores' five arrays."""
    plain, fine, m_plain, m_fine, _ = (np.asarray(s) for s in scores)
    if mirrored:
        use = m_plain > plain
        plain, fine = np.where(use, m_plain, plain), np.where(use, m_fine, fine)
    return (plain >= RULES.layout_alone) | ((plain >= RULES.structure) & (fine >= RULES.detail))


def test_fast_scores_give_the_exact_verdicts():
    sig, box, aspect, i, j = _signatures(800, others=2400)
    for mirrored in (False, True):
        exact = dupmatch.structure_scores(sig, box, aspect, i, j,
                                          good_enough=RULES.structure_plain, mirrored=mirrored)
        at = dupmatch.Thresholds(LAYOUT_AT, DETAIL_AT, RULES.structure_plain, mirrored)
        fast = dupmatch.fast_structure_scores(sig, box, aspect, i, j, at)
        ok = _verdict(exact, mirrored)
        assert 100 < ok.sum() < ok.size - 1000  # copies pass, look-alikes do not
        assert np.array_equal(_verdict(fast, mirrored), ok)
        # the as-is layout (the colour-cell check's gate) agrees at the layout threshold
        assert np.array_equal(fast[4] >= RULES.structure, exact[4] >= RULES.structure)
        # scores the fast path kept are the exact ones up to the float16 margin
        kept = fast[0] > -1
        assert kept.sum() > i.size // 2
        assert np.abs(fast[0][kept] - exact[0][kept]).max() < dupmatch.MARGIN
    # the data has pairs near every threshold, so the exact fallback is exercised
    for t in (*LAYOUT_AT, RULES.structure_plain):
        assert (np.abs(exact[0] - t) < 0.01).sum() >= 3


def test_unit_rows_dot_is_the_pair_score():
    sig, box, aspect, i, j = _signatures(300, seed=3)
    layout, detail = dupmatch.unit_rows(sig)
    plain, fine = dupmatch._scores(sig[i].astype(np.float32), sig[j].astype(np.float32))
    dots = dupmatch._row_dots(torch.from_numpy(layout), i, j)
    dots_fine = dupmatch._row_dots(torch.from_numpy(detail), i, j)
    assert np.abs(dots - plain).max() < 1e-3 and np.abs(dots_fine - fine).max() < 1e-3
    flipped = dupmatch._scores(sig[i].astype(np.float32),
                               np.ascontiguousarray(sig[j][:, :, ::-1]).astype(np.float32))[0]
    assert np.abs(dupmatch._row_dots(torch.from_numpy(layout), i, j, True) - flipped).max() < 1e-3


def _crowded_hashes(n: int, seed: int = 0) -> np.ndarray:
    """Hashes in 60 tight clusters (0-9 bits from a centre), many repeated: look-alikes."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(0, 2**64 - 1, size=60, dtype=np.uint64, endpoint=True)
    h = centres[rng.integers(0, 60, n)]
    for p in range(n):
        bits = rng.choice(64, rng.integers(0, 10), replace=False)
        h[p] ^= np.uint64(sum(1 << int(b) for b in bits))
    h[rng.integers(0, n, n // 3)] = h[rng.integers(0, n, n // 3)]  # repeated hashes
    return h


def _nearest_distances(n: int, a, b, d, k: int) -> list[list[int]]:
    """Per position, the k smallest distances among the pairs that name it."""
    per: list[list[int]] = [[] for _ in range(n)]
    for x, y, dist in zip(a.tolist(), b.tolist(), d.tolist(), strict=True):
        per[x].append(dist)
        per[y].append(dist)
    return [sorted(v)[:k] for v in per]


def test_hamming_nearest_keeps_each_positions_nearest():
    n, radius, k = 2500, 12, 8
    h = _crowded_hashes(n)
    dist = popcount(h[:, None] ^ h[None, :])
    np.fill_diagonal(dist, 99)
    truth = [sorted(row[row <= radius].tolist())[:k] for row in dist]
    assert np.mean([len(t) == k for t in truth]) > 0.9  # crowded: most have k within reach
    a, b, d = hamming_nearest(h, radius, k, flat_max=100)  # the distinct-hash path
    assert (a < b).all() and (d == dist[a, b]).all() and (d <= radius).all()
    assert _nearest_distances(n, a, b, d, k) == truth
    assert len(a) <= n * k
    # the exact range path agrees on every position's nearest distances
    a2, b2, d2 = hamming_neighbours(h, radius, max_neighbours=k, flat_max=100)
    assert _nearest_distances(n, a2, b2, d2, k) == truth
    # with no cap every pair within the radius is found
    a3, b3, _ = hamming_nearest(h, radius, n, flat_max=100)
    iu = np.triu_indices(n, 1)
    assert len(a3) == int((dist[iu] <= radius).sum())


def test_locality_order_puts_near_vectors_together_and_searches_give_the_same():
    rng = np.random.default_rng(2)
    centres = rng.standard_normal((12, 24)).astype(np.float32)
    label = rng.integers(0, 12, 4000)  # fewer clusters than the order uses
    vec = centres[label] + 0.2 * rng.standard_normal((4000, 24)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    order = locality_order(vec, min_rows=0)
    assert np.array_equal(np.sort(order), np.arange(4000))
    # consecutive queries share a cluster far more often than in the stored order
    assert (label[order][1:] == label[order][:-1]).mean() > 0.9
    assert (label[1:] == label[:-1]).mean() < 0.2
    index = VectorIndex.build(vec, [str(p) for p in range(4000)], exact_max=100)
    assert index.kind == "hnsw"
    _, rows = index.search_positions(vec, 5)
    _, rows_ordered = index.search_positions(vec[order], 5)
    assert np.array_equal(rows_ordered, rows[order])


def test_unit_rows_blur_is_the_pair_rule_blur():
    sig, *_ = _signatures(200, seed=4)
    a = sig.astype(np.float32)
    k = dupmatch._blur_matrix(32).numpy()
    assert np.abs(k @ a @ k.T - dupmatch._blur(a)).max() < 1e-3  # uint8 range values


def test_whole_catalog_signature_passes_in_blocks_give_the_one_pass_values(monkeypatch):
    """colour_summary and _shrink run a million images in blocks of rows (bounded
    temporaries; _shrink's uint8 sums in integers): the values of one numpy pass of the
    definition (_shrink's exactly; colour_summary's, on channel planes, within rounding)."""
    from vismerch.dupes.signature import lab_cells

    rng = np.random.default_rng(5)
    sig = rng.integers(0, 256, (23, 32, 32), dtype=np.uint8)
    sig[0] = 255  # the largest cell sums
    colour = rng.integers(0, 256, (23, 8, 8, 3), dtype=np.uint8)
    monkeypatch.setattr(dupmatch, "_BLOCK", 7)  # 23 rows: three whole blocks and a part
    monkeypatch.setattr(colourcheck, "_BLOCK", 7)
    for g in (2, 4, 8, 16):
        k = 32 // g
        one_pass = sig.reshape(23, g, k, g, k).sum(axis=(2, 4), dtype=np.float32) / np.float32(k * k)
        assert np.array_equal(dupmatch._shrink(sig, g), one_pass)
    lab = lab_cells(colour).reshape(23, -1, 3)
    w = np.clip(np.linalg.norm(lab - np.array([100.0, 0.0, 0.0], np.float32), axis=2) - 4.0,
                0.0, None) + 1e-3
    w /= w.sum(axis=1, keepdims=True)
    ab, lightness = colourcheck.colour_summary(colour)  # on channel planes: float rounding
    np.testing.assert_allclose(ab, np.einsum("nc,ncd->nd", w, lab[:, :, 1:]), atol=1e-4)
    np.testing.assert_allclose(lightness, np.einsum("nc,nc->n", w, lab[:, :, 0]), atol=1e-4)
