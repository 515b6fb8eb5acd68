"""The dealer's read-only view of the tables: each table's public stream folded with the rules
library, so that who sits where, the hand, its phase and the pending deal come from the public
record and never from a caller's word.

A view is cached per table and brought up to date incrementally (streams only grow); a stream
found shorter than the cache (a reset store) is folded again from the start. The cache is
bounded (least recently used goes) and never holds a table without events, so callers naming
made-up tables cannot grow it. A view keeps what it notes per hand (the seating, the cards
drawn, the hands shown) for the latest :data:`HANDS_KEPT` hands only, so a table that deals
for months costs the dealer no more memory, and no more work per refresh, than one that
opened today; an older hand's are folded again from the stream when asked
(:meth:`PublicTables.hand`).
"""

from __future__ import annotations

import asyncio
import bisect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from dealer.keyed_locks import KeyedLocks
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
from studkit.errors import FailedPrecondition, NotFound
from studkit.mapping import is_room_event
from studkit.repository import TableRepository
from studkit.store import EventStore, StoredEvent, Tail, TrimmedRange

Decoder = Callable[[EventEnvelope], Event]
TailReader = Callable[[str, int, str | None], Awaitable[Tail]]
"""``(table, from_version, hash_key) -> Tail``: what :meth:`EventStore.tail` reads."""
_DRAW_EVENTS: Final = (CardBurned, DownCardDealt, UpCardDealt, CommunityCardDealt)

HANDS_KEPT: Final = 256
"""The latest hands whose seating, draws and shown seats a view keeps."""

SEATING_RUNS_KEPT: Final = 4096
"""Runs of hands dealt to one seating that a view keeps for the hands older than the
latest (a seating changes when a player sits down or leaves, not every hand)."""

OLD_HANDS_CACHED: Final = 256
"""Older hands' records kept once folded again (a finished hand's never changes)."""


@dataclass(frozen=True, slots=True)
class HandRecord:
    """What the public record says of one hand: who was dealt in at which seat, how many
    cards it took from the deck (burns included), and whose down cards it shows."""

    seating: Mapping[int, str]
    draws: int = 0
    shown: frozenset[int] = frozenset()
    counted: bool = True
    """Whether ``draws`` and ``shown`` are the hand's (False: a view begun at a snapshot
    knows only the seating of the hands before it)."""

    def seat_of(self, player_id: str) -> int | None:
        """The seat ``player_id`` was dealt in at, if any."""
        for seat, player in self.seating.items():
            if player == player_id:
                return seat
        return None


