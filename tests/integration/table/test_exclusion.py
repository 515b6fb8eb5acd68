"""Player protection at a cash table (issue 34): a seated player who excludes themself
finishes the hand in progress, is then stood up with their escrow back in their account, is
dealt no later hand and cannot sit down again; the others play on."""

from __future__ import annotations

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studtest.protection import chips, play_until_stood_up, seats_dealt, three_seated
from studtest.table import Room, player

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
DEPOSIT = 100_000


async def test_an_excluded_player_is_stood_up_after_the_hand(room: Room) -> None:
    names = {1: "ann", 2: "bob", 3: "cat"}
    table_id, excluded_in = await three_seated(room, names, DEPOSIT)
    await room.wallet.client.stub.SelfExclude(
        wpb.SelfExcludeRequest(player_id="bob", period=wpb.EXCLUSION_PERIOD_WEEK),
        metadata=room.wallet.client.metadata(player("bob")), timeout=10)
    # everyone plays on, bob too, in his current hand
    view = await play_until_stood_up(room, table_id, 2, after_hand=excluded_in)
    escrows = await room.wallet.client.escrows(table_id)
    assert escrows.get(2, 0) == 0
    dealt = await seats_dealt(room, table_id, range(excluded_in + 1, view.hands_started + 1))
    for n, seats in dealt.items():
        assert 2 not in seats, f"hand {n} dealt to the excluded seat"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=2, buy_in=5_000), player("bob"))
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert await chips(room, table_id, names.values()) == 3 * DEPOSIT
