"""The wallet when its Redis goes away: calls are UNAVAILABLE with reason store_unavailable
("retry with the same idempotency key"), never INTERNAL; and ids with a trailing newline are
refused before they reach a key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studkit.grpc_server import rpc_error_reason
from studkit.metrics import REQUESTS
from studtest.wallet import OPERATOR, RunningWallet, running_wallet
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer
from wallet.config import Settings

pytestmark = pytest.mark.integration



def outage_settings(url: str, keys: DevKeys) -> Settings:
    return Settings(addr="127.0.0.1:0", redis_url=url, auth_keys=keys.key_set())


@pytest.fixture
async def lonely_redis() -> AsyncIterator[RedisServer]:
    """A Redis of this test's own, on a free port, that the test may stop."""
    server = RedisServer(appendonly=False).start()
    try:
        yield server
    finally:
        server.stop()


def calls(wallet: RunningWallet, method: str, code: str) -> float:
    return wallet.deps.metrics.sample(f"{REQUESTS}_total", service="stud.v1.WalletService",
                                      method=method, code=code)


async def test_a_stopped_redis_is_unavailable(lonely_redis: RedisServer,
                                              dev_keys: DevKeys) -> None:
    """With its Redis stopped, reads and writes of the wallet are UNAVAILABLE
    (store_unavailable, retry with the same key), counted as such; none is INTERNAL."""
    async with running_wallet(outage_settings(lonely_redis.url, dev_keys), dev_keys) as wallet:
        await wallet.client.create_account("alice")
        await wallet.client.deposit("alice", 100, "d-1")
        lonely_redis.stop()
        attempts = {
            "GetBalance": wallet.client.balance(pb.AccountRef(player_id="alice")),
            "Deposit": wallet.client.deposit("alice", 50, "d-2"),
            "CreateAccount": wallet.client.create_account("bob"),
        }
        for method, attempt in attempts.items():
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await attempt
            error = info.value
            assert error.code() is grpc.StatusCode.UNAVAILABLE, method
            assert rpc_error_reason(error) == "store_unavailable", method
            assert "same idempotency key" in (error.details() or "")
            assert str(lonely_redis.port) not in (error.details() or "")
            assert calls(wallet, method, "UNAVAILABLE") == 1
            assert calls(wallet, method, "INTERNAL") == 0


async def test_a_retry_after_the_outage_is_applied_once(lonely_redis: RedisServer,
                                                       dev_keys: DevKeys) -> None:
    """A deposit refused as UNAVAILABLE, retried with the same key once Redis is back, is
    applied once; a second retry is answered as the same deposit."""
    async with running_wallet(outage_settings(lonely_redis.url, dev_keys), dev_keys) as wallet:
        await wallet.client.create_account("alice")
        port = lonely_redis.port
        lonely_redis.stop()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await wallet.client.deposit("alice", 70, "d-retry")
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE
        # The same port, a fresh (empty) server: the account is opened again.
        lonely_redis.port, lonely_redis.data_dir = port, None
        lonely_redis.start()
        await wallet.client.create_account("alice")
        first = await wallet.client.deposit("alice", 70, "d-retry")
        again = await wallet.client.deposit("alice", 70, "d-retry")
        assert first.balance == again.balance == 70
        assert not first.replayed and again.replayed
        assert await wallet.client.player_balance("alice") == 70


@pytest.mark.parametrize("name", ["alice\n", "alice\r\n", "\nalice", "alice "])
async def test_an_id_with_a_newline_is_refused(wallet: RunningWallet, name: str) -> None:
    """Opening an account whose id ends (or starts) with a newline or a space is
    INVALID_ARGUMENT; nothing is created."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await wallet.client.create_account(name)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert rpc_error_reason(info.value) == "malformed_id"
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await wallet.client.balance(pb.AccountRef(player_id="alice"))
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND


async def test_a_page_token_with_a_newline_is_invalid_argument(wallet: RunningWallet) -> None:
    """A statement page token with a trailing newline is INVALID_ARGUMENT, not INTERNAL."""
    await wallet.client.create_account("alice")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await wallet.client.stub.GetStatement(
            pb.GetStatementRequest(account=pb.AccountRef(player_id="alice"),
                                   page_token="1-1\n"),
            metadata=wallet.client.metadata(OPERATOR), timeout=10)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
