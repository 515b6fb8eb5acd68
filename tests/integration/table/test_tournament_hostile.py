"""Hostile callers at a tournament table (DESIGN 5c): a player, an operator or another
service calling the tournament's RPCs, players asking for seats or money at a tournament
table, odd ids, bad stacks and seats, undecodable bodies. Each gets its status and reason
and changes nothing: the table's stored version (room events included) stays, and the
wallet sees nothing."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest

from rules import TableConfig
from stud.v1 import table_pb2 as pb
from studkit.auth import Principal, Role
from studkit.commandwindow import new_id
from studkit.grpc_server import rpc_error_reason
from studkit.mapping import config_to_proto
from studtest.table import (
    AUDITOR,
    OPERATOR,
    TOURNAMENT,
    Room,
    fast_settings,
    play_until,
    player,
)

pytestmark = pytest.mark.integration

DENIED = grpc.StatusCode.PERMISSION_DENIED
BAD = grpc.StatusCode.INVALID_ARGUMENT
REFUSED = grpc.StatusCode.FAILED_PRECONDITION


async def refused(room: Room, method: str, request: Any, who: Principal | None
                  ) -> tuple[grpc.StatusCode, str | None]:
    metadata = room.client.md(who) if who is not None else ()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(room.client.stub, method)(request, metadata=metadata, timeout=10)
    return caught.value.code(), rpc_error_reason(caught.value)


def stored_version(room: Room, table_id: str) -> int:
    """The table's version in its stream, room events included (the view's version counts
    only the game's)."""
    actor = room.table_deps.app.actor_of(table_id)
    assert actor is not None
    return actor.version


@pytest.fixture
async def table(room: Room) -> str:
    """A tournament table, ann seated at 1 and bob at 2, in its first hand."""
    table_id = f"tt-{uuid.uuid4().hex[:8]}"
    await room.client.call("OpenTable", pb.OpenTableRequest(
        table_id=table_id, config=config_to_proto(TableConfig.for_stakes(200)),
        settings=fast_settings(), tournament_id="mtt-9"), TOURNAMENT)
    for seat, name in {1: "ann", 2: "bob"}.items():
        await room.client.call("SeatEntrant", pb.SeatEntrantRequest(
            table_id=table_id, seat=seat, player_id=name, stack=10_000), TOURNAMENT)
    await room.client.wait_for(table_id, lambda v: v.hand_in_progress and v.hand.to_act != 0)
    return table_id


def tournament_requests(table_id: str) -> list[tuple[str, Any]]:
    cid = uuid.uuid4().hex
    return [
        ("SeatEntrant", pb.SeatEntrantRequest(table_id=table_id, command_id=cid, seat=5,
                                              player_id="eve", stack=1_000_000)),
        ("UnseatEntrant", pb.UnseatEntrantRequest(table_id=table_id, command_id=cid, seat=1,
                                                  player_id="ann")),
        ("SetStakes", pb.SetStakesRequest(table_id=table_id, command_id=cid, small_bet=400,
                                          big_bet=800, ante=100, bring_in=100)),
        ("PauseDealing", pb.PauseDealingRequest(table_id=table_id, command_id=cid,
                                                paused=True, reason="mine")),
    ]


STRANGERS = [player("ann"), player("eve"), OPERATOR, AUDITOR, Principal(Role.SERVICE, "table"),
             Principal(Role.SERVICE, "dealer"), Principal(Role.SERVICE, "wallet")]


@pytest.mark.parametrize("who", STRANGERS, ids=lambda p: p.subject)
async def test_only_the_tournament_service_gives_tournament_commands(
        room: Room, table: str, who: Principal) -> None:
    before = stored_version(room, table)
    for method, request in tournament_requests(table):
        code, reason = await refused(room, method, request, who)
        assert code is DENIED, (method, code, reason)
    assert stored_version(room, table) == before
    view = await room.client.view(table)
    assert not view.dealing_paused and [s.player_id for s in view.seats] == ["ann", "bob"]


async def test_without_a_token_they_are_unauthenticated(room: Room, table: str) -> None:
    for method, request in tournament_requests(table):
        code, _reason = await refused(room, method, request, None)
        assert code is grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize("who", [OPERATOR, player("ann"), Principal(Role.SERVICE, "table")],
                         ids=lambda p: p.subject)
async def test_only_the_tournament_service_opens_a_tournament_table(
        room: Room, who: Principal) -> None:
    table_id = f"tt-{uuid.uuid4().hex[:8]}"
    code, _reason = await refused(room, "OpenTable", pb.OpenTableRequest(
        table_id=table_id, command_id="c1", config=config_to_proto(TableConfig()),
        tournament_id="mtt-9"), who)
    assert code is DENIED
    assert room.table_deps.app.actor_of(table_id) is None or stored_version(
        room, table_id) == 0


