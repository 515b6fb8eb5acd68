"""Per-call metrics of the shared server plumbing, against a real in-process grpc.aio server:
every call of a registered method is counted once with the status code the client saw (mapped
refusals, unauthenticated calls, internal errors, streams, deadlines) and timed; probes and
unknown methods are not counted; the /metrics endpoint serves the server's own registry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from studkit.auth import Principal, Role, bearer_metadata
from studkit.errors import BadRequest, NotFound
from studkit.grpc_server import GrpcServer, create_grpc_server
from studkit.metrics import Metrics, metrics_endpoint, scrape
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

pytestmark = pytest.mark.integration

KEYS = DevKeys.generate(services=())
SERVICE = "test.v1.Counted"
REQUESTS = "stud_grpc_requests_total"


async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    if request == b"missing":
        raise NotFound("no such thing")
    if request == b"bad":
        raise BadRequest("amount", "must be positive")
    if request == b"boom":
        raise ZeroDivisionError("internals")
    if request == b"slow":
        await asyncio.sleep(5)
    return request


async def stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    yield b"one"
    if request == b"fail":
        raise BadRequest("cursor", "exhausted")


def _identity(x: bytes) -> bytes:
    return x


def add_counted(_servicer: object, server: grpc.aio.Server) -> None:
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo, _identity, _identity),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, _identity, _identity),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


@pytest.fixture
async def server() -> AsyncIterator[GrpcServer]:
    built = create_grpc_server("127.0.0.1:0", [(add_counted, None, SERVICE)],
                               verifier=KEYS.verifier())
    await built.start()
    yield built
    await built.stop(None)


@pytest.fixture
async def channel(server: GrpcServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


AUTH = bearer_metadata(KEYS.issuer().issue(Principal(Role.PLAYER, "alice")))


async def call(channel: grpc.aio.Channel, payload: bytes, *, auth: bool = True,
               timeout: float = 5) -> grpc.StatusCode:
    try:
        await channel.unary_unary(f"/{SERVICE}/Echo")(
            payload, metadata=AUTH if auth else None, timeout=timeout)
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def settled(metrics: Metrics, name: str, want: float, **labels: str) -> float:
    """The sample once it reaches ``want`` (the server records a cancelled call after the
    client has given up), or its value after 3 s."""
    for _ in range(60):
        if metrics.sample(name, **labels) >= want:
            break
        await asyncio.sleep(0.05)
    return metrics.sample(name, **labels)


def requests(metrics: Metrics, method: str, code: str) -> float:
    return metrics.sample(REQUESTS, service=SERVICE, method=method, code=code)


class TestCounts:
    async def test_each_call_is_counted_once_with_its_code(
        self, server: GrpcServer, channel: grpc.aio.Channel
    ) -> None:
        """OK, mapped refusals, a missing token and an internal error each land under the
        code the client saw, and every call is timed."""
        codes = [await call(channel, p) for p in (b"a", b"b", b"missing", b"bad", b"boom")]
        codes.append(await call(channel, b"a", auth=False))
        assert [c.name for c in codes] == ["OK", "OK", "NOT_FOUND", "INVALID_ARGUMENT",
                                           "INTERNAL", "UNAUTHENTICATED"]
        m = server.metrics
        assert requests(m, "Echo", "OK") == 2
        for code in ("NOT_FOUND", "INVALID_ARGUMENT", "INTERNAL", "UNAUTHENTICATED"):
            assert requests(m, "Echo", code) == 1, code
        assert m.sample("stud_grpc_request_seconds_count", service=SERVICE, method="Echo") == 6

    async def test_streams_are_counted_when_they_end(
        self, server: GrpcServer, channel: grpc.aio.Channel
    ) -> None:
        """A finished stream is OK; one that raises midway carries the mapped code."""
        method = channel.unary_stream(f"/{SERVICE}/Stream")
        assert [r async for r in method(b"", metadata=AUTH, timeout=5)] == [b"one"]
        with pytest.raises(grpc.aio.AioRpcError) as info:
            _ = [r async for r in method(b"fail", metadata=AUTH, timeout=5)]
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert await settled(server.metrics, REQUESTS, 1, service=SERVICE, method="Stream",
                             code="OK") == 1
        assert requests(server.metrics, "Stream", "INVALID_ARGUMENT") == 1

    async def test_a_call_past_its_deadline_is_counted_as_such(
        self, server: GrpcServer, channel: grpc.aio.Channel
    ) -> None:
        """A handler cut short by the client's deadline counts as DEADLINE_EXCEEDED."""
        assert await call(channel, b"slow", timeout=0.2) is grpc.StatusCode.DEADLINE_EXCEEDED
        assert await settled(server.metrics, REQUESTS, 1, service=SERVICE, method="Echo",
                             code="DEADLINE_EXCEEDED") == 1

    async def test_probes_and_unknown_methods_are_not_counted(
        self, server: GrpcServer, channel: grpc.aio.Channel
    ) -> None:
        """Health checks are not calls of the service, and a method nobody registered never
        becomes a label value."""
        health = health_pb2_grpc.HealthStub(channel)
        await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary(f"/{SERVICE}/Invented-by-client")(
                b"", metadata=AUTH, timeout=5)
        assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED
        families = {m.name for m in server.metrics.registry.collect()}
        assert {"stud_grpc_requests", "stud_grpc_request_seconds"} <= families
        samples = [s for m in server.metrics.registry.collect() for s in m.samples]
        assert not any(s.labels for s in samples if s.name == REQUESTS)

    async def test_servers_in_one_process_have_their_own_registries(
        self, server: GrpcServer, channel: grpc.aio.Channel
    ) -> None:
        """A second server counts nothing of the first one's calls."""
        other = create_grpc_server("127.0.0.1:0", [(add_counted, None, SERVICE)],
                                   verifier=KEYS.verifier())
        await other.start()
        try:
            await call(channel, b"a")
            assert requests(server.metrics, "Echo", "OK") == 1
            assert requests(other.metrics, "Echo", "OK") == 0
            assert other.metrics.registry is not server.metrics.registry
        finally:
            await other.stop(None)


class TestEndpoint:
    async def test_metrics_endpoint_serves_the_counts(
        self, server: GrpcServer, channel: grpc.aio.Channel
    ) -> None:
        """/metrics over HTTP shows the same counts, labelled by service, method and code."""
        for payload in (b"a", b"missing", b"missing"):
            await call(channel, payload)
        with metrics_endpoint(server.metrics.registry, free_port(), "127.0.0.1") as endpoint:
            assert endpoint is not None
            samples = await asyncio.to_thread(scrape, endpoint.port)
        counts = {(s.labels["method"], s.labels["code"]): s.value
                  for s in samples if s.name == REQUESTS}
        assert counts == {("Echo", "OK"): 1, ("Echo", "NOT_FOUND"): 2}
        assert {s.labels["service"] for s in samples if s.name == REQUESTS} == {SERVICE}

    def test_port_zero_serves_nothing(self) -> None:
        """METRICS_PORT=0 disables the endpoint."""
        with metrics_endpoint(Metrics().registry, 0) as endpoint:
            assert endpoint is None
