"""A watcher's inbox (``table.inbox.Watcher``, issue 35): an append's envelopes go in at once
and the watch that waits for them wakes once and takes them all, in the order offered across
appends; at most ``limit`` wait untaken (what fits is still given, then the watch ends as too
slow); a closed inbox gives what it holds, then ends."""

from __future__ import annotations

import asyncio

from stud.v1.envelope_pb2 import EventEnvelope
from table.inbox import Watcher


def envelopes(*sequences: int) -> list[EventEnvelope]:
    return [EventEnvelope(sequence=s, event_type="Checked") for s in sequences]


def sequences(batch: list[EventEnvelope]) -> list[int]:
    return [e.sequence for e in batch]


async def test_a_waiting_watch_wakes_once_an_append_and_takes_it_whole() -> None:
    watcher = Watcher(limit=100)
    taken: list[list[int]] = []

    async def watch() -> None:
        while batch := await watcher.take(64):
            taken.append(sequences(batch))

    task = asyncio.create_task(watch())
    appends = [envelopes(1, 2, 3), envelopes(4), envelopes(5, 6, 7, 8, 9)]
    for append in appends:
        await asyncio.sleep(0)  # the watch waits again
        assert watcher._waiter is not None
        watcher.offer(append)
    watcher.close()
    await asyncio.wait_for(task, 5)
    # One item (one wake) an append, each whole and in order: not one an envelope.
    assert taken == [[1, 2, 3], [4], [5, 6, 7, 8, 9]]
    assert not watcher.overflowed


async def test_appends_offered_meanwhile_come_in_one_take_in_order_cut_at_most() -> None:
    watcher = Watcher(limit=100)
    offered = [envelopes(1, 2), envelopes(3), envelopes(), envelopes(4, 5, 6)]
    shared = offered[0]
    for append in offered:
        watcher.offer(append)
    assert sequences(await watcher.take(64)) == [1, 2, 3, 4, 5, 6]
    assert sequences(shared) == [1, 2]  # the fan-out's list (every watcher's) is not taken
    for append in offered:
        watcher.offer(append)
    assert [sequences(await watcher.take(4)), sequences(await watcher.take(4))] == [
        [1, 2, 3, 4], [5, 6]]
    watcher.offer(envelopes(7, 8, 9))
    assert [sequences(await watcher.take(1)) for _ in range(3)] == [[7], [8], [9]]


async def test_a_slow_watch_gets_what_fit_then_ends() -> None:
    watcher = Watcher(limit=5)
    watcher.offer(envelopes(1, 2))
    watcher.offer(envelopes(3, 4, 5, 6))  # one too many: 3, 4, 5 fit
    watcher.offer(envelopes(7))  # after the overflow: nothing more
    assert watcher.overflowed
    assert sequences(await watcher.take(2)) == [1, 2]
    assert sequences(await watcher.take(64)) == [3, 4, 5]
    assert await watcher.take(64) == []  # the watch ends (too slow)

    exact = Watcher(limit=3)
    exact.offer(envelopes(1, 2, 3))  # just fits
    assert not exact.overflowed
    assert sequences(await exact.take(64)) == [1, 2, 3]
    exact.offer(envelopes(4, 5, 6))  # fits again once taken
    assert not exact.overflowed


async def test_a_closed_inbox_gives_what_it_holds_then_ends() -> None:
    watcher = Watcher(limit=5)
    watcher.offer(envelopes(1, 2))
    watcher.close()
    watcher.offer(envelopes(3))  # nothing after the close
    assert sequences(await watcher.take(64)) == [1, 2]
    assert await watcher.take(64) == []
    assert not watcher.overflowed  # moved, not too slow

    full = Watcher(limit=2)
    full.offer(envelopes(1, 2))
    full.close()  # no room left: it ends as too slow (resumed from the same sequence too)
    assert full.overflowed
    assert sequences(await full.take(64)) == [1, 2]
    assert await full.take(64) == []


async def test_a_close_wakes_a_waiting_watch() -> None:
    watcher = Watcher(limit=5)
    task = asyncio.create_task(watcher.take(64))
    await asyncio.sleep(0)
    watcher.close()
    assert await asyncio.wait_for(task, 5) == []
    assert watcher._waiter is None
