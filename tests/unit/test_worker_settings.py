"""Workers receive the driver's settings as they are: one form (the Settings object, pickled
as its values), never re-resolved from a TOML file or the environment in the worker."""

from __future__ import annotations

import multiprocessing
import pickle

from vismerch.config import Settings, load_settings
from vismerch.pipeline.tasks import BackendSpec, IngestSpec


def _seen_by_worker(spec: IngestSpec) -> tuple[Settings, dict, int]:
    return spec.settings, spec.settings.as_dict(), spec.settings.max_pixels


def _spec(settings: Settings) -> IngestSpec:
    return IngestSpec(store_path="store", backends=(BackendSpec("colour"),), settings=settings,
                      device="cpu", run_id=3)


def test_settings_pickle_as_their_values_and_compare_by_value():
    settings = load_settings(env={}).replace(max_pixels=1234, thumb_format="png", quality_min_side=77)
    copy = pickle.loads(pickle.dumps(settings))
    assert copy == settings and hash(copy) == hash(settings) and copy is not settings
    assert copy.as_dict() == settings.as_dict() and copy.max_pixels == 1234
    assert copy != settings.replace(max_pixels=1235)


def test_a_spawned_worker_sees_the_drivers_settings_not_its_environment(monkeypatch):
    settings = load_settings(env={}).replace(max_pixels=4321, thumb_size=96)
    # the worker's environment says otherwise: it must not be consulted
    monkeypatch.setenv("VISMERCH_MAX_PIXELS", "99")
    monkeypatch.setenv("VISMERCH_THUMB_SIZE", "12")
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        seen, values, max_pixels = pool.apply(_seen_by_worker, (_spec(settings),))
    assert isinstance(seen, Settings) and seen == settings
    assert values == settings.as_dict() and max_pixels == 4321 and seen.thumb_size == 96


def test_a_spec_is_hashable_by_its_settings_and_takes_older_pairs():
    settings = load_settings(env={})
    assert hash(_spec(settings)) == hash(_spec(pickle.loads(pickle.dumps(settings))))
    # benchmarks build specs from (name, value) pairs on older commits too
    pairs = _spec(tuple(sorted(settings.as_dict().items())))  # type: ignore[arg-type]
    assert isinstance(pairs.settings, Settings) and pairs.settings == settings
