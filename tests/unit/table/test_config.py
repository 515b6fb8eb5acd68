"""The table service's settings from its environment (services/table/config.py)."""

from __future__ import annotations

import pytest

from studtools.devkeys import DevKeys
from table.config import Settings


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return DevKeys.generate().env("table")


def test_the_defaults(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    assert settings.watch_buffer == 1000
    assert Settings.from_env({**env, "TABLE_WATCH_BUFFER": "1"}).watch_buffer == 1


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_watch_buffer_below_one_is_refused(env: dict[str, str], value: str) -> None:
    """0 would cut off every watch at its first live event (``watcher_too_slow``)."""
    with pytest.raises(ValueError, match="TABLE_WATCH_BUFFER must be at least 1"):
        Settings.from_env({**env, "TABLE_WATCH_BUFFER": value})
