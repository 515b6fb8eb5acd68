"""Reading a table: who the caller is to a hand, the live watch (a catch-up read a page at a
time, then the actor's fan-out) and one hand's events (read from where the hand starts, not
the whole stream). Room events are the table's own state and are not sent to watchers."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from stud.v1.envelope_pb2 import EventEnvelope
from studkit.auth import Forbidden, Principal, Role
from studkit.errors import BadRequest, FailedPrecondition, NotFound, OutOfRange, Unavailable
from studkit.mapping import is_room_event
from studkit.store import EventStore, TrimmedRange
from table.actor import TableActor
from table.inbox import WatcherTooSlow
from table.room import Room

HAND_PAGE = 100
"""Events per read of one hand's history: a hand is about 40 events with four players
dealt in, 80 with eight, so most hands take one read, which decodes a few entries past the
hand's end rather than the store's whole page (500: 4.4 ms of the table's CPU per
``GetHandHistory`` on a 15,000-event table, ``bench/bench_long_table.py``)."""


class HandArchive(Protocol):
    """Where hands that left Redis are read (:class:`studhistory.pgarchive.HandArchive`)."""

    async def hand(self, table_id: str, hand: int) -> list[bytes]: ...

    async def player_hands(self, player: str, before: tuple[datetime, str, int] | None,
                           limit: int) -> list[tuple[str, int, datetime, int, int, int]]: ...


WATCH_BATCH = 64
"""Records at most in one message of a batched watch (``WatchTableRequest.batched``): a
hand's action and what the table adds to it are a few; a catch-up read is cut in pieces of
this many (a message of about 15 KB)."""

MY_HANDS_PAGE = 50
MY_HANDS_MAX = 200


def my_hands_token(ended_at: datetime, table_id: str, hand: int) -> str:
    """The page token after a hand of ``ListMyHands`` (opaque to clients)."""
    raw = f"{ended_at.astimezone(UTC).isoformat()}|{table_id}|{hand}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def my_hands_key(token: str) -> tuple[datetime, str, int]:
    """The key a ``ListMyHands`` page token names; BadRequest for anything else."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        when, table_id, hand = raw.split("|")
        key = (datetime.fromisoformat(when), table_id, int(hand))
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("page_token", "not a page token of ListMyHands") from None
    if key[0].tzinfo is None or not 0 < key[2] < 2**63:
        raise BadRequest("page_token", "not a page token of ListMyHands")
    return key


def viewer_seat(principal: Principal, room: Room) -> int | None:
    """The caller's seat at the table now, None for an observer."""
    if principal.role is not Role.PLAYER:
        return None
    for number, seat in enumerate(room.table.seats, start=1):
        if seat is not None and seat.player_id == principal.name:
            return number
    return None


def hand_viewer(principal: Principal, room: Room, hand_number: int
                ) -> tuple[int | None, bool]:
    """Who the caller is to an event of hand ``hand_number``: the seat they held in that
    hand and True when they were dealt in (whoever holds that seat now is not); outside a
    hand (0) their seat now."""
    if not hand_number:
        return viewer_seat(principal, room), False
    if principal.role is Role.PLAYER:
        for seat, holder in room.seatings.get(hand_number, {}).items():
            if holder == principal.name:
                return seat, True
    return None, False


