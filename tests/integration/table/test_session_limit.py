"""A session time limit at a cash table (issue 34): a seated player whose session has passed
their limit finishes the hand in progress, is then stood up with their escrow back in their
account (the settlement's excluded_reasons: session_limit), is dealt no later hand and
cannot sit down at another table (session_limit); the others play on. The clock is data:
bob's session is recorded as started 61 minutes ago."""

from __future__ import annotations

import time

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit.grpc_server import rpc_error_reason
from studtest.protection import chips, play_until_stood_up, seats_dealt, three_seated
from studtest.table import Room, player
from wallet.protection import Session, session_to_text
from wallet.protection_store import SESSIONS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
DEPOSIT = 100_000
MINUTE = 60_000


async def test_a_player_past_their_session_limit_is_stood_up_after_the_hand(
        room: Room) -> None:
    names = {1: "ann", 2: "bob", 3: "cat"}

    async def limit_bob() -> None:
        await room.wallet.client.stub.SetSessionLimit(
            wpb.SetSessionLimitRequest(player_id="bob", minutes=60),
            metadata=room.wallet.client.metadata(player("bob")), timeout=10)

    table_id, limited_in = await three_seated(room, names, DEPOSIT, before_sitting=limit_bob)
    now = time.time_ns() // 1_000_000
    await room.wallet.deps.store.client.hset(
        SESSIONS, "bob", session_to_text(Session(now - 61 * MINUTE, now - MINUTE)))
    # everyone plays on, bob too, in his current hand
    view = await play_until_stood_up(room, table_id, 2, after_hand=limited_in)
    assert (await room.wallet.client.escrows(table_id)).get(2, 0) == 0
    dealt = await seats_dealt(room, table_id, range(limited_in + 1, view.hands_started + 1))
    for n, seats in dealt.items():
        assert 2 not in seats, f"hand {n} dealt to the seat past its session limit"
    other = await room.client.open_table()  # here the table's own rathole rule answers first
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=other, seat=1, buy_in=5_000), player("bob"))
    assert (refused.value.code(), rpc_error_reason(refused.value)) == (
        grpc.StatusCode.FAILED_PRECONDITION, "session_limit")
    assert await chips(room, table_id, names.values()) == 3 * DEPOSIT
