"""The dealer reads a table's stream and a hand's record in one read-only script call
(``dealer.store.TableReader``, ``read_table.lua``) instead of the event store's ``MULTI``
(issue 35): as the dealer's own Redis user, it must give exactly what
:meth:`studkit.store.EventStore.tail` gives, from any version, past a page, after a trim, with
a hash present, absent or not asked for, and again after Redis forgot its scripts; each event
once and in order from every start whatever the page; an entry read by its ``envelope`` field
among others; and the dealer's cached view, followed through it, the table's own state."""

from __future__ import annotations

import random
from typing import cast

import pytest

from dealer.store import TableReader, hand_key
from dealer.tables import PublicTables
from rules import Phase, TableConfig, pending_deal
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.keys import table_key
from studkit.mapping import event_from_envelope
from studkit.redis_client import connect
from studkit.store import EventStore, trimmed_key
from studtest.dealer import MakeTable, RunningDealer
from studtest.redis import TestRedis

pytestmark = pytest.mark.integration

PLAYERS = {1: "ann", 3: "bob", 8: "cat"}


async def test_the_script_reads_what_the_event_store_reads(
        make_table: MakeTable, dealer: RunningDealer, redis_url: str,
        redis_server: TestRedis) -> None:
    if redis_server.cluster:
        pytest.skip("on a cluster the reader is the event store's own tail")
    table = await make_table(PLAYERS)
    await table.play_hand()
    await table.start_hand()
    await table.deal()
    client = dealer.deps.store.client  # the dealer's ACL user: reads the table's keys only
    events = EventStore(client)
    small = EventStore(client, page_size=4)  # a tail longer than a page
    tid = table.table_id
    hands = (hand_key(tid, 1), hand_key(tid, 2), hand_key(tid, 99), None)
    version = (await events.tail(tid, 0)).version
    assert version > 20

    async def same(store: EventStore) -> int:
        reader, compared = TableReader(store), 0
        for start in (0, 1, 5, version - 1, version, version + 3):
            for key in hands:
                got = await reader.tail(tid, start, key)
                assert got == await store.tail(tid, start, hash_key=key), (start, key)
                assert (got.hash is None) == (key is None)
                compared += 1
        return compared

    assert await same(events) == await same(small) == 24
    for unknown in (await TableReader(events).tail("no-such-table", 0, hand_key("x", 1)),
                    await TableReader(events).tail("no-such-table", 0, None)):
        assert unknown == await events.tail("no-such-table", 0,
                                            hash_key=None if unknown.hash is None
                                            else hand_key("x", 1))
        assert (unknown.version, unknown.trimmed, unknown.events) == (0, 0, [])

    admin = connect(redis_url)
    try:
        await admin.set(trimmed_key(tid), 3)  # as an archive's trim leaves it
        await admin.xtrim(f"stud:table:{{{tid}}}:events", minid="0-4")
        assert await same(events) == 24
        await admin.script_flush()  # a restarted Redis: the script is loaded again
        assert await same(events) == 24
    finally:
        await admin.aclose()
    with pytest.raises(ValueError):
        await TableReader(events).tail(tid, -1, None)


async def test_a_tail_past_pages_holds_each_event_once_in_order(
        make_table: MakeTable, dealer: RunningDealer, redis_server: TestRedis) -> None:
    """Every start, every page size: the events after the start, each once, none missing
    (a tail that fills its first page exactly, or a multiple of pages, included): checked
    against the sequences the table wrote, not against the event store's own paging."""
    if redis_server.cluster:
        pytest.skip("on a cluster the reader is the event store's own tail")
    table = await make_table(PLAYERS)
    await table.play_hand()
    await table.start_hand()
    client = dealer.deps.store.client
    tid = table.table_id
    version = len(table.t.events)
    assert (await EventStore(client).tail(tid, 0)).version == version
    for page in (1, 2, 3, 4, 7, version - 1, version, version + 1):
        reader = TableReader(EventStore(client, page_size=page))
        for start in range(version + 2):
            got = await reader.tail(tid, start, hand_key(tid, 2))
            wanted = list(range(start + 1, version + 1))
            assert [int(e.stream_id.partition("-")[2]) for e in got.events] == wanted, \
                (page, start)
            assert [e.envelope.sequence for e in got.events] == wanted, (page, start)
            assert got.version == version and got.trimmed == 0
            assert got.hash is not None and b"commitment" in got.hash