async def test_the_tournament_service_does_not_open_cash_tables(room: Room) -> None:
    code, _reason = await refused(room, "OpenTable", pb.OpenTableRequest(
        table_id=f"t-{uuid.uuid4().hex[:8]}", command_id="c1",
        config=config_to_proto(TableConfig())), TOURNAMENT)
    assert code is DENIED


async def test_a_raked_tournament_table_is_refused(room: Room) -> None:
    from rules.config import Rake
    code, reason = await refused(room, "OpenTable", pb.OpenTableRequest(
        table_id=f"tt-{uuid.uuid4().hex[:8]}", command_id="c1",
        config=config_to_proto(TableConfig.for_stakes(200, rake=Rake(500, 30))),
        tournament_id="mtt-9"), TOURNAMENT)
    assert (code, reason) == (BAD, "invalid_config")


async def test_players_cannot_buy_in_add_leave_or_sit_out(room: Room, table: str) -> None:
    await room.fund("eve")
    await room.fund("ann")
    balances = {n: await room.wallet.client.player_balance(n) for n in ("eve", "ann")}
    before = stored_version(room, table)
    cases: list[tuple[str, Any, Principal]] = [
        ("SitDown", pb.SitDownRequest(table_id=table, command_id=new_id("c1"), seat=5,
                                      buy_in=5_000), player("eve")),
        ("SitDown", pb.SitDownRequest(table_id=table, command_id="c2", seat=5, buy_in=5_000,
                                      expected_sequence=1), player("eve")),  # stale, too
        ("AddChips", pb.AddChipsRequest(table_id=table, command_id=new_id("c3"), seat=1,
                                        amount=5_000), player("ann")),
        ("LeaveSeat", pb.LeaveSeatRequest(table_id=table, command_id=new_id("c4"), seat=1),
         player("ann")),
        ("SitOut", pb.SitOutRequest(table_id=table, command_id=new_id("c5"), seat=1),
         player("ann")),
    ]
    for method, request, who in cases:
        assert await refused(room, method, request, who) == (REFUSED, "tournament_table"), (
            method)
    assert stored_version(room, table) == before
    assert {n: await room.wallet.client.player_balance(n) for n in ("eve", "ann")} == balances
    assert await room.wallet.client.escrows(table) == {}


async def test_bad_requests_are_invalid_arguments(room: Room, table: str) -> None:
    before = stored_version(room, table)
    seat = pb.SeatEntrantRequest
    cases: list[tuple[str, Any, str]] = [
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=5, player_id="e", stack=0),
         "stack"),
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=5, player_id="e",
                             stack=-100), "stack"),
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=5, player_id="e",
                             stack=2**62), "stack"),
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=0, player_id="e",
                             stack=10), "seat"),
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=9, player_id="e",
                             stack=10), "seat"),
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=5, player_id="",
                             stack=10), "player_id"),
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=5, player_id="e ve;",
                             stack=10), "player_id"),
        ("SeatEntrant", seat(table_id=table, command_id="c", seat=5, player_id="x" * 65,
                             stack=10), "player_id"),
        ("SeatEntrant", seat(table_id="bad id!", command_id="c", seat=5, player_id="e",
                             stack=10), "table_id"),
        ("SeatEntrant", seat(table_id=table, command_id="", seat=5, player_id="e", stack=10),
         "command_id"),
        ("UnseatEntrant", pb.UnseatEntrantRequest(table_id=table, command_id="c", seat=0,
                                                  player_id="ann"), "seat"),
        ("SetStakes", pb.SetStakesRequest(table_id=table, command_id="c", small_bet=400,
                                          big_bet=400, ante=100, bring_in=100), "stakes"),
        ("SetStakes", pb.SetStakesRequest(table_id=table, command_id="c", small_bet=400,
                                          big_bet=800, ante=-1, bring_in=100), "ante"),
        ("SetStakes", pb.SetStakesRequest(table_id=table, command_id="c", small_bet=2**61,
                                          big_bet=2**62, ante=1, bring_in=100), "stakes"),
        ("PauseDealing", pb.PauseDealingRequest(table_id=table, command_id="c", paused=True,
                                                reason="x" * 65), "reason"),
        ("PauseDealing", pb.PauseDealingRequest(table_id=table, command_id="c", paused=True,
                                                reason="tab\there"), "reason"),
    ]
    for method, request, field in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(room.client.stub, method)(request, metadata=room.client.md(
                TOURNAMENT), timeout=10)
        assert caught.value.code() is BAD, (method, field, caught.value.details())
        assert field in (caught.value.details() or ""), (field, caught.value.details())
    assert stored_version(room, table) == before


