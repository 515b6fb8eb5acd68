"""The room bot over a Play stream (``campaigns.loadbots.RoomBot.play_on``) on fake streams:
the harness's own bookkeeping, not the table's. An action whose reply does not come within
the bot's reply timeout counts an error by name (``Play no reply``) and the bot opens the
stream again from the last sequence it folded, sending the action again with its command id;
the reply on the new stream is folded and the bot goes on."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import grpc

from campaigns.loadbots import RoomBot, Window
from rules import TableConfig
from rules.testing import TableDriver
from rules.views import public_event
from stud.v1 import table_pb2 as pb
from studkit.mapping import event_to_proto


@dataclass
class FakeCall:
    """One Play stream: what the bot wrote, and the messages the test lets it read."""

    inbox: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    written: list[pb.PlayRequest] = field(default_factory=list)
    cancelled: bool = False

    async def write(self, message: pb.PlayRequest) -> None:
        self.written.append(message)

    async def read(self) -> Any:
        return await self.inbox.get()

    def cancel(self) -> bool:
        self.cancelled = True
        return True


@dataclass
class FakeStub:
    calls: list[FakeCall] = field(default_factory=list)

    def Play(self, metadata: Any = None) -> FakeCall:
        call = FakeCall()
        self.calls.append(call)
        return call


async def until(check: Any) -> None:
    async with asyncio.timeout(5):
        while not check():
            await asyncio.sleep(0.01)


def betting() -> tuple[list[pb.TableEventRecord], int]:
    """A table's records up to a bring-in (as one batched record message), and the seat to
    act."""
    driver = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000})
    driver.start()
    driver.deal_from("2c 3c 4c 5c 6c 7c")
    records = [pb.TableEventRecord(sequence=n, event=event_to_proto(public_event(e)))
               for n, e in enumerate(driver.events, start=1)]
    return records, driver.legal().seat


async def test_a_lost_reply_counts_an_error_and_the_action_goes_again_on_a_new_stream(
        ) -> None:
    records, seat = betting()
    stub, window, stop = FakeStub(), Window(), asyncio.Event()
    bot = RoomBot("", "t1", seat, (("authorization", "Bearer x"),), random.Random(1), window,
                  stop, reply_timeout_s=0.2)
    task = asyncio.create_task(bot.play_on(stub, asyncio.Event()))
    try:
        await until(lambda: stub.calls)
        first = stub.calls[0]
        batch = pb.TableEventRecord()
        batch.CopyFrom(records[0])
        batch.more.extend(records[1:])
        first.inbox.put_nowait(pb.PlayMessage(record=batch))
        await until(lambda: len(first.written) == 2)  # the watch, then the action
        action = first.written[1]
        # Its reply never comes: the bot gives up on the stream after its reply timeout.
        await until(lambda: len(stub.calls) == 2)
        assert window.errors == {"Play no reply": 1}
        assert first.cancelled
        second = stub.calls[1]
        await until(lambda: len(second.written) == 2)
        watch, again = second.written
        assert watch.watch.after_sequence == records[-1].sequence
        assert again == action  # the same action, the same command id
        kind = action.WhichOneof("kind")
        command_id = getattr(action, kind).command_id
        second.inbox.put_nowait(pb.PlayMessage(reply=pb.PlayReply(
            command_id=command_id, reply=pb.CommandReply(version=len(records) + 1))))
        await asyncio.sleep(0.4)  # past another reply timeout: answered, nothing counted
        assert len(stub.calls) == 2 and window.errors == {"Play no reply": 1}
        stop.set()
        second.inbox.put_nowait(grpc.aio.EOF)
        async with asyncio.timeout(5):
            await task
    finally:
        task.cancel()
