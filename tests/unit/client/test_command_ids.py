"""The SDK's table command ids are timed (docs/history.md, "Expired commands")."""

from __future__ import annotations

import time

from studclient.client import new_command_id
from studkit.commandwindow import id_time_ms
from studkit.mapping.common import check_ident


def test_a_new_command_id_carries_its_time_and_is_a_valid_id() -> None:
    before = int(time.time() * 1000)
    command_id = new_command_id()
    after = int(time.time() * 1000)
    at = id_time_ms(command_id)
    assert at is not None and before <= at <= after
    assert check_ident(command_id, "command_id") == command_id
    assert new_command_id() != command_id


def test_ids_not_in_the_timed_form_carry_no_time() -> None:
    for other in ("0f3a9c", "t12-x", "t0000000000000", "t-1234567890123-x",
                  "x1234567890123-y", "t12345678901234-x"):
        assert id_time_ms(other) is None, other
    assert id_time_ms("t0000000000000-x") == 0
