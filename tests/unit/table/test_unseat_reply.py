"""What ``UnseatEntrant`` answers: the stack of the seat's recorded ``PlayerLeft``, never a stack
made up when that record is gone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rules.events import PlayerLeft, PlayerSeated
from studkit.errors import FailedPrecondition
from studkit.mapping.envelope import envelope_for
from table.server import unseated_stack

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def envelope(event: object) -> object:
    return envelope_for(event, table_id="t1", hand_number=3, command_id="c1",  # type: ignore[arg-type]
                        occurred_at=NOW)


def test_the_answer_is_the_recorded_stack_of_that_seat() -> None:
    envelopes = [envelope(PlayerLeft(seat=2, player_id="bob", stack=700)),
                 envelope(PlayerLeft(seat=4, player_id="ann", stack=0))]
    assert unseated_stack(envelopes, 2) == 700  # type: ignore[arg-type]
    assert unseated_stack(envelopes, 4) == 0  # type: ignore[arg-type]


def test_no_record_of_the_seat_leaving_is_refused_not_answered_zero() -> None:
    for envelopes in ([], [envelope(PlayerSeated(seat=2, player_id="bob", stack=700))]):
        with pytest.raises(FailedPrecondition) as caught:
            unseated_stack(envelopes, 2)  # type: ignore[arg-type]
        assert caught.value.reason == "archived"
