"""Player protection at a cash table (issue 34): a seated player who excludes themself
finishes the hand in progress, is then stood up with their escrow back in their account, is
dealt no later hand and cannot sit down again; the others play on."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studtest.table import OPERATOR, Room, act_once, player

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
DEPOSIT = 100_000


async def test_an_excluded_player_is_stood_up_after_the_hand(room: Room) -> None:
    table_id = await room.client.open_table()
    names = {1: "ann", 2: "bob", 3: "cat"}
    for seat, name in names.items():
        await room.fund(name, DEPOSIT)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=5_000), player(name))
    view = await room.client.wait_for(table_id,
                                      lambda v: v.HasField("hand") and v.hand.to_act != 0)
    excluded_in = view.hand.hand_number
    await room.wallet.client.stub.SelfExclude(
        wpb.SelfExcludeRequest(player_id="bob", period=wpb.EXCLUSION_PERIOD_WEEK),
        metadata=room.wallet.client.metadata(player("bob")), timeout=10)
    rng = random.Random(34)
    async with asyncio.timeout(60):  # everyone plays on, bob too, in his current hand
        while True:
            view = await room.client.view(table_id)
            if not any(s.seat == 2 for s in view.seats) and \
                    view.hands_started >= excluded_in + 2:
                break
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    escrows = await room.wallet.client.escrows(table_id)
    assert escrows.get(2, 0) == 0
    for n in range(excluded_in + 1, view.hands_started + 1):
        history = await room.client.stub.GetHandHistory(
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=n),
            metadata=room.client.md(OPERATOR))
        seats = {getattr(getattr(r.event, r.event.WhichOneof("event")), "seat", None)
                 for r in history.events}
        assert 2 not in seats, f"hand {n} dealt to the excluded seat"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=2, buy_in=5_000), player("bob"))
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    balance = await room.wallet.client.player_balance("bob")
    ann_cat = sum([await room.wallet.client.player_balance(n) for n in ("ann", "cat")])
    held = sum(v for v in (await room.wallet.client.escrows(table_id)).values())
    assert balance + ann_cat + held + (await room.wallet.client.balance(
        wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE))) == 3 * DEPOSIT
