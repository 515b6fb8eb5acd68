"""The event store contract, written once (:class:`StoreContract`) and run against Redis.

A store keeps each table's events in order, appends one command's events only at the version
the command was decided against, all or nothing, returns the recorded outcome for a retried
command id, and lets subscribers tail a table from any event id without gaps or duplicates.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis
from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)
from google.protobuf.message import Message  # type: ignore[import-untyped]
from redis.crc import key_slot

from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.chain import GENESIS, digest, verify_chain
from studkit.redis_client import connect
from studkit.store import (
    AppendResult,
    ChainBroken,
    CommandIdReused,
    EventStore,
    StoreCorrupted,
    StoredEvent,
    StreamConflict,
)
from studkit.tailer import StreamTailer, Subscription

DEADLINE = 10.0  # seconds; a generous bound for anything that should take milliseconds


def envelope(event_type: str = "Probe", hand: int = 1, payload: bytes = b"") -> EventEnvelope:
    """A caller's envelope: the store fills in sequence, table id and command id."""
    return EventEnvelope(event_type=event_type, schema_version=1, hand_number=hand,
                         payload=payload)


def envelopes(n: int, prefix: str = "E") -> list[EventEnvelope]:
    return [envelope(f"{prefix}{i}", payload=f"{prefix}{i}".encode()) for i in range(n)]


async def take(events: AsyncIterator[StoredEvent], n: int) -> list[StoredEvent]:
    """The next ``n`` events, or fail after :data:`DEADLINE`."""
    async with asyncio.timeout(DEADLINE):
        return [await anext(events) for _ in range(n)]


