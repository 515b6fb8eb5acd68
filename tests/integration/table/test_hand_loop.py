"""Whole hands through gRPC: seats, the hand loop driven by the table, settlement through the
wallet, the clock, leaving, topping up, watching and a restart of the table service."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from rules import TableConfig
from stud.v1 import table_pb2 as pb
from studkit.mapping import is_room_event
from studtest.redis import TestRedis
from studtest.table import (
    OPERATOR,
    Room,
    act_once,
    fast_settings,
    play_until,
    player,
    running_room,
)
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000


async def seat_players(room: Room, table_id: str, names: dict[int, str],
                       buy_in: int = 10_000) -> None:
    for seat, name in names.items():
        await room.fund(name, DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=buy_in), player(name))


async def play_while(room: Room, table_id: str, condition, seed: int = 0,
                     client=None) -> pb.TableView:
    """Bots act while ``condition(view)`` holds."""
    client = client or room.client
    rng = random.Random(seed)
    async with asyncio.timeout(30):
        while True:
            view = await client.view(table_id)
            if not condition(view):
                return view
            if not await act_once(client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)


async def assert_money_agrees(room: Room, table_id: str, names: list[str]) -> None:
    """Once play stops (every seat sits out, the hand in progress is finished and settled),
    every escrow equals its stack, and no chip was created or lost."""
    view = await room.client.view(table_id)
    for seat in view.seats:
        if not seat.sitting_out:
            await room.client.call("SitOut", pb.SitOutRequest(table_id=table_id,
                                                              seat=seat.seat),
                                   player(seat.player_id))
    view = await play_while(room, table_id, lambda v: v.HasField("hand") and (
        v.hand.phase != pb.HAND_PHASE_COMPLETE))

    def stacks(v: pb.TableView) -> dict[int, int]:
        return {s.seat: s.stack for s in v.seats if s.stack}

    async with asyncio.timeout(10):
        while True:
            escrows = {k: v for k, v in (await room.wallet.client.escrows(table_id)).items()
                       if v}
            view = await room.client.view(table_id)
            if escrows == stacks(view):
                break
            await asyncio.sleep(0.02)
    assert view.status != pb.TABLE_STATUS_STOPPED, view.status_reason
    balances = [await room.wallet.client.player_balance(n) for n in names]
    assert sum(balances) + sum(escrows.values()) == DEPOSIT * len(names)


async def test_hands_are_played_settled_and_reconciled(room: Room) -> None:
    """Three players sit; the table deals, bots take random legal actions through the public
    API, every hand is settled once at the wallet and every escrow equals its stack."""
    table_id = await room.client.open_table()
    names = {1: "ann", 3: "bob", 5: "cat"}
    await seat_players(room, table_id, names)
    await play_until(room.client, table_id, 8, random.Random(7).choice)
    await room.client.call("CloseTable", pb.CloseTableRequest(table_id=table_id), OPERATOR)
    view = await play_while(room, table_id, lambda v: bool(v.seats))
    assert view.status == pb.TABLE_STATUS_CLOSED
    assert view.hands_started >= 8
    await assert_money_agrees(room, table_id, list(names.values()))
    assert await room.wallet.client.paid_out(table_id) == {}
    lobby = await room.client.stub.ListTables(pb.ListTablesRequest(),
                                              metadata=room.client.md(player("ann")))
    assert [t.table_id for t in lobby.tables] == [table_id]


async def test_clock_times_out_and_sits_out_idle_players(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """Nobody acts: each turn runs out (action time, then the time bank) and RULES 6.12
    applies through TimeOut; after two hands of time-outs a seat is sat out."""
    async with running_room(redis_server, redis_url, dev_keys) as room:
        table_id = await room.client.open_table(settings=fast_settings(
            action_time_s=1, time_bank_s=1, timeouts_before_sit_out=2))
        await seat_players(room, table_id, {1: "ann", 2: "bob"})
        view = await room.client.wait_for(
            table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
        assert view.hand.turn_deadline.seconds > 0
        view = await room.client.wait_for(
            table_id, lambda v: any(s.sitting_out for s in v.seats), timeout=30)
        history = await room.client.stub.GetHandHistory(
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=1),
            metadata=room.client.md(OPERATOR))
        kinds = [r.event.WhichOneof("event") for r in history.events]
        assert "action_timed_out" in kinds
        assert history.complete


async def test_leave_during_a_hand_folds_at_the_turn_and_cashes_out(room: Room) -> None:
    """A player who leaves mid-hand is folded (or checked) when the turn comes and cashed
    out when the hand ends: the money is back in the account."""
    table_id = await room.client.open_table()
    await seat_players(room, table_id, {1: "ann", 2: "bob", 3: "cat"})
    await room.client.wait_for(table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
    await room.client.call("LeaveSeat", pb.LeaveSeatRequest(table_id=table_id, seat=2),
                           player("bob"))
    view = await room.client.view(table_id, player("bob"))
    assert [s.leaving for s in view.seats if s.seat == 2] == [True]
    rng = random.Random(3)
    async with asyncio.timeout(30):
        while True:
            view = await room.client.view(table_id)
            if not any(s.seat == 2 for s in view.seats):
                break
            if view.hand.to_act != 2 and not await act_once(
                    room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    history = await room.client.stub.GetHandHistory(
        pb.GetHandHistoryRequest(table_id=table_id, hand_number=1),
        metadata=room.client.md(OPERATOR))
    paid = won = 0
    for record in history.events:
        kind = record.event.WhichOneof("event")
        event = getattr(record.event, kind)
        if getattr(event, "seat", None) != 2:
            continue
        if kind in ("ante_posted", "bring_in_posted", "completed", "bet_made", "raised",
                    "called"):
            paid += event.amount
        elif kind in ("pot_awarded", "uncalled_bet_returned"):
            won += event.amount
    kinds = [r.event.WhichOneof("event") for r in history.events
             if getattr(getattr(r.event, r.event.WhichOneof("event")), "seat", None) == 2]
    # His turn came and he was checked or folded, as a leaving seat is (a forced bring-in
    # is posted for him, as RULES 6.12 posts it).
    assert {"folded", "checked", "bring_in_posted"} & set(kinds), kinds
    # Bob is stood up: his whole stack went back to his account. A seat leaves the view when
    # it is stood up; its cash-out follows.
    async with asyncio.timeout(10):
        while (await room.wallet.client.escrows(table_id)).get(2):
            await asyncio.sleep(0.02)
    assert await room.wallet.client.player_balance("bob") == DEPOSIT - paid + won
    await assert_money_agrees(room, table_id, ["ann", "bob", "cat"])


async def test_top_up_and_sit_out(room: Room) -> None:
    """A top-up between hands is added at once; one asked for during a hand when it ends;
    above the table's maximum it is refused."""
    table_id = await room.client.open_table(settings=fast_settings(buy_in_max=20_000))
    await seat_players(room, table_id, {1: "ann"})
    await room.client.call("AddChips", pb.AddChipsRequest(table_id=table_id, seat=1,
                                                          amount=5_000), player("ann"))
    view = await room.client.view(table_id)
    assert [s.stack for s in view.seats] == [15_000]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await room.client.call("AddChips", pb.AddChipsRequest(
            table_id=table_id, seat=1, amount=5_001), player("ann"))
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    await seat_players(room, table_id, {2: "bob"})
    await room.client.wait_for(table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
    await room.client.call("AddChips", pb.AddChipsRequest(table_id=table_id, seat=2,
                                                          amount=1_000), player("bob"))
    await room.client.call("SitOut", pb.SitOutRequest(table_id=table_id, seat=1),
                           player("ann"))
    rng = random.Random(5)
    async with asyncio.timeout(30):
        while True:
            view = await room.client.view(table_id)
            if view.HasField("hand") and view.hand.phase == pb.HAND_PHASE_COMPLETE:
                break
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    view = await room.client.wait_for(
        table_id, lambda v: sum(s.stack for s in v.seats) == 26_000)
    await assert_money_agrees(room, table_id, ["ann", "bob"])


async def test_watchers_see_the_public_record_and_resume(room: Room) -> None:
    """An observer's watch delivers every event from the start, then live ones, with no down
    card's value; resuming after a sequence repeats nothing."""
    table_id = await room.client.open_table()
    await seat_players(room, table_id, {1: "ann", 2: "bob"})
    await play_until(room.client, table_id, 2, random.Random(1).choice)
    view = await room.client.view(table_id)
    records = []
    call = room.client.stub.WatchTable(pb.WatchTableRequest(table_id=table_id),
                                       metadata=room.client.md(player("zed")))
    async with asyncio.timeout(10):
        async for record in call:
            records.append(record)
            if record.sequence >= view.version:
                break
    call.cancel()
    # Every game event of the stream, in order; the room's own events are not sent.
    stored = await room.table_deps.events.read(table_id)
    game = [s.envelope.sequence for s in stored if not is_room_event(s.envelope)]
    assert [r.sequence for r in records] == [n for n in game if n <= view.version]
    assert len(game) < len(stored)  # the room's events are in the stream, not in the watch
    for r in records:
        if r.event.WhichOneof("event") == "down_card_dealt":
            assert not r.event.down_card_dealt.HasField("card")
    after = [n for n in game if n <= view.version][-4]
    resumed = room.client.stub.WatchTable(
        pb.WatchTableRequest(table_id=table_id, after_sequence=after),
        metadata=room.client.md(player("zed")))
    got = []
    async with asyncio.timeout(10):
        async for record in resumed:
            got.append(record.sequence)
            if record.sequence >= view.version:
                break
    resumed.cancel()
    assert got == [n for n in game if after < n <= view.version]


async def test_a_restarted_table_service_carries_on_mid_hand(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """Stop the table service mid-hand and start a new one over the same Redis: it rebuilds
    the table from its log and the hand goes on to its settlement."""
    from studtest.table import running_table, table_settings
    async with running_room(redis_server, redis_url, dev_keys) as room:
        table_id = await room.client.open_table()
        await seat_players(room, table_id, {1: "ann", 2: "bob", 4: "dan"})
        rng = random.Random(11)
        async with asyncio.timeout(20):
            while True:
                view = await room.client.view(table_id)
                if view.HasField("hand") and view.hand.street >= 4:
                    break
                if not await act_once(room.client, table_id, view, rng.choice):
                    await asyncio.sleep(0.01)
        mid = await room.client.view(table_id)
        await room.table_deps.app.stop()  # the first owner stops driving
        settings = table_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                                  room.wallet.port)
        async with running_table(settings) as (_deps, port), \
                grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            from stud.v1 import table_pb2_grpc as pb_grpc
            from studtest.table import TableClient
            client = TableClient(pb_grpc.TableServiceStub(channel), room.client.tokens)
            again = await client.view(table_id)
            assert again.version == mid.version
            assert again.hand.hand_number == mid.hand.hand_number
            await play_until(client, table_id, mid.hand.hand_number + 1, rng.choice)
            await client.call("CloseTable", pb.CloseTableRequest(table_id=table_id), OPERATOR)
            await play_while(room, table_id, lambda v: bool(v.seats), client=client)
            # A seat leaves the view when it is stood up; its cash-out follows.
            async with asyncio.timeout(10):
                while await room.wallet.client.escrows(table_id):
                    await asyncio.sleep(0.02)
        balances = [await room.wallet.client.player_balance(n) for n in ("ann", "bob", "dan")]
        assert sum(balances) == 3 * DEPOSIT


def test_config_defaults() -> None:
    assert TableConfig().big_bet == 400
