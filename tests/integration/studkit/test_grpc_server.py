"""The shared server plumbing against a real in-process grpc.aio server: tokens are required
except for probes, exceptions become status codes with a reason, nothing leaks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from structlog.testing import capture_logs

from rules.errors import Reason, RuleViolation
from studkit.auth import (
    Forbidden,
    KeySet,
    Principal,
    Role,
    SigningKey,
    TokenIssuer,
    TokenVerifier,
    bearer_metadata,
)
from studkit.errors import AlreadyExists, BadRequest, Conflict, FailedPrecondition, NotFound
from studkit.grpc_server import (
    BASE_ERRORS,
    GrpcServer,
    create_grpc_server,
    current_principal,
    rpc_error_info,
    rpc_error_reason,
)
from studkit.limits import CallRateLimiter
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration

KEYS = DevKeys.generate(services=("table", "dealer"))
NEXT_ISSUER_KEY = SigningKey.generate()
"""A second issuer key published beside the first (a rotation in progress)."""
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
        verifier=TokenVerifier(
            KeySet([*KEYS.key_set(), NEXT_ISSUER_KEY.verifying_key("issuer")]),
            audience="probe"),
        errors=BASE_ERRORS.extend({Gone: grpc.StatusCode.UNAVAILABLE}),
        # The module's tests share one connection and refuse many tokens on it: its budget
        # of refused tokens (tests/integration/studkit/test_grpc_floods.py) is lifted.
        rates=CallRateLimiter(per_player=100, per_peer=400, refused_per_peer=1_000_000),
    )
    await server.start()
    yield server
    await server.stop(None)


@pytest.fixture
async def channel(probe_server: GrpcServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{probe_server.port}") as ch:
        yield ch


def token(role: Role = Role.PLAYER, name: str = "alice", keys: DevKeys = KEYS) -> str:
    """A token for ``role:name`` signed with the key that may sign it."""
    return keys.issuer_for(Principal(role, name)).issue(Principal(role, name))


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
        forged = token(keys=DevKeys.generate(services=()))
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


async def whoami_with(channel: grpc.aio.Channel, token_: str) -> bytes:
    reply: bytes = await channel.unary_unary(f"/{SERVICE}/Whoami")(
        b"", metadata=bearer_metadata(token_), timeout=5)
    return reply


async def unauthenticated(channel: grpc.aio.Channel, token_: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await whoami_with(channel, token_)
    assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED, info.value.details()


def claims(sub: str = "operator:eve", **extra: object) -> dict[str, object]:
    now = int(time.time())
    return {"sub": sub, "role": sub.split(":")[0], "iat": now, "exp": now + 600,
            "iss": "stud-hilo", **extra}


def hs256(payload: dict[str, object], secret: bytes, kid: str) -> str:
    """An HS256 JWT made by hand (PyJWT rightly refuses a public key as an HMAC secret)."""
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode()
    signing_input = f"{part(header)}.{part(json.dumps(payload).encode())}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{part(mac)}"


def public_pem(key: SigningKey) -> bytes:
    return key.public_key.public_bytes(serialization.Encoding.PEM,
                                       serialization.PublicFormat.SubjectPublicKeyInfo)


class TestKeyBoundaries:
    """Who may sign what, over the wire: a service key signs only its own service, so no
    service can make itself an operator, a player or another service."""

    @pytest.mark.parametrize("subject", [(Role.OPERATOR, "x"), (Role.PLAYER, "alice"),
                                         (Role.AUDITOR, "audit"), (Role.SERVICE, "table")])
    async def test_a_service_key_cannot_sign_for_anyone_else(
        self, channel: grpc.aio.Channel, subject: tuple[Role, str]
    ) -> None:
        """A token signed with service:dealer's own valid key for operator:x, a player, an
        auditor or service:table is UNAUTHENTICATED."""
        dealer_key = TokenIssuer(KEYS.service_key("dealer"))
        await unauthenticated(channel, dealer_key.issue(Principal(*subject)))

    async def test_the_issuer_key_cannot_sign_for_a_service(
        self, channel: grpc.aio.Channel
    ) -> None:
        """Service tokens come only from the service's own key, not the issuer's."""
        await unauthenticated(channel, KEYS.issuer().issue(Principal(Role.SERVICE, "table")))

    async def test_each_signer_signs_its_own(self, channel: grpc.aio.Channel) -> None:
        """The issuer signs players and operators; a service's source signs itself."""
        assert await whoami_with(channel, token(Role.OPERATOR, "ops")) == b"operator:ops"
        source = KEYS.service_source("dealer")
        assert await whoami_with(channel, source.token()) == b"service:dealer"

    async def test_unsigned_and_confused_algorithms_are_refused(
        self, channel: grpc.aio.Channel
    ) -> None:
        """alg=none, and HS256 keyed with the issuer's public key (PEM or raw), with or
        without a known kid, are UNAUTHENTICATED."""
        kid = KEYS.issuer_key.kid
        await unauthenticated(channel, jwt.encode(claims(), None, algorithm="none",
                                                  headers={"kid": kid}))
        raw = KEYS.issuer_key.public_key.public_bytes(serialization.Encoding.Raw,
                                                      serialization.PublicFormat.Raw)
        for secret in (public_pem(KEYS.issuer_key), raw):
            await unauthenticated(channel, hs256(claims(), secret, kid))

    async def test_unknown_or_missing_kid_is_refused(self, channel: grpc.aio.Channel) -> None:
        """A well-signed token whose kid is not in the key set, or that has none, is
        UNAUTHENTICATED."""
        stranger = SigningKey.generate()
        await unauthenticated(channel, TokenIssuer(stranger).issue(Principal(Role.PLAYER, "a")))
        await unauthenticated(channel, jwt.encode(claims(), stranger.private_key,
                                                  algorithm="EdDSA"))
        # A known kid does not make a stranger's signature valid.
        await unauthenticated(channel, jwt.encode(claims(), stranger.private_key,
                                                  algorithm="EdDSA",
                                                  headers={"kid": KEYS.issuer_key.kid}))

    async def test_an_expired_token_is_refused(self, channel: grpc.aio.Channel) -> None:
        """A token past its exp is UNAUTHENTICATED with reason token_expired."""
        old = KEYS.issuer(clock=lambda: time.time() - 7200).issue(
            Principal(Role.PLAYER, "alice"), ttl_seconds=60)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await whoami_with(channel, old)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert rpc_error_reason(info.value) == "token_expired"

    async def test_rotation_accepts_both_issuer_keys(self, channel: grpc.aio.Channel) -> None:
        """With two issuer kids published, tokens from either verify; the new kid may still
        sign only what an issuer may."""
        alice = Principal(Role.PLAYER, "alice")
        for key in (KEYS.issuer_key, NEXT_ISSUER_KEY):
            assert await whoami_with(channel, TokenIssuer(key).issue(alice)) == b"player:alice"
        await unauthenticated(channel, TokenIssuer(NEXT_ISSUER_KEY).issue(
            Principal(Role.SERVICE, "table")))

    async def test_a_token_for_another_service_is_refused(
        self, channel: grpc.aio.Channel
    ) -> None:
        """A token minted for one callee (aud) cannot be replayed at another."""
        source = KEYS.service_source("table")
        assert await whoami_with(channel, source.token("probe")) == b"service:table"
        await unauthenticated(channel, source.token("wallet"))


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