async def test_refusals_by_the_tables_state(room: Room, table: str) -> None:
    before = stored_version(room, table)
    cases: list[tuple[str, Any, str]] = [
        ("SeatEntrant", pb.SeatEntrantRequest(table_id=table, command_id="s1", seat=1,
                                              player_id="eve", stack=10), "seat_taken"),
        ("SeatEntrant", pb.SeatEntrantRequest(table_id=table, command_id="s2", seat=5,
                                              player_id="ann", stack=10), "already_seated"),
        ("UnseatEntrant", pb.UnseatEntrantRequest(table_id=table, command_id="u1", seat=1,
                                                  player_id="ann"), "hand_in_progress"),
        ("UnseatEntrant", pb.UnseatEntrantRequest(table_id=table, command_id="u2", seat=1,
                                                  player_id="bob"), "not_that_players_seat"),
        ("UnseatEntrant", pb.UnseatEntrantRequest(table_id=table, command_id="u3", seat=6,
                                                  player_id="bob"), "not_that_players_seat"),
    ]
    for method, request, reason in cases:
        assert await refused(room, method, request, TOURNAMENT) == (REFUSED, reason), method
    assert stored_version(room, table) == before
    code, reason = await refused(room, "SeatEntrant", pb.SeatEntrantRequest(
        table_id="no-such-table", command_id="c", seat=1, player_id="e", stack=10), TOURNAMENT)
    assert code is grpc.StatusCode.NOT_FOUND


async def test_a_cash_table_refuses_the_tournament_commands(room: Room) -> None:
    table_id = await room.client.open_table()
    for method, request in tournament_requests(table_id):
        assert await refused(room, method, request, TOURNAMENT) == (
            REFUSED, "not_tournament_table"), method
    assert stored_version(room, table_id) == 2  # TableOpened, SettingsSet


async def test_closing_a_tournament_table(room: Room, table: str) -> None:
    """The tournament closes its own table (not a cash table); the seats stay for it to
    unseat, nothing is cashed out."""
    cash = await room.client.open_table()
    assert await refused(room, "CloseTable", pb.CloseTableRequest(
        table_id=cash, command_id="c"), TOURNAMENT) == (DENIED, "not_tournament_table")
    assert await refused(room, "CloseTable", pb.CloseTableRequest(
        table_id=table, command_id="c"), player("ann")) == (DENIED, "permission_denied")
    await room.client.call("CloseTable", pb.CloseTableRequest(table_id=table), TOURNAMENT)
    await play_until(room.client, table, 1, lambda actions: actions[0])
    view = await room.client.view(table)
    assert view.status == pb.TABLE_STATUS_CLOSED
    assert [s.player_id for s in view.seats] == ["ann", "bob"]
    reply = await room.client.call("UnseatEntrant", pb.UnseatEntrantRequest(
        table_id=table, seat=1, player_id="ann"), TOURNAMENT)
    assert reply.stack == next(s.stack for s in view.seats if s.seat == 1)
    assert await room.wallet.client.escrows(table) == {}


async def test_a_command_id_reused_for_another_request(room: Room, table: str) -> None:
    request = pb.SeatEntrantRequest(table_id=table, command_id="same", seat=5,
                                    player_id="eve", stack=1_000)
    await room.client.call("SeatEntrant", request, TOURNAMENT)
    before = stored_version(room, table)
    other = pb.SeatEntrantRequest(table_id=table, command_id="same", seat=6,
                                  player_id="fay", stack=1_000)
    assert await refused(room, "SeatEntrant", other, TOURNAMENT) == (BAD, "command_id_reused")
    again = await room.client.call("SeatEntrant", request, TOURNAMENT)
    assert again.duplicate
    assert stored_version(room, table) == before


@pytest.mark.parametrize("method", ["SeatEntrant", "UnseatEntrant", "SetStakes",
                                    "PauseDealing"])
async def test_undecodable_bodies(room: Room, table: str, method: str) -> None:
    before = stored_version(room, table)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{room.table_port}")
    call = channel.unary_unary(f"/stud.v1.TableService/{method}",
                               request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(b"\xff\xff\xff", metadata=room.client.md(TOURNAMENT), timeout=5)
    await channel.close()
    assert caught.value.code() is BAD
    assert stored_version(room, table) == before


async def test_the_tournament_watches_and_reads_but_never_sees_down_cards(
        room: Room, table: str) -> None:
    view = await room.client.view(table, TOURNAMENT)
    assert view.viewer_seat == 0 and view.hand.players
    assert all(not d.HasField("card") for p in view.hand.players for d in p.down)
    stream = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table),
                                         metadata=room.client.md(TOURNAMENT), timeout=10)
    seen = []
    async for record in stream:
        seen.append(record)
        if record.sequence >= view.version:
            break
    stream.cancel()
    kinds = [r.event.WhichOneof("event") for r in seen]
    assert "hand_started" in kinds and "down_card_dealt" in kinds
    assert all(not r.event.down_card_dealt.HasField("card") for r in seen
               if r.event.WhichOneof("event") == "down_card_dealt")
