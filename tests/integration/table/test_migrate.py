"""Tables written by the code before the room events (c7d5f48) kept part of their state in
keys beside the stream. Each kind of side key, written as that code wrote it
(``TableActor._save_intents``: ``sit:S`` = "player amount cid fp", ``topup:S`` = "player
amount wallet_key", ``cashout:S`` = "player wallet_key", ``leave:S`` = "player", ``muck:S`` =
"1"; ``:settled`` = the last hand number the wallet settled), with the wallet moved as that
code had moved it: the table loads with the same pending intent as a room event (one append,
command id ``s:migrate:side-keys:v1``), the side keys are gone, and the money ends right
(every escrow equal to its stack, each payment made once)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

import rules
from rules.commands import LeaveSeat
from rules.events import PlayerLeft
from rules.settlement import settlement as settle_query
from rules.streets import Street
from stud.v1 import room_pb2 as rpb
from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit import keys
from studkit.commandwindow import new_id
from studkit.mapping import is_room_event, room_event_from_envelope
from studkit.redis_client import connect
from studtest.table import Room, act_once, fast_settings, player
from table.app import command_key
from table.clients import key
from table.migrate import MIGRATION_ID
from table.room import Record

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000
SIDE_KEYS = {"settings", "intents", "settled", "closed"}


async def sit(room: Room, table_id: str, seat: int, name: str, buy_in: int = 10_000) -> None:
    await room.fund(name, DEPOSIT)
    await room.client.call("SitDown", pb.SitDownRequest(
        table_id=table_id, seat=seat, buy_in=buy_in), player(name))


async def write_old_keys(redis_url: str, table_id: str, intents: dict[str, str] | None = None,
                         settled: int | None = None) -> None:
    client = connect(redis_url)
    try:
        if intents:
            await client.hset(keys.legacy_table_key(table_id, "intents"), mapping=intents)
        if settled is not None:
            await client.set(keys.legacy_table_key(table_id, "settled"), settled)
    finally:
        await client.aclose()


async def side_keys_left(redis_url: str, table_id: str) -> set[str]:
    client = connect(redis_url)
    try:
        return {name for name in SIDE_KEYS
                if await client.exists(keys.legacy_table_key(table_id, name))}
    finally:
        await client.aclose()


async def reload(room: Room, table_id: str) -> None:
    """The table's owner goes; the next one loads it (and migrates it)."""
    tables = room.table_deps.app.tables
    await tables.drop(table_id, release=True)
    await tables.take(table_id)


async def migrated(room: Room, table_id: str) -> list[Message]:
    stored = await room.table_deps.events.read(table_id)
    return [room_event_from_envelope(s.envelope) for s in stored
            if s.envelope.command_id == MIGRATION_ID]


async def room_events(room: Room, table_id: str) -> list[Message]:
    stored = await room.table_deps.events.read(table_id)
    return [room_event_from_envelope(s.envelope) for s in stored
            if is_room_event(s.envelope)]


async def settled_sagas(room: Room, table_id: str) -> None:
    """Wait until the new owner has carried every pending saga through."""
    async with asyncio.timeout(20):
        while room.table_deps.app.tables.drivers[table_id].actor.room.sagas:
            await asyncio.sleep(0.05)


def stacks(view: pb.TableView) -> dict[int, int]:
    return {s.seat: s.stack for s in view.seats if s.stack}


