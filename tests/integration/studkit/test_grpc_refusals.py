"""Refusals the shared plumbing makes itself, over a real in-process grpc.aio server: an
undecodable body is INVALID_ARGUMENT (after the token check), a stream ends when its token
expires, a store that cannot answer is UNAVAILABLE and too many streams RESOURCE_EXHAUSTED;
each mapped, logged and counted like a handler's refusal."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
import structlog
from grpc_health.v1 import health_pb2
from redis.exceptions import BusyLoadingError, MaxConnectionsError, ReadOnlyError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from structlog.testing import capture_logs

from studkit.auth import Principal, Role, TokenVerifier, bearer_metadata
from studkit.grpc_server import (
    EXPIRY_POLL_S,
    GrpcServer,
    create_grpc_server,
    current_principal,
    rpc_error_info,
    rpc_error_reason,
)
from studkit.limits import StreamLimiter
from studkit.metrics import REQUESTS
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration

SERVICE = "test.v1.Refusals"
KEYS = DevKeys.generate()
ALICE = Principal(Role.PLAYER, "alice")
Request = health_pb2.HealthCheckRequest
UNDECODABLE = b"\xff\xff\xff\xff"  # field 31, wire type 7: no such wire type


class Clock:
    """Real time plus an offset a test may move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class Probe:
    """Handlers of the test service, with what they saw."""

    def __init__(self) -> None:
        self.stream_closed = asyncio.Event()
        self.writer_cancelled = asyncio.Event()
        self.failure: Exception | None = None
        self.limiter = StreamLimiter(per_principal=2, per_peer=3)

    async def echo(self, request: Any, context: grpc.aio.ServicerContext) -> bytes:
        return f"{current_principal().subject}:{request.service}".encode()

    async def fail(self, request: Any, context: grpc.aio.ServicerContext) -> bytes:
        assert self.failure is not None
        raise self.failure

    async def ticks(self, request: Any, context: grpc.aio.ServicerContext
                    ) -> AsyncIterator[bytes]:
        """One tick now, then one per 0.2 s until the client goes (or the token expires)."""
        try:
            async with self.limiter.hold(current_principal(), context.peer()):
                while True:
                    yield b"tick"
                    await asyncio.sleep(0.2)
        finally:
            self.stream_closed.set()

    async def quiet(self, request: Any, context: grpc.aio.ServicerContext
                    ) -> AsyncIterator[bytes]:
        """One message, then silence: a watch with nothing new to say."""
        try:
            yield b"hello"
            await asyncio.Event().wait()
        finally:
            self.stream_closed.set()

    async def bound(self, request: Any, context: grpc.aio.ServicerContext
                    ) -> AsyncIterator[bytes]:
        """Binds a log variable, as the dealer binds table_id, then waits."""
        structlog.contextvars.bind_contextvars(table_id="t-9")
        yield b"hello"
        await asyncio.Event().wait()

    async def writer(self, request: Any, context: grpc.aio.ServicerContext) -> None:
        """A stream that answers through context.write, then waits."""
        await context.write(b"hello")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.writer_cancelled.set()
            raise


def _identity(x: bytes) -> bytes:
    return x


def add_probe(probe: Probe, server: grpc.aio.Server) -> None:
    decode = Request.FromString
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(probe.echo, decode, _identity),
        "Fail": grpc.unary_unary_rpc_method_handler(probe.fail, _identity, _identity),
        "EchoStream": grpc.unary_stream_rpc_method_handler(probe.quiet, decode, _identity),
        "Ticks": grpc.unary_stream_rpc_method_handler(probe.ticks, _identity, _identity),
        "Quiet": grpc.unary_stream_rpc_method_handler(probe.quiet, _identity, _identity),
        "Writer": grpc.unary_stream_rpc_method_handler(probe.writer, _identity, _identity),
        "Bound": grpc.unary_stream_rpc_method_handler(probe.bound, _identity, _identity),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


def issue(who: Principal = ALICE, ttl_seconds: int = 3600) -> tuple[tuple[str, str]]:
    return bearer_metadata(KEYS.issuer_for(who).issue(who, ttl_seconds))


def make_verifier() -> TokenVerifier:
    return KEYS.verifier()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
async def server(probe: Probe, clock: Clock) -> AsyncIterator[GrpcServer]:
    running = create_grpc_server("127.0.0.1:0", [(add_probe, probe, SERVICE)],
                                 verifier=make_verifier(), clock=clock)
    await running.start()
    yield running
    await running.stop(None)


