"""runtime/collector.py: the service's collector once warm (young threshold, startup frozen)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cairn.runtime.collector import tuned_collector


@pytest.fixture
def restored() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


@pytest.mark.usefixtures("restored")
def test_a_warm_service_collects_young_objects_less_often_and_freezes_what_startup_loaded() -> None:
    gc.unfreeze()
    loaded = [[i] for i in range(100)]  # containers alive at warm-up (models, policies, caches)
    before = gc.get_threshold()
    with tuned_collector(12_345) as tuned:
        assert tuned is True
        assert gc.get_threshold() == (12_345, *before[1:])
        assert gc.get_freeze_count() >= len(loaded)  # out of every later collection's walk
    # stopped: nothing stays frozen, so a later service's start does not keep this one's objects
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("restored")
def test_zero_leaves_pythons_collector_alone() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    with tuned_collector(0) as tuned:
        assert tuned is False
        assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
