"""The SDK's table watch is batched on the wire (``WatchTableRequest.batched``, issue 35) and
hands its callers the records one by one, exactly as an unbatched watch sends them; stopped
inside a message, it resumes at the next record: nothing lost, nothing twice."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from stud.v1 import table_pb2 as pb
from studclient import Client
from studkit.auth import Principal
from studtest.table import Room, play_until, player

ClientFor = Callable[[Principal], Client]

pytestmark = pytest.mark.integration


class Observed:
    """A real WatchTable call, its messages observed as they pass: the records each carried
    (the first and those in its ``more``)."""

    def __init__(self, call: Any, messages: list[list[int]]) -> None:
        self.call = call
        self.messages = messages

    def cancel(self) -> bool:
        return bool(self.call.cancel())

    async def __aiter__(self) -> AsyncIterator[pb.TableEventRecord]:
        async for message in self.call:
            self.messages.append([message.sequence, *(r.sequence for r in message.more)])
            yield message


def observe(client: Client) -> tuple[list[int], list[list[int]]]:
    """Observe ``client``'s WatchTable calls: the ``after_sequence`` each was opened with, and
    the records of every message they got."""
    opened: list[int] = []
    messages: list[list[int]] = []
    real = client.watch_table_call

    def watch_table_call(table_id: str, after_sequence: int,
                         metadata: tuple[tuple[str, str], ...]) -> Any:
        opened.append(after_sequence)
        return Observed(real(table_id, after_sequence, metadata), messages)

    client.watch_table_call = watch_table_call  # type: ignore[method-assign]
    return opened, messages


async def unbatched(room: Room, table_id: str, who: Principal, after: int, upto: int
                    ) -> list[bytes]:
    """``who``'s records after ``after`` up to ``upto`` from a watch that did not ask for
    batches (one record a message), serialized."""
    out: list[bytes] = []
    call = room.client.stub.WatchTable(pb.WatchTableRequest(
        table_id=table_id, after_sequence=after), metadata=room.client.md(who))
    try:
        async with asyncio.timeout(30):
            async for record in call:
                assert not record.more
                out.append(record.SerializeToString())
                if record.sequence >= upto:
                    break
    finally:
        call.cancel()
    return out


async def seated_table(room: Room) -> str:
    table_id = await room.client.open_table()
    for seat, name in {1: "ann", 3: "bob"}.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    return table_id


async def test_the_sdk_watch_hands_over_each_record_an_unbatched_watch_gets(
        room: Room, client_for: ClientFor) -> None:
    """A seated player's and a rail's TableWatch, live over three hands: ``on_event`` gets
    the records of an unbatched watch, byte for byte (no ``more``), in order, each once,
    while the wire carried several records in some messages."""
    table_id = await seated_table(room)
    got: dict[str, list[pb.TableEventRecord]] = {}
    watches = {}
    wire: dict[str, list[list[int]]] = {}
    for name in ("ann", "rail"):
        client = client_for(player(name))
        _, wire[name] = observe(client)
        got[name] = []
        watches[name] = client.watch(table_id, cards=False, on_event=got[name].append)
        await watches[name].start()
    start = {name: w.last_sequence for name, w in watches.items()}
    await play_until(room.client, table_id, 3, random.Random(5).choice)
    version = (await room.client.view(table_id)).version
    async with asyncio.timeout(20):
        while any(w.last_sequence < version for w in watches.values()):
            await asyncio.sleep(0.02)
    for name, watch in watches.items():
        await watch.close()
        expected = await unbatched(room, table_id, player(name), start[name], version)
        assert len(expected) > 20
        # (the table deals on by itself: what came after ``version`` is not compared)
        assert [r.SerializeToString() for r in got[name] if r.sequence <= version] == expected
        assert any(len(records) > 1 for records in wire[name])  # batched on the wire
        assert len(wire[name]) < len(expected)


async def test_a_watch_stopped_inside_a_batch_resumes_at_the_next_record(
        room: Room, client_for: ClientFor) -> None:
    """``Client.watch_records`` stopped right after a record that came in a message's
    ``more`` (live, then caught up) and opened again with that record's sequence: together
    the records of one unbatched watch, none lost, none twice."""
    table_id = await seated_table(room)
    client = client_for(player("ann"))
    opened, wire = observe(client)
    start = (await room.client.view(table_id)).version
    got: list[pb.TableEventRecord] = []

    async def until_inside_a_batch(after: int) -> None:
        async with contextlib.aclosing(client.watch_records(table_id, after)) as records:
            async for record in records:
                got.append(record)
                if record.sequence in wire[-1][1:-1]:
                    return  # stop inside the message: the records after it not taken

    live = asyncio.create_task(until_inside_a_batch(start))
    await asyncio.sleep(0.2)
    await play_until(room.client, table_id, 2, random.Random(11).choice)
    await asyncio.wait_for(live, 20)
    version = (await room.client.view(table_id)).version
    stopped = got[-1].sequence
    assert wire[-1][-1] > stopped  # the message held records past the stop
    # Caught up: stop inside the first page, then once more from there to the end.
    await until_inside_a_batch(stopped)
    assert len(wire[-1]) > 2 and got[-1].sequence == wire[-1][1]
    again = got[-1].sequence
    async with contextlib.aclosing(client.watch_records(table_id, again)) as rest:
        async for record in rest:
            got.append(record)
            if record.sequence >= version:
                break
    assert opened == [start, stopped, again]
    assert [r.SerializeToString() for r in got] == await unbatched(
        room, table_id, player("ann"), start, version)
