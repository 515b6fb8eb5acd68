"""Dealer integration fixtures: a real Redis (through the dealer's and the table's ACL users
when the session runs its own server) and a real in-process grpc.aio dealer on 127.0.0.1:0;
``TableRole`` writes the table's public stream as the table service will."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping

import pytest

from dealer.config import Settings
from rules import TableConfig
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.dealer import MakeTable, RunningDealer, TableRole, running_dealer
from studtest.redis import TestRedis
from studtools.devkeys import DevKeys

_tables = itertools.count(1)


def service_url(redis_server: TestRedis, admin_url: str, service: str) -> str:
    """A service ACL user's URL when this session runs the server, else the admin URL."""
    if redis_server.server is not None:
        return redis_server.server.url_for(service)
    return admin_url


@pytest.fixture
async def dealer(redis_server: TestRedis, redis_url: str,
                 dev_keys: DevKeys) -> AsyncIterator[RunningDealer]:
    """A fresh dealer on a flushed Redis, trusting the session's dev keys."""
    settings = Settings(addr="127.0.0.1:0", auth_keys=dev_keys.key_set(),
                        redis_url=service_url(redis_server, redis_url, "dealer"))
    async with running_dealer(settings, dev_keys) as running:
        yield running


@pytest.fixture
async def table_events(redis_server: TestRedis, redis_url: str) -> AsyncIterator[EventStore]:
    """The event store as the table service uses it (the table's Redis user)."""
    client = connect(service_url(redis_server, redis_url, "table"))
    yield EventStore(client)
    await client.aclose()


@pytest.fixture
def make_table(dealer: RunningDealer, table_events: EventStore) -> MakeTable:
    """Open a table (public events in its stream) with players seated: seat -> name."""

    async def make(players: Mapping[int, str], config: TableConfig | None = None,
                   **kwargs: object) -> TableRole:
        table = TableRole(table_events, dealer.client, f"t-{next(_tables)}",
                          config or TableConfig(), players, **kwargs)  # type: ignore[arg-type]
        await table.open()
        return table

    return make
