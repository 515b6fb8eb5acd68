"""Wallet integration fixtures: a real Redis (through the wallet's ACL user when the session
runs its own server) and a real in-process grpc.aio wallet server on 127.0.0.1:0."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from studkit.redis_client import connect
from studtest.redis import TestRedis
from studtest.wallet import RunningWallet, running_wallet
from studtools.devkeys import DevKeys
from wallet.config import Settings


def wallet_url(redis_server: TestRedis, admin_url: str) -> str:
    """The wallet ACL user's URL when this session runs the server, else the admin URL."""
    if redis_server.server is not None:
        return redis_server.server.url_for("wallet")
    return admin_url


@pytest.fixture
async def wallet(redis_server: TestRedis, redis_url: str,
                 dev_keys: DevKeys) -> AsyncIterator[RunningWallet]:
    """A fresh wallet on a flushed Redis, trusting the session's dev keys."""
    settings = Settings(addr="127.0.0.1:0", redis_url=wallet_url(redis_server, redis_url),
                        auth_keys=dev_keys.key_set())
    async with running_wallet(settings, dev_keys) as running:
        yield running


@pytest.fixture
async def snapshot(redis_url: str) -> AsyncIterator[Callable[[], Awaitable[dict[str, Any]]]]:
    """Every wallet key with its content (a test-only SCAN), to prove a refusal changed
    nothing."""
    admin = connect(redis_url, decode_responses=True)

    async def take() -> dict[str, Any]:
        state: dict[str, Any] = {}
        async for key in admin.scan_iter(match="stud:wallet:*"):
            kind = await admin.type(key)
            if kind == "hash":
                state[key] = await admin.hgetall(key)
            elif kind == "stream":
                state[key] = await admin.xrange(key)
            else:
                state[key] = kind
        return state

    yield take
    await admin.aclose()
