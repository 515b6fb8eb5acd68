"""Durability with AOF ``appendfsync always``: every append the store acknowledged survives a
SIGKILL of Redis, and a command's events survive together or not at all (docs/redis.md)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from stud.v1.envelope_pb2 import EventEnvelope
from studkit.store import AppendResult, EventStore, StoredEvent
from studtools.redis_server import RedisServer

DEADLINE = 30.0


@pytest.fixture
def servers() -> Iterator[list[RedisServer]]:
    """Servers started by a test; each is stopped afterwards."""
    started: list[RedisServer] = []
    yield started
    for server in started:
        server.stop()


def start(servers: list[RedisServer], data_dir: Path) -> RedisServer:
    server = RedisServer(appendonly=True, appendfsync="always", data_dir=data_dir).start()
    servers.append(server)
    return server


def batch(command: str, n: int) -> list[EventEnvelope]:
    return [EventEnvelope(event_type=f"{command}.{i}", schema_version=1, payload=b"x" * 64)
            for i in range(n)]


async def read_all(url: str, tables: list[str]) -> dict[str, list[StoredEvent]]:
    client = aioredis.Redis.from_url(url)
    try:
        store = EventStore(client)
        return {table: await store.read(table) for table in tables}
    finally:
        await client.aclose()


class TestAppendfsyncAlways:
    async def test_acknowledged_appends_survive_a_sigkill(
        self, tmp_path: Path, servers: list[RedisServer]
    ) -> None:
        """After SIGKILL and a restart on the same data directory, every acknowledged append
        is there, with its events, versions, command records and the table index."""
        server = start(servers, tmp_path)
        client = aioredis.Redis.from_url(server.url)
        store = EventStore(client)
        acknowledged: dict[str, AppendResult] = {}
        for table in ("t1", "t2"):
            version = 0
            for step in range(20):
                result = await store.append(table, batch(f"{table}-c{step}", 1 + step % 5),
                                            expected_version=version,
                                            command_id=f"{table}-c{step}")
                acknowledged[f"{table}-c{step}"] = result
                version = result.version
        before = await read_all(server.url, ["t1", "t2"])
        await client.aclose()
        server.kill()

        restarted = start(servers, tmp_path)
        assert await read_all(restarted.url, ["t1", "t2"]) == before
        client = aioredis.Redis.from_url(restarted.url)
        try:
            store = EventStore(client)
            assert await store.table_ids() == ["t1", "t2"]
            assert await store.version("t1") == acknowledged["t1-c19"].version
            retry = await store.append("t1", batch("again", 1), 0, command_id="t1-c7")
            assert retry == AppendResult(acknowledged["t1-c7"].version,
                                         acknowledged["t1-c7"].stream_ids, duplicate=True)
        finally:
            await client.aclose()

    async def test_a_crash_during_appends_loses_no_acknowledged_command_and_splits_none(
        self, tmp_path: Path, servers: list[RedisServer]
    ) -> None:
        """Writers append multi-event commands concurrently; Redis is SIGKILLed mid-flight.
        After restart every acknowledged command is present, and every command present has
        all of its events (the one in flight may be there whole, or not at all)."""
        server = start(servers, tmp_path)
        tables = [f"w{i}" for i in range(4)]
        sizes: dict[str, int] = {}
        acknowledged: set[str] = set()
        enough = asyncio.Event()

        async def writer(table: str) -> None:
            client = aioredis.Redis.from_url(server.url, socket_timeout=5)
            store = EventStore(client)
            version, step = 0, 0
            try:
                while True:
                    command = f"{table}-c{step}"
                    sizes[command] = 1 + step % 5
                    result = await store.append(table, batch(command, sizes[command]),
                                                expected_version=version, command_id=command)
                    acknowledged.add(command)
                    if len(acknowledged) >= 200:
                        enough.set()
                    version, step = result.version, step + 1
            except (RedisConnectionError, RedisTimeoutError, OSError):
                return  # the server is gone
            finally:
                await client.aclose(close_connection_pool=True)

        tasks = [asyncio.create_task(writer(table)) for table in tables]
        async with asyncio.timeout(DEADLINE):
            await enough.wait()
        server.kill()
        async with asyncio.timeout(DEADLINE):
            await asyncio.gather(*tasks)

        restarted = start(servers, tmp_path)
        stored = await read_all(restarted.url, tables)
        per_command = Counter(e.envelope.command_id for events in stored.values() for e in events)
        assert acknowledged <= set(per_command)
        assert all(per_command[command] == sizes[command] for command in per_command)
        for events in stored.values():
            assert [e.envelope.sequence for e in events] == list(range(1, len(events) + 1))
