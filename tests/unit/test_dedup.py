"""Near-duplicate grouping: hash candidates, cosine confirmation, crop rule, groups."""

from __future__ import annotations

import numpy as np
import pytest

from vismerch.errors import UsageError
from vismerch.indexes.vector import VectorIndex
from vismerch.merch.dedup import (
    DupGroup,
    connected_components,
    find_duplicate_groups,
    hamming_neighbours,
    plan_chunks,
    popcount,
)

DIM = 32


def _flip(h: int, bits) -> np.uint64:
    mask = 0
    for b in bits:
        mask |= 1 << int(b)
    return np.uint64(int(h) ^ mask)


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def _near(v: np.ndarray, rng, noise: float = 0.03) -> np.ndarray:
    return _unit(v + noise * rng.standard_normal(v.shape) / np.sqrt(v.size))


def _catalog(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    vectors = _unit(rng.standard_normal((n, DIM)))
    ids = [f"p{i:04d}" for i in range(n)]
    return rng, hashes, vectors, ids


def _groups(groups: list[DupGroup]) -> set[frozenset[str]]:
    return {frozenset(g.members) for g in groups}


def test_planted_groups_found_and_no_false_groups():
    rng, h, v, ids = _catalog()
    # exact copies (distance 0), and a few flipped bits (re-encode / resize)
    h[1] = h[2] = h[0]
    v[1], v[2] = _near(v[0], rng), _near(v[0], rng)
    h[11] = _flip(h[10], rng.choice(64, 3, replace=False))
    h[12] = _flip(h[10], rng.choice(64, 6, replace=False))
    v[11], v[12] = _near(v[10], rng), _near(v[10], rng)
    groups = find_duplicate_groups(ids, h, v, max_hamming=10, min_cosine=0.92)
    assert _groups(groups) == {frozenset({"p0000", "p0001", "p0002"}),
                               frozenset({"p0010", "p0011", "p0012"})}


def test_random_hashes_make_no_groups_even_without_vectors():
    _, h, v, ids = _catalog(n=2000, seed=1)
    assert find_duplicate_groups(ids, h, v) == []
    assert find_duplicate_groups(ids, h, None) == []  # hashes alone: 2000 random are >10 apart


def test_cosine_gate_rejects_hash_near_but_vector_far():
    rng, h, v, ids = _catalog()
    h[5] = _flip(h[4], [1, 9])  # 2 bits apart: a hash collision candidate...
    v[5] = _unit(v[4] * -1 + 0.1 * rng.standard_normal(DIM))  # ...but different content
    assert find_duplicate_groups(ids, h, v) == []
    # the same pair with similar vectors is a duplicate
    v[5] = _near(v[4], rng)
    assert _groups(find_duplicate_groups(ids, h, v)) == {frozenset({"p0004", "p0005"})}


def test_crop_rule_needs_near_identical_vectors():
    rng, h, v, ids = _catalog()
    h[21] = _flip(h[20], rng.choice(64, 13, replace=False))  # beyond max_hamming, like a crop
    v[21] = _near(v[20], rng, noise=0.05)
    assert float(v[20] @ v[21]) >= 0.97
    got = find_duplicate_groups(ids, h, v, max_hamming=10, crop_hamming=16, crop_cosine=0.97)
    assert _groups(got) == {frozenset({"p0020", "p0021"})}
    # without the crop rule, or with content only moderately alike, it is not a duplicate
    assert find_duplicate_groups(ids, h, v, max_hamming=10, crop_hamming=10) == []
    v[21] = _unit(v[20] + 0.45 * _unit(rng.standard_normal(DIM)))
    assert 0.85 < float(v[20] @ v[21]) < 0.97
    assert find_duplicate_groups(ids, h, v, max_hamming=10, crop_hamming=16) == []


def test_union_find_is_transitive():
    rng, h, v, ids = _catalog()
    h[31] = _flip(h[30], range(0, 8))
    h[32] = _flip(h[31], range(8, 16))  # 16 bits from p0030: linked only through p0031
    v[31], v[32] = _near(v[30], rng), _near(v[30], rng)
    assert popcount(np.array([h[30] ^ h[32]]))[0] == 16
    groups = find_duplicate_groups(ids, h, v, max_hamming=10, crop_hamming=10)
    assert _groups(groups) == {frozenset({"p0030", "p0031", "p0032"})}
    labels = connected_components(6, np.array([0, 4, 2]), np.array([1, 5, 1]))
    assert labels.tolist() == [0, 0, 0, 3, 4, 4]


def test_representative_order_and_numbering():
    rng, h, v, ids = _catalog(n=12)
    for members in ([3, 4, 5, 6], [8, 9]):
        for m in members[1:]:
            h[m] = h[members[0]]
            v[m] = _near(v[members[0]], rng)
    penalty = np.zeros(12)
    resolution = np.full(12, 1000.0)
    penalty[[3, 4]] = 1  # p0005 and p0006 have fewer flags...
    resolution[6] = 2000  # ...and p0006 is larger
    resolution[9] = 5000
    groups = find_duplicate_groups(ids, h, v, quality_penalty=penalty, resolution=resolution)
    assert groups == [
        DupGroup(1, "p0006", ["p0006", "p0003", "p0004", "p0005"]),
        DupGroup(2, "p0009", ["p0009", "p0008"]),
    ]
    # all equal: smallest id wins; numbering follows the representative ids
    groups = find_duplicate_groups(ids, h, v)
    assert [(g.group, g.representative) for g in groups] == [(1, "p0003"), (2, "p0008")]


def test_large_identical_hash_group_splits_by_content():
    rng, h, v, ids = _catalog(n=200)
    a, b = _unit(rng.standard_normal(DIM)), _unit(rng.standard_normal(DIM))
    for m in range(100, 180):  # 80 products share one hash (a placeholder picture, say)
        h[m] = h[100]
        v[m] = _near(a if m < 140 else b, rng)
    groups = find_duplicate_groups(ids, h, v)
    assert _groups(groups) == {frozenset(ids[100:140]), frozenset(ids[140:180])}


def test_prebuilt_index_in_another_order_gives_same_groups():
    rng, h, v, ids = _catalog()
    h[41] = _flip(h[40], rng.choice(64, 12, replace=False))
    v[41] = _near(v[40], rng, noise=0.02)
    perm = rng.permutation(len(ids))
    index = VectorIndex.build(v[perm], [ids[p] for p in perm])
    expected = {frozenset({"p0040", "p0041"})}
    assert _groups(find_duplicate_groups(ids, h, v, index=index)) == expected
    assert _groups(find_duplicate_groups(ids, h, v)) == expected


@pytest.mark.parametrize("radius", [0, 4, 10])
def test_multi_index_hashing_matches_brute_force(radius):
    rng = np.random.default_rng(radius)
    n = 1500
    h = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    for _ in range(400):  # plant pairs at every distance up to radius + 2, bits spread out
        a, b = rng.integers(n, size=2)
        h[b] = _flip(h[a], rng.choice(64, rng.integers(0, radius + 3), replace=False))
    dist = popcount(h[:, None] ^ h[None, :])
    iu = np.triu_indices(n, 1)
    hit = dist[iu] <= radius
    truth = set(zip(iu[0][hit].tolist(), iu[1][hit].tolist(), strict=True))
    for flat_max in (10**9, 10):  # exact flat index, then the chunked hash index
        a, b, d = hamming_neighbours(h, radius, max_neighbours=10**6, flat_max=flat_max)
        assert set(zip(a.tolist(), b.tolist(), strict=True)) == truth
        assert (d == dist[a, b]).all()


def test_chunk_plan_satisfies_pigeonhole():
    for n in (10**4, 10**6, 10**8):
        for radius in (0, 5, 10, 16):
            plan = plan_chunks(n, radius)
            assert sum(f + 1 for _, _, f in plan) > radius
            ends = [o + w for o, w, _ in plan]
            assert all(e <= o for e, (o, _, _) in zip(ends[:-1], plan[1:], strict=True)) and ends[-1] <= 64


def test_neighbour_cap_bounds_the_pairs():
    h = np.zeros(50, dtype=np.uint64)
    h[:] = np.arange(50, dtype=np.uint64)  # all within 6 bits of each other
    a, b, _ = hamming_neighbours(h, 10, max_neighbours=3)
    assert 0 < len(a) <= 50 * 3


def test_empty_and_mismatched_inputs():
    assert find_duplicate_groups([], np.zeros(0, np.uint64), np.zeros((0, DIM), np.float32)) == []
    assert find_duplicate_groups(["a"], np.zeros(1, np.uint64), np.ones((1, DIM), np.float32)) == []
    with pytest.raises(UsageError):
        find_duplicate_groups(["a", "b"], np.zeros(3, np.uint64), None)
    with pytest.raises(UsageError):
        find_duplicate_groups(["a", "a"], np.zeros(2, np.uint64), None)


def test_structure_gate_separates_same_photo_from_look_alike_product():
    """Hash and colour vector agree for both pairs; only the same photo keeps its 32x32 layout."""
    rng = np.random.default_rng(4)
    photo = (rng.random((32, 32)) * 255).astype(np.uint8)
    reencoded = np.clip(photo.astype(int) + rng.integers(-3, 4, photo.shape), 0, 255).astype(np.uint8)
    other = (rng.random((32, 32)) * 255).astype(np.uint8)
    ids = ["a", "b", "c"]
    hashes = np.array([7, 7, 7], dtype=np.uint64)
    vectors = np.tile(np.eye(4, dtype=np.float32)[0], (3, 1))
    structure = np.stack([photo, reencoded, other])
    groups = find_duplicate_groups(ids, hashes, vectors, structure=structure, min_structure=0.96)
    assert [g.members for g in groups] == [["a", "b"]]
    without = find_duplicate_groups(ids, hashes, vectors)
    assert [sorted(g.members) for g in without] == [["a", "b", "c"]]


def _product_shot(size: int = 256, scale: float = 1.0, stripe: bool = False) -> np.ndarray:
    """A dark t-shirt-like block with sleeves on white, optionally striped."""
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (size, size), (250, 250, 250))
    draw = ImageDraw.Draw(im)
    c, s = size / 2, size * 0.3 * scale
    draw.rectangle((c - s * 0.6, c - s, c + s * 0.6, c + s), fill=(30, 40, 90))
    draw.polygon([(c - s * 0.6, c - s), (c - s * 1.1, c - s * 0.4), (c - s * 0.6, c - s * 0.2)],
                 fill=(30, 40, 90))
    draw.polygon([(c + s * 0.6, c - s), (c + s * 1.1, c - s * 0.4), (c + s * 0.6, c - s * 0.2)],
                 fill=(30, 40, 90))
    if stripe:
        for y in range(int(c - s), int(c + s), 12):
            draw.rectangle((c - s * 0.6, y, c + s * 0.6, y + 4), fill=(230, 230, 230))
    return np.asarray(im)


def test_a_crop_of_a_photo_lines_up_after_a_centre_zoom():
    """A 12% centre crop (resized back to the working size) matches its photo through the
    zoom search, though not as it is; another product of the same colour and silhouette
    but a different print does not match either way."""
    from PIL import Image

    from vismerch.features.colour import ColourBackend
    from vismerch.merch.dedup import structure_correlation

    photo = _product_shot()
    cut = round(256 * 0.06)
    crop = np.asarray(Image.fromarray(photo[cut:-cut, cut:-cut]).resize((256, 256), Image.BILINEAR))
    striped = _product_shot(stripe=True)
    sig = ColourBackend().encode_images(np.stack([photo, crop, striped])).columns["structure"]
    i, j = np.array([0, 0]), np.array([1, 2])
    as_is = structure_correlation(sig, i, j, zooms=())
    zoomed = structure_correlation(sig, i, j)
    assert as_is[0] < 0.975 <= zoomed[0]  # the crop: only the zoom search lines it up
    assert zoomed[1] < 0.975  # the other print: no zoom makes it the same photo
