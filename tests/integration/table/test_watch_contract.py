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
from studkit.mapping import is_room_event
from studtest.table import OPERATOR, Room, play_until, player

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
