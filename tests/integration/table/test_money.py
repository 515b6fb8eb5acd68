"""Money at the table: rake goes to the house, a hand the dealer cannot finish is voided
(RULES 9.8) with every chip back where it was, and the ledger always balances."""

from __future__ import annotations

import asyncio
import random

import pytest

from rules import Rake, TableConfig
from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studtest.redis import TestRedis
from studtest.table import OPERATOR, Room, act_once, fast_settings, player, running_room
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration
DEPOSIT = 1_000_000


async def seat(room: Room, table_id: str, names: dict[int, str], buy_in: int = 10_000) -> None:
    for number, name in names.items():
        await room.fund(name, DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=number, buy_in=buy_in), player(name))


async def house(room: Room) -> int:
    return await room.wallet.client.balance(wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE))


async def test_rake_goes_to_the_house_and_chips_are_conserved(room: Room) -> None:
    """With a 5% rake capped at 60, the house holds exactly the rake the log records, and
    player balances + escrows + house == deposits."""
    config = TableConfig(rake=Rake(percent_bps=500, cap=60))
    table_id = await room.client.open_table(config=config)
    names = {1: "ann", 2: "bob", 3: "cat"}
    await seat(room, table_id, names)
    rng = random.Random(4)
    async with asyncio.timeout(60):
        while (view := await room.client.view(table_id)).hands_started < 6:
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    await room.client.call("CloseTable", pb.CloseTableRequest(table_id=table_id), OPERATOR)
    async with asyncio.timeout(60):
        while (view := await room.client.view(table_id)).seats:
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    assert await room.wallet.client.paid_out(table_id) == {}
    raked = 0
    for number in range(1, view.hands_started + 1):
        history = await room.client.stub.GetHandHistory(
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=number),
            metadata=room.client.md(OPERATOR))
        raked += sum(r.event.rake_taken.amount for r in history.events
                     if r.event.WhichOneof("event") == "rake_taken")
    balances = [await room.wallet.client.player_balance(n) for n in names.values()]
    assert await house(room) == raked
    assert sum(balances) + raked == DEPOSIT * len(names)


async def bet_to_the_next_street(room: Room, table_id: str) -> pb.TableView:
    """Bring-in and calls (else any action) until the street's betting ends; the view then."""
    rng = random.Random(0)
    async with asyncio.timeout(30):
        while True:
            view = await room.client.view(table_id)
            if view.hand.phase != pb.HAND_PHASE_BETTING:
                return view
            await act_once(room.client, table_id, view,
                           lambda acts: next((a for a in acts if a.kind in (1, 5, 6)),
                                             rng.choice(acts)))


async def test_a_hand_the_dealer_cannot_finish_is_voided(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    """The dealer goes away mid-hand: past the table's outage limit the hand is voided, every
    ante and wager goes back, nothing is raked, the void is settled, and the table then
    waits for the dealer (its view says so)."""
    async with running_room(redis_server, redis_url, dev_keys) as room:
        table_id = await room.client.open_table(settings=fast_settings(outage_limit_s=1))
        await seat(room, table_id, {1: "ann", 2: "bob"})
        view = await room.client.wait_for(table_id, lambda v: v.HasField("hand")
                                          and v.hand.to_act != 0)
        assert room.dealer.server is not None
        await room.dealer.server.stop(None)
        # Bring-in and a call: the next street needs the dealer, who is gone.
        view = await bet_to_the_next_street(room, table_id)
        view = await room.client.wait_for(
            table_id, lambda v: v.hand.phase == pb.HAND_PHASE_COMPLETE, timeout=30)
        history = await room.client.stub.GetHandHistory(
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=1),
            metadata=room.client.md(OPERATOR))
        kinds = [r.event.WhichOneof("event") for r in history.events]
        assert "hand_voided" in kinds and "pot_awarded" not in kinds
        assert sorted(s.stack for s in view.seats) == [10_000, 10_000]
        view = await room.client.wait_for(
            table_id, lambda v: v.status == pb.TABLE_STATUS_WAITING, timeout=30)
        assert "dealer" in view.status_reason
        assert await room.wallet.client.escrows(table_id) == {1: 10_000, 2: 10_000}


async def test_a_watch_gets_a_streets_last_action_while_the_dealer_is_away(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An append the driver follows at once (here a street's last call, then the next
    street's cards) is held for the watchers until that next append (issue 35: one message
    for both), but not while the dealer does not answer: the driver gives it to them as
    soon as it waits (the backstop timer is made an hour long here, so only that can)."""
    from table import actor as table_actor
    monkeypatch.setattr(table_actor, "HOLD_S", 3600.0)
    async with running_room(redis_server, redis_url, dev_keys) as room:
        table_id = await room.client.open_table(settings=fast_settings(outage_limit_s=600))
        await seat(room, table_id, {1: "ann", 2: "bob"})
        await room.client.wait_for(table_id, lambda v: v.HasField("hand")
                                   and v.hand.to_act != 0)
        call = room.client.stub.WatchTable(pb.WatchTableRequest(
            table_id=table_id, batched=True), metadata=room.client.md(OPERATOR))
        assert room.dealer.server is not None
        await room.dealer.server.stop(None)
        view = await bet_to_the_next_street(room, table_id)
        assert view.hand.phase == pb.HAND_PHASE_DEALING
        seen = 0
        async with asyncio.timeout(30):
            while seen < view.version:
                message = await call.read()
                seen = max(r.sequence for r in (message, *message.more))
        call.cancel()
        view = await room.client.view(table_id)
        assert view.hand.phase == pb.HAND_PHASE_DEALING  # still no cards: the dealer is away
