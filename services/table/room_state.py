"""The room's state of one table (DESIGN §5b), folded from its stream: the rules' table
state plus the room's own (settings, the money saga of each seat, deferred leaves, muck
preferences, closing, settlement, the clock's bookkeeping). ``apply(room, events, ...)`` folds
events, the rules' and the room's (``room.proto``), into it. Pure: time comes in as data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum, unique
from typing import Any, Final, TypeAlias, assert_never, cast, get_args

import rules
from rules import Event, TableState
from rules.events import (
    ActionTimedOut,
    BetMade,
    BringInPosted,
    Called,
    Checked,
    ChipsAdded,
    Completed,
    Folded,
    HandEnded,
    HandStarted,
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    Raised,
    StakesChanged,
    TableOpened,
)
from rules.settlement import settlement
from table import room_events as rev
from table.model import TableSettings
from table.room_events import RoomEvent, is_room

ACTIONS: Final = (BringInPosted, Completed, BetMade, Raised, Called, Checked, Folded,
                  ActionTimedOut)
SEATINGS_KEPT: Final = 200
"""Hands whose seating (who was dealt in where) the room keeps, for hand histories."""
STARTS_KEPT: Final = 500
HAND_STARTS_KEPT: Final = 1000
"""Hands whose first sequence the room keeps, so that reading one of them starts there (an
older hand's start is found by bisecting the stream: ``Watching.hand_events``)."""

_KEPT_BY_ROOM: Final = (*ACTIONS, TableOpened, HandStarted, HandEnded, PlayerSeated,
                        PlayerLeft, PlayerSatOut, PlayerSatIn, ChipsAdded)
"""The rules' events the room keeps something of (:meth:`_Fold.game_event`)."""
_NO_BOOKKEEPING: Final = frozenset(
    kind for kind in get_args(Event) if not issubclass(kind, _KEPT_BY_ROOM))
"""The rules' events the room keeps nothing of (a dealt card, an ante, a pot awarded, ...):
passed over by their class (issue 35: each went through every check of the others)."""

AnyEvent: TypeAlias = Event | RoomEvent | rev.TurnStarted
"""An event of a table's stream: the rules', the room's (:mod:`table.room_events`), or a
turn's clock."""

@unique
class SagaKind(StrEnum):
    """The money move a seat's saga makes."""

    BUY_IN = "buy_in"
    TOP_UP = "top_up"
    CASH_OUT = "cash_out"


BUY_IN: Final = SagaKind.BUY_IN
TOP_UP: Final = SagaKind.TOP_UP
CASH_OUT: Final = SagaKind.CASH_OUT


@dataclass(frozen=True, slots=True)
class Saga:
    """A money move of one seat in flight: the wallet moves, then the log records."""

    kind: SagaKind
    player_id: str
    amount: int
    wallet_key: str
    command_id: str = ""
    refund_due: bool = False


@dataclass(frozen=True, slots=True)
class SeatResult:
    """One seat dealt into a finished hand: its stack at the hand's start (before the ante)
    and at its end."""

    seat: int
    player_id: str
    stack_start: int
    stack_end: int


@dataclass(frozen=True, slots=True)
class Stakes:
    """A table's four stakes (RULES 2.5)."""

    small_bet: int
    big_bet: int
    ante: int
    bring_in: int


@dataclass(frozen=True, slots=True)
class Turn:
    """The clock of the turn of ``seat`` (absolute times, seconds)."""

    seat: int
    started_at: float
    action_deadline: float
    deadline: float
    bank_ms: int


@dataclass(frozen=True)
class Room:
    """One table as the room knows it, folded from its stream. Not slotted: a room is copied
    by its ``__dict__`` (:func:`updated`), at once, where thirty slots are copied one by
    one."""

    table: TableState = field(default_factory=rules.initial_state)
    version: int = 0
    settings: TableSettings = field(default_factory=TableSettings)
    sagas: Mapping[int, Saga] = field(default_factory=dict)
    leaving: Mapping[int, str] = field(default_factory=dict)
    muck: frozenset[int] = frozenset()
    closed: bool = False
    stopped: str = ""
    """Why dealing is stopped by a reconciliation ("" while dealing)."""
    settled: int = 0
    """The last hand the wallet settled."""
    turn: Turn | None = None
    banks: Mapping[int, int] = field(default_factory=dict)
    timeout_streak: Mapping[int, int] = field(default_factory=dict)
    timed_out: frozenset[int] = frozenset()
    sat_out_since: Mapping[int, float] = field(default_factory=dict)
    departures: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    """player id -> (the stack they left with, when): the players who left within the
    rathole window (older departures are dropped at the next one)."""
    seatings: Mapping[int, Mapping[int, str]] = field(default_factory=dict)
    hand_starts: Mapping[int, int] = field(default_factory=dict)
    """hand number -> the sequence of its HandStarted, for the latest
    :data:`HAND_STARTS_KEPT` hands (reads one hand, not the stream)."""
    hand_started_at: tuple[float, ...] = ()
    last_hand_ended_at: float = 0.0
    visible: int = 0
    """The sequence of the last rules event (what watchers have seen): a command acted on
    an older one is stale."""
    tournament_id: str = ""
    """The tournament of a tournament table ("" for a cash table; DESIGN 5c)."""
    paused: bool = False
    pause_reason: str = ""
    """Dealing paused by the tournament (a break, hand for hand) and why."""
    one_hand: str = ""
    """Dealing again for one hand only: the reason the table pauses with when it starts
    ("" otherwise; hand for hand, DESIGN 5c)."""
    pending_stakes: Stakes | None = None
    """Stakes asked for during a hand: in force from the next one (RULES 2.5)."""
    results: Mapping[int, tuple[SeatResult, ...]] = field(default_factory=dict)
    """hand number -> each seat's stack at its start and end (the last SEATINGS_KEPT)."""

    @property
    def tournament(self) -> bool:
        return bool(self.tournament_id)

    def bank(self, seat: int) -> int:
        """The seat's time bank now, in ms."""
        return self.banks.get(seat, int(self.settings.time_bank_s * 1000))

    def saga(self, seat: int) -> Saga | None:
        return self.sagas.get(seat)


_FIELDS: Final = frozenset(f.name for f in fields(Room))


def updated(room: Room, changes: Mapping[str, object]) -> Room:
    """``dataclasses.replace(room, **changes)``, the same value at a fraction of the cost: a
    room is copied once per fold and once per command, and ``replace`` checks every field
    and goes through the generated frozen ``__init__`` (a ``Room`` has no
    ``__post_init__``, and every field is an init field, so nothing runs there that this
    leaves out). A name that is not a field raises ``KeyError``."""
    if not changes.keys() <= _FIELDS:
        raise KeyError(sorted(set(changes) - _FIELDS)[0])
    new = object.__new__(Room)
    values = new.__dict__
    values.update(room.__dict__)
    values.update(changes)
    return new


# --- folding --------------------------------------------------------------------------------

def apply(room: Room, events: Sequence[AnyEvent], *, at: float, first_sequence: int,
          table: TableState | None = None) -> Room:
    """``room`` with ``events`` folded in (sequences ``first_sequence``, ... : a
    :class:`~table.room_events.TurnStarted` takes none; ``at`` their time). ``table`` is the
    rules' state after them when the caller has it (it is not folded again)."""
    f = _Fold(room)
    state = room.table
    run: list[Event] = []
    """The game events not yet folded into ``state``: folded together (``rules.fold``: a run
    of hand events thaws and freezes the hand once), up to a hand's start, the one event
    whose bookkeeping reads the state before it."""
    sequence = first_sequence - 1
    for event in events:
        if isinstance(event, rev.TurnStarted):
            f.turn = Turn(event.seat, event.started_at, event.action_deadline, event.deadline,
                          event.bank_ms)
            continue
        sequence += 1
        if is_room(event):
            f.room_event(event)
            continue
        game = cast(Event, event)  # not a room event: the rules'
        if run and isinstance(game, HandStarted):
            state, run = rules.fold(run, state), []
        f.game_event(game, state, at, sequence)
        if table is None:
            run.append(game)
        f.visible = sequence
    if run:
        state = rules.fold(run, state)
    final = table if table is not None else state
    for event in events:
        if isinstance(event, HandEnded):
            f.hand_result(final, event.hand_number)
        elif isinstance(event, StakesChanged):
            f.set("pending_stakes", None)
    return f.build(final, sequence if sequence >= first_sequence else room.version)


def hand_result(table: TableState) -> tuple[SeatResult, ...]:
    """Each seat dealt into the table's last hand, once over: its stack at the start (the
    end, less what it won, plus what it put in: antes and wagers net of uncalled ones) and
    at the end (a voided hand gives back everything put in)."""
    done = settlement(table)
    hand = table.hand
    if done is None or hand is None:
        return ()
    return tuple(SeatResult(s.seat, s.player_id, hand.player(s.seat).stack - s.net,
                            hand.player(s.seat).stack) for s in done.seats)


class _Fold:
    """The room's fields while a batch of events is folded (copied on first write)."""

    def __init__(self, room: Room) -> None:
        self.room = room
        self.changes: dict[str, object] = {}
        self.turn = room.turn
        self.visible = room.visible

    def get(self, name: str) -> dict[Any, Any]:
        """The field ``name`` (a mapping) to change: copied on the first write."""
        if name not in self.changes:
            self.changes[name] = dict(getattr(self.room, name))
        value: dict[Any, Any] = self.changes[name]  # type: ignore[assignment]
        return value

    def set(self, name: str, value: object) -> None:
        self.changes[name] = value

    def now(self, name: str) -> Any:
        return self.changes.get(name, getattr(self.room, name))

    def game_event(self, event: Event, before: TableState, at: float, sequence: int) -> None:
        """Note ``event``'s bookkeeping; ``before`` is the table before it when ``event`` is
        a hand's start (read there only)."""
        if event.__class__ in _NO_BOOKKEEPING:
            return
        turn = self.turn
        if isinstance(event, ACTIONS):
            if turn is not None and event.seat == turn.seat:
                used_ms = max(0, int((at - turn.action_deadline) * 1000))
                self.get("banks")[event.seat] = max(0, turn.bank_ms - used_ms)
                self.turn = None
            if isinstance(event, ActionTimedOut) and event.seat not in self.now("leaving"):
                self.set("timed_out", frozenset(self.now("timed_out")) | {event.seat})
            return
        if isinstance(event, TableOpened):
            self.set("settings", self.room.settings.for_config(event.config))
        elif isinstance(event, HandStarted):
            seatings = self.get("seatings")
            seatings[event.hand_number] = {s: seat.player_id for s in event.seats
                                           if (seat := before.seat(s)) is not None}
            for old in sorted(seatings)[:-SEATINGS_KEPT]:
                del seatings[old]
            starts = self.get("hand_starts")
            starts[event.hand_number] = sequence
            if len(starts) > HAND_STARTS_KEPT:
                for old in [n for n in starts if n <= event.hand_number - HAND_STARTS_KEPT]:
                    del starts[old]
            self.set("hand_started_at", (*self.now("hand_started_at"),
                                         at)[-STARTS_KEPT:])
            self.set("timed_out", frozenset())
            if reason := self.now("one_hand"):  # dealt its one hand: paused from now on
                self.set("paused", True)
                self.set("pause_reason", reason)
                self.set("one_hand", "")
        elif isinstance(event, HandEnded):
            self.set("last_hand_ended_at", at)
            self.turn = None
            streak = self.get("timeout_streak")
            timed_out = self.now("timed_out")
            for s in self.now("seatings").get(event.hand_number, {}):
                streak[s] = streak.get(s, 0) + 1 if s in timed_out else 0
        elif isinstance(event, PlayerSeated):
            self.get("banks")[event.seat] = int(self.room.settings.time_bank_s * 1000)
            self.get("timeout_streak").pop(event.seat, None)
            self.get("sat_out_since").pop(event.seat, None)
            self._end_saga(event.seat, BUY_IN)
        elif isinstance(event, PlayerLeft):
            departures = self.get("departures")
            # Only a departure within the rathole window counts (room.buy_in_range): the
            # older ones go, so the map holds the recent leavers, not everyone who ever sat.
            window = self.now("settings").rathole_window_s
            for player in [p for p, (_, when) in departures.items() if at - when >= window]:
                del departures[player]
            departures[event.player_id] = (event.stack, at)
            self.get("sat_out_since").pop(event.seat, None)
            self.get("timeout_streak").pop(event.seat, None)
            self.get("leaving").pop(event.seat, None)
            self.set("muck", frozenset(self.now("muck")) - {event.seat})
        elif isinstance(event, PlayerSatOut):
            self.get("sat_out_since")[event.seat] = at
        elif isinstance(event, PlayerSatIn):
            self.get("sat_out_since").pop(event.seat, None)
        elif isinstance(event, ChipsAdded):
            self._end_saga(event.seat, TOP_UP)

    def hand_result(self, table: TableState, number: int) -> None:
        if table.hand is None or table.hand.hand_number != number:
            return
        results = self.get("results")
        results[number] = hand_result(table)
        for old in sorted(results)[:-SEATINGS_KEPT]:
            del results[old]

    def _end_saga(self, seat: int, kind: SagaKind) -> None:
        saga = self.now("sagas").get(seat)
        if saga is not None and saga.kind == kind:
            del self.get("sagas")[seat]

    def room_event(self, event: RoomEvent) -> None:
        """Fold one room event in (every kind is handled: an unknown one is a type
        error)."""
        match event:
            case rev.SettingsSet(settings=settings):
                self.set("settings", settings)
            case rev.BuyInRequested() | rev.TopUpQueued():
                kind = BUY_IN if isinstance(event, rev.BuyInRequested) else TOP_UP
                self.get("sagas")[event.seat] = Saga(kind, event.player_id, event.amount,
                                                     event.wallet_key, event.command_id)
            case rev.BuyInRefundDue(seat=seat):
                saga = self.now("sagas")[seat]
                self.get("sagas")[seat] = replace(saga, refund_due=True)
            case rev.BuyInFailed(seat=seat) | rev.BuyInRefunded(seat=seat):
                self._end_saga(seat, BUY_IN)
            case rev.TopUpDropped(seat=seat):
                self._end_saga(seat, TOP_UP)
            case rev.CashOutRequested():
                self.get("sagas")[event.seat] = Saga(CASH_OUT, event.player_id, event.amount,
                                                     event.wallet_key)
            case rev.CashOutPaid(seat=seat):
                self._end_saga(seat, CASH_OUT)
            case rev.LeaveRequested(seat=seat, player_id=player):
                self.get("leaving")[seat] = player
            case rev.MuckPreferenceSet(seat=seat, muck=muck):
                mucks = frozenset(self.now("muck"))
                self.set("muck", mucks | {seat} if muck else mucks - {seat})
            case rev.TableClosed():
                self.set("closed", True)
            case rev.HandSettled(hand_number=number):
                self.set("settled", max(int(self.now("settled")), number))
            case rev.DealingStopped(reason=reason):
                self.set("stopped", reason or "stopped")
            case rev.DealingResumed():
                self.set("stopped", "")
            case rev.TournamentModeSet(tournament_id=tournament_id):
                self.set("tournament_id", tournament_id)
            case rev.StakesQueued():
                self.set("pending_stakes", Stakes(event.small_bet, event.big_bet, event.ante,
                                                  event.bring_in))
            case rev.DealingPaused(paused=paused, reason=reason, one_hand=one_hand):
                self.set("paused", paused)
                self.set("pause_reason", reason if paused else "")
                self.set("one_hand", (reason or "hand_for_hand")
                         if one_hand and not paused else "")
            case rev.OrphanEscrowRefunded():
                pass  # recorded before its escrow is paid back; the room keeps nothing
            case _:
                assert_never(event)

    def build(self, table: TableState, version: int) -> Room:
        changes = self.changes
        changes.update(table=table, version=version, turn=self.turn, visible=self.visible)
        return updated(self.room, changes)
