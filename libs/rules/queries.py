"""Questions about a table state, for services, clients and bots (all pure)."""

from __future__ import annotations

from rules import dealing, showdown
from rules.betting import LegalActions, legal_actions_for
from rules.dealing import DealPlan
from rules.errors import Reason, RuleViolation
from rules.side_pots import Pot
from rules.state import Phase, TableState


def seats_to_deal(state: TableState) -> tuple[int, ...]:
    """The seats that would be dealt in if a hand started now: seated, not sitting out, with
    chips (RULES 3.1-3.2, 3.5).

    >>> from rules.testing import TableDriver
    >>> from rules.config import TableConfig
    >>> from rules.commands import SitOut
    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 4: 1000, 6: 1000})
    >>> _ = t.apply(SitOut(seat=4)); seats_to_deal(t.state)
    (1, 6)
    """
    return tuple(
        n for n, s in enumerate(state.seats, start=1)
        if s is not None and not s.sitting_out and s.stack > 0
    )


def start_refusal(state: TableState) -> RuleViolation | None:
    """Why a hand cannot start now, or None if it can (what ``decide`` refuses a
    ``StartHand`` with, the hand number aside)."""
    config = state.config
    if config is None:
        return RuleViolation(Reason.INVALID_COMMAND, "the table is not open")
    if state.hand_in_progress:
        return RuleViolation(Reason.HAND_IN_PROGRESS, "a hand is already in progress")
    seats = seats_to_deal(state)
    if len(seats) < config.min_players:
        return RuleViolation(Reason.NOT_ENOUGH_PLAYERS,
                             f"{len(seats)} eligible players, {config.min_players} needed")
    return None


def sit_refusal(state: TableState, seat: object, player_id: object,
                stack: object) -> RuleViolation | None:
    """Why ``SitDown(seat=seat, player_id=player_id, stack=stack)`` would be refused now, or
    None if it would be accepted (what ``decide`` refuses it with; a room asks this before it
    takes a buy-in's money).

    >>> from rules.testing import TableDriver
    >>> from rules.config import TableConfig
    >>> t = TableDriver(TableConfig(), stacks={1: 1000})
    >>> sit_refusal(t.state, 2, "bob", 500) is None
    True
    >>> sit_refusal(t.state, 1, "bob", 500).reason.name
    'SEAT_TAKEN'
    """
    config = state.config
    if config is None:
        return RuleViolation(Reason.INVALID_COMMAND, "the table is not open")
    # The arguments are typed loosely (object): compiled, a parameter typed int would refuse
    # a wrong type with a TypeError (or take a bool as an int) before these checks say why.
    if (not isinstance(seat, int) or isinstance(seat, bool)
            or not 1 <= seat <= config.seats):
        return RuleViolation(Reason.SEAT_OUT_OF_RANGE,
                             f"seat must be 1..{config.seats}, got {seat!r}")
    if state.seat(seat) is not None:
        return RuleViolation(Reason.SEAT_TAKEN, f"seat {seat} is taken")
    if not player_id:
        return RuleViolation(Reason.INVALID_COMMAND, "player id must not be empty")
    if not isinstance(player_id, str):
        return RuleViolation(Reason.INVALID_COMMAND,
                             f"player id must be a string, got {player_id!r}")
    if any(s is not None and s.player_id == player_id for s in state.seats):
        return RuleViolation(Reason.PLAYER_ALREADY_SEATED, f"{player_id} is already seated")
    if not isinstance(stack, int) or isinstance(stack, bool) or stack <= 0:
        return RuleViolation(Reason.INVALID_COMMAND,
                             f"stack must be a positive integer, got {stack!r}")
    return None


def can_start_hand(state: TableState) -> bool:
    """Whether ``StartHand`` (with the next hand number) would be accepted now: the table is
    open, no hand is in progress and at least ``min_players`` seats would be dealt in.

    >>> from rules.testing import TableDriver
    >>> from rules.config import TableConfig
    >>> can_start_hand(TableDriver(TableConfig(), stacks={1: 1000}).state)
    False
    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000}); can_start_hand(t.state)
    True
    >>> _ = t.start(); can_start_hand(t.state)
    False
    """
    return start_refusal(state) is None


def legal_actions(state: TableState) -> LegalActions | None:
    """Exactly what the player to act may do, with amounts; None if nobody is to act.

    >>> from rules.testing import TableDriver
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
    return dealing.deal_plan(state.hand, state.config)


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
    return showdown.showing_order(hand, state.config)