async def test_a_pending_sit_down_whose_money_moved_is_seated_once(room: Room,
                                                                  redis_url: str) -> None:
    """``sit:3``: cat's buy-in reached the wallet and the old table crashed before seating
    her. She is seated with it, once; her retry pays nothing."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    await room.fund("cat", DEPOSIT)
    sit = new_id("sit-1")
    cid = command_key(player("cat"), sit)
    await room.wallet.client.buy_in("cat", table_id, 3, 7_000, key(table_id, cid))
    await write_old_keys(redis_url, table_id, {"sit:3": f"cat 7000 {cid} fp0"})
    await reload(room, table_id)
    assert await migrated(room, table_id) == [rpb.BuyInRequested(
        seat=3, player_id="cat", amount=7_000, wallet_key=key(table_id, cid), command_id=cid)]
    assert not await side_keys_left(redis_url, table_id)
    await settled_sagas(room, table_id)
    view = await room.client.view(table_id)
    assert {s.seat: (s.player_id, s.stack) for s in view.seats} == {3: ("cat", 7_000)}
    # Her retry (the old call's command id): the seat is hers already; nothing moves. (The
    # old code recorded the seat under her command id, so a retry got OK; the migration
    # records it under its own, so the retry is refused as seat_taken.)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=3, buy_in=7_000, command_id=sit), player("cat"))
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert await room.wallet.client.escrows(table_id) == {3: 7_000}
    assert await room.wallet.client.player_balance("cat") == DEPOSIT - 7_000
    kinds = [type(e) for e in await room_events(room, table_id)]
    assert kinds.count(rpb.BuyInRequested) == 1 and rpb.OrphanEscrowRefunded not in kinds


async def test_a_pending_sit_down_the_wallet_never_saw_ends_having_moved_nothing(
        room: Room, redis_url: str) -> None:
    """``sit:3`` whose buy-in never reached the wallet: the saga ends (failed), no seat, no
    money moved, and the seat is free again."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    await room.fund("cat", DEPOSIT)
    cid = command_key(player("cat"), "sit-1")
    await write_old_keys(redis_url, table_id, {"sit:3": f"cat 7000 {cid} fp0"})
    await reload(room, table_id)
    assert [type(e) for e in await migrated(room, table_id)] == [rpb.BuyInRequested]
    await settled_sagas(room, table_id)
    assert [type(e) for e in await room_events(room, table_id)][-2:] == [
        rpb.BuyInRequested, rpb.BuyInFailed]
    assert not (await room.client.view(table_id)).seats
    assert await room.wallet.client.escrows(table_id) == {}
    assert await room.wallet.client.player_balance("cat") == DEPOSIT
    await sit(room, table_id, 3, "dan")
    assert await room.wallet.client.escrows(table_id) == {3: 10_000}


@pytest.mark.parametrize("paid", [True, False], ids=["paid", "not_paid"])
async def test_a_pending_top_up_is_added_once(room: Room, redis_url: str, paid: bool) -> None:
    """``topup:1``: ann's top-up was queued (paid to the wallet during a hand, or not yet):
    it is added once and paid once."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    await sit(room, table_id, 1, "ann")
    wallet_key = key(table_id, command_key(player("ann"), "top-1"))
    if paid:
        await room.wallet.client.buy_in("ann", table_id, 1, 1_000, wallet_key)
    await write_old_keys(redis_url, table_id, {"topup:1": f"ann 1000 {wallet_key}"})
    await reload(room, table_id)
    assert await migrated(room, table_id) == [rpb.TopUpQueued(
        seat=1, player_id="ann", amount=1_000, wallet_key=wallet_key)]
    assert not await side_keys_left(redis_url, table_id)
    await settled_sagas(room, table_id)
    assert stacks(await room.client.view(table_id)) == {1: 11_000}
    assert await room.wallet.client.escrows(table_id) == {1: 11_000}
    assert await room.wallet.client.player_balance("ann") == DEPOSIT - 11_000


async def test_a_pending_cash_out_is_paid_and_not_taken_for_an_orphan(
        room: Room, redis_url: str) -> None:
    """``cashout:2``: bob left (the old code's append of LeaveSeat held the rules' events
    alone) and the table crashed before paying him. He is paid his escrow by the cash-out's
    own key; it is not refunded as an escrow the log does not know."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    actor = room.table_deps.app.tables.drivers[table_id].actor
    left: Any = rules.decide(actor.room.table, LeaveSeat(seat=2))
    assert [type(e) for e in left] == [PlayerLeft]
    done = await actor.commit(Record(tuple(left)), "c:player:bob:leave-1")
    wallet_key = key(table_id, "leave", 2, done.result.version)
    await write_old_keys(redis_url, table_id, {"cashout:2": f"bob {wallet_key}"})
    await reload(room, table_id)
    assert await migrated(room, table_id) == [rpb.CashOutRequested(
        seat=2, player_id="bob", wallet_key=wallet_key)]
    assert not await side_keys_left(redis_url, table_id)
    await settled_sagas(room, table_id)
    kinds = [type(e) for e in await room_events(room, table_id)]
    assert kinds[-2:] == [rpb.CashOutRequested, rpb.CashOutPaid]
    assert rpb.OrphanEscrowRefunded not in kinds
    assert await room.wallet.client.escrows(table_id) == {1: 10_000}
    assert await room.wallet.client.player_balance("bob") == DEPOSIT


