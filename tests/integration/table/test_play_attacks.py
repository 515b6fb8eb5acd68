"""Hostile ``TableService.Play`` streams over real gRPC (issue 35): every refused action is a
reply with the code and reason its unary call gets, changes nothing and leaves the stream
open; a stream without a good token, with a bad first or later message, or undecodable
bytes ends with a clear status; floods of messages and of streams are bounded, refused,
counted, and the table goes on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from studkit.auth import Principal, TokenBook
from studkit.commandwindow import new_id
from studkit.grpc_server import rpc_error_info, rpc_error_reason
from studtest.redis import TestRedis
from studtest.table import OPERATOR, Room, player, running_room
from studtools.devkeys import DevKeys

from .play_support import REQUESTS, PlayStream

pytestmark = pytest.mark.integration
PLAY = "/stud.v1.TableService/Play"


@pytest.fixture
async def table(room: Room) -> tuple[str, pb.TableView]:
    """A table in its first hand, waiting for the bring-in (ann at 1, bob at 2)."""
    return await _table(room)


async def _table(room: Room, names: tuple[str, str] = ("ann", "bob")
                 ) -> tuple[str, pb.TableView]:
    table_id = await room.client.open_table()
    for seat, name in enumerate(names, start=1):
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(table_id=table_id, seat=seat,
                                                            buy_in=10_000), player(name))
    view = await room.client.wait_for(table_id, lambda v: v.HasField("hand")
                                      and v.hand.to_act != 0)
    return table_id, view


def holder(view: pb.TableView, seat: int) -> str:
    return next(s.player_id for s in view.seats if s.seat == seat)


async def unary_refusal(room: Room, kind: str, fields: dict[str, Any], who: Principal
                        ) -> tuple[int, str, dict[str, str]]:
    """The code, reason and ErrorInfo metadata the unary call of ``kind`` is refused with."""
    method = "".join(part.title() for part in kind.split("_"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(room.client.stub, method)(REQUESTS[kind](**fields),
                                                metadata=room.client.md(who), timeout=10)
    info = rpc_error_info(caught.value)
    assert info is not None
    return (caught.value.code().value[0], rpc_error_reason(caught.value) or "",
            dict(info.metadata))


async def test_a_refused_action_is_the_unary_refusal_and_changes_nothing(
        room: Room, table: tuple[str, pb.TableView]) -> None:
    table_id, view = table
    to_act = view.hand.to_act
    other = 1 if to_act == 2 else 2
    actor, bystander = holder(view, to_act), holder(view, other)
    streams = {name: await PlayStream.open(room, player(name), table_id)
               for name in (actor, bystander)}
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        # (who, kind, fields, the reason expected)
        (bystander, "fold", dict(seat=other, expected_sequence=view.version),
         "not_your_turn"),
        (bystander, "fold", dict(seat=to_act, expected_sequence=view.version),
         "not_your_seat"),
        (actor, "bet", dict(seat=to_act, to=999_999, expected_sequence=view.version), ""),
        (actor, "post_bring_in", dict(seat=to_act, expected_sequence=view.version - 1),
         "stale"),
        (actor, "check", dict(seat=to_act, expected_sequence=view.version), ""),
        (actor, "fold", dict(seat=9, expected_sequence=view.version), ""),
        (actor, "fold", dict(seat=to_act, expected_sequence=view.version,
                             command_id="a b"), "malformed_id"),
        (actor, "fold", dict(seat=to_act, expected_sequence=view.version,
                             command_id="x" * 65), "malformed_id"),
        (actor, "fold", dict(seat=to_act, expected_sequence=view.version,
                             command_id=""), "malformed_id"),
        (actor, "fold", dict(seat=to_act, command_id="no-time-in-it"), "command_id_untimed"),
        (actor, "fold", dict(seat=to_act, expected_sequence=view.version,
                             command_id=new_id() + "\n"), "malformed_id"),
        (actor, "fold", dict(seat=to_act, command_id=new_id() + "\n"), "malformed_id"),
        (actor, "fold", dict(seat=to_act, expected_sequence=view.version,
                             command_id="x" * 10_000), "malformed_id"),
    ]
    try:
        for who, kind, fields, reason in cases:
            fields = {"table_id": table_id, "command_id": new_id(), **fields}
            code, unary_reason, metadata = await unary_refusal(room, kind, fields,
                                                               player(who))
            reply = await streams[who].act(kind, **fields)
            assert not reply.HasField("reply"), (kind, fields)
            assert (reply.code, reply.reason, dict(reply.metadata)) == (
                code, unary_reason, metadata), (kind, fields)
            assert reply.command_id == fields["command_id"]
            assert reply.message
            if reason:
                assert reply.reason == reason, (kind, fields)
            assert (await room.client.view(table_id)).version == view.version
        assert grpc.StatusCode.PERMISSION_DENIED.value[0] in {
            r.code for r in streams[bystander].replies}
        # The stream went on: the bring-in is applied on it.
        done = await streams[actor].act("post_bring_in", table_id=table_id, seat=to_act,
                                        expected_sequence=view.version)
        assert done.HasField("reply") and not done.code
        assert done.reply.version > view.version
    finally:
        for stream in streams.values():
            await stream.close()


async def test_an_action_at_another_table_is_refused(room: Room,
                                                      table: tuple[str, pb.TableView]) -> None:
    """The stream acts at its own table only: another table's id, or none, is refused as a
    reply (INVALID_ARGUMENT other_table) and that table is untouched."""
    table_id, view = table
    other_id, other_view = await _table(room, ("cat", "dan"))
    to_act = other_view.hand.to_act
    name = holder(other_view, to_act)
    stream = await PlayStream.open(room, player(name), table_id)
    try:
        for target in (other_id, ""):
            reply = await stream.act("post_bring_in", table_id=target, seat=to_act,
                                     expected_sequence=other_view.version)
            assert reply.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
            assert reply.reason == "other_table"
            assert reply.metadata["field"] == "table_id"
        assert (await room.client.view(other_id)).version == other_view.version
        assert (await room.client.view(table_id)).version == view.version
    finally:
        await stream.close()


async def test_a_malformed_table_id_is_the_unary_refusal(
        room: Room, table: tuple[str, pb.TableView]) -> None:
    """An action naming a table id no table can have (the stream's own with a trailing
    newline, 10,000 characters) is refused as its unary call is (INVALID_ARGUMENT
    ``malformed_id``, field ``table_id``), not as another table's, and changes nothing; the
    stream goes on."""
    table_id, view = table
    to_act = view.hand.to_act
    name = holder(view, to_act)
    stream = await PlayStream.open(room, player(name), table_id)
    try:
        for target in (table_id + "\n", "t" * 10_000, table_id[:-1] + "\n"):
            fields = dict(table_id=target, seat=to_act, command_id=new_id(),
                          expected_sequence=view.version)
            code, reason, metadata = await unary_refusal(room, "post_bring_in", fields,
                                                         player(name))
            reply = await stream.act("post_bring_in", **fields)
            assert (reply.code, reply.reason, dict(reply.metadata)) == (
                code, reason, metadata), target[:80]
            assert (reply.code, reply.reason, reply.metadata["field"]) == (
                grpc.StatusCode.INVALID_ARGUMENT.value[0], "malformed_id", "table_id")
            assert (await room.client.view(table_id)).version == view.version
        done = await stream.act("post_bring_in", table_id=table_id, seat=to_act,
                                command_id=new_id(), expected_sequence=view.version)
        assert done.HasField("reply") and not done.code
    finally:
        await stream.close()


@pytest.mark.parametrize("how", ["none", "forged", "garbage"])
async def test_a_stream_without_a_good_token_is_refused(
        room: Room, table: tuple[str, pb.TableView], how: str) -> None:
    table_id, view = table
    metadata = {
        "none": (),
        "forged": tuple(TokenBook(DevKeys.generate()).metadata(player("ann"))),
        "garbage": (("authorization", "Bearer x.y.z"),),
    }[how]
    # Refused as the call begins, before its first message is read (a client's write
    # racing that end may fail locally: the status is read, not written).
    call = room.client.stub.Play(metadata=metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
        await call.write(pb.PlayRequest(post_bring_in=pb.PostBringInRequest(
            table_id=table_id, seat=view.hand.to_act, command_id=new_id(),
            expected_sequence=view.version)))
    assert (await room.client.view(table_id)).version == view.version


async def test_a_stream_ends_when_its_token_expires(room: Room,
                                                    table: tuple[str, pb.TableView]) -> None:
    """Records flow while the token is valid; it ends UNAUTHENTICATED token_expired once the
    token expires, and an action sent after that is not applied."""
    table_id, view = table
    to_act = view.hand.to_act
    name = holder(view, to_act)
    short = TokenBook(room.keys, ttl_seconds=2)
    stream = await PlayStream.open(room, None, table_id,
                                   metadata=tuple(short.metadata(player(name))))
    try:
        await stream.wait(lambda: any(r.sequence == view.version for r in stream.records))
        ended = await stream.ending(timeout=30)
        assert ended.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(ended) == "token_expired"
        with pytest.raises((grpc.aio.AioRpcError, asyncio.InvalidStateError)):
            await stream.send(pb.PlayRequest(post_bring_in=pb.PostBringInRequest(
                table_id=table_id, seat=to_act, command_id=new_id(),
                expected_sequence=view.version)))
        await asyncio.sleep(0.2)
        assert (await room.client.view(table_id)).version == view.version
    finally:
        await stream.close()


async def _ends_with(room: Room, messages: list[pb.PlayRequest], who: Principal
                     ) -> tuple[grpc.aio.AioRpcError, PlayStream]:
    call = room.client.stub.Play(metadata=room.client.md(who))
    stream = PlayStream(call)
    for message in messages:
        await stream.send(message)
    stream._reader = asyncio.create_task(stream._read())
    return await stream.ending(), stream


async def test_bad_messages_end_the_stream(room: Room, table: tuple[str, pb.TableView]
                                           ) -> None:
    table_id, view = table
    to_act = view.hand.to_act
    ann = player(holder(view, to_act))
    watch = pb.PlayRequest(watch=pb.WatchTableRequest(table_id=table_id))
    bring_in = pb.PlayRequest(post_bring_in=pb.PostBringInRequest(
        table_id=table_id, seat=to_act, command_id=new_id(), expected_sequence=view.version))
    for messages, reason in [
        ([bring_in], "watch_first"),
        ([pb.PlayRequest()], "watch_first"),
        ([watch, watch], "watch_again"),
        ([watch, pb.PlayRequest()], "empty_message"),
        ([pb.PlayRequest(watch=pb.WatchTableRequest(table_id="a b"))], "malformed_id"),
    ]:
        ended, stream = await _ends_with(room, messages, ann)
        assert ended.code() is grpc.StatusCode.INVALID_ARGUMENT, messages
        assert rpc_error_reason(ended) == reason, messages
        assert not stream.replies
    # The watch's own ends: past the table's end, an unknown table.
    ended, _ = await _ends_with(room, [pb.PlayRequest(watch=pb.WatchTableRequest(
        table_id=table_id, after_sequence=view.version + 5))], ann)
    assert ended.code() is grpc.StatusCode.OUT_OF_RANGE
    assert rpc_error_reason(ended) == "after_the_end"
    ended, _ = await _ends_with(room, [pb.PlayRequest(watch=pb.WatchTableRequest(
        table_id="t-none"))], ann)
    assert ended.code() is grpc.StatusCode.NOT_FOUND
    # A client that half-closes before its watch.
    call = room.client.stub.Play(metadata=room.client.md(ann))
    await call.done_writing()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (await room.client.view(table_id)).version == view.version


async def test_undecodable_bytes_end_the_stream(room: Room,
                                                table: tuple[str, pb.TableView]) -> None:
    table_id, view = table
    watch = pb.PlayRequest(watch=pb.WatchTableRequest(table_id=table_id)).SerializeToString()
    md = room.client.md(player(holder(view, view.hand.to_act)))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{room.table_port}") as channel:
        for messages in ([b"\xff\xff\xff"], [watch, b"\x0a\xff\x01"], [watch, b"\x08"]):
            call = channel.stream_stream(PLAY, request_serializer=None,
                                         response_deserializer=None)(metadata=md)
            for message in messages:
                await call.write(message)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                async with asyncio.timeout(10):
                    while True:
                        raw = await call.read()
                        assert raw is not grpc.aio.EOF
                        assert pb.PlayMessage.FromString(raw).HasField("record")
            assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert rpc_error_reason(caught.value) == "undecodable_request"
    assert (await room.client.view(table_id)).version == view.version


async def test_a_half_closed_stream_keeps_receiving_records(
        room: Room, table: tuple[str, pb.TableView]) -> None:
    table_id, view = table
    to_act = view.hand.to_act
    name = holder(view, to_act)
    other = holder(view, 1 if to_act == 2 else 2)
    stream = await PlayStream.open(room, player(other), table_id)
    try:
        await stream.wait(lambda: any(r.sequence == view.version for r in stream.records))
        await stream.call.done_writing()
        await room.client.call("PostBringIn", pb.PostBringInRequest(
            table_id=table_id, seat=to_act, expected_sequence=view.version), player(name))
        after = await room.client.view(table_id)
        await stream.wait(lambda: any(r.sequence >= after.version for r in stream.records))
        assert stream.ended is None
    finally:
        await stream.close()


async def test_each_action_is_counted_as_a_call(room: Room,
                                                table: tuple[str, pb.TableView]) -> None:
    table_id, view = table
    to_act = view.hand.to_act
    metrics = room.table_deps.metrics
    labels = dict(service="stud.v1.TableService", method="Play/PostBringIn")

    def count(code: str) -> float:
        return metrics.sample("stud_grpc_requests_total", **labels, code=code)

    stream = await PlayStream.open(room, player(holder(view, to_act)), table_id)
    try:
        refused = await stream.act("post_bring_in", table_id=table_id, seat=to_act,
                                   expected_sequence=view.version - 1)
        assert refused.reason == "stale"
        done = await stream.act("post_bring_in", table_id=table_id, seat=to_act,
                                expected_sequence=view.version)
        assert done.HasField("reply")
        assert count("FAILED_PRECONDITION") == 1
        assert count("OK") == 1
    finally:
        await stream.close()


async def test_too_many_streams(room: Room, table: tuple[str, pb.TableView]) -> None:
    """A Play stream counts as a watch: past the player's limit (8) one more, Play or
    WatchTable, is refused RESOURCE_EXHAUSTED too_many_streams; closing one frees a place."""
    table_id, _view = table
    ann = player("ann")
    streams = [await PlayStream.open(room, ann, table_id) for _ in range(8)]
    try:
        for stream in streams:
            await stream.wait(lambda s=stream: bool(s.records))
        extra = await PlayStream.open(room, ann, table_id)
        ended = await extra.ending()
        assert ended.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert rpc_error_reason(ended) == "too_many_streams"
        watch = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                            metadata=room.client.md(ann))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await watch.read()
        assert rpc_error_reason(caught.value) == "too_many_streams"
        await streams.pop().close()
        # The place is freed once the server has handled the cancellation: until then a new
        # stream may still be refused too_many_streams (a busy machine), never for ever.
        async with asyncio.timeout(10):
            while True:
                again = await PlayStream.open(room, ann, table_id)
                streams.append(again)
                try:
                    await again.wait(lambda s=again: bool(s.records))
                    break
                except grpc.aio.AioRpcError as exc:
                    assert rpc_error_reason(exc) == "too_many_streams"
                    streams.remove(again)
                    await asyncio.sleep(0.05)
    finally:
        for stream in streams:
            await stream.close()


@pytest.fixture
async def slow_room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
                    ) -> AsyncIterator[Room]:
    """A room whose players may make 5 calls a second (a burst of 10)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STUD_RATE_PER_PLAYER", "5")
        patch.setenv("STUD_RATE_LIMITED_HOLD_MS", "100")
        async with running_room(redis_server, redis_url, dev_keys) as running:
            yield running


