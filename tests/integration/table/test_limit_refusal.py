"""Player protection through the table (issue 34): a sit-down or a top-up the wallet refuses
for a limit reaches the player with the wallet's ErrorInfo details (what is left, the limit,
its kind and window, when it frees some), not only the reason; nothing is seated or added."""

from __future__ import annotations

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit.grpc_server import rpc_error_info, rpc_error_reason
from studtest.table import Room, player

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def refused(room: Room, method: str, request: object, who: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await room.client.call(method, request, player(who))
    return caught.value


async def test_a_sit_down_past_a_limit_says_what_is_left_and_when(room: Room) -> None:
    table_id = await room.client.open_table()
    await room.fund("ann", 100_000)
    await room.wallet.client.stub.SetLimit(
        wpb.SetLimitRequest(player_id="ann", kind=wpb.LIMIT_KIND_WAGER,
                            window=wpb.LIMIT_WINDOW_DAY, amount=3_000),
        metadata=room.wallet.client.metadata(player("ann")), timeout=10)
    error = await refused(room, "SitDown", pb.SitDownRequest(
        table_id=table_id, seat=1, buy_in=5_000), "ann")
    assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert rpc_error_reason(error) == "wager_limit"
    info = rpc_error_info(error)
    assert info is not None
    assert {k: info.metadata[k] for k in ("kind", "window", "limit", "remaining")} == {
        "kind": "wager", "window": "day", "limit": "3000", "remaining": "3000"}
    assert int(info.metadata["resets_at_ms"]) > 0
    assert not any(s.seat == 1 for s in (await room.client.view(table_id)).seats)

    await room.client.call("SitDown", pb.SitDownRequest(table_id=table_id, seat=1,
                                                        buy_in=2_000), player("ann"))
    error = await refused(room, "AddChips", pb.AddChipsRequest(
        table_id=table_id, seat=1, amount=2_000), "ann")
    assert rpc_error_reason(error) == "wager_limit"
    info = rpc_error_info(error)
    assert info is not None and info.metadata["remaining"] == "1000"
    first_counted = int(info.metadata["resets_at_ms"])
    assert first_counted > 0  # the sit-down's 2,000 leaves the window 24 hours after it
    assert await room.wallet.client.player_balance("ann") == 98_000