@pytest.fixture
async def channel(server: GrpcServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


def calls(server: GrpcServer, method: str, code: str) -> float:
    return server.metrics.sample(f"{REQUESTS}_total", service=SERVICE, method=method, code=code)


async def refusal(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value


async def stream_refusal(call: Any) -> tuple[list[bytes], grpc.aio.AioRpcError]:
    seen: list[bytes] = []
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for item in call:
            seen.append(item)
    return seen, info.value


class TestUndecodableRequests:
    async def test_an_undecodable_body_is_invalid_argument(
        self, channel: grpc.aio.Channel, server: GrpcServer
    ) -> None:
        """Raw bytes that are no request message get INVALID_ARGUMENT with reason
        undecodable_request (not UNKNOWN), logged and counted."""
        with capture_logs() as logs:
            error = await refusal(channel.unary_unary(f"/{SERVICE}/Echo")(
                UNDECODABLE, metadata=issue(), timeout=5))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert rpc_error_reason(error) == "undecodable_request"
        info = rpc_error_info(error)
        assert info is not None and info.reason == "undecodable_request"
        assert info.metadata["field"] == "request"
        assert "DecodeError" in (error.details() or "")
        assert calls(server, "Echo", "INVALID_ARGUMENT") == 1
        rejected = [e for e in logs if e["event"] == "rpc_rejected"]
        assert [e["reason"] for e in rejected] == ["undecodable_request"]

    async def test_without_a_token_the_token_is_refused_first(
        self, channel: grpc.aio.Channel, server: GrpcServer
    ) -> None:
        """An undecodable body without a token is UNAUTHENTICATED: callers learn nothing
        about a request before they are known; the call is still logged and counted."""
        with capture_logs() as logs:
            error = await refusal(channel.unary_unary(f"/{SERVICE}/Echo")(
                UNDECODABLE, timeout=5))
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(error) == "missing_token"
        assert calls(server, "Echo", "UNAUTHENTICATED") == 1
        assert [e["reason"] for e in logs if e["event"] == "rpc_rejected"] == ["missing_token"]

    async def test_a_stream_with_an_undecodable_body_is_invalid_argument(
        self, channel: grpc.aio.Channel, server: GrpcServer
    ) -> None:
        """A server stream refuses an undecodable request the same way, before any reply."""
        seen, error = await stream_refusal(channel.unary_stream(f"/{SERVICE}/EchoStream")(
            UNDECODABLE, metadata=issue(), timeout=5))
        assert seen == []
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert rpc_error_reason(error) == "undecodable_request"
        assert calls(server, "EchoStream", "INVALID_ARGUMENT") == 1

    async def test_a_decodable_body_still_reaches_the_handler(
        self, channel: grpc.aio.Channel
    ) -> None:
        """The tolerant deserializer passes well-formed requests through unchanged."""
        reply = await channel.unary_unary(f"/{SERVICE}/Echo")(
            Request(service="x").SerializeToString(), metadata=issue(), timeout=5)
        assert reply == b"player:alice:x"


class TestStreamsEndWithTheirToken:
    async def test_a_stream_ends_unauthenticated_when_the_token_expires(
        self, channel: grpc.aio.Channel, server: GrpcServer, clock: Clock, probe: Probe
    ) -> None:
        """A stream that keeps sending ends with UNAUTHENTICATED (token_expired) once the
        clock passes its token's expiry; the handler is closed and the call counted."""
        call = channel.unary_stream(f"/{SERVICE}/Ticks")(b"", metadata=issue(ttl_seconds=60),
                                                          timeout=30)
        assert await call.read() == b"tick"
        assert await call.read() == b"tick"  # still valid: it keeps going
        clock.offset = 61
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            while True:
                await call.read()
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(info.value) == "token_expired"
        assert time.monotonic() - started < EXPIRY_POLL_S + 2
        await asyncio.wait_for(probe.stream_closed.wait(), 5)
        assert probe.limiter.open_streams(ALICE) == 0
        assert calls(server, "Ticks", "UNAUTHENTICATED") == 1

    async def test_a_waiting_stream_ends_too(
        self, channel: grpc.aio.Channel, server: GrpcServer, clock: Clock, probe: Probe
    ) -> None:
        """A stream with nothing to send (waiting for news) ends at the expiry too, and its
        handler is cancelled and closed."""
        call = channel.unary_stream(f"/{SERVICE}/Quiet")(b"", metadata=issue(), timeout=30)
        assert await call.read() == b"hello"
        clock.offset = 3600
        error = await refusal(call.read())
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(error) == "token_expired"
        await asyncio.wait_for(probe.stream_closed.wait(), 5)

    async def test_a_stream_written_through_the_context_ends_too(
        self, channel: grpc.aio.Channel, clock: Clock, probe: Probe
    ) -> None:
        """A handler that answers with context.write is cancelled at the expiry."""
        call = channel.unary_stream(f"/{SERVICE}/Writer")(b"", metadata=issue(), timeout=30)
        assert await call.read() == b"hello"
        clock.offset = 3600
        error = await refusal(call.read())
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(error) == "token_expired"
        await asyncio.wait_for(probe.writer_cancelled.wait(), 5)

    async def test_what_the_handler_binds_is_in_the_calls_last_line(
        self, channel: grpc.aio.Channel, clock: Clock
    ) -> None:
        """The handler's steps run in tasks, yet what it binds to the log context reaches the
        call's closing line, with the principal."""
        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
            call = channel.unary_stream(f"/{SERVICE}/Bound")(b"", metadata=issue(), timeout=30)
            assert await call.read() == b"hello"
            clock.offset = 3600
            error = await refusal(call.read())
            assert rpc_error_reason(error) == "token_expired"
            for _ in range(100):
                if any(e["event"] == "rpc_rejected" for e in logs):
                    break
                await asyncio.sleep(0.02)
        [line] = [e for e in logs if e["event"] == "rpc_rejected"]
        assert line["table_id"] == "t-9" and line["principal"] == "player:alice"
        assert line["reason"] == "token_expired"

    async def test_a_real_two_second_token(self, channel: grpc.aio.Channel) -> None:
        """With the real clock, a stream on a 2-second token ends within about 2 s."""
        call = channel.unary_stream(f"/{SERVICE}/Ticks")(b"", metadata=issue(ttl_seconds=2),
                                                          timeout=30)
        started = time.monotonic()
        seen, error = await stream_refusal(call)
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(error) == "token_expired"
        assert len(seen) >= 1 and time.monotonic() - started < 3.5

    async def test_a_unary_call_is_not_cut_short(
        self, channel: grpc.aio.Channel, clock: Clock
    ) -> None:
        """Only streams are timed: a unary call with a valid token is answered."""
        reply = await channel.unary_unary(f"/{SERVICE}/Echo")(
            Request(service="y").SerializeToString(), metadata=issue(), timeout=5)
        assert reply == b"player:alice:y"


REDIS_FAILURES: dict[str, Callable[[], Exception]] = {
    "connection": lambda: RedisConnectionError("Error 111 connecting to 10.9.8.7:6379."),
    "timeout": lambda: RedisTimeoutError("Timeout reading from 10.9.8.7:6379"),
    "loading": lambda: BusyLoadingError("Redis is loading the dataset in memory"),
    "pool": lambda: MaxConnectionsError("Too many connections"),
    "readonly": lambda: ReadOnlyError("You can't write against a read only replica."),
}


class TestStoreOutages:
    @pytest.mark.parametrize("kind", sorted(REDIS_FAILURES))
    async def test_redis_failures_are_unavailable(
        self, channel: grpc.aio.Channel, server: GrpcServer, probe: Probe, kind: str
    ) -> None:
        """Lost connections, time-outs, a loading or read-only Redis and an empty pool are
        UNAVAILABLE (store_unavailable, "retry with the same idempotency key"), logged as a
        warning with the cause, and never name the store's address."""
        probe.failure = REDIS_FAILURES[kind]()
        with capture_logs() as logs:
            error = await refusal(channel.unary_unary(f"/{SERVICE}/Fail")(
                b"", metadata=issue(), timeout=5))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert rpc_error_reason(error) == "store_unavailable"
        assert "same idempotency key" in (error.details() or "")
        assert "10.9.8.7" not in (error.details() or "")
        assert calls(server, "Fail", "UNAVAILABLE") == 1
        [line] = [e for e in logs if e["event"] == "rpc_rejected"]
        assert line["log_level"] == "warning"
        assert line["error"] == type(probe.failure).__name__


class TestStreamLimits:
    async def test_too_many_streams_is_resource_exhausted(
        self, channel: grpc.aio.Channel, server: GrpcServer, probe: Probe
    ) -> None:
        """Past the limiter's per-principal bound a stream is RESOURCE_EXHAUSTED
        (too_many_streams); once one closes, another may open."""
        metadata = issue()
        first = channel.unary_stream(f"/{SERVICE}/Ticks")(b"", metadata=metadata, timeout=30)
        second = channel.unary_stream(f"/{SERVICE}/Ticks")(b"", metadata=metadata, timeout=30)
        assert await first.read() == b"tick" and await second.read() == b"tick"
        _, error = await stream_refusal(
            channel.unary_stream(f"/{SERVICE}/Ticks")(b"", metadata=metadata, timeout=30))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert rpc_error_reason(error) == "too_many_streams"
        assert calls(server, "Ticks", "RESOURCE_EXHAUSTED") == 1
        first.cancel()
        for _ in range(100):
            if probe.limiter.open_streams(ALICE) < 2:
                break
            await asyncio.sleep(0.02)
        third = channel.unary_stream(f"/{SERVICE}/Ticks")(b"", metadata=metadata, timeout=30)
        assert await third.read() == b"tick"
        second.cancel()
        third.cancel()
