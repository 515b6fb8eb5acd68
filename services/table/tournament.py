"""The room's policy at a tournament table (DESIGN 5c, RULES 2.5), pure: the commands only
the tournament service may give (seat an entrant with a stack, unseat one, set the stakes
from the next hand on, pause dealing) and what a tournament table refuses its players.

A tournament table moves no money: its stacks are tournament chips, seated and unseated by
the tournament, never bought in or cashed out through the wallet, and no rake is taken.
The game is the rules' (a seat is the rules' ``PlayerSeated``, an unseat their
``PlayerLeft`` with the stack, new stakes their ``StakesChanged``); the room adds
``TournamentModeSet``, ``StakesQueued`` (stakes asked for during a hand) and
``DealingPaused``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from rules import TableState
from rules.commands import ChangeStakes, LeaveSeat, SitDown
from rules.decide import decide_and_fold
from rules.errors import RuleViolation
from studkit.errors import BadRequest, FailedPrecondition
from table import room_events as rev
from table.room_state import AnyEvent, Room, Stakes

TOURNAMENT_TABLE: Final = "tournament_table"
"""The reason a player's seat or money request is refused at a tournament table."""
NOT_TOURNAMENT_TABLE: Final = "not_tournament_table"
PAUSE_REASON_MAX: Final = 64
AMOUNT_MAX: Final = 10**15
"""The largest stack or stake a tournament may set (sums of them stay far inside int64)."""
TOURNAMENT_SERVICE: Final = "tournament"
"""The service whose principal (``service:tournament``) alone gives these commands."""


class TournamentRefusal(FailedPrecondition):
    """Refused by the tournament table's policy now (``FAILED_PRECONDITION``)."""


@dataclass(frozen=True, slots=True)
class SeatEntrant:
    seat: int
    player_id: str
    stack: int


@dataclass(frozen=True, slots=True)
class UnseatEntrant:
    seat: int
    player_id: str


@dataclass(frozen=True, slots=True)
class SetStakes:
    stakes: Stakes


@dataclass(frozen=True, slots=True)
class PauseDealing:
    paused: bool
    reason: str = ""
    one_hand: bool = False
    """With ``paused`` false: deal one hand, then pause again (with ``reason``) as it
    starts: hand for hand that holds even if the tournament service is gone."""


TournamentCommand = SeatEntrant | UnseatEntrant | SetStakes | PauseDealing


@dataclass(frozen=True, slots=True)
class Outcome:
    """A tournament command's events and, when the rules decided them, the state after."""

    events: tuple[AnyEvent, ...]
    table: TableState | None = None


def refuse_players(room: Room, what: str) -> None:
    """A player's seat, chips, leave or sit-out request at a tournament table is refused
    (RULES 2.5: the tournament seats and unseats; nobody sits out)."""
    if room.tournament:
        raise TournamentRefusal(f"{what} is not possible at a tournament table (the "
                                "tournament seats and unseats its players)",
                                reason=TOURNAMENT_TABLE)


def _require_tournament(room: Room) -> None:
    if not room.table.opened:
        raise TournamentRefusal("the table is not open", reason="table_not_open")
    if not room.tournament:
        raise TournamentRefusal("not a tournament table", reason=NOT_TOURNAMENT_TABLE)


def _seat_in_range(room: Room, seat: int) -> None:
    config = room.table.config
    assert config is not None
    if not 1 <= seat <= config.seats:
        raise BadRequest("seat", f"must be 1..{config.seats}")


def _seat_entrant(room: Room, c: SeatEntrant) -> Outcome:
    _seat_in_range(room, c.seat)
    if not 0 < c.stack <= AMOUNT_MAX:
        raise BadRequest("stack", f"must be 1..{AMOUNT_MAX}")
    if room.closed:
        raise TournamentRefusal("the table is closed", reason="table_closed")
    table = room.table
    if any(s is not None and s.player_id == c.player_id for s in table.seats):
        raise TournamentRefusal(f"{c.player_id} is already seated here",
                                reason="already_seated")
    if table.seat(c.seat) is not None:
        raise TournamentRefusal(f"seat {c.seat} is taken", reason="seat_taken")
    events, after = decide_and_fold(table, SitDown(seat=c.seat, player_id=c.player_id,
                                                   stack=c.stack))
    return Outcome(events, after)


