"""Issue 17, F3: a long table's history is never read whole. Over a real Redis, with the
table's stream read in small pages (``events_page``), every XRANGE the table service sends
for the table is recorded (a spy on its real client: the entries are Redis's answers):
``GetHandHistory(N)`` starts reading at hand N's ``HandStarted`` and reads little more than
that hand, and a catch-up watch from sequence 0 has never read more than one page beyond
the events it has handed on."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

import table.room_state
from stud.v1 import table_pb2 as pb
from studkit.keys import table_key
from studkit.mapping import is_room_event
from studtest.redis import TestRedis
from studtest.table import OPERATOR, Room, play_until, player, running_room
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration
PAGE = 8
HANDS = 5


class Reads:
    """The XRANGEs of one table's stream, as (the range's start, the entries answered)."""

    def __init__(self, room: Room, table_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        client = room.table_deps.events.client
        real = client.xrange
        stream = table_key(table_id, "events")

        async def xrange(name: Any, *args: Any, **kwargs: Any) -> Any:
            entries = await real(name, *args, **kwargs)
            if (name.decode() if isinstance(name, bytes) else name) == stream:
                start = kwargs.get("min", args[0] if args else "-")
                self.calls.append((str(start), len(entries or [])))
            return entries

        monkeypatch.setattr(client, "xrange", xrange)
        self.pages: list[int] = []
        """The versions the store's paged reads of the table started after, in order."""
        store = room.table_deps.events
        real_pages = store.pages

        def pages(name: str, from_version: int = 0, **kwargs: Any) -> Any:
            if name == table_id:
                self.pages.append(from_version)
            return real_pages(name, from_version, **kwargs)

        monkeypatch.setattr(store, "pages", pages)

    def entries(self) -> int:
        return sum(n for _, n in self.calls)


@contextlib.asynccontextmanager
async def played_room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
                      hands: int = HANDS) -> AsyncIterator[tuple[Room, str]]:
    """A room whose table reads its stream ``PAGE`` events at a time, and a table that has
    played ``hands`` hands."""
    async with running_room(redis_server, redis_url, dev_keys, events_page=PAGE) as room:
        table_id = await room.client.open_table()
        for seat, name in {1: "ann", 3: "bob", 5: "cat"}.items():
            await room.fund(name)
            await room.client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=10_000), player(name))
        await play_until(room.client, table_id, hands, random.Random(3).choice)
        yield room, table_id


@pytest.fixture
async def long_room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
                    ) -> AsyncIterator[tuple[Room, str]]:
    async with played_room(redis_server, redis_url, dev_keys) as played:
        yield played


async def test_one_hand_is_read_from_its_start_not_the_whole_stream(
        long_room: tuple[Room, str], monkeypatch: pytest.MonkeyPatch) -> None:
    room, table_id = long_room
    actor = (await room.table_deps.app.routed(table_id)).actor
    starts = actor.room.hand_starts
    total = actor.version
    for hand in (HANDS - 1, 2):
        reads = Reads(room, table_id, monkeypatch)
        history = await room.client.call("GetHandHistory", pb.GetHandHistoryRequest(
            table_id=table_id, hand_number=hand), OPERATOR)
        assert history.complete and history.events
        first, last = history.events[0].sequence, history.events[-1].sequence
        assert first == starts[hand]
        # The first read starts just before the hand's HandStarted, never at the stream's
        # start; the reads end within a page past its HandEnded.
        assert reads.calls[0][0] == f"(0-{starts[hand] - 1}", reads.calls
        assert reads.entries() <= last - first + 1 + PAGE, (reads.calls, first, last)
        assert reads.entries() < total / 2, (reads.entries(), total)


async def test_a_catch_up_watch_reads_a_page_ahead_at_most(
        long_room: tuple[Room, str], monkeypatch: pytest.MonkeyPatch) -> None:
    room, table_id = long_room
    app = room.table_deps.app
    upto = (await app.routed(table_id)).actor.version
    assert upto > 10 * PAGE  # a table several pages long
    reads = Reads(room, table_id, monkeypatch)
    watch = app.watch(OPERATOR, table_id, 0)
    seen = 0
    try:
        async for envelope in watch:
            assert envelope.sequence > seen
            seen = envelope.sequence
            # What the watch holds: the entries read past the last one handed on.
            assert reads.entries() <= seen + PAGE, (seen, reads.calls)
            assert all(n <= PAGE for _, n in reads.calls)
            if seen >= upto - 1:
                break
    finally:
        await watch.aclose()  # type: ignore[attr-defined]
    assert reads.entries() >= upto - PAGE  # the catch-up was read, page by page
    assert len(reads.calls) >= upto // PAGE


async def test_a_hand_older_than_the_room_keeps_is_found_by_bisecting(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The room keeps the first sequence of its latest ``HAND_STARTS_KEPT`` hands only (one
    here), so a table dealing for months does not carry every hand's in its state and
    snapshots: an older hand's start is found by bisecting the stream, a few small reads,
    and its history is the same hand, still never the stream read whole."""
    monkeypatch.setattr(table.room_state, "HAND_STARTS_KEPT", 1)
    async with played_room(redis_server, redis_url, dev_keys, 3 * HANDS) as (room, table_id):
        actor = (await room.table_deps.app.routed(table_id)).actor
        latest = actor.room.table.hands_started
        assert list(actor.room.hand_starts) == [latest]
        total = actor.version
        stream = [s.envelope for s in await room.table_deps.events.read(table_id)]
        for hand in (1, 2, latest - 1):
            reads = Reads(room, table_id, monkeypatch)
            history = await room.client.call("GetHandHistory", pb.GetHandHistoryRequest(
                table_id=table_id, hand_number=hand), OPERATOR)
            expected = [e for e in stream if e.hand_number == hand and not is_room_event(e)]
            assert history.complete and history.events
            assert [e.sequence for e in history.events] == [e.sequence for e in expected]
            assert history.events[0].event.WhichOneof("event") == "hand_started"
            assert history.events[-1].event.WhichOneof("event") == "hand_ended"
            # The hand is read from its HandStarted, not from the events naming no hand
            # before it (they were read twice when the bisection answered the first of them).
            assert reads.pages[-1] == history.events[0].sequence - 1, reads.pages
            assert len(reads.pages) - 1 <= steps_of(total), reads.pages  # then its steps
            # The bisection's steps, then the hand. A step reads a page, and more when it
            # lands in a run of envelopes naming no hand a page long or longer (on a Redis
            # Cluster the third player sits before hand 1 is dealt: the table's first eight
            # events, TableOpened to the third PlayerSeated, are such a run, one page).
            per_step = PAGE * (1 + longest_run(stream) // PAGE)
            bound = steps_of(total) * per_step + len(expected) + PAGE
            assert reads.entries() <= bound, (bound, reads.calls)
            assert reads.entries() < total / 2, (reads.entries(), total)


def steps_of(total: int) -> int:
    """The most steps a bisection of ``total`` sequences takes."""
    return total.bit_length() + 1


def longest_run(stream: list[Any]) -> int:
    """The longest run of envelopes that name no hand (hand_number 0)."""
    longest = run = 0
    for envelope in stream:
        run = run + 1 if not envelope.hand_number else 0
        longest = max(longest, run)
    return longest