async def test_a_leave_and_a_muck_asked_for_during_a_hand_are_done_after_it(
        room: Room, redis_url: str) -> None:
    """``leave:2`` and ``muck:1`` asked for during a hand: after the migration bob still
    leaves when the hand ends and is paid his stack; ann's muck preference holds."""
    table_id = await room.client.open_table()
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    await room.client.wait_for(table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
    await write_old_keys(redis_url, table_id, {"leave:2": "bob", "muck:1": "1"})
    await reload(room, table_id)
    assert await migrated(room, table_id) == [
        rpb.LeaveRequested(seat=2, player_id="bob"),
        rpb.MuckPreferenceSet(seat=1, player_id="ann", muck=True)]
    assert not await side_keys_left(redis_url, table_id)
    assert (await room.client.view(table_id, player("ann"))).muck_preference
    rng = random.Random(5)
    async with asyncio.timeout(60):
        while True:
            view = await room.client.view(table_id)
            if [s.seat for s in view.seats] == [1]:
                break
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    await settled_sagas(room, table_id)
    stored = await room.table_deps.events.read(table_id)
    leaves = [room_event_from_envelope(s.envelope) for s in stored
              if s.envelope.event_type == "CashOutRequested"]
    assert [(e.seat, e.player_id) for e in leaves] == [(2, "bob")]
    ann = (await room.client.view(table_id)).seats[0]
    assert await room.wallet.client.escrows(table_id) == {1: ann.stack}
    bob = await room.wallet.client.player_balance("bob")
    assert bob - (DEPOSIT - 10_000) == leaves[0].amount
    assert ann.stack + leaves[0].amount <= 20_000  # the rake, if any, is all that went


def settle_request(state: rules.TableState, table_id: str) -> wpb.SettleHandRequest:
    """The wallet's settlement of the hand that ended, as the table asks for it."""
    s = settle_query(state)
    assert s is not None and state.config is not None
    request = wpb.SettleHandRequest(
        table_id=table_id, hand_number=s.hand_number, rake=s.rake,
        ended_on_street=wpb.SettleHandRequest.Street.Value(
            f"STREET_{(s.ended_on or Street.THIRD).name}"),
        seats=[wpb.SettlementSeat(seat=x.seat, player_id=x.player_id, amount_in=x.amount_in,
                                  amount_won=x.amount_won) for x in s.seats])
    if state.config.rake is not None:
        request.rake_policy.percent_bps = state.config.rake.percent_bps
        request.rake_policy.cap = state.config.rake.cap
    return request


async def test_a_hand_the_old_code_settled_is_not_settled_again(room: Room,
                                                                redis_url: str) -> None:
    """``:settled`` = 1: the old owner paid hand 1 at the wallet and wrote the side key, not
    an event, then went. The new owner records the settlement from the key and does not
    settle the hand a second time; every escrow equals its stack."""
    table_id = await room.client.open_table(settings=fast_settings(next_hand_delay_ms=600_000))
    await sit(room, table_id, 1, "ann")
    await sit(room, table_id, 2, "bob")
    driver = room.table_deps.app.tables.drivers[table_id]
    settled = asyncio.Event()

    async def old_settle() -> None:  # c7d5f48: the wallet, then the side key; no event
        await driver.system.wallet.settle(settle_request(driver.actor.room.table, table_id))
        await write_old_keys(redis_url, table_id, settled=1)
        settled.set()
        await asyncio.Event().wait()

    driver.money.settle = old_settle  # type: ignore[method-assign]
    rng = random.Random(9)
    async with asyncio.timeout(60):
        while not settled.is_set():
            view = await room.client.view(table_id)
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    before = {name: await room.wallet.client.player_balance(name) for name in ("ann", "bob")}
    assert rpb.HandSettled not in [type(e) for e in await room_events(room, table_id)]
    await reload(room, table_id)
    assert await migrated(room, table_id) == [rpb.HandSettled(hand_number=1)]
    assert not await side_keys_left(redis_url, table_id)
    new = room.table_deps.app.tables.drivers[table_id]
    async with asyncio.timeout(20):
        while not new.money.repaired:
            await asyncio.sleep(0.05)
    assert new.actor.room.settled == 1 and not new.actor.room.stopped
    assert [type(e) for e in await room_events(room, table_id)].count(rpb.HandSettled) == 1
    view = await room.client.view(table_id)
    assert await room.wallet.client.escrows(table_id) == stacks(view)
    after = {name: await room.wallet.client.player_balance(name) for name in ("ann", "bob")}
    assert after == before
