"""A session time limit at a cash table (issue 34): a seated player whose session has passed
their limit finishes the hand in progress, is then stood up with their escrow back in their
account (the settlement's excluded_reasons: session_limit), is dealt no later hand and
cannot sit down at another table (session_limit); the others play on. The clock is data:
bob's session is recorded as started 61 minutes ago."""

from __future__ import annotations

import asyncio
import random
import time

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit.grpc_server import rpc_error_reason
from studtest.table import OPERATOR, Room, act_once, player
from wallet.protection import Session, session_to_text
from wallet.protection_store import SESSIONS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
DEPOSIT = 100_000
MINUTE = 60_000


async def test_a_player_past_their_session_limit_is_stood_up_after_the_hand(
        room: Room) -> None:
    table_id = await room.client.open_table()
    names = {1: "ann", 2: "bob", 3: "cat"}
    for name in names.values():
        await room.fund(name, DEPOSIT)
    await room.wallet.client.stub.SetSessionLimit(
        wpb.SetSessionLimitRequest(player_id="bob", minutes=60),
        metadata=room.wallet.client.metadata(player("bob")), timeout=10)
    for seat, name in names.items():
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=5_000), player(name))
    view = await room.client.wait_for(table_id,
                                      lambda v: v.HasField("hand") and v.hand.to_act != 0)
    limited_in = view.hand.hand_number
    now = time.time_ns() // 1_000_000
    await room.wallet.deps.store.client.hset(
        SESSIONS, "bob", session_to_text(Session(now - 61 * MINUTE, now - MINUTE)))
    rng = random.Random(34)
    async with asyncio.timeout(60):  # everyone plays on, bob too, in his current hand
        while True:
            view = await room.client.view(table_id)
            if not any(s.seat == 2 for s in view.seats) and \
                    view.hands_started >= limited_in + 2:
                break
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    assert (await room.wallet.client.escrows(table_id)).get(2, 0) == 0
    for n in range(limited_in + 1, view.hands_started + 1):
        history = await room.client.stub.GetHandHistory(
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=n),
            metadata=room.client.md(OPERATOR))
        seats = {getattr(getattr(r.event, r.event.WhichOneof("event")), "seat", None)
                 for r in history.events}
        assert 2 not in seats, f"hand {n} dealt to the seat past its session limit"
    other = await room.client.open_table()  # here the table's own rathole rule answers first
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=other, seat=1, buy_in=5_000), player("bob"))
    assert (refused.value.code(), rpc_error_reason(refused.value)) == (
        grpc.StatusCode.FAILED_PRECONDITION, "session_limit")
    held = sum((await room.wallet.client.escrows(table_id)).values())
    balances = sum([await room.wallet.client.player_balance(n) for n in names.values()])
    house = await room.wallet.client.balance(wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE))
    assert balances + held + house == 3 * DEPOSIT
