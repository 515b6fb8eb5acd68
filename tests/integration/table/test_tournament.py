"""A tournament table over real gRPC and a real Redis (DESIGN 5c, RULES 2.5): opened by
``service:tournament``, entrants seated with tournament stacks, hands played by the test's
bots, stakes raised between hands, a pause and a resume, an unseat that answers the stack,
no rake and no wallet call at all, and a restart of the table replica that folds the same
table back from the log."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import grpc
import pytest

from rules import TableConfig
from stud.v1 import common_pb2 as cpb
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.mapping import config_to_proto
from studtest.redis import TestRedis
from studtest.table import (
    TOURNAMENT,
    Room,
    TableClient,
    fast_settings,
    play_until,
    running_room,
    running_table,
    table_settings,
)
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

pytestmark = pytest.mark.integration

ENTRANTS = {1: ("ann", 50_000), 2: ("bob", 30_000), 3: ("cy", 20_000)}
CHIPS = sum(stack for _player, stack in ENTRANTS.values())
CONFIG = TableConfig.for_stakes(200)  # 200/400, ante 40, bring-in 50


async def open_tournament_table(client: TableClient, tournament_id: str = "mtt-1") -> str:
    table_id = f"tt-{uuid.uuid4().hex[:8]}"
    await client.call("OpenTable", pb.OpenTableRequest(
        table_id=table_id, config=config_to_proto(CONFIG), settings=fast_settings(),
        tournament_id=tournament_id), TOURNAMENT)
    return table_id


async def seat_all(client: TableClient, table_id: str) -> None:
    for seat, (name, stack) in ENTRANTS.items():
        await client.call("SeatEntrant", pb.SeatEntrantRequest(
            table_id=table_id, seat=seat, player_id=name, stack=stack), TOURNAMENT)


def total(view: pb.TableView) -> int:
    """The chips at the table: the stacks, plus what is in the pots of a hand in progress."""
    in_pots = (sum(p.hand_total for p in view.hand.players)
               - sum(a.amount for a in view.hand.awards)) if view.hand_in_progress else 0
    return sum(s.stack for s in view.seats) + in_pots


def passive(actions: list[Any]) -> Any:
    """Check or call when it can (no raise wars: nobody busts in a few hands)."""
    kinds = {a.kind: a for a in actions}
    for kind in (cpb.ACTION_KIND_CHECK, cpb.ACTION_KIND_CALL, cpb.ACTION_KIND_BRING_IN):
        if kind in kinds:
            return kinds[kind]
    return actions[0]


async def antes(client: TableClient, table_id: str, hand: int) -> list[int]:
    history = await client.stub.GetHandHistory(
        pb.GetHandHistoryRequest(table_id=table_id, hand_number=hand),
        metadata=client.md(TOURNAMENT), timeout=10)
    return [r.event.ante_posted.amount for r in history.events
            if r.event.WhichOneof("event") == "ante_posted"]


async def history(client: TableClient, table_id: str, hand: int) -> pb.HandHistory:
    reply: pb.HandHistory = await client.stub.GetHandHistory(
        pb.GetHandHistoryRequest(table_id=table_id, hand_number=hand),
        metadata=client.md(TOURNAMENT), timeout=10)
    return reply


async def test_a_tournament_table_from_seating_to_unseating(room: Room) -> None:
    client = room.client
    table_id = await open_tournament_table(client)
    await seat_all(client, table_id)
    view = await client.wait_for(table_id, lambda v: v.hand_in_progress
                                 and v.hand.to_act != 0, TOURNAMENT)
    assert view.tournament_id == "mtt-1" and not view.dealing_paused
    assert view.config.rake.percent_bps == 0
    put_in = {p.seat: p.hand_total for p in view.hand.players}  # the antes, so far
    assert {s.seat: (s.player_id, s.stack + put_in[s.seat]) for s in view.seats} == ENTRANTS
    choose = random.Random(7).choice

    # Level 2 asked for during hand 1: hand 1 keeps its stakes, hand 2 has the new ones.
    level = pb.SetStakesRequest(table_id=table_id, small_bet=400, big_bet=800, ante=100,
                                bring_in=100)
    await client.call("SetStakes", level, TOURNAMENT)
    view = await client.view(table_id, TOURNAMENT)
    if view.hand_in_progress and view.hand.hand_number == 1:
        assert view.pending_stakes.ante == 100 and view.config.ante == 40
    await play_until(client, table_id, 2, passive)
    assert await antes(client, table_id, 1) == [40, 40, 40]
    assert await antes(client, table_id, 2) == [100, 100, 100]
    view = await client.view(table_id, TOURNAMENT)
    assert view.config.small_bet == 400 and not view.HasField("pending_stakes")

    # Every finished hand: each seat's stack at its start and end; no rake, no chip lost.
    for number in (1, 2):
        result = (await history(client, table_id, number)).result
        assert result.hand_number == number and len(result.seats) == 3
        assert sum(s.stack_start for s in result.seats) == CHIPS
        assert sum(s.stack_end for s in result.seats) == CHIPS
    first, second = (await history(client, table_id, 1)).result, (
        await history(client, table_id, 2)).result
    assert [s.stack_end for s in first.seats] == [s.stack_start for s in second.seats]
    assert first.seats[0].stack_start == 50_000

    # A break: the hand in progress finishes, then nothing is dealt until the resume.
    await client.call("PauseDealing", pb.PauseDealingRequest(
        table_id=table_id, paused=True, reason="break"), TOURNAMENT)
    async with asyncio.timeout(30):
        while True:
            view = await client.view(table_id, TOURNAMENT)
            if not view.hand_in_progress:
                break
            await play_until(client, table_id, view.hands_started, choose)
    assert view.dealing_paused and view.pause_reason == "break"
    lobby = await client.call("ListTables", pb.ListTablesRequest(), TOURNAMENT)
    line = next(t for t in lobby.tables if t.table_id == table_id)
    assert (line.tournament_id, line.dealing_paused, line.pause_reason) == (
        "mtt-1", True, "break")
    idle_at = view.hands_started
    await asyncio.sleep(0.5)
    view = await client.view(table_id, TOURNAMENT)
    assert view.hands_started == idle_at and not view.hand_in_progress
    assert total(view) == CHIPS
    assert view.last_hand_result.hand_number == idle_at
    assert {s.seat: s.stack_end for s in view.last_hand_result.seats} == {
        s.seat: s.stack for s in view.seats}

    # Unseat cy while idle: the stack comes off; a retry answers the same stack.
    cy = next(s for s in view.seats if s.player_id == "cy")
    unseat = pb.UnseatEntrantRequest(table_id=table_id, seat=cy.seat, player_id="cy",
                                     command_id=uuid.uuid4().hex)
    reply = await client.call("UnseatEntrant", unseat, TOURNAMENT)
    again = await client.call("UnseatEntrant", unseat, TOURNAMENT)
    assert reply.stack == cy.stack == again.stack and again.reply.duplicate
    assert not reply.reply.duplicate
    view = await client.view(table_id, TOURNAMENT)
    assert [s.player_id for s in view.seats] == ["ann", "bob"]
    assert total(view) + reply.stack == CHIPS

    # Resume: two players deal on.
    await client.call("PauseDealing", pb.PauseDealingRequest(table_id=table_id, paused=False),
                      TOURNAMENT)
    view = await play_until(client, table_id, idle_at + 2, choose)
    assert not view.dealing_paused and view.pause_reason == ""
    assert total(view) + reply.stack == CHIPS

    # No wallet call was ever made for the table: it holds no escrow and settled nothing.
    assert await room.wallet.client.escrows(table_id) == {}


async def test_hand_for_hand_deals_one_hand_then_the_table_pauses_itself(room: Room) -> None:
    """Released for one hand (``one_hand``), a table deals exactly one and is paused as it
    starts, with no further call: hand for hand holds while the tournament service is
    down. ``one_hand`` with a pause is refused, and changes nothing."""
    client = room.client
    table_id = await open_tournament_table(client)
    await client.call("PauseDealing", pb.PauseDealingRequest(
        table_id=table_id, paused=True, reason="hand_for_hand"), TOURNAMENT)
    await seat_all(client, table_id)
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await client.call("PauseDealing", pb.PauseDealingRequest(
            table_id=table_id, paused=True, reason="break", one_hand=True), TOURNAMENT)
    assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    view = await client.view(table_id, TOURNAMENT)
    assert view.hands_started == 0 and view.pause_reason == "hand_for_hand"
    await client.call("PauseDealing", pb.PauseDealingRequest(
        table_id=table_id, paused=False, reason="hand_for_hand", one_hand=True), TOURNAMENT)
    view = await client.wait_for(table_id, lambda v: v.hands_started == 1, TOURNAMENT)
    assert view.dealing_paused and view.pause_reason == "hand_for_hand"
    view = await play_until(client, table_id, 1, random.Random(3).choice)
    await asyncio.sleep(1.0)  # the fast settings deal the next hand at once
    view = await client.view(table_id, TOURNAMENT)
    assert view.hands_started == 1 and not view.hand_in_progress and view.dealing_paused
    assert total(view) == CHIPS
    # The next round's release deals the next hand, and only that one.
    await client.call("PauseDealing", pb.PauseDealingRequest(
        table_id=table_id, paused=False, reason="hand_for_hand", one_hand=True), TOURNAMENT)
    view = await play_until(client, table_id, 2, random.Random(4).choice)
    await asyncio.sleep(1.0)
    view = await client.view(table_id, TOURNAMENT)
    assert view.hands_started == 2 and view.dealing_paused


async def test_an_entrant_seated_during_a_hand_waits_for_the_next(room: Room) -> None:
    client = room.client
    table_id = await open_tournament_table(client)
    await seat_all(client, table_id)
    view = await client.wait_for(table_id, lambda v: v.hand_in_progress
                                 and v.hand.to_act != 0, TOURNAMENT)
    await client.call("SeatEntrant", pb.SeatEntrantRequest(
        table_id=table_id, seat=5, player_id="dee", stack=10_000), TOURNAMENT)
    view = await client.view(table_id, TOURNAMENT)
    assert view.hand.hand_number == 1 and 5 not in {p.seat for p in view.hand.players}
    view = await play_until(client, table_id, 1, passive)
    view = await client.wait_for(table_id, lambda v: v.hands_started >= 2, TOURNAMENT)
    assert 5 in {s.seat for s in (await history(client, table_id, 2)).result.seats} or (
        5 in {p.seat for p in view.hand.players})


async def test_no_wallet_is_needed_at_all(redis_server: TestRedis, redis_url: str,
                                          dev_keys: DevKeys) -> None:
    """The table's wallet address answers nothing: a tournament table deals, settles and
    reconciles its hands anyway (it never calls the wallet)."""
    async with running_room(redis_server, redis_url, dev_keys,
                            wallet_target=f"127.0.0.1:{free_port()}") as room:
        client = room.client
        table_id = await open_tournament_table(client)
        await seat_all(client, table_id)
        view = await play_until(client, table_id, 3, passive, timeout=60)
        assert view.status == pb.TABLE_STATUS_OPEN, view.status_reason
        assert total(view) == CHIPS


async def test_a_restarted_replica_folds_the_same_tournament_table(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """Mid-tournament (stakes queued during a hand, a pause asked for): the table replica
    stops, a new one loads the table from its log and shows the very same table, then
    carries on with the queued stakes and the pause."""
    async with running_room(redis_server, redis_url, dev_keys) as room:
        client = room.client
        table_id = await open_tournament_table(client)
        await seat_all(client, table_id)
        await play_until(client, table_id, 1, passive)
        await client.wait_for(table_id, lambda v: v.hand_in_progress
                              and v.hand.hand_number == 2 and v.hand.to_act != 0, TOURNAMENT)
        await client.call("SetStakes", pb.SetStakesRequest(
            table_id=table_id, small_bet=400, big_bet=800, ante=100, bring_in=100),
            TOURNAMENT)
        await client.call("PauseDealing", pb.PauseDealingRequest(
            table_id=table_id, paused=True, reason="hand_for_hand"), TOURNAMENT)
        before = await client.view(table_id, TOURNAMENT)
        assert before.hand_in_progress and before.pending_stakes.ante == 100
        await room.table_deps.app.stop()  # the replica goes away mid-hand
        settings = table_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                                  room.wallet.port)
        async with running_table(settings) as (_deps, port), \
                grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            again = TableClient(pb_grpc.TableServiceStub(channel),  # type: ignore[no-untyped-call]
                                client.tokens)
            after = await again.wait_for(table_id, lambda v: True, TOURNAMENT)
            for view in (before, after):
                view.hand.ClearField("turn_deadline")
                view.hand.ClearField("time_bank_ms")
            assert after == before
            view = await play_until(again, table_id, 2, passive)
            await asyncio.sleep(0.3)
            view = await again.view(table_id, TOURNAMENT)
            assert view.hands_started == 2 and not view.hand_in_progress  # paused
            assert view.config.ante == 100 and not view.HasField("pending_stakes")
            assert total(view) == CHIPS
            await again.call("PauseDealing", pb.PauseDealingRequest(
                table_id=table_id, paused=False), TOURNAMENT)
            await play_until(again, table_id, 3, passive)
            assert await antes(again, table_id, 3) == [100, 100, 100]


async def test_an_away_player_stays_dealt_in(room: Room) -> None:
    """RULES 2.5: nobody acts, every turn runs out (one second and a one-second bank), and
    at a cash table with these settings both seats would be sat out after one hand; here
    both stay dealt in every hand, post the ante and the bring-in, and are folded or
    checked when their time runs out."""
    client = room.client
    table_id = f"tt-{uuid.uuid4().hex[:8]}"
    await client.call("OpenTable", pb.OpenTableRequest(
        table_id=table_id, config=config_to_proto(CONFIG), tournament_id="mtt-away",
        settings=fast_settings(action_time_s=1, time_bank_s=1, timeouts_before_sit_out=1)),
        TOURNAMENT)
    for seat, name in ((1, "ann"), (2, "bob")):
        await client.call("SeatEntrant", pb.SeatEntrantRequest(
            table_id=table_id, seat=seat, player_id=name, stack=10_000), TOURNAMENT)
    view = await client.wait_for(table_id, lambda v: v.hands_started >= 4, TOURNAMENT,
                                 timeout=60)
    assert not any(s.sitting_out for s in view.seats)
    for number in (1, 2, 3):
        events = (await history(client, table_id, number)).events
        kinds = [r.event.WhichOneof("event") for r in events]
        assert kinds.count("ante_posted") == 2 and "bring_in_posted" in kinds
        assert "action_timed_out" in kinds
        started = next(r.event.hand_started for r in events
                       if r.event.WhichOneof("event") == "hand_started")
        assert list(started.seats) == [1, 2]
    assert total(view) == 20_000