async def test_a_flood_of_messages_is_limited_as_calls_are(slow_room: Room) -> None:
    """A stream firing actions past the player's call rate gets RESOURCE_EXHAUSTED
    rate_limited replies (each counted), in order, one for each message; the table and the
    other player are unharmed."""
    room = slow_room
    table_id, view = await _table(room)
    to_act = view.hand.to_act
    flooder, other = holder(view, to_act), holder(view, 1 if to_act == 2 else 2)
    stream = await PlayStream.open(room, player(other), table_id)
    flood = 60
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        for _ in range(flood):
            await stream.send(pb.PlayRequest(check=pb.CheckRequest(
                table_id=table_id, seat=1 if to_act == 2 else 2, command_id=new_id(),
                expected_sequence=view.version)))
        await stream.wait(lambda: len(stream.replies) >= flood, timeout=60)
        elapsed = loop.time() - started
        reasons = [r.reason for r in stream.replies]
        # Past its burst (10 calls), the stream's actions are handled at the player's rate
        # (5 a second), the others refused, each after its hold.
        assert reasons.count("not_your_turn") <= 10 + 5 * elapsed + 1
        assert reasons.count("rate_limited") >= 1
        assert set(reasons) <= {"rate_limited", "not_your_turn"}
        assert all(r.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
                   for r in stream.replies if r.reason == "rate_limited")
        assert room.table_deps.metrics.sample(
            "stud_grpc_requests_total", service="stud.v1.TableService", method="Play/Check",
            code="RESOURCE_EXHAUSTED") == reasons.count("rate_limited")
        assert stream.ended is None
        assert (await room.client.view(table_id)).version == view.version
        # The other player acts as usual.
        await room.client.call("PostBringIn", pb.PostBringInRequest(
            table_id=table_id, seat=to_act, expected_sequence=view.version),
            player(flooder))
        assert (await room.client.view(table_id, OPERATOR)).version > view.version
    finally:
        await stream.close()