async def test_an_entry_with_more_fields_is_read_by_its_envelope(
        make_table: MakeTable, dealer: RunningDealer, redis_url: str,
        redis_server: TestRedis) -> None:
    """A stream entry with fields beside ``envelope``, before or after it, is read by its
    envelope (as the event store reads it); one without is refused as the event store
    refuses it."""
    if redis_server.cluster:
        pytest.skip("on a cluster the reader is the event store's own tail")
    table = await make_table(PLAYERS)
    await table.start_hand()
    admin = connect(redis_url, decode_responses=False)
    copy = f"{table.table_id}-copy"
    stream = table_key(copy, "events")
    try:
        written = await admin.xrange(table_key(table.table_id, "events"), count=3) or []
        payloads = [cast(bytes, fields[b"envelope"]) for _id, fields in written
                    if fields is not None]
        assert len(payloads) == 3
        layouts: list[list[tuple[bytes, bytes]]] = [
            [(b"envelope", payloads[0])],
            [(b"note", b"envelope"), (b"envelope", payloads[1])],  # a value, not a field
            [(b"envelope", payloads[2]), (b"note", b"x"), (b"z", b"")],
        ]
        for sequence, layout in enumerate(layouts, start=1):
            # XADD keeps the fields in the order given (a dict would too, but say so).
            await admin.execute_command("XADD", stream, f"0-{sequence}",
                                        *[part for pair in layout for part in pair])
        await admin.set(table_key(copy, "version"), len(layouts))
        client = dealer.deps.store.client
        events, reader = EventStore(client), TableReader(EventStore(client))
        got = await reader.tail(copy, 0, None)
        assert got == await events.tail(copy, 0)
        assert [e.envelope.SerializeToString() for e in got.events] == [
            EventEnvelope.FromString(p).SerializeToString() for p in payloads]
        await admin.execute_command("XADD", stream, "0-4", "note", "no envelope")
        with pytest.raises(TypeError, match="envelope"):
            await events.tail(copy, 0)
        with pytest.raises(TypeError, match="envelope"):
            await reader.tail(copy, 0, None)
    finally:
        await admin.delete(stream, table_key(copy, "version"))
        await admin.aclose()


async def test_a_view_followed_through_the_reader_is_the_tables_state(
        make_table: MakeTable, dealer: RunningDealer) -> None:
    """The dealer's cached view, refreshed through the reader after any step of the table
    (a tail of one event, of several, longer than a page), is the state the table decided
    on, at its version: the pending deal the table asks for is the one the view expects
    (a ``wrong_deal`` refusal of a correct request would be a view that skipped or folded
    twice an event)."""
    table = await make_table({1: "ann", 3: "bob", 5: "cat", 8: "dan"},
                             TableConfig(burn_cards=True))
    client = dealer.deps.store.client
    tid = table.table_id
    followers = [PublicTables(EventStore(client), event_from_envelope,
                              tail=TableReader(EventStore(client, page_size=page)).tail)
                 for page in (1, 3, 500)]
    rng = random.Random(35)
    checked = deals = 0

    async def follow() -> None:
        nonlocal checked, deals
        for i, tables in enumerate(followers):
            if i and rng.random() < 0.6:  # the others let several events gather
                continue
            view, raw = await tables.view_and_hash(tid, hand_key(tid, table.hand_number))
            assert view.version == len(table.t.events)
            assert view.state == table.t.state
            assert raw is not None and b"commitment" in raw
            if table.t.hand.phase == Phase.DEALING:
                assert pending_deal(view.state) == table.t.plan()
                deals += 1
            checked += 1

    plays: list[tuple[dict[int, int], int | None]] = [
        ({}, None), ({3: 4}, None), ({}, 5), ({5: 3, 8: 6}, 4), ({1: 7}, None), ({}, 3)]
    for folds, bet_on in plays:
        await table.start_hand()
        await follow()
        while not table.t.hand.is_over:
            await table.step(folds, bet_on)
            await follow()
    fresh = PublicTables(EventStore(client), event_from_envelope)
    whole = await fresh.view(tid)
    for tables in followers:
        view = await tables.view(tid)
        assert (view.version, view.state, view.seatings, view.draws, view.shown) == (
            whole.version, whole.state, whole.seatings, whole.draws, whole.shown)
    assert deals > 6 * 5 and checked > deals
