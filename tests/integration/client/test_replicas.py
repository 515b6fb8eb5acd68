"""The SDK against several table replicas: connected to one replica, it follows ``not_owner``
redirects to the table's owner for commands, views and its live watch."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable

import pytest

from studclient import Client, Stale, legal_actions, my_turn
from studtest.gateway import owned_by
from studtest.redis import TestRedis
from studtest.table import OPERATOR, fast_settings, player, running_room, running_table
from studtest.table import table_settings as make_settings
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration
LEASE_MS = 1500  # renewed every third of it: a stall of a second still keeps the owner


async def test_the_sdk_follows_redirects_to_the_owner(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        connector: Callable[..., Client]) -> None:
    async with running_room(redis_server, redis_url, dev_keys, lease_ms=LEASE_MS,
                            replica_id="r-room") as room:
        await room.table_deps.app.stop()
        async with contextlib.AsyncExitStack() as stack:
            running = []
            for i in range(2):
                settings = make_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                                         room.wallet.port, lease_ms=LEASE_MS,
                                         replica_id=f"r{i}")
                running.append(await stack.enter_async_context(running_table(settings)))
            await asyncio.sleep(LEASE_MS / 1000)
            for deps, _port in running:
                await deps.app.rebalance()
            first_port = running[0][1]
            table_id = owned_by("r1", ["r0", "r1"], "routed")
            ops = connector(room, OPERATOR, table_port=first_port)
            await ops.open_table(table_id, settings=fast_settings())
            assert table_id in running[1][0].app.actors
            assert ops.route(table_id) == f"127.0.0.1:{running[1][1]}"
            names = ("ann", "bob")
            clients = [connector(room, player(n), table_port=first_port) for n in names]
            for seat, (name, client) in enumerate(zip(names, clients, strict=True), start=1):
                await ops.create_account(name)
                await ops.deposit(name, 100_000)
                await client.sit(table_id, seat, 10_000)

            async def bot(client: Client, seed: int) -> int:
                rng = random.Random(seed)
                actions = 0
                async with client.watch(table_id) as watch:
                    async for view in watch.views():
                        if view.hands_started >= 2:
                            return actions
                        if my_turn(view):
                            with contextlib.suppress(Stale):
                                await client.act(table_id, rng.choice(legal_actions(view)),
                                                 expected_sequence=view.version)
                                actions += 1
                return actions

            async with asyncio.timeout(60):
                counts = await asyncio.gather(*(bot(c, i) for i, c in enumerate(clients)))
            assert sum(counts) > 0
            view = await ops.get_table(table_id)
            assert view.hands_started >= 2
            assert all(c.route(table_id) == ops.route(table_id) for c in clients)
            for client in (*clients, ops):
                await client.close()
