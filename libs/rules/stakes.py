"""RULES 2.5: stakes that change between hands (a tournament's levels). The change is an
event of its own (``StakesChanged``), only between hands, and the config it makes must pass
RULES 2.3, so a fold of the log gives every hand the stakes it was dealt with."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rules.commands import ChangeStakes
from rules.errors import Reason, RuleViolation
from rules.events import Event, StakesChanged
from rules.state import TableState


def change_stakes(state: TableState, command: ChangeStakes) -> list[Event]:
    """The events of ``command``: one ``StakesChanged``, or :class:`RuleViolation`.

    >>> from rules.config import TableConfig
    >>> from rules.evolve import evolve
    >>> from rules.events import TableOpened
    >>> from rules.state import initial_state
    >>> s = evolve(initial_state(), TableOpened(table_id="t1", config=TableConfig()))
    >>> change_stakes(s, ChangeStakes(small_bet=400, big_bet=800, ante=80, bring_in=100))
    [StakesChanged(small_bet=400, big_bet=800, ante=80, bring_in=100)]
    >>> change_stakes(s, ChangeStakes(small_bet=400, big_bet=800, ante=80, bring_in=400))
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: invalid_config: need 0 < bring_in < small_bet
    """
    config = state.config
    if config is None:
        raise RuleViolation(Reason.INVALID_COMMAND, "the table is not open")
    if state.hand_in_progress:
        raise RuleViolation(Reason.HAND_IN_PROGRESS, "the stakes change only between hands")
    # Read untyped: compiled, a read typed int would refuse a wrong type with a TypeError (or
    # take a bool as an int) before the check below says why.
    c: Any = command
    amounts = (c.small_bet, c.big_bet, c.ante, c.bring_in)
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in amounts):
        raise RuleViolation(Reason.INVALID_CONFIG, "stakes must be integers")
    replace(config, small_bet=c.small_bet, big_bet=c.big_bet, ante=c.ante,
            bring_in=c.bring_in)  # raises invalid_config (RULES 2.3)
    return [StakesChanged(small_bet=c.small_bet, big_bet=c.big_bet,
                          ante=c.ante, bring_in=c.bring_in)]
