"""Who acts first, who acts next and when a betting round ends (RULES §6-§8): the reads of a
hand that ``evolve`` makes after every card and action, on a frozen hand or on the fold's
mutable twin alike (:data:`Hand`). Compiled (tools/compile_core.py), a twin's attributes are
read natively; :mod:`rules.betting` re-exports these for everything else."""

from __future__ import annotations

from collections.abc import Callable

from rules._mutable import MutableHand, MutablePlayer
from rules.config import HeadsUpRaises, TableConfig
from rules.hands import board_value
from rules.state import HandState, Player
from rules.streets import bet_size

Hand = HandState | MutableHand
"""A hand as the helpers here read it: frozen, or the fold's mutable twin (the same attributes
and properties; a twin's players are a list of frozen players and twins)."""
AnyPlayer = Player | MutablePlayer
"""A player as the helpers here read it: frozen or a twin."""

# Enum members as module constants for the hot paths: an enum member is looked up through
# the enum's metaclass, about ten times the cost of a global.
_ROUND_STARTS_HEADS_UP = HeadsUpRaises.ROUND_STARTS_HEADS_UP
_HEADS_UP_BEFORE_CAP = HeadsUpRaises.HEADS_UP_BEFORE_CAP


def clockwise_after(hand: Hand, seat: int, wanted: Callable[[AnyPlayer], bool]) -> int | None:
    """The first player clockwise after ``seat`` (not ``seat`` itself unless it is the only
    one) for whom ``wanted`` holds."""
    players = hand.players
    for p in players:
        if p.seat > seat and wanted(p):
            return p.seat
    for p in players:
        if p.seat <= seat and wanted(p):
            return p.seat
    return None


def highest_board_seat(hand: Hand) -> int:
    """The player in the hand with the highest board; ties to the lowest seat (RULES 8.1-8.2)."""
    best: tuple[tuple[int, ...], int] | None = None
    for p in hand.players:
        if p.folded:
            continue
        key = (board_value(p.up[:4]), -p.seat)  # p.board, inlined
        if best is None or key > best:
            best = key
    assert best is not None
    return -best[1]


def bring_in_duty(hand: Hand) -> int | None:
    """Who must bring in on 3rd street, or None when fewer than two players dealt in have
    chips (RULES 7.1, 7.8, 7.9)."""
    if sum(1 for p in hand.players if p.stack > 0) < 2:
        return None
    lowest = min(hand.players, key=lambda p: p.up[0].key)
    if lowest.stack > 0:
        return lowest.seat
    return clockwise_after(hand, lowest.seat, lambda p: p.stack > 0)


def first_to_act(hand: Hand) -> int | None:
    """First actor on 4th to 7th street: the highest board, or the next player clockwise able
    to act when that player is all-in (RULES 8.3)."""
    top = highest_board_seat(hand)
    if hand.player(top).able:
        return top
    return clockwise_after(hand, top, lambda p: p.able)


def lifts_cap(hand: Hand, config: TableConfig, round_start: bool) -> bool:
    """Whether the heads-up option lifts the cap now (call at round start or after an action)."""
    if hand.cap_lifted:
        return True
    option = config.heads_up_raises
    if option == _ROUND_STARTS_HEADS_UP:
        return round_start and able_count(hand) == 2
    if option == _HEADS_UP_BEFORE_CAP:
        return able_count(hand) == 2 and hand.full_wagers < config.cap
    return False


def able_count(hand: Hand) -> int:
    """How many players are able to act."""
    count = 0
    for p in hand.players:
        if not p.folded and p.stack > 0:  # p.able, inlined
            count += 1
    return count


def street_bet(hand: Hand, config: TableConfig) -> int:
    """The bet size S of the current street."""
    street = hand.street
    assert street is not None
    return bet_size(config, street)


def round_over(hand: Hand) -> bool:
    """Whether the betting round has ended (RULES 6.10)."""
    target = hand.target
    in_hand = 0
    waiting = False
    for p in hand.players:
        if not p.folded:
            in_hand += 1
            # p.able, inlined: not folded (checked above) and chips behind
            if p.stack > 0 and not (p.acted and p.street_total >= target):
                waiting = True
    return in_hand <= 1 or not waiting


def next_to_act(hand: Hand, after: int) -> int | None:
    """The next player clockwise after ``after`` who still has to act this round."""
    # clockwise_after(hand, after, lambda p: p.able and (not p.acted or p.street_total < T)),
    # inlined: this runs after every action.
    target = hand.target
    players = hand.players
    for p in players:
        if (p.seat > after and not p.folded and p.stack > 0
                and (not p.acted or p.street_total < target)):
            return p.seat
    for p in players:
        if (p.seat <= after and not p.folded and p.stack > 0
                and (not p.acted or p.street_total < target)):
            return p.seat
    return None
