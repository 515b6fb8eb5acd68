"""The plain client's cheaper command path (``studkit.redis_client``: :class:`FastPool`, the
connections that write without a task, :class:`TimedRedis` running a command its lean way)
keeps what redis-py's own path gives, on a real redis-server of the test's own (paused with
SIGSTOP, stopped and started again):

- a stalled Redis fails a command within ``socket_timeout``, a read and a write alike, and
  the client serves again once Redis does;
- a command retries on a lost or stalled connection exactly as redis-py's ``Retry`` does
  (the same attempts, in the same order, each on a closed and reopened connection), so a
  Redis restart is ridden out and the fenced append, its NOSCRIPT reload included, goes on;
- a command cancelled while it waits leaves no reply behind for the next one;
- a pool of one connection serves a burst of concurrent commands and pipelines in turn;
- with OpenTelemetry's Redis instrumentation on, every command is a span, as before.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from stud.v1.envelope_pb2 import EventEnvelope
from studkit.redis_client import FastPool, TimedRedis, connect, reconnecting
from studkit.store import STORE_UNAVAILABLE_ERRORS, EventStore
from studtools.redis_server import RedisServer

pytestmark = pytest.mark.integration

TIMEOUT_S = 0.3
SLACK_S = 1.5
"""Generous room for a shared machine: a stalled command fails after ``TIMEOUT_S`` and well
before ``TIMEOUT_S + SLACK_S``."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own (it is paused, stopped and started again)."""
    started = RedisServer(appendonly=False, data_dir=tmp_path / "redis").start()
    yield started
    if started.process is not None:
        os.kill(started.process.pid, signal.SIGCONT)
    started.stop()


def no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


