"""What table.proto promises a watcher, checked over real gRPC against the whole room (issue
29: `TableEventRecord.sequence` said "1-based, gapless", and a client written from the
contract saw gaps and thought it had lost events). The table's stream holds the rules'
events and the room's own (room.proto: the buy-in saga, settings, ...); a watcher, a command's
reply and a hand's history carry the rules' events only, so their sequences rise strictly with
gaps exactly where room events sit. Resuming from the last sequence seen, or from any
sequence in a gap, misses nothing and repeats nothing; `TableView.version` is the last
visible event's sequence (a resume token and a valid `expected_sequence`), and
`CommandReply.version` the stream's own count, room events included."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from studkit.auth import Principal
from studkit.mapping import is_room_event
from studtest.redis import TestRedis
from studtest.table import OPERATOR, Room, act_once, play_until, player, running_room
from studtools.devkeys import DevKeys
from table.inbox import WatcherTooSlow
from table.watching import WATCH_BATCH

pytestmark = pytest.mark.integration


async def watch(room: Room, table_id: str, after: int, upto: int) -> list[pb.TableEventRecord]:
    """The operator's watch from ``after`` until the record at or past ``upto``."""
    out: list[pb.TableEventRecord] = []
    call = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id,
                                                            after_sequence=after),
                                       metadata=room.client.md(OPERATOR))
    try:
        async with asyncio.timeout(10):
            async for record in call:
                out.append(record)
                if record.sequence >= upto:
                    break
    finally:
        call.cancel()
    return out


