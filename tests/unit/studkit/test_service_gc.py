"""The services' garbage-collector settings (``studkit.service.GcSettings``): read from the
environment, refused when malformed, and applied: the thresholds before start-up, the freeze
once the server starts. How much they pay is measured, not tested (docs/benchmarks.md)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from studkit.service import GcSettings


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """Whatever a test sets, the process's collector is as it was afterwards."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_the_default_freezes_and_keeps_pythons_thresholds() -> None:
    assert GcSettings.from_env({}) == GcSettings(threshold=None, freeze=True)


@pytest.mark.parametrize(("raw", "threshold"), [
    ("50000", (50000,)), ("7000,20", (7000, 20)), (" 700, 10 ,10 ", (700, 10, 10)),
    ("0", (0,)),
])
def test_thresholds_are_read(raw: str, threshold: tuple[int, ...]) -> None:
    settings = GcSettings.from_env({"STUD_GC_THRESHOLD": raw, "STUD_GC_FREEZE": "0"})
    assert settings == GcSettings(threshold=threshold, freeze=False)


@pytest.mark.parametrize("env", [
    {"STUD_GC_THRESHOLD": "many"}, {"STUD_GC_THRESHOLD": "1,2,3,4"},
    {"STUD_GC_THRESHOLD": "-1"}, {"STUD_GC_THRESHOLD": "700,,10"},
    {"STUD_GC_FREEZE": "yes"}, {"STUD_GC_FREEZE": "2"},
])
def test_a_malformed_setting_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=next(iter(env))):
        GcSettings.from_env(env)


@pytest.mark.usefixtures("restored_gc")
def test_the_thresholds_are_set_at_start() -> None:
    GcSettings(threshold=(12345, 17, 9)).at_start()
    assert gc.get_threshold() == (12345, 17, 9)
    assert GcSettings.state()["gc_threshold"] == [12345, 17, 9]


@pytest.mark.usefixtures("restored_gc")
def test_no_threshold_leaves_the_collectors_own() -> None:
    before = gc.get_threshold()
    GcSettings(threshold=None).at_start()
    assert gc.get_threshold() == before


@pytest.mark.usefixtures("restored_gc")
def test_serving_freezes_what_start_up_made() -> None:
    gc.unfreeze()
    made_at_start_up = [[i] for i in range(1000)]  # tracked containers
    GcSettings(freeze=True).when_serving()
    frozen = gc.get_freeze_count()
    assert frozen >= len(made_at_start_up)
    assert GcSettings.state()["gc_frozen"] == frozen


@pytest.mark.usefixtures("restored_gc")
def test_without_freeze_nothing_is_frozen() -> None:
    gc.unfreeze()
    GcSettings(freeze=False).when_serving()
    assert gc.get_freeze_count() == 0
