"""A test client of ``TableService.Play`` over real gRPC: one stream, its records and
replies kept apart as they come (the tests of ``test_play*.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from stud.v1 import table_pb2 as pb
from studkit.auth import Principal
from studkit.commandwindow import new_id
from studtest.table import OPERATOR, Room

REQUESTS = {
    "post_bring_in": pb.PostBringInRequest, "complete": pb.CompleteRequest,
    "bet": pb.BetRequest, "raise": pb.RaiseRequest, "call": pb.CallRequest,
    "check": pb.CheckRequest, "fold": pb.FoldRequest,
}
KINDS = {1: "post_bring_in", 2: "complete", 3: "bet", 4: "raise", 5: "call", 6: "check",
         7: "fold"}
"""``LegalAction.kind`` -> the ``PlayRequest`` field."""


@dataclass
class PlayStream:
    """One player's Play stream: ``records`` as they came (a batch's ``more`` flattened),
    ``replies`` in order, ``messages`` every message, ``ended`` the error it ended with."""

    call: Any
    records: list[pb.TableEventRecord] = field(default_factory=list)
    replies: list[pb.PlayReply] = field(default_factory=list)
    messages: list[pb.PlayMessage] = field(default_factory=list)
    ended: grpc.aio.AioRpcError | None = None
    _news: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, room: Room, who: Principal | None, table_id: str, *,
                   batched: bool = False, after: int = 0,
                   metadata: Sequence[tuple[str, str]] | None = None) -> PlayStream:
        md = metadata if metadata is not None else (
            room.client.md(who) if who is not None else ())
        stream = cls(room.client.stub.Play(metadata=tuple(md)))
        stream._reader = asyncio.create_task(stream._read())
        with contextlib.suppress(grpc.aio.AioRpcError):  # refused at once: see `ended`
            await stream.send(pb.PlayRequest(watch=pb.WatchTableRequest(
                table_id=table_id, after_sequence=after, batched=batched)))
        return stream

    async def send(self, request: pb.PlayRequest) -> None:
        await self.call.write(request)

    async def _read(self) -> None:
        try:
            async for message in self.call:
                self.messages.append(message)
                if message.HasField("record"):
                    first = pb.TableEventRecord()
                    first.CopyFrom(message.record)
                    del first.more[:]
                    self.records.extend([first, *message.record.more])
                else:
                    self.replies.append(message.reply)
                self._news.set()
        except grpc.aio.AioRpcError as exc:
            self.ended = exc
        finally:
            self._news.set()

    async def wait(self, condition: Any, timeout: float = 20.0) -> None:
        """Until ``condition()`` holds (raises the stream's end if it ends first)."""
        async with asyncio.timeout(timeout):
            while not condition():
                if self.ended is not None:
                    raise self.ended
                if self._reader is not None and self._reader.done():
                    raise AssertionError("the stream ended with OK")
                self._news.clear()
                await self._news.wait()

    async def act(self, kind: str, **fields: Any) -> pb.PlayReply:
        """Send one action and wait for its reply (the next one)."""
        fields.setdefault("command_id", new_id())
        count = len(self.replies)
        await self.send(pb.PlayRequest(**{kind: REQUESTS[kind](**fields)}))
        await self.wait(lambda: len(self.replies) > count)
        return self.replies[count]

    async def ending(self, timeout: float = 20.0) -> grpc.aio.AioRpcError:
        """The error the stream ends with."""
        await self.wait(lambda: self.ended is not None, timeout)
        assert self.ended is not None
        return self.ended

    async def close(self) -> None:
        self.call.cancel()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


async def play_hands(room: Room, table_id: str, streams: dict[str, PlayStream], hands: int,
                     rng: random.Random, timeout: float = 90.0) -> list[pb.PlayReply]:
    """Act for whoever is to act, through their own Play stream, until ``hands`` hands have
    been completed; every reply, in order."""
    replies: list[pb.PlayReply] = []
    async with asyncio.timeout(timeout):
        while True:
            view = await room.client.view(table_id, OPERATOR)
            if view.hands_started > hands or (
                    view.hands_started == hands and view.HasField("hand")
                    and view.hand.phase == pb.HAND_PHASE_COMPLETE):
                return replies
            hand = view.hand
            if (not view.HasField("hand") or hand.phase != pb.HAND_PHASE_BETTING
                    or not hand.to_act or not hand.legal_actions.actions):
                await asyncio.sleep(0.01)
                continue
            holder = next(s.player_id for s in view.seats if s.seat == hand.to_act)
            action = rng.choice(list(hand.legal_actions.actions))
            kind = KINDS[action.kind]
            fields: dict[str, Any] = dict(table_id=table_id, seat=hand.to_act,
                                          expected_sequence=view.version)
            if kind in ("complete", "bet", "raise"):
                fields["to"] = action.to
            reply = await streams[holder].act(kind, **fields)
            replies.append(reply)
            if reply.code:  # the clock acted first, or stale: the table moved on
                assert reply.code == grpc.StatusCode.FAILED_PRECONDITION.value[0], reply
