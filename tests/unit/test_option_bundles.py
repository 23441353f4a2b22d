"""Functions whose many options travel as one frozen dataclass (``**options``) still refuse a
misspelt option at once, before any work, as a plain keyword argument would."""

from __future__ import annotations

import pytest

from vismerch.arrange.layout import ArrangeRequest, arrange_collection
from vismerch.features.neural import build_backend
from vismerch.merch.semantic import semantic_search
from vismerch.pipeline.ingest import IngestOptions, ingest
from vismerch.plan.planner import make_plan


class _Untouchable:
    def __getattr__(self, name):
        raise AssertionError(f"touched the store ({name}) before checking the options")


def test_misspelt_options_are_refused_before_any_work(tmp_path):
    with pytest.raises(TypeError, match="wrokers"):
        ingest(tmp_path / "no-source", tmp_path / "store", wrokers=1)
    assert not (tmp_path / "store").exists()
    with pytest.raises(TypeError, match="colums"):
        arrange_collection(_Untouchable(), "dresses", colums=4)
    with pytest.raises(TypeError, match="catgory"):
        semantic_search(_Untouchable(), "red dress", catgory="dress")
    with pytest.raises(TypeError, match="modle"):
        build_backend("clip", modle="x")
    with pytest.raises(TypeError, match="imgaes"):
        make_plan("embed", imgaes="1M")


def test_the_bundles_keep_the_old_defaults():
    assert IngestOptions() == IngestOptions(workers=None, device=None, distributor=None, progress=True,
                                            derive=True, on_progress=None)
    req = ArrangeRequest()
    assert (req.columns, req.mode, req.quality_gate, req.duplicates, req.log) == (4, "mix", True,
                                                                                  "space", True)
