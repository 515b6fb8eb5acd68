"""Random tables played by the rules' own driver, for tests that check a rules cut against a
fresh build after every command (tests/unit/rules: the kept twin, the kept events)."""

from __future__ import annotations

import random
from collections.abc import Callable

from rules import DECK, TableConfig
from rules.betting import ActionKind, LegalActions
from rules.commands import Command, Fold, TimeOut
from rules.events import Event
from rules.state import TableState
from rules.testing import StackedDeck, TableDriver, action_command

Observe = Callable[[TableState, Command, tuple[Event, ...]], None]
"""Called after each command the driver applies: the state before, the command, its events."""


def random_action(rng: random.Random, legal: LegalActions) -> Command:
    """A legal action, a time-out now and then, and a fold more often than chance gives."""
    roll = rng.random()
    if roll < 0.03:
        return TimeOut(seat=legal.seat)
    if roll < 0.12 and legal.get(ActionKind.FOLD) is not None:
        return Fold(seat=legal.seat)
    return action_command(legal.seat, rng.choice(legal.actions).kind)


def play_random_tables(rng: random.Random, tables: int,
                       observer: Callable[[TableDriver], Observe], hands: int = 3) -> None:
    """``tables`` tables of 2-8 players at random stakes (a burn card at some), each playing up
    to ``hands`` hands of shuffled decks with :func:`random_action` and random mucks;
    ``observer(table)`` gives each table's hook."""
    for table_number in range(tables):
        config = TableConfig.for_stakes(rng.choice((2, 10)), burn_cards=rng.random() < 0.3)
        big = config.big_bet
        seats = rng.sample(range(1, 9), rng.randint(2, 8))
        table = TableDriver(config, stacks={s: rng.randint(2 * big, 30 * big) for s in seats},
                            table_id=f"t{table_number}")
        observe = observer(table)
        for _ in range(hands):
            if sum(1 for s in seats if table.state.stack(s) > 0) < 2:
                break
            deck = list(DECK)
            rng.shuffle(deck)
            table.play_hand(StackedDeck(deck), act=lambda legal: random_action(rng, legal),
                            mucks=lambda hands: [h.seat for h in hands if rng.random() < 0.5],
                            observe=observe)
