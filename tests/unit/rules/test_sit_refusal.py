"""``rules.sit_refusal`` (what a room asks before it takes a buy-in's money) refuses exactly
the ``SitDown`` commands ``decide`` refuses, with the same reason, and nothing else."""

from __future__ import annotations

import itertools

import pytest

from rules import TableConfig, decide, initial_state, sit_refusal
from rules.commands import SitDown
from rules.errors import Reason, RuleViolation
from rules.state import TableState
from rules.testing import TableDriver


def _tables() -> list[TableState]:
    driver = TableDriver(TableConfig(), stacks={1: 1000, 3: 500})
    playing = TableDriver(TableConfig(), stacks={1: 1000, 3: 500})
    playing.start()
    return [initial_state(), driver.state, playing.state]


SEATS = (0, 1, 2, 8, 9, -1, True)
PLAYERS = ("", "ann", "seat1", "new")
STACKS = (0, 1, 500, -5, True)


@pytest.mark.parametrize("state", _tables())
def test_sit_refusal_is_decides_refusal(state: TableState) -> None:
    names = {s.player_id for s in state.seats if s is not None}
    players = PLAYERS + tuple(sorted(names))
    for seat, player, stack in itertools.product(SEATS, players, STACKS):
        refusal = sit_refusal(state, seat, player, stack)  # type: ignore[arg-type]
        try:
            decide(state, SitDown(seat=seat, player_id=player, stack=stack))  # type: ignore[arg-type]
        except RuleViolation as e:
            assert refusal is not None and refusal.reason == e.reason, (seat, player, stack)
        else:
            assert refusal is None, (seat, player, stack, refusal)


def test_a_taken_seat_and_a_seated_player_are_named() -> None:
    state = TableDriver(TableConfig(), stacks={1: 1000}).state
    player = state.seats[0]
    assert player is not None
    taken = sit_refusal(state, 1, "bob", 500)
    twice = sit_refusal(state, 2, player.player_id, 500)
    assert taken is not None and taken.reason == Reason.SEAT_TAKEN
    assert twice is not None and twice.reason == Reason.PLAYER_ALREADY_SEATED
    assert sit_refusal(state, 2, "bob", 500) is None
