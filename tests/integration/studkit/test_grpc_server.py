"""The shared server plumbing against a real in-process grpc.aio server: tokens are required
except for probes, exceptions become status codes with a reason, nothing leaks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from structlog.testing import capture_logs

from rules.errors import Reason, RuleViolation
from studkit.auth import Forbidden, Principal, Role, TokenIssuer, TokenVerifier, bearer_metadata
from studkit.errors import AlreadyExists, BadRequest, Conflict, FailedPrecondition, NotFound
from studkit.grpc_server import (
    BASE_ERRORS,
    GrpcServer,
    create_grpc_server,
    current_principal,
    rpc_error_info,
    rpc_error_reason,
)

pytestmark = pytest.mark.integration

SECRET = "integration-test-secret-long-enough-for-hs256"
SERVICE = "test.v1.Probe"


class Gone(Exception):
    """A service-specific exception added to the table by extension."""

    reason = "gone_away"


ERRORS: dict[str, Exception] = {
    "bad": BadRequest("amount", "must be positive"),
    "rule": RuleViolation(Reason.NOT_YOUR_TURN, "seat 3 is to act"),
    "precondition": FailedPrecondition("balance too low", reason="insufficient_funds"),
    "forbidden": Forbidden("not yours"),
    "missing": NotFound("no such account"),
    "exists": AlreadyExists("account exists"),
    "conflict": Conflict("lost the race"),
    "gone": Gone("custom"),
    "boom": ZeroDivisionError("secret internals"),
}


async def whoami(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return current_principal().subject.encode()


async def fail(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    raise ERRORS[request.decode()]


async def stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    yield b"one"
    yield b"two"
    raise BadRequest("cursor", "exhausted")


def _identity(x: bytes) -> bytes:
    return x


def add_probe(_servicer: Any, server: grpc.aio.Server) -> None:
    handlers = {
        "Whoami": grpc.unary_unary_rpc_method_handler(whoami, _identity, _identity),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, _identity, _identity),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, _identity, _identity),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


@pytest.fixture(scope="module")
async def probe_server() -> AsyncIterator[GrpcServer]:
    server = create_grpc_server(
        "127.0.0.1:0",
        [(add_probe, None, SERVICE)],
        verifier=TokenVerifier(SECRET),
        errors=BASE_ERRORS.extend({Gone: grpc.StatusCode.UNAVAILABLE}),
    )
    await server.start()
    yield server
    await server.stop(None)


@pytest.fixture
async def channel(probe_server: GrpcServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{probe_server.port}") as ch:
        yield ch


def token(role: Role = Role.PLAYER, name: str = "alice", secret: str = SECRET) -> str:
    return TokenIssuer(secret).issue(Principal(role, name))


class TestProbesAndAuth:
    async def test_health_needs_no_token(self, channel: grpc.aio.Channel) -> None:
        """A health check without a token answers SERVING for the server and the service."""
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING

    async def test_reflection_needs_no_token(self, channel: grpc.aio.Channel) -> None:
        """Reflection lists the registered service without a token."""
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        replies = [r async for r in stub.ServerReflectionInfo(iter([request]), timeout=5)]
        assert len(replies) == 1
        names = {s.name for s in replies[0].list_services_response.service}
        assert SERVICE in names and "grpc.health.v1.Health" in names

    async def test_missing_token_is_unauthenticated(self, channel: grpc.aio.Channel) -> None:
        """A call without a token is UNAUTHENTICATED with reason missing_token."""
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary(f"/{SERVICE}/Whoami")(b"", timeout=5)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(info.value) == "missing_token"

    async def test_forged_token_is_unauthenticated(self, channel: grpc.aio.Channel) -> None:
        """A token signed with another key is UNAUTHENTICATED."""
        forged = token(secret="a-different-secret-of-sufficient-length!!")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary(f"/{SERVICE}/Whoami")(
                b"", metadata=bearer_metadata(forged), timeout=5
            )
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED

    async def test_handler_sees_the_principal(self, channel: grpc.aio.Channel) -> None:
        """The handler reads the verified caller from current_principal()."""
        reply = await channel.unary_unary(f"/{SERVICE}/Whoami")(
            b"", metadata=bearer_metadata(token(Role.SERVICE, "table")), timeout=5
        )
        assert reply == b"service:table"

    async def test_logs_bind_rpc_and_principal_but_never_the_token(
        self, channel: grpc.aio.Channel
    ) -> None:
        """One rpc_handled line carries rpc and principal; no line contains the token."""
        secret_token = token()
        with capture_logs() as logs:
            await channel.unary_unary(f"/{SERVICE}/Whoami")(
                b"", metadata=bearer_metadata(secret_token), timeout=5
            )
        handled = [e for e in logs if e["event"] == "rpc_handled"]
        assert handled and handled[0]["code"] == "OK"
        assert secret_token not in repr(logs)


class TestErrorMapping:
    @pytest.mark.parametrize(
        ("kind", "code", "reason"),
        [
            ("bad", grpc.StatusCode.INVALID_ARGUMENT, "bad_request"),
            ("rule", grpc.StatusCode.FAILED_PRECONDITION, "not_your_turn"),
            ("precondition", grpc.StatusCode.FAILED_PRECONDITION, "insufficient_funds"),
            ("forbidden", grpc.StatusCode.PERMISSION_DENIED, "permission_denied"),
            ("missing", grpc.StatusCode.NOT_FOUND, "not_found"),
            ("exists", grpc.StatusCode.ALREADY_EXISTS, "already_exists"),
            ("conflict", grpc.StatusCode.ABORTED, "conflict"),
            ("gone", grpc.StatusCode.UNAVAILABLE, "gone_away"),
        ],
    )
    async def test_maps_exceptions_to_codes_and_reasons(
        self, channel: grpc.aio.Channel, kind: str, code: grpc.StatusCode, reason: str
    ) -> None:
        """Each exception class gets its code, its stud-reason and a matching ErrorInfo."""
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary(f"/{SERVICE}/Fail")(
                kind.encode(), metadata=bearer_metadata(token()), timeout=5
            )
        assert info.value.code() is code
        assert rpc_error_reason(info.value) == reason
        error_info = rpc_error_info(info.value)
        assert error_info is not None
        assert (error_info.reason, error_info.domain) == (reason, "stud-hilo")

    async def test_bad_request_names_the_field(self, channel: grpc.aio.Channel) -> None:
        """A BadRequest names its field in the message and in ErrorInfo metadata."""
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary(f"/{SERVICE}/Fail")(
                b"bad", metadata=bearer_metadata(token()), timeout=5
            )
        assert "amount" in (info.value.details() or "")
        error_info = rpc_error_info(info.value)
        assert error_info is not None and error_info.metadata["field"] == "amount"

    async def test_unexpected_exception_is_internal_and_logged(
        self, channel: grpc.aio.Channel
    ) -> None:
        """Anything unmapped is INTERNAL with a generic message, logged with its traceback."""
        with capture_logs() as logs, pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary(f"/{SERVICE}/Fail")(
                b"boom", metadata=bearer_metadata(token()), timeout=5
            )
        assert info.value.code() is grpc.StatusCode.INTERNAL
        assert "secret internals" not in (info.value.details() or "")
        failed = [e for e in logs if e["event"] == "rpc_failed"]
        assert failed and failed[0]["log_level"] == "error" and failed[0].get("exc_info")

    async def test_streams_are_mapped_after_partial_output(
        self, channel: grpc.aio.Channel
    ) -> None:
        """A server stream that raises after two messages ends with the mapped code."""
        call = channel.unary_stream(f"/{SERVICE}/Stream")(
            b"", metadata=bearer_metadata(token()), timeout=5
        )
        received = []
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for item in call:
                received.append(item)
        assert received == [b"one", b"two"]
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