def _unseat_entrant(room: Room, c: UnseatEntrant) -> Outcome:
    _seat_in_range(room, c.seat)
    table = room.table
    holder = table.seat(c.seat)
    if holder is None or holder.player_id != c.player_id:
        raise TournamentRefusal(f"seat {c.seat} is not {c.player_id}'s",
                                reason="not_that_players_seat")
    if table.hand_in_progress and table.hand is not None and table.hand.has_player(c.seat):
        raise TournamentRefusal(f"seat {c.seat} is in the hand in progress: pause dealing "
                                "and unseat after the hand", reason="hand_in_progress")
    events, after = decide_and_fold(table, LeaveSeat(seat=c.seat))
    return Outcome(events, after)


def change_stakes(stakes: Stakes) -> ChangeStakes:
    return ChangeStakes(small_bet=stakes.small_bet, big_bet=stakes.big_bet,
                        ante=stakes.ante, bring_in=stakes.bring_in)


def current_stakes(room: Room) -> Stakes:
    config = room.table.config
    assert config is not None
    return Stakes(config.small_bet, config.big_bet, config.ante, config.bring_in)


def _set_stakes(room: Room, c: SetStakes) -> Outcome:
    config = room.table.config
    assert config is not None
    s = c.stakes
    if any(a > AMOUNT_MAX for a in (s.small_bet, s.big_bet, s.ante, s.bring_in)):
        raise BadRequest("stakes", f"each at most {AMOUNT_MAX}", reason="invalid_config")
    try:  # RULES 2.3 on the config they would make
        replace(config, small_bet=s.small_bet, big_bet=s.big_bet, ante=s.ante,
                bring_in=s.bring_in)
    except RuleViolation as exc:
        raise BadRequest("stakes", exc.detail, reason="invalid_config") from None
    if room.table.hand_in_progress:  # from the next hand on (RULES 2.5)
        if room.pending_stakes == s:
            return Outcome(())
        return Outcome((rev.StakesQueued(small_bet=s.small_bet, big_bet=s.big_bet,
                                         ante=s.ante, bring_in=s.bring_in),))
    if s == current_stakes(room) and room.pending_stakes is None:
        return Outcome(())
    events, after = decide_and_fold(room.table, change_stakes(s))
    return Outcome(events, after)


def _pause(room: Room, c: PauseDealing) -> Outcome:
    if len(c.reason) > PAUSE_REASON_MAX:
        raise BadRequest("reason", f"at most {PAUSE_REASON_MAX} characters")
    if c.one_hand and c.paused:
        raise BadRequest("one_hand", "one hand is a way to deal again, not to pause")
    reason = c.reason if c.paused or c.one_hand else ""
    one_hand = (reason or "hand_for_hand") if c.one_hand else ""
    if (room.paused, room.pause_reason, room.one_hand) == (c.paused, reason if c.paused
                                                           else "", one_hand):
        return Outcome(())
    return Outcome((rev.DealingPaused(paused=c.paused, reason=reason, one_hand=c.one_hand),))


def decide_tournament(room: Room, command: TournamentCommand) -> Outcome:
    """The events a tournament command causes; raises :class:`TournamentRefusal`,
    :class:`~studkit.errors.BadRequest` or the rules' ``RuleViolation`` (nothing changes)."""
    _require_tournament(room)
    match command:
        case SeatEntrant():
            return _seat_entrant(room, command)
        case UnseatEntrant():
            return _unseat_entrant(room, command)
        case SetStakes():
            return _set_stakes(room, command)
        case PauseDealing():
            return _pause(room, command)
    raise AssertionError(f"not a tournament command: {command!r}")


def due_at_tournament_table(room: Room) -> ChangeStakes | None:
    """Between hands: stakes queued during the hand just ended take effect now, before the
    next hand starts."""
    if room.pending_stakes is None or room.table.hand_in_progress:
        return None
    return change_stakes(room.pending_stakes)


def may_deal(room: Room) -> bool:
    """Whether the room lets a new hand start (a paused tournament table does not)."""
    return not room.paused