async def test_a_flood_behind_a_stalled_watch_waits_in_flow_control(
        room: Room, table: tuple[str, pb.TableView], monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream's watch stalls (as a client that reads nothing stalls it: its write waits
    for the client), its player's bring-in is applied, whose reply waits for its place among
    the records, and the player floods refused actions behind it: the stream reads none of
    them while the reply waits (they wait in gRPC's flow control, never queued behind the
    reply on the server). Once the watch moves again, the reply comes, then each refusal in
    its turn, and nothing else changed."""
    from table.app import TableApp
    from table.play import PlayStreams

    table_id, view = table
    seat = view.hand.to_act
    name = next(s.player_id for s in view.seats if s.seat == seat)
    stalled, moving = asyncio.Event(), asyncio.Event()
    original = TableApp.watch_batches

    async def stalling(self: TableApp, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        async for batch in original(self, *args, **kwargs):  # type: ignore[arg-type]
            if stalled.is_set():
                await moving.wait()
            yield batch

    handled: list[str] = []
    handle = PlayStreams._handled

    async def counted(self: PlayStreams, kind: str, *args: Any) -> Any:
        handled.append(kind)
        return await handle(self, kind, *args)

    monkeypatch.setattr(TableApp, "watch_batches", stalling)
    monkeypatch.setattr(PlayStreams, "_handled", counted)
    stream = await PlayStream.open(room, player(name), table_id)
    try:
        await stream.wait(lambda: any(r.sequence >= view.version for r in stream.records))
        stalled.set()
        await stream.send(pb.PlayRequest(post_bring_in=pb.PostBringInRequest(
            table_id=table_id, seat=seat, command_id=new_id(),
            expected_sequence=view.version)))
        flood = [new_id() for _ in range(20)]
        for cid in flood:  # not this seat's turn once the bring-in is in: each refused
            await stream.send(pb.PlayRequest(check=pb.CheckRequest(
                table_id=table_id, seat=seat, command_id=cid)))
        async with asyncio.timeout(20):
            while not handled:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        assert handled == ["post_bring_in"], "read past a reply waiting for its place"
        assert stream.replies == []
        after = await room.client.view(table_id)
        moving.set()
        await stream.wait(lambda: len(stream.replies) == 1 + len(flood))
        assert stream.replies[0].HasField("reply"), stream.replies[0]
        assert [r.command_id for r in stream.replies[1:]] == flood
        assert all(not r.HasField("reply") and r.code == grpc.StatusCode
                   .FAILED_PRECONDITION.value[0] for r in stream.replies[1:]), stream.replies
        assert (await room.client.view(table_id)).version == after.version
    finally:
        moving.set()
        await stream.close()
