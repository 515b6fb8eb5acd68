"""The dealer's read-only view of the tables: each table's public stream folded with the rules
library, so that who sits where, the hand, its phase and the pending deal come from the public
record and never from a caller's word.

A view is cached per table and brought up to date incrementally (streams only grow); a stream
found shorter than the cache (a reset store) is folded again from the start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rules import Event, TableState, evolve, initial_state
from rules.events import HandStarted
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.store import EventStore

Decoder = Callable[[EventEnvelope], Event]


@dataclass(slots=True)
class TableView:
    """A table as its public stream says, at ``version``."""

    table_id: str
    version: int = 0
    state: TableState = field(default_factory=initial_state)
    seatings: dict[int, Mapping[int, str]] = field(default_factory=dict)
    """hand number -> {seat: player id} of the players dealt into that hand."""

    def apply(self, event: Event) -> None:
        """Fold one event (and note the seating when a hand starts)."""
        if isinstance(event, HandStarted):
            seats = {}
            for number in event.seats:
                seat = self.state.seat(number)
                if seat is not None:
                    seats[number] = seat.player_id
            self.seatings[event.hand_number] = seats
        self.state = evolve(self.state, event)
        self.version += 1

    def seat_of(self, hand_number: int, player_id: str) -> int | None:
        """The seat ``player_id`` was dealt into hand ``hand_number`` at, if any."""
        for seat, player in self.seatings.get(hand_number, {}).items():
            if player == player_id:
                return seat
        return None


class PublicTables:
    """Folded public streams, one cached :class:`TableView` per table."""

    def __init__(self, events: EventStore, decode: Decoder) -> None:
        self._events = events
        self._decode = decode
        self._views: dict[str, TableView] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def view(self, table_id: str) -> TableView:
        """The table as of now (an empty view for a table with no events)."""
        lock = self._locks.setdefault(table_id, asyncio.Lock())
        async with lock:
            view = self._views.get(table_id) or TableView(table_id)
            if view.version and await self._events.version(table_id) < view.version:
                view = TableView(table_id)
            stored = await self._events.read(table_id, from_version=view.version)
            if stored:
                # Fold into a copy so a failure leaves the cached view untouched.
                fresh = TableView(table_id, view.version, view.state, dict(view.seatings))
                for item in stored:
                    fresh.apply(self._decode(item.envelope))
                view = fresh
            self._views[table_id] = view
            return view
