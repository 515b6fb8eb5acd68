"""The table repository's snapshot codec: every state random legal play reaches (mid-hand
included, rake on) survives JSON and comes back equal, so a snapshot loads the same table
as the fold it replaces."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rules import ActionKind, LegalActions, Rake, TableConfig, TableState
from rules.cards import DECK
from rules.commands import Command
from rules.events import Event
from rules.testing import StackedDeck, TableDriver, action_command
from studkit.repository import state_from_json, state_to_json


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32 - 1), players=st.integers(2, 8),
       rake=st.booleans())
def test_every_state_round_trips(seed: int, players: int, rake: bool) -> None:
    rng = random.Random(seed)
    config = TableConfig(rake=Rake(500, 60) if rake else None)
    table = TableDriver(config, stacks={s: rng.randrange(1, 5000) for s in range(1, players + 1)})
    states: list[TableState] = [table.state]

    def observe(_before: TableState, _command: Command, _events: tuple[Event, ...]) -> None:
        states.append(table.state)

    for _hand in range(2):
        cards = list(DECK)
        rng.shuffle(cards)
        if not any(s is not None and s.stack > 0 for s in table.state.seats[1:]):
            break
        try:
            table.play_hand(StackedDeck(cards), lambda legal: _pick(rng, legal),
                            observe=observe)
        except Exception as exc:  # not enough players left: stop playing
            if "not_enough_players" not in str(exc):
                raise
            break
    for state in states:
        assert state_from_json(state_to_json(state)) == state


def _pick(rng: random.Random, legal: LegalActions) -> Command:
    action = rng.choice(legal.actions)
    wager = action.kind in (ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE)
    return action_command(legal.seat, action.kind, action.to if wager else None)
