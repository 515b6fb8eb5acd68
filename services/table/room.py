"""The room's model of one table, pure (DESIGN §5b): a frozen :class:`Room` (the rules' table
state plus the room's own state), ``decide(room, command, now)`` for the room's commands, and
``apply(room, events, ...)`` to fold events into it.

The game is the rules' (``libs/rules``); this module holds the room's policies: seats and
buy-in ranges, the rathole rule, top-ups, leaving, sit-out and its limits, the time bank,
muck preferences, closing, and the states of the money saga of each seat. Every one of them
is folded from the table's stream (the rules' events and the room events of ``room.proto``),
so a table is rebuilt from its log alone. No I/O, no clock (``now`` comes in as data).

The money saga, one per seat at a time (so no interleaving of calls can strand chips):

- buy-in: ``BuyInRequested`` (before the wallet moves) -> ``PlayerSeated`` | ``BuyInFailed``
  (the wallet refused) | ``BuyInRefundDue`` -> ``BuyInRefunded``;
- top-up: ``TopUpQueued`` -> ``ChipsAdded`` | ``TopUpDropped``;
- cash-out: ``PlayerLeft`` with ``CashOutRequested`` (one append) -> ``CashOutPaid``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Final

import rules
from rules import Command, TableState
from rules.commands import AddChips, LeaveSeat, OpenTable, SitDown, SitOut
from rules.decide import decide_and_fold
from rules.errors import Reason, RuleViolation
from rules.events import PlayerLeft
from studkit.errors import BadRequest, FailedPrecondition
from table import room_events as rev
from table.model import settings_from_stored, settings_to_proto
from table.room_commands import (
    ApplyTopUp,
    BuyInEnd,
    Close,
    ConfirmBuyIn,
    DropTopUp,
    EndBuyIn,
    Leave,
    Open,
    PayCashOut,
    Play,
    QueueTopUp,
    Reconciled,
    Record,
    RefundOrphan,
    RequestBuyIn,
    RoomCommand,
    SetMuck,
    Settle,
)
from table.room_state import (
    BUY_IN,
    CASH_OUT,
    TOP_UP,
    AnyEvent,
    Room,
    Saga,
    SagaKind,
    Turn,
    apply,
)
from table.tournament import (
    PauseDealing,
    SeatEntrant,
    SetStakes,
    UnseatEntrant,
    decide_tournament,
    due_at_tournament_table,
    refuse_players,
)

__all__ = [
    "BUY_IN",
    "CASH_OUT",
    "TOP_UP",
    "ApplyTopUp",
    "BuyInEnd",
    "Close",
    "ConfirmBuyIn",
    "DropTopUp",
    "EndBuyIn",
    "Leave",
    "Open",
    "PayCashOut",
    "Play",
    "QueueTopUp",
    "Reconciled",
    "Record",
    "RefundOrphan",
    "RequestBuyIn",
    "Room",
    "RoomCommand",
    "Saga",
    "SetMuck",
    "Settle",
    "Turn",
    "apply",
]


class RoomRefusal(FailedPrecondition):
    """The room's policy refuses the command now (``FAILED_PRECONDITION`` with a reason)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What a command causes: its events, and the rules' state after them when deciding
    computed it (a game command: the caller then evolves only the room's part)."""

    events: tuple[AnyEvent, ...]
    table: TableState | None = None


def _refuse(reason: str, detail: str) -> RoomRefusal:
    return RoomRefusal(detail, reason=reason)


def _game(room: Room, command: Command) -> Decision:
    events, after = decide_and_fold(room.table, command)
    return Decision(events, after)


def buy_in_range(room: Room, player_id: str, now: float) -> tuple[int, int, int]:
    """(least, most, owed) a player may bring now; ``owed`` is what the rathole rule asks
    for: within the window, at least what they left with (even above the maximum)."""
    s = room.settings
    left = room.departures.get(player_id)
    owed = left[0] if left is not None and now - left[1] < s.rathole_window_s else 0
    return s.buy_in_min, max(s.buy_in_max, owed), owed


def _request_buy_in(room: Room, c: RequestBuyIn, now: float) -> Decision:
    refuse_players(room, "buying in")
    if room.closed:
        raise _refuse("table_closed", "the table is closed")
    if room.saga(c.seat) is not None:
        raise _refuse("seat_taken", f"seat {c.seat} is taken")
    if any(s.kind == BUY_IN and s.player_id == c.player_id for s in room.sagas.values()):
        raise RuleViolation(Reason.PLAYER_ALREADY_SEATED, f"{c.player_id} is sitting down")
    least, most, owed = buy_in_range(room, c.player_id, now)
    if not least <= c.amount <= most:
        raise _refuse("buy_in_out_of_range", f"the buy-in must be {least}..{most}")
    if c.amount < owed:
        raise _refuse("rathole", f"you left this table with {owed} less than "
                      f"{round(room.settings.rathole_window_s)}s ago: bring at least that much")
    refusal = rules.sit_refusal(room.table, c.seat, c.player_id, c.amount)
    if refusal is not None:
        raise refusal
    return Decision((rev.BuyInRequested(seat=c.seat, player_id=c.player_id, amount=c.amount,
                                        wallet_key=c.wallet_key, command_id=c.command_id),))


def _pending(room: Room, seat: int, kind: SagaKind, wallet_key: str) -> Saga:
    saga = room.saga(seat)
    if saga is None or saga.kind != kind or saga.wallet_key != wallet_key:
        raise _refuse("no_such_saga", f"seat {seat} has no such {kind} pending")
    return saga


def _confirm_buy_in(room: Room, c: ConfirmBuyIn) -> Decision:
    saga = _pending(room, c.seat, BUY_IN, c.wallet_key)
    if saga.refund_due:
        raise _refuse("buy_in_refunded", "this buy-in is being refunded")
    return _game(room, SitDown(seat=c.seat, player_id=saga.player_id, stack=saga.amount))


def _end_buy_in(room: Room, c: EndBuyIn) -> Decision:
    saga = _pending(room, c.seat, BUY_IN, c.wallet_key)
    if c.stage == BuyInEnd.FAILED:
        return Decision((rev.BuyInFailed(seat=c.seat, player_id=saga.player_id,
                                         reason=c.reason),))
    if c.stage == BuyInEnd.REFUND_DUE:
        return Decision(() if saga.refund_due else (rev.BuyInRefundDue(
            seat=c.seat, player_id=saga.player_id, reason=c.reason),))
    if not saga.refund_due:
        raise _refuse("no_refund_due", "no refund is due")
    return Decision((rev.BuyInRefunded(seat=c.seat, player_id=saga.player_id,
                                       amount=saga.amount),))


def _owned(room: Room, seat: int, player_id: str) -> None:
    holder = room.table.seat(seat) if 1 <= seat <= len(room.table.seats) else None
    if holder is None or holder.player_id != player_id:
        raise _refuse("not_your_seat", f"seat {seat} is not yours")


def _queue_top_up(room: Room, c: QueueTopUp) -> Decision:
    refuse_players(room, "adding chips")
    _owned(room, c.seat, c.player_id)
    if room.saga(c.seat) is not None:
        raise _refuse("topup_pending", "a top-up is already pending")
    if c.seat in room.leaving:
        raise _refuse("leaving", "the seat is leaving")
    holder = room.table.seat(c.seat)
    assert holder is not None
    if holder.stack + c.amount > room.settings.buy_in_max:
        raise _refuse("above_buy_in_max",
                      f"a stack may be topped up to {room.settings.buy_in_max}")
    return Decision((rev.TopUpQueued(seat=c.seat, player_id=c.player_id, amount=c.amount,
                                     wallet_key=c.wallet_key, command_id=c.command_id),))


def _leave(room: Room, c: Leave) -> Decision:
    refuse_players(room, "leaving the seat")
    _owned(room, c.seat, c.player_id)
    table = room.table
    hand = table.hand
    # Dealt into a hand that is on, or over but not yet settled: the wallet's settlement
    # still posts to the seat's escrow, so it is cashed out after that (seed 10 of the
    # simulator: a cash-out first left the settlement a released seat, and the table stuck).
    in_hand = hand is not None and hand.has_player(c.seat) and (
        table.hand_in_progress or room.settled < hand.hand_number)
    if in_hand or room.saga(c.seat) is not None:
        if c.seat in room.leaving:
            return Decision(())
        return Decision((rev.LeaveRequested(seat=c.seat, player_id=c.player_id),))
    events, after = decide_and_fold(table, LeaveSeat(seat=c.seat))
    left = [e for e in events if isinstance(e, PlayerLeft)]
    cash = tuple(rev.CashOutRequested(seat=e.seat, player_id=e.player_id, amount=e.stack,
                                      wallet_key=c.wallet_key) for e in left)
    return Decision((*events, *cash), after)


def _open(room: Room, c: Open) -> Decision:
    if c.tournament_id and c.config.rake is not None:
        raise BadRequest("config.rake", "a tournament table takes no rake",
                         reason="invalid_config")
    events, after = decide_and_fold(room.table, OpenTable(table_id=c.table_id,
                                                          config=c.config))
    settings = c.settings.for_config(c.config)
    mode = (rev.TournamentModeSet(tournament_id=c.tournament_id),) if c.tournament_id else ()
    # as stored (whole seconds), so the room folded live equals the one folded from its log
    stored = settings_from_stored(settings_to_proto(settings))
    return Decision((*events, rev.SettingsSet(settings=stored), *mode),
                    after)


def decide(room: Room, command: RoomCommand, now: float) -> Decision:
    """The events ``command`` causes in ``room`` at ``now``; raises :class:`RoomRefusal` or
    the rules' :class:`~rules.errors.RuleViolation` (nothing changes)."""
    match command:
        case Play(command=game):
            if isinstance(game, SitOut):
                refuse_players(room, "sitting out")
            return _game(room, game)
        case Open():
            return _open(room, command)
        case SeatEntrant() | UnseatEntrant() | SetStakes() | PauseDealing():
            outcome = decide_tournament(room, command)
            return Decision(outcome.events, outcome.table)
        case RequestBuyIn():
            return _request_buy_in(room, command, now)
        case ConfirmBuyIn():
            return _confirm_buy_in(room, command)
        case EndBuyIn():
            return _end_buy_in(room, command)
        case QueueTopUp():
            return _queue_top_up(room, command)
        case ApplyTopUp(seat=seat, wallet_key=wallet_key):
            saga = _pending(room, seat, TOP_UP, wallet_key)
            return _game(room, AddChips(seat=seat, amount=saga.amount))
        case DropTopUp(seat=seat, wallet_key=wallet_key, reason=reason):
            saga = _pending(room, seat, TOP_UP, wallet_key)
            return Decision((rev.TopUpDropped(seat=seat, player_id=saga.player_id,
                                              reason=reason),))
        case Leave():
            return _leave(room, command)
        case PayCashOut(seat=seat, wallet_key=wallet_key):
            saga = _pending(room, seat, CASH_OUT, wallet_key)
            return Decision((rev.CashOutPaid(seat=seat, player_id=saga.player_id),))
        case SetMuck(seat=seat, player_id=player, muck=muck):
            _owned(room, seat, player)
            if (seat in room.muck) == muck:
                return Decision(())
            return Decision((rev.MuckPreferenceSet(seat=seat, player_id=player, muck=muck),))
        case Close(by=by):
            return Decision(() if room.closed else (rev.TableClosed(by=by),))
        case Settle(hand_number=n, rake=rake):
            if n <= room.settled:
                raise _refuse("settled", f"hand {n} is settled")
            return Decision((rev.HandSettled(hand_number=n, rake=rake),))
        case Reconciled(problem=problem):
            if problem and problem != room.stopped:
                return Decision((rev.DealingStopped(reason=problem),))
            if not problem and room.stopped:
                return Decision((rev.DealingResumed(),))
            return Decision(())
        case RefundOrphan(seat=seat, player_id=player, amount=amount):
            # Decided at the commit, not where the wallet was read: a sit-down's saga recorded
            # meanwhile (a retry after a restart, with the same wallet key) owns the escrow.
            holder = room.table.seat(seat) if 1 <= seat <= len(room.table.seats) else None
            if seat in room.sagas or (holder is not None and holder.player_id == player):
                raise _refuse("not_an_orphan", f"seat {seat}'s escrow is accounted for")
            return Decision((rev.OrphanEscrowRefunded(seat=seat, player_id=player,
                                                      amount=amount),))
        case Record(events=events):
            return Decision(events)
    raise AssertionError(f"not a room command: {command!r}")


# --- what is due between hands (policy; the driver does it) ---------------------------------

def due_between_hands(room: Room, now: float) -> RoomCommand | None:
    """The next seat change the room's policies ask for between hands, if any: a leave
    asked for during the hand, a seat timed out too often (sat out), a seat sitting out for
    longer than the limit or at a closed table (stood up). At a tournament table none of
    these (RULES 2.5: nobody sits out or is stood up; the tournament unseats), only stakes
    queued during the hand."""
    if room.tournament:
        stakes = due_at_tournament_table(room)
        return None if stakes is None else Play(stakes)
    table = room.table
    for seat, player in sorted(room.leaving.items()):
        if room.saga(seat) is None:
            return Leave(seat, player, "")
    limit = room.settings.timeouts_before_sit_out
    for number, holder in enumerate(table.seats, start=1):
        if holder is None or room.saga(number) is not None:
            continue
        if not holder.sitting_out and room.timeout_streak.get(number, 0) >= limit:
            return Play(SitOut(seat=number))
        since = room.sat_out_since.get(number)
        if room.closed or (holder.sitting_out and since is not None
                           and now - since >= room.settings.sit_out_limit_s):
            return Leave(number, holder.player_id, "")
    return None


def next_sit_out_deadline(room: Room, now: float) -> float:
    """Seconds until a seat sitting out reaches the table's limit (at most 5); infinite when
    no seat is sitting out (then only a change of the table is worth a look)."""
    waits = [since + room.settings.sit_out_limit_s - now
             for number, since in room.sat_out_since.items()
             if (seat := room.table.seat(number)) is not None and seat.sitting_out]
    return max(0.0, min(5.0, *waits)) if waits else math.inf




# --- carrying a saga on (policy; the money module does the wallet's part) -------------------

@unique
class WalletStep(StrEnum):
    """The wallet call that carries a saga on before its step is recorded."""

    NONE = "none"
    BUY_IN = "buy_in"
    CASH_OUT = "cash_out"
    REFUND = "refund"


WALLET_NONE: Final = WalletStep.NONE
WALLET_BUY_IN: Final = WalletStep.BUY_IN
WALLET_CASH_OUT: Final = WalletStep.CASH_OUT
WALLET_REFUND: Final = WalletStep.REFUND


def saga_step(room: Room, seat: int, held: tuple[str, int] | None
              ) -> tuple[WalletStep, RoomCommand] | None:
    """How a saga that no call carries on goes on (after a crash, an outage, or a top-up
    held for a hand's end): the wallet call to make first (idempotent by the saga's key),
    then the command that records it. ``held`` is what the wallet holds for the seat now.
    None when the saga must wait (a top-up while its seat is in a hand).

    A buy-in is seated only if its money reached the wallet, else it ends having moved
    nothing (the player sits down again): a call that gave up is never completed behind
    the player's back with money the wallet never had.
    """
    saga = room.saga(seat)
    if saga is None:
        return None
    if saga.kind == CASH_OUT:
        return WALLET_CASH_OUT, PayCashOut(seat, saga.wallet_key)
    if saga.kind == TOP_UP:
        table = room.table
        if table.hand_in_progress and table.hand is not None and table.hand.has_player(seat):
            return None
        return WALLET_BUY_IN, ApplyTopUp(seat, saga.wallet_key)
    if saga.refund_due:
        return WALLET_REFUND, EndBuyIn(seat, saga.wallet_key, BuyInEnd.REFUNDED)
    if held == (saga.player_id, saga.amount):
        return WALLET_NONE, ConfirmBuyIn(seat, saga.wallet_key)
    return WALLET_NONE, EndBuyIn(seat, saga.wallet_key, BuyInEnd.FAILED, "abandoned")
