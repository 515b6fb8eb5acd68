"""The services' Redis pools wait for a connection (issue 17, F2): a burst of more calls than
the pool has connections queues for them instead of failing "Too many connections", and a
call that waits too long fails as a lost connection does (UNAVAILABLE to the caller). On a
real Redis (a Redis Cluster under ``make test-cluster``, whose client waits for a turn)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis

from studkit.redis_client import Client, connect, is_cluster

pytestmark = pytest.mark.integration

POOL = 100
"""The services' pool (``studkit.redis_client.POOL_SIZE``)."""
BURST = 300
HOLD_S = 0.1
"""How long each call of the burst holds its connection (a ``BLPOP`` on an empty list)."""


async def held_call(client: Client, key: str) -> bool:
    """One call that keeps its connection for :data:`HOLD_S` (nothing to pop)."""
    return await client.blpop([key], timeout=HOLD_S) is None


async def held_pipeline(client: Client, key: str) -> bool:
    pipe = client.pipeline(transaction=False)
    pipe.blpop([key], timeout=HOLD_S)
    pipe.exists(key)
    return await pipe.execute() == [None, 0]


async def test_a_burst_of_300_calls_on_a_pool_of_100_all_succeed(redis_url: str) -> None:
    """300 concurrent calls, then 300 concurrent pipelines, each holding a connection for a
    while: every one succeeds (the non-blocking pool refused every call past the 100th), and
    Redis never sees more of this client's connections than the pool holds."""
    name = f"burst-{uuid.uuid4().hex[:8]}"
    client = connect(redis_url, max_connections=POOL, socket_timeout=10,
                     client_name=name)
    admin = connect(redis_url)
    await admin.ping()  # a cluster client knows its nodes from its first command on
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            listing = await admin.client_list() if not is_cluster(admin) else [
                c for node in admin.get_primaries()
                for c in await admin.client_list(target_nodes=node)]
            ours = [c for c in listing if c.get("name") == name]
            if is_cluster(client):  # per node
                per_node: dict[str, int] = {}
                for c in ours:
                    per_node[str(c.get("laddr"))] = per_node.get(str(c.get("laddr")), 0) + 1
                peak = max([peak, *per_node.values()])
            else:
                peak = max(peak, len(ours))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    try:
        for call in (held_call, held_pipeline):
            key = f"stud:test:empty:{uuid.uuid4().hex}"
            answers = await asyncio.gather(*(call(client, key) for _ in range(BURST)),
                                           return_exceptions=True)
            failed = [a for a in answers if a is not True]
            assert failed == [], (call.__name__, failed[:3], len(failed))
    finally:
        watcher.cancel()
        await client.aclose()
        await admin.aclose()
    # A cluster client also reads the slot map over a connection of its own.
    assert 0 < peak <= POOL + (1 if is_cluster(client) else 0)


async def test_a_call_that_waits_too_long_for_a_connection_fails(redis_url: str) -> None:
    """Past ``pool_wait_s`` a waiting call fails with ``redis.ConnectionError`` (reported as
    UNAVAILABLE, store_unavailable), and the pool serves again once its calls are back."""
    client = connect(redis_url, max_connections=2, pool_wait_s=0.2, socket_timeout=10)
    key = f"stud:test:empty:{uuid.uuid4().hex}"
    try:
        slow = [asyncio.create_task(client.blpop([key], timeout=2)) for _ in range(2)]
        await asyncio.sleep(0.3)  # both connections taken
        with pytest.raises(redis.ConnectionError):
            await client.get(key)
        assert await asyncio.gather(*slow) == [None, None]
        assert await client.get(key) is None
    finally:
        await client.aclose()
