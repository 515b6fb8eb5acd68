"""Bad input and cheating at the table: each refusal has its status code and reason, and
changes nothing (the table's version and the wallet's escrows stay as they were)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit.auth import Principal, Role
from studkit.commandwindow import new_id
from studkit.grpc_server import rpc_error_reason
from studtest.table import AUDITOR, OPERATOR, Room, player

pytestmark = pytest.mark.integration


async def refused(room: Room, method: str, request: Any, who: Principal | None
                  ) -> tuple[grpc.StatusCode, str | None]:
    metadata = room.client.md(who) if who is not None else ()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(room.client.stub, method)(request, metadata=metadata, timeout=10)
    return caught.value.code(), rpc_error_reason(caught.value)


@pytest.fixture
async def table(room: Room) -> tuple[str, pb.TableView]:
    """A table in its first hand, waiting for the bring-in."""
    table_id = await room.client.open_table()
    for seat, name in {1: "ann", 2: "bob"}.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(table_id=table_id, seat=seat,
                                                            buy_in=10_000), player(name))
    view = await room.client.wait_for(table_id, lambda v: v.HasField("hand")
                                      and v.hand.to_act != 0)
    return table_id, view


def holder(view: pb.TableView, seat: int) -> str:
    return next(s.player_id for s in view.seats if s.seat == seat)


async def test_refusals_change_nothing(room: Room, table: tuple[str, pb.TableView]) -> None:
    table_id, view = table
    to_act = view.hand.to_act
    other = 1 if to_act == 2 else 2
    actor, bystander = player(holder(view, to_act)), player(holder(view, other))
    escrows = await room.wallet.client.escrows(table_id)
    cid = new_id()
    untimed = str(uuid.uuid4())

    def fold(seat: int, **kw: Any) -> pb.FoldRequest:
        return pb.FoldRequest(table_id=table_id, seat=seat, command_id=kw.pop("cid", cid),
                              **kw)

    cases: list[tuple[str, Any, Principal | None, grpc.StatusCode, str | None]] = [
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act, command_id=cid),
         None, grpc.StatusCode.UNAUTHENTICATED, "missing_token"),
        # Another player's seat.
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act, command_id=cid),
         bystander, grpc.StatusCode.PERMISSION_DENIED, "not_your_seat"),
        # Out of turn.
        ("Check", pb.CheckRequest(table_id=table_id, seat=other, command_id=cid), bystander,
         grpc.StatusCode.FAILED_PRECONDITION, "not_your_turn"),
        # An observer, an auditor and an operator cannot act.
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act, command_id=cid),
         player("zed"), grpc.StatusCode.PERMISSION_DENIED, "not_your_seat"),
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act, command_id=cid),
         AUDITOR, grpc.StatusCode.PERMISSION_DENIED, "not_a_player"),
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act, command_id=cid),
         OPERATOR, grpc.StatusCode.PERMISSION_DENIED, "not_a_player"),
        # A service token is not a player either.
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act, command_id=cid),
         Principal(Role.SERVICE, "dealer"), grpc.StatusCode.PERMISSION_DENIED, "not_a_player"),
        # Wrong amount.
        ("Complete", pb.CompleteRequest(table_id=table_id, seat=to_act, command_id=cid, to=1),
         actor, grpc.StatusCode.FAILED_PRECONDITION, "wrong_amount"),
        # A stale pre-selected action.
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act, command_id=cid,
                                              expected_sequence=view.version - 1),
         actor, grpc.StatusCode.FAILED_PRECONDITION, "stale"),
        # Malformed ids and values.
        ("Fold", fold(to_act, cid="bad id\n"), actor, grpc.StatusCode.INVALID_ARGUMENT, None),
        ("Fold", fold(to_act, cid=""), actor, grpc.StatusCode.INVALID_ARGUMENT, None),
        ("Fold", pb.FoldRequest(table_id="t\n", seat=to_act, command_id=cid), actor,
         grpc.StatusCode.INVALID_ARGUMENT, None),
        ("Fold", fold(9), actor, grpc.StatusCode.INVALID_ARGUMENT, None),
        ("Fold", fold(0), actor, grpc.StatusCode.INVALID_ARGUMENT, None),
        ("Fold", pb.FoldRequest(table_id="no-such-table", seat=1, command_id=cid), actor,
         grpc.StatusCode.NOT_FOUND, "unknown_table"),
        # Players do not open or close tables, nor buy in outside the range.
        ("OpenTable", pb.OpenTableRequest(table_id="x1", command_id=cid), actor,
         grpc.StatusCode.INVALID_ARGUMENT, None),
        ("CloseTable", pb.CloseTableRequest(table_id=table_id, command_id=cid), actor,
         grpc.StatusCode.PERMISSION_DENIED, None),
        ("SitDown", pb.SitDownRequest(table_id=table_id, seat=3, command_id=cid, buy_in=0),
         player("zed"), grpc.StatusCode.FAILED_PRECONDITION, "buy_in_out_of_range"),
        ("SitDown", pb.SitDownRequest(table_id=table_id, seat=1, command_id=cid,
                                      buy_in=10_000),
         player("zed"), grpc.StatusCode.FAILED_PRECONDITION, "seat_taken"),
        # A player's command must say how old it is: a timed id or expected_sequence
        # (docs/history.md, "Expired commands"); a UUIDv4, a hex string or a malformed
        # timed id with neither is refused before anything is read.
        ("Fold", fold(to_act, cid=untimed), actor, grpc.StatusCode.INVALID_ARGUMENT,
         "command_id_untimed"),
        ("PostBringIn", pb.PostBringInRequest(table_id=table_id, seat=to_act,
                                              command_id=untimed.upper()),
         actor, grpc.StatusCode.INVALID_ARGUMENT, "command_id_untimed"),
        ("SitOut", pb.SitOutRequest(table_id=table_id, seat=to_act, command_id="t12-x"),
         actor, grpc.StatusCode.INVALID_ARGUMENT, "command_id_untimed"),
        ("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=to_act, muck=True, command_id=uuid.uuid4().hex),
         actor, grpc.StatusCode.INVALID_ARGUMENT, "command_id_untimed"),
        ("AddChips", pb.AddChipsRequest(table_id=table_id, seat=to_act, amount=1_000,
                                        command_id=untimed),
         actor, grpc.StatusCode.INVALID_ARGUMENT, "command_id_untimed"),
        ("SitDown", pb.SitDownRequest(table_id=table_id, seat=3, command_id=untimed,
                                      buy_in=10_000),
         player("ann"), grpc.StatusCode.INVALID_ARGUMENT, "command_id_untimed"),
        ("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=to_act, command_id=untimed),
         actor, grpc.StatusCode.INVALID_ARGUMENT, "command_id_untimed"),
    ]
    for method, request, who, code, reason in cases:
        got = await refused(room, method, request, who)
        assert got[0] == code, (method, request, who, got)
        if reason is not None:
            assert got[1] == reason, (method, request, who, got)
    after = await room.client.view(table_id)
    assert after.version == view.version
    assert await room.wallet.client.escrows(table_id) == escrows


async def test_a_command_id_reused_for_another_command_is_refused(
        room: Room, table: tuple[str, pb.TableView]) -> None:
    """The same command id repeats the outcome; with another command it is refused."""
    table_id, view = table
    seat = view.hand.to_act
    who = player(holder(view, seat))
    request = pb.PostBringInRequest(table_id=table_id, seat=seat, command_id=new_id("c-1"))
    first = await room.client.call("PostBringIn", request, who)
    again = await room.client.call("PostBringIn", request, who)
    assert again.duplicate and again.version == first.version
    assert [e.sequence for e in again.events] == [e.sequence for e in first.events]
    code, reason = await refused(room, "Fold", pb.FoldRequest(
        table_id=table_id, seat=seat, command_id=request.command_id), who)
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "command_id_reused")
    assert (await room.client.view(table_id)).version == first.version


async def test_undecodable_body_is_invalid_argument(room: Room) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{room.table_port}")
    call = channel.unary_unary("/stud.v1.TableService/Fold",
                               request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(b"\xff\xff\xff", metadata=room.client.md(player("ann")), timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    await channel.close()


async def test_floods_of_watches_are_limited(room: Room, table: tuple[str, pb.TableView]
                                             ) -> None:
    """One caller may hold a bounded number of open watches (RESOURCE_EXHAUSTED past it);
    others still watch."""
    table_id, _view = table
    calls = []
    for _ in range(8):
        call = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                           metadata=room.client.md(player("zed")))
        await call.read()  # open and delivering
        calls.append(call)
    extra = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                        metadata=room.client.md(player("zed")))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await extra.read()
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert rpc_error_reason(caught.value) == "too_many_streams"
    other = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                        metadata=room.client.md(player("amy")))
    assert (await other.read()).sequence == 1
    for call in [*calls, other]:
        call.cancel()
    missing = room.client.stub.WatchTable(pb.WatchTableRequest(table_id="nope"),
                                          metadata=room.client.md(player("amy")))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await missing.read()
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND


async def test_no_one_sits_down_at_a_closed_table(room: Room) -> None:
    """After CloseTable a SitDown is refused before any money moves."""
    table_id = await room.client.open_table()
    await room.client.call("CloseTable", pb.CloseTableRequest(table_id=table_id), OPERATOR)
    await room.fund("zoe")
    code, reason = await refused(room, "SitDown", pb.SitDownRequest(
        table_id=table_id, seat=1, buy_in=10_000, command_id=new_id("s1")), player("zoe"))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "table_closed")
    statement = await room.wallet.client.stub.GetStatement(
        wpb.GetStatementRequest(account=wpb.AccountRef(player_id="zoe")),
        metadata=room.wallet.client.metadata(OPERATOR))
    assert [line.kind for line in statement.lines] == [wpb.TRANSACTION_KIND_DEPOSIT]


async def test_a_flooding_player_is_rate_limited_and_others_are_not(
        room: Room, table: tuple[str, pb.TableView]) -> None:
    """A player firing calls as fast as possible is refused past the per-player rate
    (RESOURCE_EXHAUSTED rate_limited, nothing done); another player and the table's own
    service calls go on."""
    table_id, view = table
    import asyncio

    async def one(who: Principal) -> grpc.StatusCode:
        try:
            await room.client.stub.GetTable(pb.GetTableRequest(table_id=table_id),
                                            metadata=room.client.md(who), timeout=10)
            return grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            assert exc.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED or \
                rpc_error_reason(exc) == "rate_limited"
            return exc.code()

    codes = await asyncio.gather(*(one(player("flood")) for _ in range(600)))
    assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) > 0
    assert codes.count(grpc.StatusCode.OK) > 0
    assert await one(player("amy")) is grpc.StatusCode.OK
    # The table kept dealing meanwhile: the hand goes on to the next action.
    after = await room.client.view(table_id)
    assert after.version == view.version and after.hand.to_act == view.hand.to_act


async def test_a_watch_ends_when_its_token_expires(room: Room,
                                                   table: tuple[str, pb.TableView]) -> None:
    """WatchTable delivers while the token is valid and ends UNAUTHENTICATED token_expired
    once it expires, mid-stream; a fresh token resumes it."""
    from studkit.auth import TokenBook
    table_id, view = table
    short = TokenBook(room.keys, ttl_seconds=2)
    call = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                       metadata=tuple(short.metadata(player("eve"))))
    first = await call.read()
    assert first.sequence == 1
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async with asyncio.timeout(30):
            while True:
                await call.read()
    assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert rpc_error_reason(caught.value) == "token_expired"
    resumed = room.client.stub.WatchTable(
        pb.WatchTableRequest(table_id=table_id, after_sequence=view.version - 1),
        metadata=room.client.md(player("eve")))
    assert (await resumed.read()).sequence == view.version
    resumed.cancel()
