"""Client SDK fixtures: the whole room in process (real dealer, wallet and table gRPC servers
over the session's real Redis) and SDK clients connected to it as any principal."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from studclient import Client
from studkit.auth import Principal
from studtest.redis import TestRedis
from studtest.table import Room, running_room
from studtools.devkeys import DevKeys

ClientFor = Callable[[Principal], Client]


def connect(room: Room, who: Principal, table_port: int | None = None, **kwargs: object
            ) -> Client:
    """An SDK client of the room as ``who`` (tokens from the room's token book)."""
    tokens = room.client.tokens
    return Client.connect(f"127.0.0.1:{table_port or room.table_port}",
                          f"127.0.0.1:{room.dealer.port}", f"127.0.0.1:{room.wallet.port}",
                          lambda: tokens.token(who), **kwargs)  # type: ignore[arg-type]


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
               ) -> AsyncIterator[Room]:
    """A fresh room on a flushed Redis."""
    async with running_room(redis_server, redis_url, dev_keys) as running:
        yield running


@pytest.fixture
def connector() -> Callable[..., Client]:
    """:func:`connect`, for tests (``connect(room, who, table_port=None, **kwargs)``)."""
    return connect


@pytest.fixture
async def client_for(room: Room) -> AsyncIterator[ClientFor]:
    """Makes SDK clients of the room; all are closed at the end of the test."""
    made: list[Client] = []

    def make(who: Principal) -> Client:
        client = connect(room, who)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