class Watching:
    """The reading use cases: the live watch, one hand's events, a player's own hands.
    ``routed`` is the table's actor if this replica owns it (else it raises where the table
    is)."""

    def __init__(self, store: EventStore,
                 routed: Callable[[str], Awaitable[TableActor]]) -> None:
        self._store = store
        self._routed = routed
        self.history: HandArchive | None = None
        """PostgreSQL's archive of hands (None: a hand that left Redis is NOT_FOUND
        archived)."""

    async def _archived(self, table_id: str, after: int) -> FailedPrecondition:
        return FailedPrecondition(
            f"the events after {after} were archived; watch from "
            f"{await self._store.trimmed(table_id)} (stud replay reads archives)",
            reason="archived")

    async def watch(self, principal: Principal, table_id: str, after: int
                    ) -> AsyncIterator[EventEnvelope]:
        """The table's game envelopes after sequence ``after``, then live ones, one at a
        time (:meth:`watch_batches`)."""
        async for batch in self.watch_batches(principal, table_id, after, 1):
            for envelope in batch:
                yield envelope

    async def watch_batches(self, principal: Principal, table_id: str, after: int,
                            most: int = WATCH_BATCH) -> AsyncIterator[list[EventEnvelope]]:
        """The table's game envelopes after sequence ``after``, then live ones, in batches
        of at most ``most``: what is ready when the watcher is written to (a page read, the
        envelopes its inbox holds); a watcher that falls ``watcher_buffer`` events behind is
        cut off (:class:`WatcherTooSlow`)."""
        actor = await self._routed(table_id)
        if after > actor.version:
            raise OutOfRange(f"the table is at sequence {actor.version}; resume at or "
                             "before it", reason="after_the_end")
        upto = actor.version  # no await between this and subscribing: nothing is missed
        watcher = actor.subscribe()
        try:
            last = after
            if after < upto:
                # In a generator of its own: the pages it read are freed once it is done,
                # not held by this frame for as long as the watch lasts.
                batch: list[EventEnvelope] = []
                async for envelope in self._caught_up(table_id, after, upto):
                    last = envelope.sequence
                    if not is_room_event(envelope):
                        batch.append(envelope)
                        if len(batch) >= most:
                            yield batch
                            batch = []
                if batch:
                    yield batch
            while True:
                # What is pending, an append's envelopes or several appends', in one wake.
                live = await watcher.take(most)
                if not live:
                    if watcher.overflowed:
                        raise WatcherTooSlow(f"fell behind; resume after sequence {last}")
                    # The replica let the table go: resume at its owner.
                    await self._routed(table_id)  # not_owner, naming the owner, if it is known
                    raise Unavailable(f"the table moved between replicas; resume after "
                                      f"sequence {last}", reason="table_moved")
                if live[0].sequence <= last:  # read by the catch-up too (held, then offered)
                    live = [e for e in live if e.sequence > last]
                    if not live:
                        continue
                last = live[-1].sequence
                yield live
        finally:
            actor.unsubscribe(watcher)

    async def _caught_up(self, table_id: str, after: int, upto: int
                         ) -> AsyncIterator[EventEnvelope]:
        """The stored envelopes after ``after`` up to ``upto``, a page at a time."""
        try:
            async for page in self._store.pages(table_id, after):
                for stored in page:
                    if stored.envelope.sequence > upto:
                        return
                    yield stored.envelope
                if page[-1].envelope.sequence >= upto:
                    return
        except TrimmedRange:
            raise await self._archived(table_id, after) from None

    async def hand_events(self, table_id: str, hand_number: int
                          ) -> tuple[list[EventEnvelope], bool]:
        """The game envelopes of one hand, and whether it has ended."""
        actor = await self._routed(table_id)
        if hand_number < 1 or hand_number > actor.room.table.hands_started:
            raise NotFound(f"hand {hand_number} has not been played", reason="unknown_hand")
        out: list[EventEnvelope] = []
        try:
            # From its HandStarted when the room still keeps where that is, else from where
            # a bisection of the stream finds it.
            async for env in self._store.hand_envelopes(
                    table_id, hand_number, start=actor.room.hand_starts.get(hand_number),
                    page=min(HAND_PAGE, self._store.page_size)):
                if is_room_event(env):
                    continue
                out.append(env)
                if env.event_type == "HandEnded":
                    return out, True
        except TrimmedRange:
            out = []
        if not out and self.history is not None:  # played, no longer in Redis: archived
            return await self._from_archive(table_id, hand_number)
        if not out:
            raise NotFound(f"hand {hand_number} was archived; stud replay reads the archive",
                           reason="archived")
        return out, False

    async def my_hands(self, principal: Principal, page_token: str, size: int
                       ) -> tuple[list[tuple[str, int, datetime, int, int, int]], str]:
        """A player's own settled hands, newest first, from the archive; the next page's
        token (empty at the end)."""
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player lists their own hands", reason="not_a_player")
        if not 0 <= size <= MY_HANDS_MAX:
            raise BadRequest("page_size", f"at most {MY_HANDS_MAX}")
        size = size or MY_HANDS_PAGE
        before = my_hands_key(page_token) if page_token else None
        if self.history is None:
            raise FailedPrecondition("this table service has no archive to list hands from",
                                     reason="no_archive")
        try:
            rows = await self.history.player_hands(principal.name, before, size + 1)
        except Exception as exc:  # PostgreSQL unreachable: the caller may retry
            raise Unavailable("the archive cannot be read now; retry",
                              reason="archive_unavailable") from exc
        page = rows[:size]
        more = len(rows) > size
        token = my_hands_token(page[-1][2], page[-1][0], page[-1][1]) if more else ""
        return page, token

    async def _from_archive(self, table_id: str, hand_number: int
                            ) -> tuple[list[EventEnvelope], bool]:
        """A hand's game envelopes from the archive of record, byte for byte as appended."""
        assert self.history is not None
        try:
            stored = await self.history.hand(table_id, hand_number)
        except Exception as exc:  # PostgreSQL unreachable: the caller may retry
            raise Unavailable("the hand's archive cannot be read now; retry",
                              reason="archive_unavailable") from exc
        out = [e for e in map(EventEnvelope.FromString, stored) if not is_room_event(e)]
        if not out:
            raise NotFound(f"hand {hand_number} is neither in Redis nor in the archive",
                           reason="archived")
        return out, out[-1].event_type == "HandEnded"
