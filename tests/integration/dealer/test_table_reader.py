"""The dealer reads a table's stream and a hand's record in one read-only script call
(``dealer.store.TableReader``, ``read_table.lua``) instead of the event store's ``MULTI``
(issue 35): as the dealer's own Redis user, it must give exactly what
:meth:`studkit.store.EventStore.tail` gives, from any version, past a page, after a trim, with
a hash present, absent or not asked for, and again after Redis forgot its scripts."""

from __future__ import annotations

import pytest

from dealer.store import TableReader, hand_key
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