class Paused:
    """``with Paused(server):`` the server is stopped (SIGSTOP) inside, continued after."""

    def __init__(self, server: RedisServer) -> None:
        assert server.process is not None
        self.pid = server.process.pid

    def __enter__(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def __exit__(self, *exc: object) -> None:
        os.kill(self.pid, signal.SIGCONT)


def envelopes(n: int) -> list[EventEnvelope]:
    return [EventEnvelope(event_type="BetMade", schema_version=1, payload=b"x" * 48)
            for _ in range(n)]


async def test_a_stalled_redis_fails_a_read_within_the_socket_timeout(
        server: RedisServer) -> None:
    """A GET and a fenced append sent to a paused Redis each fail with a timeout after
    ``socket_timeout`` (no retry configured here: one attempt), and the same client serves
    again once Redis goes on."""
    client = connect(server.url, socket_timeout=TIMEOUT_S, retry=no_retry())
    store = EventStore(client)
    try:
        await client.set("stud:test:k", b"v")
        version = (await store.append("t1", envelopes(1), 0, command_id="c0")).version
        with Paused(server):
            for call in (lambda: client.get("stud:test:k"),
                         lambda: store.append("t1", envelopes(2), version, command_id="c1")):
                started = time.monotonic()
                with pytest.raises(redis.TimeoutError) as raised:
                    await call()
                elapsed = time.monotonic() - started
                assert TIMEOUT_S * 0.9 <= elapsed < TIMEOUT_S + SLACK_S, elapsed
                assert isinstance(raised.value, STORE_UNAVAILABLE_ERRORS)
        assert await client.get("stud:test:k") == b"v"
        # The append cut off may or may not have been applied: its retry is answered either way.
        result = await store.append("t1", envelopes(2), version, command_id="c1")
        assert result.version == version + 2
    finally:
        await client.aclose()


async def test_a_stalled_redis_fails_a_write_within_the_socket_timeout(
        server: RedisServer) -> None:
    """A command too big for the socket's buffers waits for a paused Redis to read it, and
    fails ``Timeout writing to socket`` after ``socket_timeout`` (the write's own timeout,
    where the lean write path waits on a paused transport)."""
    client = connect(server.url, socket_timeout=TIMEOUT_S, retry=no_retry())
    big = b"x" * (64 << 20)
    try:
        await client.ping()
        with Paused(server):
            started = time.monotonic()
            with pytest.raises(redis.TimeoutError, match="writing"):
                await client.set("stud:test:big", big)
            elapsed = time.monotonic() - started
            assert TIMEOUT_S * 0.9 <= elapsed < TIMEOUT_S + SLACK_S + 1.0, elapsed
        assert await client.ping()
    finally:
        await client.aclose()


def recorded_disconnects(pool: BlockingConnectionPool) -> list[tuple[str, int | None]]:
    """Patch ``pool``'s connection class to record each ``disconnect(error=...)``: the
    error's type and the failure count, as the retry reports them."""
    seen: list[tuple[str, int | None]] = []
    base: type[AbstractConnection] = pool.connection_class

    class Counted(base):  # type: ignore[valid-type,misc]
        async def disconnect(self, *args: Any, **kwargs: Any) -> None:
            error = kwargs.get("error")
            if error is not None:
                seen.append((type(error).__name__, kwargs.get("failure_count")))
            await super().disconnect(*args, **kwargs)

    pool.connection_class = Counted
    return seen


async def stalled_get(client: Redis, server: RedisServer) -> tuple[str, float]:
    await client.set("stud:test:k", b"v")  # one connection, open: the GET's read times out
    with Paused(server):
        started = time.monotonic()
        with pytest.raises(redis.RedisError) as raised:
            await client.get("stud:test:k")
        elapsed = time.monotonic() - started
    assert await client.get("stud:test:k") == b"v"
    return type(raised.value).__name__, elapsed


async def test_a_stalled_command_is_retried_as_redis_py_retries_it(
        server: RedisServer) -> None:
    """With the services' retry (:func:`reconnecting`, 6 retries with backoff), a command to
    a paused Redis is tried and its connection closed as many times, in the same order, with
    the same errors, as redis-py's own client does it: the lean path is the same retry."""
    outcomes = []
    for lean in (True, False):
        pool_class = FastPool if lean else BlockingConnectionPool
        pool = pool_class.from_url(server.url, socket_timeout=TIMEOUT_S, retry=reconnecting(),
                                   retry_on_error=[redis.ConnectionError, redis.TimeoutError])
        seen = recorded_disconnects(pool)
        client = (TimedRedis if lean else Redis).from_pool(pool)
        try:
            error, elapsed = await stalled_get(client, server)
        finally:
            await client.aclose()
        outcomes.append((error, seen))
        # 7 attempts of TIMEOUT_S each, 2.2 s of backoff between them.
        assert 0.95 * (7 * TIMEOUT_S + 2.2) <= elapsed < 7 * TIMEOUT_S + 2.2 + 3 * SLACK_S, \
            elapsed
    lean_outcome, stock_outcome = outcomes
    assert lean_outcome == stock_outcome
    assert lean_outcome[0] == "TimeoutError"
    assert [count for _, count in lean_outcome[1]][-7:] == [1, 2, 3, 4, 5, 6, 7]


async def test_a_restarted_redis_is_ridden_out_and_the_append_reloads_its_script(
        server: RedisServer) -> None:
    """Redis stops and starts again on the same port (no AOF: the stream and the script are
    gone): the client's pooled connections are dead, the next commands reconnect by
    themselves, and the fenced append answers NOSCRIPT by loading its script again."""
    client = connect(server.url, socket_timeout=10, health_check_interval=30)
    store = EventStore(client)
    try:
        assert (await store.append("t1", envelopes(2), 0, command_id="c0")).version == 2
        await asyncio.gather(*(client.get("stud:test:k") for _ in range(5)))  # 5 pooled
        server.stop()
        server.start()
        assert await client.get("stud:test:k") is None
        assert await asyncio.gather(*(client.exists("stud:test:k") for _ in range(5))) \
            == [0] * 5
        result = await store.append("t2", envelopes(3), 0, command_id="c1")
        assert result.version == 3 and not result.duplicate
        assert await store.append("t2", envelopes(3), 0, command_id="c1") == \
            type(result)(3, result.stream_ids, duplicate=True)
    finally:
        await client.aclose()


async def test_a_cancelled_command_leaves_no_reply_to_the_next(server: RedisServer) -> None:
    """A command cancelled while it waits for its reply (the caller gone, a deadline) closes
    its connection: on a pool of one, the next command runs on that connection reopened and
    reads its own reply, never the cancelled command's (which Redis sends once it goes on),
    and the pool holds no connection in use."""
    client = connect(server.url, max_connections=1, socket_timeout=10)
    try:
        await client.set("stud:test:a", b"first")
        await client.set("stud:test:b", b"second")
        async def get_a() -> Any:
            return await client.get("stud:test:a")

        with Paused(server):
            waiting = asyncio.create_task(get_a())
            await asyncio.sleep(0.2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        assert await client.get("stud:test:b") == b"second"
        assert await client.get("stud:test:a") == b"first"
        pool = getattr(client, "connection_pool", None)
        assert isinstance(pool, FastPool) and not pool._in_use_connections
    finally:
        await client.aclose()


async def test_a_pool_of_one_serves_a_burst_in_turn(server: RedisServer) -> None:
    """200 concurrent commands and 50 pipelines on a pool of one connection: each waits for
    the connection (the blocking path), gets it back from the one before it (woken on each
    release, the quick hand-back never leaving a waiter asleep), and all succeed; Redis sees
    one connection of this client."""
    client = connect(server.url, max_connections=1, pool_wait_s=10, socket_timeout=10,
                     client_name="burst-of-one")
    try:
        await client.set("stud:test:k", b"v")

        async def piped() -> list[Any]:
            async with client.pipeline(transaction=True) as pipe:
                pipe.get("stud:test:k")
                pipe.incr("stud:test:n")
                return await pipe.execute()

        gets = [client.get("stud:test:k") for _ in range(200)]
        answers: list[Any] = await asyncio.gather(*gets, *(piped() for _ in range(50)))
        assert answers[:200] == [b"v"] * 200
        assert sorted(piped_[1] for piped_ in answers[200:]) == list(range(1, 51))
        ours = [c for c in await client.client_list() if c.get("name") == "burst-of-one"]
        assert len(ours) == 1
        pool = getattr(client, "connection_pool", None)
        assert isinstance(pool, FastPool) and not pool._in_use_connections
    finally:
        await client.aclose()


async def test_with_tracing_on_every_command_is_a_span(server: RedisServer) -> None:
    """OpenTelemetry's Redis instrumentation (on when the services trace) wraps redis-py's
    ``execute_command``: the client then runs commands through it, one span each, the
    append's EVALSHA included; off again, commands run their lean way and make no span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = RedisInstrumentor()
    client = connect(server.url, socket_timeout=10)
    store = EventStore(client)
    instrumentor.instrument(tracer_provider=provider)
    try:
        await client.set("stud:test:k", b"v")
        assert await client.get("stud:test:k") == b"v"
        await store.append("t1", envelopes(1), 0, command_id="c0")
        names = [span.name for span in exporter.get_finished_spans()]
        assert names[:2] == ["SET", "GET"] and "EVALSHA" in names, names
    finally:
        instrumentor.uninstrument()
    exporter.clear()
    try:
        assert await client.get("stud:test:k") == b"v"
        assert exporter.get_finished_spans() == ()
    finally:
        await client.aclose()