async def test_a_watch_skips_room_events_and_resumes_from_any_sequence(room: Room) -> None:
    table_id = await room.client.open_table()
    replies = []
    for seat, name in {1: "ann", 3: "bob"}.items():
        await room.fund(name)
        replies.append(await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name)))
    await play_until(room.client, table_id, 2, random.Random(5).choice)
    # The next hand is dealt at once; read when it waits for a player (nothing is appended).
    await room.client.wait_for(table_id, lambda v: bool(v.hand.to_act) and v.hand.legal_actions
                               .seat == v.hand.to_act)

    stream = [s.envelope for s in await room.table_deps.events.read(table_id)]
    visible = [e.sequence for e in stream if not is_room_event(e)]
    gaps = [e.sequence for e in stream if is_room_event(e)]
    assert gaps and gaps[0] < visible[-1]  # room events sit between the game's
    view = await room.client.view(table_id)
    assert view.version == visible[-1]  # the last event a watcher can see
    assert view.last_event_id == f"0-{view.version}"

    # From the start: the game's events, every one, once, in order; the gaps are the room's.
    records = await watch(room, table_id, 0, view.version)
    seen = [r.sequence for r in records]
    assert seen == visible
    assert [r.event_id for r in records] == [f"0-{s}" for s in seen]
    assert seen != list(range(1, len(seen) + 1))  # not gapless

    # Resuming after any sequence, one in a gap included, gives exactly what follows it.
    for after in (seen[0], gaps[0], gaps[-1] - 1 if gaps[-1] > 1 else 1, seen[len(seen) // 2]):
        if after >= view.version:
            continue
        resumed = await watch(room, table_id, after, view.version)
        assert [r.sequence for r in resumed] == [s for s in visible if s > after], after

    # A command's reply: the stream's version after it, room events counted (SitDown's
    # saga ends with a room event), and only the events the caller may see.
    for reply in replies:
        last = next(e for e in stream if e.sequence == reply.version)
        assert [r.sequence for r in reply.events] == [
            e.sequence for e in stream if e.sequence <= reply.version
            and not is_room_event(e) and e.command_id == last.command_id]

    # Past the table's version: OUT_OF_RANGE, as the proto says.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await watch(room, table_id, 10**9, 0)
    assert caught.value.code() == grpc.StatusCode.OUT_OF_RANGE



async def watch_messages(room: Room, table_id: str, who: Principal, after: int, upto: int,
                         batched: bool, out: list[pb.TableEventRecord] | None = None,
                         skip_own: bool = False) -> list[pb.TableEventRecord]:
    """``who``'s watch from ``after`` until a record at or past ``upto``: the messages as
    sent (a batched watch's carry the records after their first in ``more``), also put in
    ``out`` as they come."""
    out = [] if out is None else out
    call = room.client.stub.WatchTable(pb.WatchTableRequest(
        table_id=table_id, after_sequence=after, batched=batched, skip_own=skip_own),
        metadata=room.client.md(who))
    try:
        async with asyncio.timeout(60):
            async for message in call:
                out.append(message)
                if max([message.sequence, *(r.sequence for r in message.more)]) >= upto:
                    break
    finally:
        call.cancel()
    return out


def flattened(messages: list[pb.TableEventRecord], upto: int) -> list[bytes]:
    """Each record up to sequence ``upto`` a list of messages carries, in order, serialized
    (without ``more``)."""
    out = []
    for message in messages:
        first = pb.TableEventRecord()
        first.CopyFrom(message)
        first.ClearField("more")
        for record in (first, *message.more):
            assert not record.more
            if record.sequence <= upto:
                out.append(record.SerializeToString())
    return out


def last_sequence(messages: list[pb.TableEventRecord]) -> int:
    return max([0, *(r.sequence for m in messages for r in (m, *m.more))])


def watchers(room: Room, table_id: str) -> int:
    """How many watches the table's actor has subscribed now."""
    actor = room.table_deps.app.actor_of(table_id)
    assert actor is not None
    return len(actor.watchers)


async def subscribed(room: Room, table_id: str, count: int) -> None:
    """Until the table's actor has ``count`` watches subscribed (each opened watch gets what
    is appended from then on; a fixed sleep was not enough on a busy machine)."""
    async with asyncio.timeout(10):
        while watchers(room, table_id) < count:
            await asyncio.sleep(0.01)


async def test_a_batched_watch_carries_the_same_records_in_fewer_messages(room: Room) -> None:
    """WatchTableRequest.batched (issue 35): the records an unbatched watch gets, byte for
    byte and in order, each as the caller may see it, live and caught up, in fewer
    messages; an unbatched watch never gets `more`."""
    table_id = await room.client.open_table()
    for seat, name in {1: "ann", 3: "bob"}.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    ann, rail = player("ann"), player("rail-watcher")
    start = (await room.client.view(table_id)).version
    # Live: watching while the hands are played (what the table fans out as it commits).
    live: dict[tuple[str, bool], list[pb.TableEventRecord]] = {}
    tasks = []
    watching = watchers(room, table_id)
    for who in (ann, rail):
        for batched in (False, True):
            live[(who.name, batched)] = []
            tasks.append(asyncio.create_task(watch_messages(
                room, table_id, who, start, 10**9, batched, live[(who.name, batched)])))
    await subscribed(room, table_id, watching + len(tasks))
    await play_until(room.client, table_id, 3, random.Random(7).choice)
    version = (await room.client.view(table_id)).version
    async with asyncio.timeout(10):
        while any(last_sequence(m) < version for m in live.values()):
            await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for who in (ann, rail):
        one = [m for m in live[(who.name, False)] if m.sequence <= version]
        many = [m for m in live[(who.name, True)] if m.sequence <= version]  # first records
        assert all(not m.more for m in one)
        records = flattened(one, version)
        assert len(records) == len(one) > 20
        assert flattened(many, version) == records
        assert len(many) < len(one)  # a deal and its turn, an action and what follows it
        # Caught up (a page read): the same records again, in still fewer messages.
        read = await watch_messages(room, table_id, who, start, version, True)
        assert flattened(read, version) == records
        assert len(read) < len(many)


async def test_a_watch_that_skips_its_own_commands_gets_them_in_their_replies(
        room: Room) -> None:
    """WatchTableRequest.skip_own (issue 35): the caller's own actions written after its
    watch began are left out, batched or not; its replies carry exactly those records, byte
    for byte as the watch would have sent them; everything else comes as before (the other
    player's actions, the cards the table deals, the hand's end), and a watcher with no
    commands of its own (the rail) gets everything. A watch that catches up on what was
    written before it began gets the caller's own actions too (a client that lost its
    replies, after a restart or on another device, learns what it did)."""
    table_id = await room.client.open_table()
    for seat, name in {1: "ann", 3: "bob"}.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    ann, rail = player("ann"), player("rail-watcher")
    start = (await room.client.view(table_id)).version
    replies: list[pb.CommandReply] = []
    calling = room.client.call

    async def recording(method: str, request: object, who: Principal) -> object:
        reply = await calling(method, request, who)
        if who == ann and isinstance(reply, pb.CommandReply):
            replies.append(reply)
        return reply

    room.client.call = recording  # type: ignore[method-assign]
    live: dict[tuple[str, bool, bool], list[pb.TableEventRecord]] = {}
    tasks = []
    watching = watchers(room, table_id)
    for who, batched, skip in ((ann, True, False), (ann, True, True), (ann, False, True),
                               (rail, True, True)):
        live[(who.name, batched, skip)] = []
        tasks.append(asyncio.create_task(watch_messages(
            room, table_id, who, start, 10**9, batched, live[(who.name, batched, skip)],
            skip)))
    # Each watch subscribed (its own actions from here on are what it skips) before any.
    await subscribed(room, table_id, watching + len(tasks))
    await play_until(room.client, table_id, 3, random.Random(11).choice)
    room.client.call = calling  # type: ignore[method-assign]
    version = (await room.client.view(table_id)).version
    async with asyncio.timeout(10):
        while last_sequence(live[("ann", True, False)]) < version \
                or last_sequence(live[("rail-watcher", True, True)]) < version:
            await asyncio.sleep(0.05)
    everything = flattened(live[("ann", True, False)], version)
    mine = [r.SerializeToString() for reply in replies for r in reply.events]
    assert len(replies) > 5 and mine and set(mine) < set(everything)
    others = [r for r in everything if r not in mine]
    # The skipping watches' last records may be ann's own, which never come: each is
    # waited for up to the last record that is not.
    last_other = pb.TableEventRecord.FromString(others[-1]).sequence
    async with asyncio.timeout(10):
        while last_sequence(live[("ann", True, True)]) < last_other \
                or last_sequence(live[("ann", False, True)]) < last_other:
            await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert flattened(live[("ann", True, True)], version) == others
    assert flattened(live[("ann", False, True)], version) == others
    assert len(flattened(live[("rail-watcher", True, True)], version)) == len(everything)
    # Caught up on what was written before the watch began: everything, ann's own included.
    for batched in (True, False):
        read = await watch_messages(room, table_id, ann, start, last_other, batched,
                                    skip_own=True)
        assert flattened(read, last_other) == [
            r for r in everything if pb.TableEventRecord.FromString(r).sequence <= last_other]
        assert set(mine) & set(flattened(read, last_other))


async def test_a_watch_that_reads_no_more_gets_its_buffer_then_ends_and_resumes(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """A watch that stops reading is cut off after the table's ``watch_buffer`` envelopes
    (``watcher_too_slow``): the table never waits for it. What it got until then is the
    table's game envelopes in order, none missing, none twice, across appends; resuming
    after the last sequence it names gives what follows, from the store."""
    async with running_room(redis_server, redis_url, dev_keys, watch_buffer=12) as room:
        table_id = await room.client.open_table()
        for seat, name in {1: "ann", 3: "bob"}.items():
            await room.fund(name)
            await room.client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=10_000), player(name))
        view = await room.client.wait_for(
            table_id, lambda v: bool(v.hand.to_act) and v.hand.legal_actions.seat
            == v.hand.to_act)
        app = room.table_deps.app
        watch = app.watch_batches(OPERATOR, table_id, view.version)
        actor = app.actor_of(table_id)
        assert actor is not None
        watching = len(actor.watchers)
        first = asyncio.create_task(anext(watch))
        async with asyncio.timeout(10):  # subscribed, waiting: nothing is appended meanwhile
            while len(actor.watchers) == watching:
                await asyncio.sleep(0.01)
        assert not first.done()
        assert await act_once(room.client, table_id, view, random.Random(3).choice)
        got = [e.sequence for e in await asyncio.wait_for(first, 20)]
        taken_first = len(got)
        # It reads no more while two hands are played: far more than 12 envelopes.
        await play_until(room.client, table_id, 3, random.Random(13).choice)
        with pytest.raises(WatcherTooSlow) as slow:
            async with asyncio.timeout(20):
                async for batch in watch:
                    assert batch and len(batch) <= WATCH_BATCH
                    got.extend(e.sequence for e in batch)
        stream = [s.envelope for s in await room.table_deps.events.read(table_id)]
        visible = [e.sequence for e in stream
                   if not is_room_event(e) and e.sequence > view.version]
        assert len(visible) > len(got) + 20
        assert got == visible[:len(got)]  # in order, none missing, none twice
        assert len(got) == taken_first + 12  # what was taken, then the buffer's worth
        assert f"resume after sequence {got[-1]}" in str(slow.value)
        resumed = app.watch_batches(OPERATOR, table_id, got[-1])
        try:
            again = await asyncio.wait_for(anext(resumed), 10)
        finally:
            await resumed.aclose()
        assert [e.sequence for e in again] == visible[len(got):len(got) + len(again)]
