"""The archiver's idempotency window is configurable upward only (docs/history.md,
"Expired commands"): the tables' command_expired rule counts on the least one."""

from __future__ import annotations

import pytest

from archiver.config import Settings
from studkit.commandwindow import COMMAND_WINDOW_S
from studtools.devkeys import DevKeys

BASE = {"STUD_HISTORY_DSN": "postgresql://x/y", **DevKeys.generate(["archiver"]).env("archiver")}


def test_the_window_defaults_to_the_least_and_may_be_longer() -> None:
    assert Settings.from_env(BASE).command_window_s == COMMAND_WINDOW_S
    longer = Settings.from_env({**BASE, "STUD_COMMAND_WINDOW_S": "3600"})
    assert longer.command_window_s == 3600


def test_a_shorter_window_is_refused() -> None:
    with pytest.raises(ValueError, match="STUD_COMMAND_WINDOW_S"):
        Settings.from_env({**BASE, "STUD_COMMAND_WINDOW_S": "60"})
