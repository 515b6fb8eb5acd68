"""Tournament integration fixtures: a real Redis (through each service's ACL user when the
session runs its own server), a real wallet and a real tournament service on 127.0.0.1:0,
its process manager running; or the whole room (dealer, wallet, table service) and the
settings of a tournament service that drives its tables."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from studtest.redis import TestRedis
from studtest.table import Room, fast_settings, running_room
from studtest.tournament_service import OffsetClock, RunningTournament, running_tournament
from studtest.wallet import RunningWallet, running_wallet
from studtools.devkeys import DevKeys
from tournament.config import Settings
from wallet.config import Settings as WalletSettings


def url_for(redis_server: TestRedis, admin_url: str, user: str) -> str:
    return redis_server.server.url_for(user) if redis_server.server is not None else admin_url


@pytest.fixture
async def wallet(redis_server: TestRedis, redis_url: str,
                 dev_keys: DevKeys) -> AsyncIterator[RunningWallet]:
    settings = WalletSettings(addr="127.0.0.1:0",
                              redis_url=url_for(redis_server, redis_url, "wallet"),
                              auth_keys=dev_keys.key_set())
    async with running_wallet(settings, dev_keys) as running:
        yield running


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
               ) -> AsyncIterator[Room]:
    async with running_room(redis_server, redis_url, dev_keys) as running:
        yield running


@pytest.fixture
def room_settings(room: Room, redis_server: TestRedis, redis_url: str,
                  dev_keys: DevKeys) -> Settings:
    """A tournament service's settings over ``room`` (fast rounds, the room's fast tables)."""
    return Settings(addr="127.0.0.1:0", redis_url=url_for(redis_server, redis_url, "tournament"),
                    auth_keys=dev_keys.key_set(), service_key=dev_keys.service_key("tournament"),
                    wallet_target=f"127.0.0.1:{room.wallet.port}",
                    table_target=f"127.0.0.1:{room.table_port}", tick_s=0.05,
                    table_settings=fast_settings())


@pytest.fixture
def tournament_clock() -> OffsetClock:
    """The clock the ``tournament`` fixture's service decides by: the wall clock until a test
    moves it (``jump_to``), so a start comes when the test says."""
    return OffsetClock()


@pytest.fixture
async def tournament(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
                     wallet: RunningWallet, tournament_clock: OffsetClock
                     ) -> AsyncIterator[RunningTournament]:
    settings = Settings(addr="127.0.0.1:0",
                        redis_url=url_for(redis_server, redis_url, "tournament"),
                        auth_keys=dev_keys.key_set(),
                        service_key=dev_keys.service_key("tournament"),
                        wallet_target=f"127.0.0.1:{wallet.port}", tick_s=0.05)
    async with running_tournament(settings, dev_keys, clock=tournament_clock) as running:
        yield running
