"""Questions about a table state, for services, clients and bots (all pure)."""

from __future__ import annotations

from rules import dealing, showdown
from rules.betting import LegalActions, legal_actions_for
from rules.dealing import DealPlan
from rules.pots import Pot
from rules.state import Phase, TableState


def legal_actions(state: TableState) -> LegalActions | None:
    """Exactly what the player to act may do, with amounts; None if nobody is to act.

    >>> from rules.driver import TableDriver
    >>> from rules.config import TableConfig
    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000}); _ = t.start()
    >>> legal_actions(t.state) is None  # cards first
    True
    >>> t.deal_from("2c 3c 4c 5c 6c 7c")
    >>> [a.kind.value for a in legal_actions(t.state).actions]
    ['bring_in', 'complete']
    """
    if state.hand is None or state.config is None:
        return None
    return legal_actions_for(state.hand, state.config)


def pending_deal(state: TableState) -> DealPlan | None:
    """The cards the dealer must deliver next, or None when not dealing."""
    if state.hand is None or state.config is None:
        return None
    return dealing.pending_deal(state.hand, state.config)


def pots(state: TableState) -> tuple[Pot, ...]:
    """The pots of the current hand as they stand (empty between hands)."""
    if state.hand is None or state.hand.is_over:
        return ()
    return showdown.hand_pots(state.hand)


def showdown_order(state: TableState) -> tuple[int, ...]:
    """Seats in showing order when the hand is at its showdown, else empty."""
    hand = state.hand
    if hand is None or state.config is None or hand.phase != Phase.SHOWDOWN:
        return ()
    return showdown.showdown_order(hand, state.config)
