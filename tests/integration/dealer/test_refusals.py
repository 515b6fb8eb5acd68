"""The dealer's refusals from the hardening review, over real gRPC: undecodable bodies are
INVALID_ARGUMENT (with or without a token, never UNKNOWN), a WatchMyCards stream ends when its
token expires, and table ids with a trailing newline are refused."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from rules import Phase
from stud.v1 import dealer_pb2 as pb
from studkit.auth import bearer_metadata
from studkit.grpc_server import rpc_error_reason
from studkit.metrics import REQUESTS
from studtest.dealer import TABLE, MakeTable, RunningDealer, player

pytestmark = pytest.mark.integration

SERVICE = "stud.v1.DealerService"
PLAYERS = {2: "ann", 5: "bob"}
UNDECODABLE = b"\x0a\x05ab"  # field 1 claims 5 bytes, 2 follow: a truncated message


def calls(dealer: RunningDealer, method: str, code: str) -> float:
    return dealer.deps.metrics.sample(f"{REQUESTS}_total", service=SERVICE, method=method,
                                      code=code)


async def raw_call(dealer: RunningDealer, method: str, body: bytes,
                   metadata: tuple[tuple[str, str], ...] | None) -> grpc.aio.AioRpcError:
    """Send ``body`` as it is (no serializer) and return the refusal."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{dealer.port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            if method == "WatchMyCards":
                async for _ in channel.unary_stream(f"/{SERVICE}/{method}")(
                        body, metadata=metadata, timeout=10):
                    pass
            else:
                await channel.unary_unary(f"/{SERVICE}/{method}")(
                    body, metadata=metadata, timeout=10)
    return info.value


class TestUndecodableBodies:
    @pytest.mark.parametrize("method", ["StartHand", "Deal", "GetMyCards", "WatchMyCards"])
    async def test_with_a_token_it_is_invalid_argument(
        self, dealer: RunningDealer, method: str
    ) -> None:
        """Bytes that are no request are INVALID_ARGUMENT (undecodable_request) and counted,
        not UNKNOWN."""
        who = player("ann") if method in {"GetMyCards", "WatchMyCards"} else TABLE
        error = await raw_call(dealer, method, UNDECODABLE, dealer.client.metadata(who))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert rpc_error_reason(error) == "undecodable_request"
        assert calls(dealer, method, "INVALID_ARGUMENT") == 1
        assert calls(dealer, method, "UNKNOWN") == 0

    @pytest.mark.parametrize("method", ["StartHand", "WatchMyCards"])
    async def test_without_a_token_it_is_unauthenticated(
        self, dealer: RunningDealer, method: str
    ) -> None:
        """Without a token the token is refused first (UNAUTHENTICATED), and counted."""
        error = await raw_call(dealer, method, UNDECODABLE, None)
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(error) == "missing_token"
        assert calls(dealer, method, "UNAUTHENTICATED") == 1


class TestWatchEndsWithItsToken:
    async def test_a_two_second_token_ends_the_watch(
        self, make_table: MakeTable, dealer: RunningDealer
    ) -> None:
        """A watch opened with a 2-second token ends with UNAUTHENTICATED (token_expired)
        about 2 s later (it used to deliver cards long after); a fresh token resumes it."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.deal()
        short = dealer.client.keys.issuer_for(player("ann")).issue(player("ann"), ttl_seconds=2)
        opened = time.monotonic()
        call = dealer.client.stub.WatchMyCards(
            pb.WatchMyCardsRequest(table_id=table.table_id),
            metadata=bearer_metadata(short), timeout=30)
        first = await call.read()
        assert len(first.down) == 2
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await asyncio.wait_for(call.read(), 10)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(info.value) == "token_expired"
        assert time.monotonic() - opened < 4
        assert calls(dealer, "WatchMyCards", "UNAUTHENTICATED") == 1
        # The watch let go of its reader; a fresh token watches again.
        await table.play_until(Phase.DEALING)
        await table.deal()
        again = dealer.client.stub.WatchMyCards(
            pb.WatchMyCardsRequest(table_id=table.table_id),
            metadata=dealer.client.metadata(player("ann")), timeout=30)
        latest = await again.read()
        assert (len(latest.down), len(latest.up)) == (2, 2)
        again.cancel()


class TestNewlineIds:
    @pytest.mark.parametrize("table_id", ["t-1\n", "t-1\r\n", "\nt-1", "t-1 "])
    async def test_a_table_id_with_whitespace_is_invalid_argument(
        self, make_table: MakeTable, dealer: RunningDealer, table_id: str
    ) -> None:
        """StartHand and GetMyCards refuse a table id with a newline or space around it."""
        await make_table(PLAYERS)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await dealer.client.start_hand(table_id, 1)
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await dealer.client.my_cards(table_id, player("ann"))
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