async def eventually(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` on every turn of the event loop until it holds or the deadline."""
    async with asyncio.timeout(DEADLINE):
        while not condition():
            await asyncio.sleep(0)


def sequences(events: list[StoredEvent]) -> list[int]:
    return [e.envelope.sequence for e in events]


class StoreContract:
    """What every event store does. Subclasses provide :meth:`make_store` and
    :meth:`make_tailer`; each test gets fresh, empty storage."""

    async def make_store(self, *, page_size: int = 500) -> EventStore:
        raise NotImplementedError

    def make_tailer(self, store: EventStore, *, buffer_limit: int = 10_000) -> StreamTailer:
        raise NotImplementedError

    # -- append and read ------------------------------------------------------------------

    async def test_new_table_is_empty(self) -> None:
        """A table nobody wrote to is at version 0, has no events and is not listed."""
        store = await self.make_store()
        assert await store.version("t1") == 0
        assert await store.read("t1") == []
        assert await store.table_ids() == []

    async def test_reads_back_what_was_appended(self) -> None:
        """Read-back returns the appended envelopes, numbered 1.., with table and command."""
        store = await self.make_store()
        first = await store.append("t1", envelopes(2, "A"), expected_version=0, command_id="c1")
        second = await store.append("t1", envelopes(3, "B"), expected_version=2, command_id="c2")
        assert first == AppendResult(version=2, stream_ids=("0-1", "0-2"))
        assert second == AppendResult(version=5, stream_ids=("0-3", "0-4", "0-5"))
        stored = await store.read("t1")
        assert [e.stream_id for e in stored] == ["0-1", "0-2", "0-3", "0-4", "0-5"]
        assert sequences(stored) == [1, 2, 3, 4, 5]
        assert [e.envelope.event_type for e in stored] == ["A0", "A1", "B0", "B1", "B2"]
        assert [e.envelope.command_id for e in stored] == ["c1", "c1", "c2", "c2", "c2"]
        assert {e.envelope.table_id for e in stored} == {"t1"}
        expected = envelope("B2", payload=b"B2")
        expected.MergeFrom(EventEnvelope(sequence=5, table_id="t1", command_id="c2"))
        expected.prev_digest = digest(stored[-2].envelope.SerializeToString(deterministic=True))
        assert stored[-1].envelope == expected
        assert await store.version("t1") == 5

    async def test_command_id_reused_for_another_command_is_refused(self) -> None:
        """Idempotency checks content: the same id with the same fingerprint is a duplicate;
        with another fingerprint it is refused and nothing is written."""
        store = await self.make_store()
        first = await store.append("t1", envelopes(1), 0, "c1", fingerprint="f-a")
        again = await store.append("t1", envelopes(1), 1, "c1", fingerprint="f-a")
        assert again == AppendResult(version=first.version, stream_ids=first.stream_ids,
                                     duplicate=True)
        with pytest.raises(CommandIdReused) as caught:
            await store.append("t1", envelopes(2), 1, "c1", fingerprint="f-b")
        assert caught.value.recorded.version == 1
        assert await store.version("t1") == 1
        assert await store.recorded("t1", "c1", "f-a") == again
        assert await store.recorded("t1", "c2") is None
        with pytest.raises(CommandIdReused):
            await store.recorded("t1", "c1", "f-b")

    async def test_reads_from_a_version(self) -> None:
        """``read(from_version=n)`` returns the events after the n-th."""
        store = await self.make_store()
        await store.append("t1", envelopes(4), expected_version=0, command_id="c1")
        assert sequences(await store.read("t1", from_version=2)) == [3, 4]
        assert await store.read("t1", from_version=4) == []

    async def test_reads_long_streams_in_pages(self) -> None:
        """Reading pages through a stream longer than one page loses and repeats nothing."""
        store = await self.make_store(page_size=3)
        for version in range(0, 10, 2):
            await store.append("t1", envelopes(2), expected_version=version,
                               command_id=f"c{version}")
        assert sequences(await store.read("t1")) == list(range(1, 11))
        assert sequences(await store.read("t1", from_version=3)) == list(range(4, 11))

    async def test_finds_where_a_hand_begins_by_bisection(self) -> None:
        """``hand_start(n)`` is the sequence of the first envelope naming hand n or later
        (not the start of the run of envelopes between hands (0) before it: a hand's read
        from there read that run twice, issue 29), whatever runs lie around it, longer than a
        read's page included; past the end for a hand not in the stream."""
        store = await self.make_store(page_size=3)
        numbers = [0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 2, 2, 3, 0, 5, 5, 0, 0, 0, 0, 0, 0, 0, 6]
        await store.append("t1", [envelope(f"E{i}", hand=n) for i, n in enumerate(numbers)],
                           expected_version=0, command_id="c1")

        def expected(hand: int) -> int:
            return next((k for k in range(1, len(numbers) + 1) if numbers[k - 1] >= hand),
                        len(numbers) + 1)

        for hand in range(1, 8):
            for page in (1, 2, 16):
                assert await store.hand_start("t1", hand, page=page) == expected(hand), (
                    hand, page)
        assert [await store.hand_start("t1", h) for h in (1, 2, 4, 7)] == [3, 11, 15, 25]
        assert await store.hand_start("nowhere", 1) == 1

        async def hand(number: int, start: int | None = None) -> list[str]:
            return [e.event_type async for e in store.hand_envelopes(
                "t1", number, start=start, page=2)]

        for number in range(1, 8):
            assert await hand(number) == [f"E{i}" for i, n in enumerate(numbers)
                                          if n == number], number
        assert await hand(2, start=11) == ["E10", "E11"]  # from its start, given
        assert await hand(4) == []  # not in the stream: nothing, not the rest of it

    async def test_leaves_the_callers_envelopes_untouched(self) -> None:
        """The store numbers copies; the caller's messages keep their fields."""
        store = await self.make_store()
        mine = envelopes(2)
        await store.append("t1", mine, expected_version=0, command_id="c1")
        assert [(e.sequence, e.table_id, e.command_id) for e in mine] == [(0, "", "")] * 2

    async def test_refuses_an_envelope_of_another_table_or_command(self) -> None:
        """An envelope naming another table or command is a caller bug: nothing is written."""
        store = await self.make_store()
        foreign = envelope()
        foreign.table_id = "t2"
        with pytest.raises(ValueError, match="t2"):
            await store.append("t1", [envelope(), foreign], expected_version=0, command_id="c")
        other = envelope()
        other.command_id = "c-other"
        with pytest.raises(ValueError, match="c-other"):
            await store.append("t1", [other], expected_version=0, command_id="c")
        assert await store.version("t1") == 0

    async def test_keeps_tables_apart(self) -> None:
        """Each table has its own versions and its own command ids."""
        store = await self.make_store()
        await store.append("t1", envelopes(3), expected_version=0, command_id="c1")
        result = await store.append("t2", envelopes(1), expected_version=0, command_id="c1")
        assert result == AppendResult(version=1, stream_ids=("0-1",))
        assert await store.version("t1") == 3
        assert sequences(await store.read("t2")) == [1]

    async def test_lists_the_tables_that_have_events(self) -> None:
        """The index lists every table with events, once, sorted."""
        store = await self.make_store()
        for table in ("t2", "t1", "t3"):
            await store.append(table, envelopes(1), expected_version=0, command_id="a")
        await store.append("t1", envelopes(1), expected_version=1, command_id="b")
        assert await store.table_ids() == ["t1", "t2", "t3"]

    async def test_a_command_without_events_is_recorded_but_lists_no_table(self) -> None:
        """A command that decided no events is recorded (a retry is a duplicate) and writes
        no event."""
        store = await self.make_store()
        assert await store.append("t1", [], expected_version=0, command_id="c") == AppendResult(
            version=0, stream_ids=()
        )
        retry = await store.append("t1", [], expected_version=0, command_id="c")
        assert retry.duplicate
        assert await store.table_ids() == []
        assert await store.version("t1") == 0

    # -- conditional appends --------------------------------------------------------------

    async def test_second_append_at_the_same_version_conflicts(self) -> None:
        """Two commands decided against version n: the first wins, the second raises
        StreamConflict naming both versions, and writes nothing."""
        store = await self.make_store()
        await store.append("t1", envelopes(1), expected_version=0, command_id="winner")
        with pytest.raises(StreamConflict) as raised:
            await store.append("t1", envelopes(1, "L"), expected_version=0, command_id="loser")
        assert (raised.value.expected, raised.value.actual) == (0, 1)
        assert [e.envelope.command_id for e in await store.read("t1")] == ["winner"]

    async def test_append_ahead_of_the_stream_conflicts(self) -> None:
        """An expected version the stream has not reached is a conflict too."""
        store = await self.make_store()
        with pytest.raises(StreamConflict) as raised:
            await store.append("t1", envelopes(1), expected_version=3, command_id="c")
        assert (raised.value.expected, raised.value.actual) == (3, 0)
        assert await store.table_ids() == []

    async def test_multi_event_append_is_all_or_nothing(self) -> None:
        """A command's events are all written, contiguously, or none is."""
        store = await self.make_store()
        await store.append("t1", envelopes(2), expected_version=0, command_id="c1")
        with pytest.raises(StreamConflict):
            await store.append("t1", envelopes(5, "X"), expected_version=1, command_id="c2")
        assert sequences(await store.read("t1")) == [1, 2]
        result = await store.append("t1", envelopes(5, "X"), expected_version=2, command_id="c2")
        assert result.stream_ids == ("0-3", "0-4", "0-5", "0-6", "0-7")
        assert [e.envelope.event_type for e in await store.read("t1", 2)] == [
            "X0", "X1", "X2", "X3", "X4",
        ]

    async def test_losing_writer_succeeds_after_rereading(self) -> None:
        """After a conflict, appending at the version the conflict reports succeeds."""
        store = await self.make_store()
        await store.append("t1", envelopes(1), expected_version=0, command_id="a")
        try:
            await store.append("t1", envelopes(1), expected_version=0, command_id="b")
        except StreamConflict as conflict:
            result = await store.append("t1", envelopes(1), conflict.actual, command_id="b")
        assert result.version == 2

    # -- idempotency -----------------------------------------------------------------------

    async def test_retried_command_returns_the_original_outcome_and_writes_nothing(
        self,
    ) -> None:
        """A command id seen before gets its recorded outcome back, marked duplicate, even if
        the stream moved on and the retry carries other events or versions."""
        store = await self.make_store()
        original = await store.append("t1", envelopes(3), expected_version=0, command_id="c1")
        await store.append("t1", envelopes(1), expected_version=3, command_id="c2")
        for expected in (0, 3, 4):
            retry = await store.append("t1", envelopes(2, "R"), expected, command_id="c1")
            assert retry == AppendResult(original.version, original.stream_ids, duplicate=True)
        assert sequences(await store.read("t1")) == [1, 2, 3, 4]
        assert "R0" not in {e.envelope.event_type for e in await store.read("t1")}

    async def test_a_conflicting_command_is_not_recorded(self) -> None:
        """A command that lost a race was not applied, so its id can still succeed."""
        store = await self.make_store()
        await store.append("t1", envelopes(1), expected_version=0, command_id="a")
        with pytest.raises(StreamConflict):
            await store.append("t1", envelopes(1), expected_version=0, command_id="b")
        result = await store.append("t1", envelopes(1), expected_version=1, command_id="b")
        assert result == AppendResult(version=2, stream_ids=("0-2",))

    # -- schema growth ----------------------------------------------------------------------

    async def test_payload_written_by_an_old_schema_reads_with_the_new_one(self) -> None:
        """The store carries payloads opaquely: an event written with a v1 message parses
        with v2 (new field at its default), and v2 bytes parse with v1."""
        old, new = probe_messages()
        store = await self.make_store()
        written = old(table_id="t1", stack=500)
        await store.append("t1", [envelope("Probe", payload=written.SerializeToString())],
                           expected_version=0, command_id="c1")
        (stored,) = await store.read("t1")
        parsed = new.FromString(stored.envelope.payload)
        assert (parsed.table_id, parsed.stack, parsed.rake) == ("t1", 500, 0)
        newer = new(table_id="t1", stack=7, rake=1).SerializeToString()
        assert old.FromString(newer).stack == 7

    # -- tailing ----------------------------------------------------------------------------

    async def test_tail_replays_stored_events_then_delivers_new_ones(self) -> None:
        """A subscriber from "0" gets the stored events, then events appended later."""
        store = await self.make_store()
        tailer = self.make_tailer(store)
        await store.append("t1", envelopes(3), expected_version=0, command_id="c1")
        async with tailer.subscribe("t1", "0") as events:
            assert sequences(await take(events, 3)) == [1, 2, 3]
            await store.append("t1", envelopes(2), expected_version=3, command_id="c2")
            assert sequences(await take(events, 2)) == [4, 5]

    async def test_tail_delivers_events_written_after_it_started(self) -> None:
        """A subscriber waiting on an empty table gets the first events when they come."""
        store = await self.make_store()
        tailer = self.make_tailer(store)
        async with tailer.subscribe("t1", "0-0") as events:
            waiting = asyncio.create_task(take(events, 2))
            await store.append("t1", envelopes(2), expected_version=0, command_id="c1")
            assert sequences(await waiting) == [1, 2]

    async def test_tail_resumes_after_a_given_id(self) -> None:
        """Resuming from an event id yields exactly the events after it."""
        store = await self.make_store()
        tailer = self.make_tailer(store)
        first = await store.append("t1", envelopes(4), expected_version=0, command_id="c1")
        async with tailer.subscribe("t1", first.stream_ids[1]) as events:
            assert sequences(await take(events, 2)) == [3, 4]
            await store.append("t1", envelopes(1), expected_version=4, command_id="c2")
            assert sequences(await take(events, 1)) == [5]
        async with tailer.subscribe("t1", "0-5") as events:
            waiting = asyncio.create_task(take(events, 1))
            await store.append("t1", envelopes(1), expected_version=5, command_id="c3")
            assert sequences(await waiting) == [6]

    async def test_tail_has_no_gap_or_duplicate_while_writes_go_on(self) -> None:
        """Subscribers joining at different moments of a burst of appends each see every
        event exactly once, in order."""
        store = await self.make_store()
        tailer = self.make_tailer(store)
        total, joined = 120, []
        for step in range(total // 3):
            await store.append("t1", envelopes(3), expected_version=3 * step,
                               command_id=f"c{step}")
            if step % 10 == 0:
                subscription = tailer.subscribe("t1", "0")
                joined.append((subscription, asyncio.create_task(take(subscription, total))))
        for subscription, task in joined:
            assert sequences(await task) == list(range(1, total + 1))
            await subscription.aclose()

    async def test_one_reader_per_table_which_stops_with_its_last_subscriber(self) -> None:
        """Subscribers of one table share one reader; it stops when the last one leaves."""
        store = await self.make_store()
        tailer = self.make_tailer(store)
        first, second = tailer.subscribe("t1"), tailer.subscribe("t1")
        waiting = [asyncio.create_task(take(s, 1)) for s in (first, second)]
        await eventually(lambda: tailer.tailed_tables() == {"t1"})
        await store.append("t1", envelopes(1), expected_version=0, command_id="c1")
        assert [sequences(await w) for w in waiting] == [[1], [1]]
        assert len([t for t in asyncio.all_tasks() if t.get_name() == "tail:t1"]) == 1
        await first.aclose()
        assert tailer.tailed_tables() == {"t1"}
        await store.append("t1", envelopes(1), expected_version=1, command_id="c2")
        assert sequences(await take(second, 1)) == [2]
        await second.aclose()
        assert tailer.tailed_tables() == frozenset()
        assert [t for t in asyncio.all_tasks() if t.get_name() == "tail:t1"] == []

    async def test_a_slow_subscriber_catches_up_from_the_stream(self) -> None:
        """A subscriber that falls further behind than its buffer re-reads what it missed."""
        store = await self.make_store()
        tailer = self.make_tailer(store, buffer_limit=3)
        slow = tailer.subscribe("t1")
        fast = tailer.subscribe("t1")
        waiting = asyncio.create_task(take(fast, 1))
        await store.append("t1", envelopes(1), expected_version=0, command_id="c0")
        await waiting
        assert sequences(await take(slow, 1)) == [1]
        for step in range(10):
            await store.append("t1", envelopes(5), expected_version=1 + 5 * step,
                               command_id=f"c{step + 1}")
        assert sequences(await take(fast, 50)) == list(range(2, 52))  # all were delivered
        assert sequences(await take(slow, 50)) == list(range(2, 52))
        await slow.aclose()
        await fast.aclose()

    async def test_closing_the_tailer_ends_its_subscriptions(self) -> None:
        """After ``aclose`` every subscription's iteration ends and no reader runs."""
        store = await self.make_store()
        tailer = self.make_tailer(store)
        events = tailer.subscribe("t1")
        waiting = asyncio.create_task(take(events, 1))
        await store.append("t1", envelopes(1), expected_version=0, command_id="c")
        await waiting
        await tailer.aclose()
        with pytest.raises(StopAsyncIteration):
            await take(events, 1)
        assert tailer.tailed_tables() == frozenset()


def probe_messages() -> tuple[type[Message], type[Message]]:
    """Two releases of one event message: v2 added ``rake = 3`` and reserved field 4."""
    classes = []
    for version, fields in ((1, ("table_id", "stack")), (2, ("table_id", "stack", "rake"))):
        proto = descriptor_pb2.FileDescriptorProto(
            name=f"probe_v{version}.proto", package=f"probe.v{version}", syntax="proto3"
        )
        message = proto.message_type.add(name="Probe")
        for number, name in enumerate(fields, start=1):
            message.field.add(
                name=name, number=number, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING if name == "table_id"
                else descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
            )
        if version == 2:
            message.reserved_range.add(start=4, end=5)
            message.reserved_name.append("tip")
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        classes.append(
            message_factory.GetMessageClass(pool.FindMessageTypeByName(f"probe.v{version}.Probe"))
        )
    return classes[0], classes[1]


class TestRedisEventStore(StoreContract):
    """The contract against a real Redis (the session's server, flushed per test)."""

    @pytest.fixture(autouse=True)
    async def _redis(self, redis_url: str) -> AsyncIterator[None]:
        self.url = redis_url
        self.clients: list[aioredis.Redis] = []
        self.tailers: list[StreamTailer] = []
        yield
        for tailer in self.tailers:
            await tailer.aclose()
        for client in self.clients:
            await client.aclose()

    def client(self) -> aioredis.Redis:
        client = connect(self.url)
        self.clients.append(client)
        return client

    async def make_store(self, *, page_size: int = 500) -> EventStore:
        return EventStore(self.client(), page_size=page_size)

    def make_tailer(self, store: EventStore, *, buffer_limit: int = 10_000) -> StreamTailer:
        tailer = StreamTailer(self.client(), block_ms=1_000, buffer_limit=buffer_limit)
        self.tailers.append(tailer)
        return tailer

    async def test_keys_of_one_table_share_one_cluster_slot(self) -> None:
        """Every key the append script touches for a table hashes to the table's slot."""
        slots = {key_slot(k.encode()) for k in (keys.table_stream("t-42"),
                                                keys.table_commands("t-42"),
                                                keys.table_version("t-42"))}
        assert len(slots) == 1

    async def test_loads_the_script_again_after_a_script_flush(self) -> None:
        """EVALSHA falls back to loading the script when the server has lost it."""
        store = await self.make_store()
        await store.append("t1", envelopes(1), expected_version=0, command_id="a")
        await store.client.script_flush()
        result = await store.append("t1", envelopes(1), expected_version=1, command_id="b")
        assert result.version == 2

    async def test_refuses_to_append_to_a_stream_written_behind_its_back(self) -> None:
        """If the stream and the version key disagree, the store raises and writes nothing."""
        store = await self.make_store()
        await store.append("t1", envelopes(1), expected_version=0, command_id="a")
        await store.client.xadd(keys.table_stream("t1"), {"envelope": b""})
        with pytest.raises(StoreCorrupted):
            await store.append("t1", envelopes(1), expected_version=1, command_id="b")
        assert await store.version("t1") == 1

    async def test_reads_an_envelope_written_before_fields_were_added(self) -> None:
        """Stream entries written by an older release (an envelope without the newer
        fields) parse with today's EventEnvelope, and appends continue after them."""
        old_bytes = old_envelope_bytes(event_type="HandStarted", sequence=1)
        client = self.client()
        await client.xadd(keys.table_stream("t1"), {"envelope": old_bytes}, id="0-1")
        await client.set(keys.table_version("t1"), 1)
        store = await self.make_store()
        (stored,) = await store.read("t1")
        assert stored.envelope.event_type == "HandStarted"
        assert stored.envelope.sequence == 1
        assert not stored.envelope.HasField("occurred_at")
        assert stored.envelope.payload == b""
        assert (await store.append("t1", envelopes(1), 1, command_id="c")).version == 2

    # -- the chain (studkit.chain) -----------------------------------------------------------

    async def raw(self, table: str) -> list[bytes]:
        """The stream's stored envelope bytes, in order."""
        return [fields[b"envelope"] for _, fields in
                await self.client().xrange(keys.table_stream(table))]

    async def test_the_events_form_a_chain_over_their_stored_bytes(self) -> None:
        """Each envelope links to the digest of the stored bytes of the one before it,
        within a command and across commands; the head is the last one's digest."""
        store = await self.make_store()
        await store.append("t1", envelopes(3, "A"), 0, "c1")
        await store.append("t1", [], 3, "nothing")
        await EventStore(self.client()).append("t1", envelopes(2, "B"), 3, "c2")  # no cache
        await store.append("t1", envelopes(1, "C"), 5, "c3")
        raw = await self.raw("t1")
        links = [EventEnvelope.FromString(r).prev_digest for r in raw]
        assert links == [GENESIS, *(digest(r) for r in raw[:-1])]
        assert await store.chain("t1") == (digest(raw[-1]), 1)
        assert verify_chain("t1", raw, head=digest(raw[-1])) is None
        assert await store.chain("nobody") == (None, None)

    async def test_refuses_an_append_that_does_not_link_to_the_head(self) -> None:
        """A stored event changed behind the store's back: a store that links to what the
        stream now holds is refused (ChainBroken, nothing written), as is the first append
        of a stream that does not link to GENESIS."""
        store = await self.make_store()
        await store.append("t1", envelopes(2), 0, "c1")
        client = self.client()
        stream = keys.table_stream("t1")
        first, second = await self.raw("t1")
        changed = EventEnvelope.FromString(second)
        changed.payload = b"E9"
        await client.delete(stream)
        await client.xadd(stream, {"envelope": first}, id="0-1")
        await client.xadd(stream, {"envelope": changed.SerializeToString()}, id="0-2")
        with pytest.raises(ChainBroken) as refused:
            await EventStore(self.client()).append("t1", envelopes(1), 2, "c2")
        assert refused.value.head == digest(second) == (await store.chain("t1"))[0]
        assert refused.value.link == digest(changed.SerializeToString())
        assert isinstance(refused.value, StreamConflict) and refused.value.actual == 2
        assert await store.version("t1") == 2 and await store.recorded("t1", "c2") is None
        # The store that wrote event 2 still links to the bytes it wrote: it appends.
        assert (await store.append("t1", envelopes(1), 2, "c2")).version == 3
        # The script itself, given a first append that does not start from GENESIS.
        names = ("events", "commands", "version", "owner", "trimmed", "chain")
        reply = await store._run_append(tuple(keys.table_key("t2", n) for n in names),
                                        (0, "c1", "t2", "", "", b"\x01" * 32, b"\x02" * 32,
                                         b"x"))
        assert reply == [b"broken_link", GENESIS]
        assert await store.version("t2") == 0

    async def test_a_writer_whose_last_event_was_lost_is_refused_then_rereads(self) -> None:
        """Writer A appended event 2, which a failover lost; writer B appended another event
        2. A, at the same version, links to its own event 2: refused like a lost race, and
        its next attempt links to the stream's event 2."""
        a, b = await self.make_store(), await self.make_store()
        await a.append("t1", envelopes(1, "A"), 0, "c1")
        await a.append("t1", envelopes(1, "A"), 1, "c2")
        client = self.client()
        head, _ = await a.chain("t1")
        first, _lost = await self.raw("t1")
        await client.delete(keys.table_stream("t1"))  # as a replica without event 2 has it
        await client.xadd(keys.table_stream("t1"), {"envelope": first}, id="0-1")
        await client.set(keys.table_version("t1"), 1)
        await client.hset(keys.table_key("t1", "chain"), "head", digest(first))
        await b.append("t1", envelopes(1, "B"), 1, "c3")
        with pytest.raises(ChainBroken):
            await a.append("t1", envelopes(1, "A"), 2, "c4")
        assert (await a.append("t1", envelopes(1, "A"), 2, "c4")).version == 3
        raw = await self.raw("t1")
        assert verify_chain("t1", raw, head=(await a.chain("t1"))[0]) is None
        assert head != digest(raw[1])

    async def test_a_table_written_before_the_chain_starts_it_at_a_recorded_point(
            self) -> None:
        """Events stored without links (the old format): the first append links to the
        digest of the last stored event and records where the chain starts; a verifier
        given that point checks the chain from there, the anchor event's bytes included."""
        client = self.client()
        stream = keys.table_stream("old")
        old = [old_envelope_bytes(event_type="HandStarted", sequence=n) for n in (1, 2, 3)]
        for n, raw in enumerate(old, start=1):
            await client.xadd(stream, {"envelope": raw}, id=f"0-{n}")
        await client.set(keys.table_version("old"), 3)
        store = await self.make_store()
        assert await store.chain("old") == (None, None)
        await store.append("old", envelopes(2), 3, "c1")
        raw = await self.raw("old")
        assert raw[:3] == old
        assert EventEnvelope.FromString(raw[3]).prev_digest == digest(old[2])
        head, since = await store.chain("old")
        assert (head, since) == (digest(raw[-1]), 4)
        assert verify_chain("old", raw, since=since, head=head) is None
        changed = old[2].replace(b"HandStarted", b"HandStartee")
        broken = verify_chain("old", [*raw[:2], changed, *raw[3:]], since=since, head=head)
        assert broken is not None and broken.sequence == 3
        assert (broken.expected, broken.found) == (digest(old[2]), digest(changed))
        # Events before the recorded point are not linked: a change there goes unseen.
        changed = old[0].replace(b"HandStarted", b"HandStartee")
        assert verify_chain("old", [changed, *raw[1:]], since=since, head=head) is None

    async def test_an_append_after_the_head_left_for_the_archive_links_to_it(self) -> None:
        """The stream's events all trimmed (archived): a store without the last digest in
        hand links to the chain's recorded head."""
        await (await self.make_store()).append("t1", envelopes(2), 0, "c1")
        last = (await self.raw("t1"))[-1]
        client = self.client()
        await client.xtrim(keys.table_stream("t1"), minid="0-3")
        await client.set(keys.table_key("t1", "trimmed"), 2)
        store = await self.make_store()
        assert (await store.append("t1", envelopes(1), 2, "c2")).version == 3
        (raw,) = await self.raw("t1")
        assert EventEnvelope.FromString(raw).prev_digest == digest(last)
        assert verify_chain("t1", [raw], start=digest(last), head=digest(raw)) is None

    async def test_tailer_refuses_a_block_longer_than_the_socket_timeout(self) -> None:
        """A blocked XREAD outliving the client's socket timeout would fail; the tailer
        refuses that configuration up front (redis-py's default timeout counts too)."""
        with pytest.raises(ValueError, match="socket_timeout"):
            StreamTailer(connect(self.url, socket_timeout=1), block_ms=1_000)
        with pytest.raises(ValueError, match="socket_timeout"):
            StreamTailer(self.client(), block_ms=5_000)
        StreamTailer(connect(self.url, socket_timeout=None), block_ms=60_000)

    async def test_subscription_is_an_async_iterator(self) -> None:
        """``subscribe`` returns a Subscription usable with ``async for``."""
        store = await self.make_store()
        tailer = self.make_tailer(store)
        await store.append("t1", envelopes(2), expected_version=0, command_id="c")
        subscription = tailer.subscribe("t1")
        assert isinstance(subscription, Subscription)
        seen = []
        async with asyncio.timeout(DEADLINE):
            async for event in subscription:
                seen.append(event.envelope.sequence)
                if len(seen) == 2:
                    break
        await subscription.aclose()
        assert seen == [1, 2]


def old_envelope_bytes(event_type: str, sequence: int) -> bytes:
    """An EventEnvelope as an early release wrote it: only fields 1 to 5 existed."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="old_envelope.proto", package="old.v1", syntax="proto3"
    )
    message = proto.message_type.add(name="EventEnvelope")
    types = descriptor_pb2.FieldDescriptorProto
    for number, (name, kind) in enumerate(
        (("event_type", types.TYPE_STRING), ("schema_version", types.TYPE_UINT32),
         ("table_id", types.TYPE_STRING), ("hand_number", types.TYPE_UINT64),
         ("sequence", types.TYPE_UINT64)),
        start=1,
    ):
        message.field.add(name=name, number=number, type=kind, label=types.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    old = message_factory.GetMessageClass(pool.FindMessageTypeByName("old.v1.EventEnvelope"))
    return bytes(old(event_type=event_type, schema_version=1, table_id="t1", hand_number=1,
                     sequence=sequence).SerializeToString())
