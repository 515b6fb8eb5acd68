"""Client SDK fixtures: the whole room in process (real dealer, wallet and table gRPC servers
over the session's real Redis) and SDK clients connected to it as any principal."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from studclient import Client
from studkit.auth import Principal
from studtest.redis import TestRedis
from studtest.table import Room, fast_settings, running_room
from studtest.tournament_service import RunningTournament, running_tournament
from studtools.devkeys import DevKeys
from tournament.config import Settings

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


@pytest.fixture
async def tournaments(room: Room, redis_server: TestRedis, redis_url: str,
                      dev_keys: DevKeys) -> AsyncIterator[RunningTournament]:
    """A tournament service over ``room`` (its own Redis user, fast rounds, fast tables)."""
    url = (redis_server.server.url_for("tournament") if redis_server.server is not None
           else redis_url)
    settings = Settings(addr="127.0.0.1:0", redis_url=url, auth_keys=dev_keys.key_set(),
                        service_key=dev_keys.service_key("tournament"),
                        wallet_target=f"127.0.0.1:{room.wallet.port}",
                        table_target=f"127.0.0.1:{room.table_port}", tick_s=0.05,
                        table_settings=fast_settings())
    async with running_tournament(settings, dev_keys) as running:
        yield running


def client_env(room: Room, tournaments: RunningTournament, keys: DevKeys,
               monkeypatch: pytest.MonkeyPatch, **extra: str) -> dict[str, str]:
    """The variables a ``stud`` command of this room reads (set in the process too)."""
    env = {"STUD_TABLE_TARGET": f"127.0.0.1:{room.table_port}",
           "STUD_DEALER_TARGET": f"127.0.0.1:{room.dealer.port}",
           "STUD_WALLET_TARGET": f"127.0.0.1:{room.wallet.port}",
           "STUD_TOURNAMENT_TARGET": f"127.0.0.1:{tournaments.port}",
           "STUD_ISSUER_KEY": keys.issuer_key.pem(), **extra}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("STUD_OPERATOR_TOKEN", raising=False)
    return env
