"""The dealer's read-only view of the tables: each table's public stream folded with the rules
library, so that who sits where, the hand, its phase and the pending deal come from the public
record and never from a caller's word.

A view is cached per table and brought up to date incrementally (streams only grow); a stream
found shorter than the cache (a reset store) is folded again from the start. The cache is
bounded (least recently used goes) and never holds a table without events, so callers naming
made-up tables cannot grow it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from rules import Event, TableState, evolve, fold, initial_state
from rules.events import (
    CardBurned,
    CommunityCardDealt,
    DownCardDealt,
    HandExposed,
    HandShown,
    HandStarted,
    TableOpened,
    UpCardDealt,
)
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.errors import FailedPrecondition
from studkit.mapping import is_room_event
from studkit.repository import TableRepository
from studkit.store import EventStore, StoredEvent

Decoder = Callable[[EventEnvelope], Event]
_DRAW_EVENTS: Final = (CardBurned, DownCardDealt, UpCardDealt, CommunityCardDealt)


class NotSeated(FailedPrecondition):
    """Raised when a player watches their cards at a table where they have no seat and no
    place in the hand being played: nothing would ever be sent. Sit down, then watch."""

    default_reason = "not_seated"


@dataclass(slots=True)
class TableView:
    """A table as its public stream says, at ``version``."""

    table_id: str
    version: int = 0
    state: TableState = field(default_factory=initial_state)
    seatings: dict[int, Mapping[int, str]] = field(default_factory=dict)
    """hand number -> {seat: player id} of the players dealt into that hand."""
    draws: dict[int, int] = field(default_factory=dict)
    """hand number -> cards the public record took from the deck (burns included)."""
    shown: dict[int, frozenset[int]] = field(default_factory=dict)
    """hand number -> seats whose down cards the public record shows (shown or exposed)."""

    def apply(self, event: Event) -> None:
        """Fold one event (and note the seating when a hand starts, and per hand the cards
        drawn and the hands shown)."""
        hand = self.state.hand
        if hand is not None:
            number = hand.hand_number
            if isinstance(event, _DRAW_EVENTS):
                self.draws[number] = self.draws.get(number, 0) + 1
            elif isinstance(event, HandShown | HandExposed):
                self.shown[number] = self.shown.get(number, frozenset()) | {event.seat}
        if isinstance(event, HandStarted):
            seats = {}
            for number in event.seats:
                seat = self.state.seat(number)
                if seat is not None:
                    seats[number] = seat.player_id
            self.seatings[event.hand_number] = seats
        self.state = evolve(self.state, event)
        self.version += 1

    def extend(self, events: Sequence[Event]) -> None:
        """:meth:`apply` each of ``events`` in turn, with the same result; the events between
        two hand starts are folded at once (``rules.fold``: a run of hand events thaws and
        freezes the hand once, not once per event)."""
        run: list[Event] = []
        number = None if self.state.hand is None else self.state.hand.hand_number
        for event in events:
            if isinstance(event, HandStarted | TableOpened):  # the hand number changes
                self._fold(run, number)
                run = []
                self.apply(event)
                number = None if self.state.hand is None else self.state.hand.hand_number
            else:
                run.append(event)
        self._fold(run, number)

    def _fold(self, run: list[Event], number: int | None) -> None:
        """Fold ``run``, events of hand ``number`` (None: no hand yet), none a hand start."""
        if not run:
            return
        if number is not None:
            for event in run:
                if isinstance(event, _DRAW_EVENTS):
                    self.draws[number] = self.draws.get(number, 0) + 1
                elif isinstance(event, HandShown | HandExposed):
                    self.shown[number] = self.shown.get(number, frozenset()) | {event.seat}
        self.state = fold(run, self.state)
        self.version += len(run)

    def has_cards_for(self, player_id: str) -> bool:
        """Whether ``player_id`` has cards to follow here: a seat at the table now, or a
        place in the hand being played (a player who left mid-hand until it ends)."""
        if any(seat is not None and seat.player_id == player_id
               for seat in self.state.seats):
            return True
        hand = self.state.hand
        return (hand is not None and self.state.hand_in_progress
                and self.seat_of(hand.hand_number, player_id) is not None)

    def seat_of(self, hand_number: int, player_id: str) -> int | None:
        """The seat ``player_id`` was dealt into hand ``hand_number`` at, if any."""
        for seat, player in self.seatings.get(hand_number, {}).items():
            if player == player_id:
                return seat
        return None


DEFAULT_MAX_TABLES: Final = 1024
"""Views kept by default: a table's view is a few kilobytes, and one not kept is folded
again from its stream on the next call."""


class PublicTables:
    """Folded public streams: a bounded, least-recently-used cache of :class:`TableView`.

    Only tables with events are cached (a call naming an unknown table leaves nothing
    behind), at most ``max_tables`` of them; the least recently used goes first. One lock
    per table serialises its refreshes, and is dropped when nobody holds or waits for it.
    """

    def __init__(self, events: EventStore, decode: Decoder,
                 max_tables: int = DEFAULT_MAX_TABLES) -> None:
        if max_tables < 1:
            raise ValueError("max_tables must be at least 1")
        self._events = events
        self._decode = decode
        self._max_tables = max_tables
        self._views: OrderedDict[str, TableView] = OrderedDict()
        self._locks: dict[str, _TableLock] = {}

    @property
    def max_tables(self) -> int:
        """How many views the cache keeps at most."""
        return self._max_tables

    def cached(self) -> int:
        """How many views are cached now."""
        return len(self._views)

    def locks(self) -> int:
        """How many per-table locks exist now (0 when no call is in flight)."""
        return len(self._locks)

    async def view(self, table_id: str) -> TableView:
        """The table as of now (an empty view for a table with no events)."""
        async with self._lock(table_id):
            view = self._views.get(table_id) or TableView(table_id)
            # One round trip while the cached view is a prefix of the stream: every call
            # but the first after a reset store or an archive's trim, which read again.
            tail = await self._events.tail(table_id, from_version=view.version)
            stored: list[StoredEvent] | None = tail.events
            if view.version and tail.version < view.version:  # a reset store
                view, stored = TableView(table_id), None
            if view.version < tail.trimmed:
                view, stored = await self._from_snapshot(table_id), None
            if stored is None:
                stored = await self._events.read(table_id, from_version=view.version)
            if stored:
                # Fold into a copy so a failure leaves the cached view untouched.
                fresh = TableView(table_id, view.version, view.state, dict(view.seatings),
                                  dict(view.draws), dict(view.shown))
                # The room's events are not the game's: they only count in the version.
                events = [self._decode(item.envelope) for item in stored
                          if not is_room_event(item.envelope)]
                fresh.extend(events)
                fresh.version += len(stored) - len(events)
                view = fresh
            self._remember(view)
            return view

    async def _from_snapshot(self, table_id: str) -> TableView:
        """The view at the table's snapshot, for a table whose oldest events were archived
        (``stud archive`` trims only up to the snapshot): its state and the seatings of the
        recent hands the table keeps beside it. Raises ``TrimmedRange`` without one."""
        loaded = await TableRepository(self._events).load(table_id)
        seatings: dict[int, Mapping[int, str]] = {
            int(hand): {int(seat): str(player) for seat, player in seats.items()}
            for hand, seats in loaded.extra.get("seatings", {}).items()}
        return TableView(table_id, loaded.version, loaded.state, seatings)

    def _remember(self, view: TableView) -> None:
        if not view.version:  # no events: nothing worth keeping (and ids are free to invent)
            self._views.pop(view.table_id, None)
            return
        self._views[view.table_id] = view
        self._views.move_to_end(view.table_id)
        while len(self._views) > self._max_tables:
            self._views.popitem(last=False)

    @contextlib.asynccontextmanager
    async def _lock(self, table_id: str) -> AsyncIterator[None]:
        entry = self._locks.get(table_id)
        if entry is None:
            entry = self._locks[table_id] = _TableLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0 and self._locks.get(table_id) is entry:
                del self._locks[table_id]


@dataclass(eq=False, slots=True)
class _TableLock:
    """A table's lock and how many calls hold or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