def _note(draws: dict[int, int], shown: dict[int, frozenset[int]], number: int,
          event: Event) -> None:
    """Count ``event`` of hand ``number``: a card drawn from the deck, or a hand shown."""
    if isinstance(event, _DRAW_EVENTS):
        draws[number] = draws.get(number, 0) + 1
    elif isinstance(event, HandShown | HandExposed):
        shown[number] = shown.get(number, frozenset()) | {event.seat}


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
    """hand number -> {seat: player id} of the players dealt into that hand (the latest
    :data:`HANDS_KEPT` hands, in the order they started)."""
    draws: dict[int, int] = field(default_factory=dict)
    """hand number -> cards the public record took from the deck (burns included)."""
    shown: dict[int, frozenset[int]] = field(default_factory=dict)
    """hand number -> seats whose down cards the public record shows (shown or exposed)."""
    counted_from: int = 1
    """The first hand whose draws and shown seats this view counted (a view begun at a
    table's snapshot has the seatings of the hands before it, not their cards)."""
    runs: tuple[tuple[int, Mapping[int, str] | None], ...] = ()
    """The seatings of the hands no longer in ``seatings``, as runs: (first hand, seating,
    None where a hand is unknown), each up to the next run's first hand, the last up to
    ``runs_end``; at most :data:`SEATING_RUNS_KEPT`, the oldest go first."""
    runs_end: int = 0
    """The last hand the runs cover (0: none)."""

    def apply(self, event: Event) -> None:
        """Fold one event (and note the seating when a hand starts, and per hand the cards
        drawn and the hands shown)."""
        hand = self.state.hand
        if hand is not None:
            _note(self.draws, self.shown, hand.hand_number, event)
        if isinstance(event, HandStarted):
            seats = {}
            for number in event.seats:
                seat = self.state.seat(number)
                if seat is not None:
                    seats[number] = seat.player_id
            self.seatings[event.hand_number] = seats
            self._forget_before(event.hand_number - HANDS_KEPT + 1)
        self.state = evolve(self.state, event)
        self.version += 1

    def _forget_before(self, first_kept: int) -> None:
        """Drop what is noted of the hands numbered below ``first_kept`` (each map holds
        hands in the order they started: the oldest first), their seatings kept as runs."""
        seatings = self.seatings
        while seatings and (oldest := next(iter(seatings))) < first_kept:
            self._keep_run(oldest, seatings.pop(oldest))
        for notes in (self.draws, self.shown):
            while notes and next(iter(notes)) < first_kept:
                del notes[next(iter(notes))]

    def _keep_run(self, hand_number: int, seating: Mapping[int, str]) -> None:
        runs = self.runs
        if runs and self.runs_end + 1 != hand_number:  # a gap: nothing known of it
            runs = (*runs, (self.runs_end + 1, None))
        if not runs or runs[-1][1] != seating:
            runs = (*runs, (hand_number, seating))
        if len(runs) > SEATING_RUNS_KEPT:
            runs = runs[len(runs) - SEATING_RUNS_KEPT:]
        self.runs, self.runs_end = runs, hand_number

    def _earlier_seating(self, hand_number: int) -> Mapping[int, str] | None:
        runs = self.runs
        if not runs or not runs[0][0] <= hand_number <= self.runs_end:
            return None
        at = bisect.bisect_right(runs, hand_number, key=lambda run: run[0]) - 1
        return runs[at][1]

    def record(self, hand_number: int) -> HandRecord | None:
        """What this view notes of hand ``hand_number``: all of it for its latest hands,
        the seating only (not ``counted``) for an older one its runs cover, None for a
        hand not started or one older than that."""
        seating = self.seatings.get(hand_number)
        if seating is None:
            earlier = self._earlier_seating(hand_number)
            return None if earlier is None else HandRecord(earlier, counted=False)
        return HandRecord(seating, self.draws.get(hand_number, 0),
                          self.shown.get(hand_number, frozenset()),
                          counted=hand_number >= self.counted_from)

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
                _note(self.draws, self.shown, number, event)
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
                 max_tables: int = DEFAULT_MAX_TABLES, *, tail: TailReader | None = None
                 ) -> None:
        """``tail`` reads a table's stream from a version on with a hash of the table's
        (the service's: :class:`dealer.store.TableReader`, one script call); ``events``'
        own :meth:`~EventStore.tail` when None."""
        if max_tables < 1:
            raise ValueError("max_tables must be at least 1")
        self._events = events
        self._tail: TailReader = tail or (
            lambda table_id, version, hash_key: events.tail(table_id, version,
                                                            hash_key=hash_key))
        self._decode = decode
        self._max_tables = max_tables
        self._views: OrderedDict[str, TableView] = OrderedDict()
        self._locks = KeyedLocks()
        self._old: OrderedDict[tuple[str, int], HandRecord] = OrderedDict()
        """(table, hand) -> an older hand's record, folded again (least recently used goes)."""
        self._old_lock = asyncio.Lock()
        """One fold of a hand older than a view's runs at a time (each reads its table's
        stream from the start, or from the snapshot)."""

    @property
    def events(self) -> EventStore:
        """The tables' event store (read-only for the dealer's Redis user)."""
        return self._events

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
        view, _hash = await self.view_and_hash(table_id, None)
        return view

    def latest_hand(self, table_id: str) -> int | None:
        """The number of the table's latest hand as the cached view has it (None: no view
        cached, or no hand yet), without a read."""
        cached = self._views.get(table_id)
        hand = None if cached is None else cached.state.hand
        return None if hand is None else hand.hand_number

    async def view_since(self, table_id: str, version: int | None) -> TableView:
        """The table as of ``version`` or later: the cached view when it has folded that
        event already (no read: the watchers of one table, told of the same event, read the
        stream once between them), else :meth:`view`; None: :meth:`view`."""
        cached = self._views.get(table_id)
        if version is not None and cached is not None and cached.version >= version:
            self._views.move_to_end(table_id)
            return cached
        return await self.view(table_id)

    async def view_and_hash(self, table_id: str, hash_key: str | None
                            ) -> tuple[TableView, dict[bytes, bytes] | None]:
        """:meth:`view`, and the hash ``hash_key`` (a key of the table's own hash tag: the
        dealer's record of one of its hands) read in the same round trip (issue 35)."""
        async with self._locks.hold(table_id):
            view = self._views.get(table_id) or TableView(table_id)
            # One round trip while the cached view is a prefix of the stream: every call
            # but the first after a reset store or an archive's trim, which read again.
            tail = await self._tail(table_id, view.version, hash_key)
            stored: list[StoredEvent] | None = tail.events
            if view.version and tail.version < view.version:  # a reset store
                view, stored = TableView(table_id), None
                for key in [key for key in self._old if key[0] == table_id]:
                    del self._old[key]  # its older hands are other hands now
            if view.version < tail.trimmed:
                view, stored = await self._from_snapshot(table_id), None
            if stored is None:
                stored = await self._events.read(table_id, from_version=view.version)
            if stored:
                # Fold into a copy so a failure leaves the cached view untouched.
                fresh = TableView(table_id, view.version, view.state, dict(view.seatings),
                                  dict(view.draws), dict(view.shown), view.counted_from,
                                  view.runs, view.runs_end)
                # The room's events are not the game's: they only count in the version.
                events = [self._decode(item.envelope) for item in stored
                          if not is_room_event(item.envelope)]
                fresh.extend(events)
                fresh.version += len(stored) - len(events)
                view = fresh
            self._remember(view)
            return view, tail.hash

    async def hand(self, view: TableView, hand_number: int, *, counted: bool = False
                   ) -> HandRecord | None:
        """What the public record says of hand ``hand_number`` at ``view``'s table: the
        view's own notes for its latest hands; for an older one the seating its runs keep
        and, with ``counted``, its draws and shown seats counted from the hand's own events;
        for one older than its runs, the stream folded again up to it (one such fold at a
        time). What is read is cached: a finished hand's record never changes. None for a
        hand ``view`` has not seen start, or one archived out of the stream."""
        record = view.record(hand_number)
        if record is not None and (record.counted or not counted):
            return record
        if record is None and not 1 <= hand_number <= view.state.hands_started:
            return None
        key = (view.table_id, hand_number)
        found = self._old.get(key)
        if found is None:
            if record is not None:  # its seating known: its cards counted from its events
                found = await self._count_hand(view.table_id, hand_number, record.seating)
            else:  # older than the view's runs: the stream folded up to it, one at a time
                async with self._old_lock:
                    found = (self._old.get(key)
                             or await self._fold_hand(view.table_id, hand_number))
            if found is None:
                return None
            self._old[key] = found
            while len(self._old) > OLD_HANDS_CACHED:
                self._old.popitem(last=False)
        self._old.move_to_end(key)
        return found

    async def started_hand(self, view: TableView, hand_number: int, *,
                           counted: bool = False) -> HandRecord:
        """:meth:`hand`, or :class:`NotFound`: ``unknown_hand`` for a hand not started,
        ``archived`` for one no longer in the stream."""
        record = await self.hand(view, hand_number, counted=counted)
        if record is not None:
            return record
        if 1 <= hand_number <= view.state.hands_started:
            raise NotFound(f"hand {hand_number} was archived; stud replay reads the archive",
                           reason="archived")
        raise NotFound(f"hand {hand_number} has not started", reason="unknown_hand")

    async def _fold_hand(self, table_id: str, hand_number: int) -> HandRecord | None:
        """Hand ``hand_number``'s record, folding the stream up to the next hand's start
        (the hand is over: a view keeps every hand still being played), from its first
        event, or from the table's snapshot when the stream's head was archived (a hand
        started before the snapshot has the seating the snapshot keeps, and its cards
        counted from its events while they are still in the stream; else None)."""
        past = TableView(table_id)
        try:
            if await self._events.trimmed(table_id):
                past = await self._from_snapshot(table_id)
                if hand_number <= past.state.hands_started:  # the snapshot's seating
                    partial = past.record(hand_number)
                    return None if partial is None else await self._count_hand(
                        table_id, hand_number, partial.seating)
            async for page in self._events.pages(table_id, past.version):
                events = [self._decode(item.envelope) for item in page
                          if not is_room_event(item.envelope)]
                end = next((i for i, event in enumerate(events)
                            if isinstance(event, HandStarted)
                            and event.hand_number > hand_number), None)
                past.extend(events if end is None else events[:end])
                if end is not None:
                    return past.record(hand_number)
        except TrimmedRange:  # archived: stud replay reads it
            return None
        return None

    async def _count_hand(self, table_id: str, hand_number: int, seating: Mapping[int, str]
                          ) -> HandRecord | None:
        """Hand ``hand_number``'s record with its draws and shown seats counted from its
        own events (read from where the stream's bisection finds it begins); None when its
        start is no longer in the stream."""
        draws: dict[int, int] = {}
        shown: dict[int, frozenset[int]] = {}
        begun = False
        try:
            async for envelope in self._events.hand_envelopes(table_id, hand_number):
                if is_room_event(envelope):
                    continue
                event = self._decode(envelope)
                if not begun and not isinstance(event, HandStarted):
                    return None  # its start was archived
                begun = True
                _note(draws, shown, hand_number, event)
        except TrimmedRange:
            return None
        if not begun:
            return None
        return HandRecord(seating, draws.get(hand_number, 0),
                          shown.get(hand_number, frozenset()))

    async def _from_snapshot(self, table_id: str) -> TableView:
        """The view at the table's snapshot, for a table whose oldest events were archived
        (``stud archive`` trims only up to the snapshot): its state and the seatings of the
        recent hands the table keeps beside it. Raises ``TrimmedRange`` without one."""
        loaded = await TableRepository(self._events).load(table_id)
        seatings: dict[int, Mapping[int, str]] = {
            int(hand): {int(seat): str(player) for seat, player in seats.items()}
            for hand, seats in sorted(loaded.extra.get("seatings", {}).items(),
                                      key=lambda item: int(item[0]))}
        return TableView(table_id, loaded.version, loaded.state, seatings,
                         counted_from=loaded.state.hands_started + 1)

    def _remember(self, view: TableView) -> None:
        if not view.version:  # no events: nothing worth keeping (and ids are free to invent)
            self._views.pop(view.table_id, None)
            return
        self._views[view.table_id] = view
        self._views.move_to_end(view.table_id)
        while len(self._views) > self._max_tables:
            self._views.popitem(last=False)
