"""Whose budget a call spends (issue 29, G6), over a real in-process grpc.aio server: the
budget of refused calls was kept per TCP connection (``context.peer()``), and grpc-python's
shared subchannel pool put an attacker's channels on the measuring client's connection, so
the operator's ``GetTable`` was refused ``rate_limited`` "more than 5 refused calls a second
on this connection". Behind an L7 ingress or a gRPC-Web gateway, many clients share a few
upstream connections, and one client's bad tokens refused them all.

Now a caller whose token verified is counted as itself, never against its connection's
refused calls; and a call from a trusted proxy (``STUD_TRUSTED_PROXIES``) is counted against
the client address the proxy attests (the last hop of ``x-forwarded-for`` it appended, past
the trusted proxies before it), while the header from any other peer is ignored."""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

from studkit.auth import Principal, Role, bearer_metadata
from studkit.grpc_server import GrpcServer, create_grpc_server, current_principal, rpc_error_reason
from studkit.limits import CallerKeys, CallRateLimiter
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration

SERVICE = "test.v1.Keys"
KEYS = DevKeys.generate()
REFUSED_PER_S = 0.1
BURST_S = 100.0
BUDGET = int(REFUSED_PER_S * BURST_S)
"""Ten refused calls, then one per 10 s: nothing that matters refills while a test runs,
however slowly a busy machine runs it."""
FLOOD = 60
"""Bad tokens sent in a flood: several budgets' worth, so the budget is spent whatever
refills while the flood lasts."""
Request = health_pb2.HealthCheckRequest
Metadata = Sequence[tuple[str, str]]


async def echo(request: Any, context: grpc.aio.ServicerContext) -> bytes:
    return current_principal().subject.encode()


def add_echo(_servicer: object, server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(echo, Request.FromString, lambda b: b)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Echo": handler}),))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(i: int) -> Metadata:
    """A well-formed token under the issuer's kid with a random signature (each ``i`` its
    own), as the attacker sent."""
    header = b64(json.dumps({"alg": "EdDSA", "kid": KEYS.issuer().kid}).encode())
    now = int(time.time())
    claims = {"sub": f"player:eve{i}", "role": "player", "iat": now, "exp": now + 600,
              "iss": "stud-hilo"}
    token = f"{header}.{b64(json.dumps(claims).encode())}.{b64(secrets.token_bytes(64))}"
    return bearer_metadata(token)


def valid(who: Principal) -> Metadata:
    """A fresh token of ``who`` (never seen by the server before this call)."""
    return bearer_metadata(KEYS.issuer_for(who).issue(who, 600))


def via(address: str, metadata: Metadata) -> Metadata:
    """``metadata`` as a gateway forwards it: with the client's address in
    ``x-forwarded-for``."""
    return (*metadata, ("x-forwarded-for", address))


Serve = Callable[[CallerKeys | None], Awaitable[GrpcServer]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``serve(callers)``: a server whose refused calls are budgeted (:data:`BUDGET`), their
    refusals answered at once (the hold has tests of its own)."""
    servers: list[GrpcServer] = []

    async def start(callers: CallerKeys | None) -> GrpcServer:
        rates = CallRateLimiter(per_player=100, per_peer=400, burst_s=BURST_S,
                                refused_per_peer=REFUSED_PER_S, refused_burst_s=BURST_S,
                                hold_s=0.0)
        kwargs = {} if callers is None else {"callers": callers}
        server = create_grpc_server("127.0.0.1:0", [(add_echo, None, SERVICE)],
                                    verifier=KEYS.verifier(), rates=rates, **kwargs)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop(None)


async def call(channel: grpc.aio.Channel, metadata: Metadata) -> tuple[str, str | None]:
    """(status code name, stud-reason) of one Echo call."""
    try:
        await channel.unary_unary(f"/{SERVICE}/Echo",
                                  request_serializer=Request.SerializeToString)(
            Request(), metadata=metadata, timeout=10)
        return "OK", None
    except grpc.aio.AioRpcError as exc:
        return exc.code().name, rpc_error_reason(exc)


RATE_LIMITED = ("RESOURCE_EXHAUSTED", "rate_limited")
UNAUTHENTICATED = ("UNAUTHENTICATED", "unauthenticated")


async def test_a_good_token_is_never_refused_for_bad_tokens_on_its_connection(
        serve: Serve) -> None:
    """G6's reproduction: the operator and a player share one channel (one TCP connection)
    with an attacker sending a forged token after another. The attacker is refused
    ``rate_limited`` past the connection's budget; the operator's and the player's calls are
    served all along, before, between and after the attacker's."""
    server = await serve(None)
    operator = valid(Principal(Role.OPERATOR, "ops"))
    amy = valid(Principal(Role.PLAYER, "amy"))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as shared:
        assert await call(shared, operator) == ("OK", None)
        assert await call(shared, amy) == ("OK", None)
        attacker: Counter[tuple[str, str | None]] = Counter()
        victims: Counter[tuple[str, str | None]] = Counter()
        for i in range(FLOOD):
            attacker[await call(shared, forged(i))] += 1
            if i % 5 == 4:
                victims[await call(shared, operator)] += 1
                victims[await call(shared, amy)] += 1
        assert attacker[RATE_LIMITED] >= FLOOD - BUDGET - 1, attacker
        assert victims == {("OK", None): 2 * FLOOD // 5}, victims
        assert await call(shared, operator) == ("OK", None)


async def test_behind_a_trusted_proxy_each_client_address_has_its_own_budget(
        serve: Serve) -> None:
    """A gateway (trusted: loopback here) carries every client on one upstream connection,
    each call with the client's address in ``x-forwarded-for``. The attacker at
    198.51.100.66 spends its own budget: refused ``rate_limited`` past it, also when it
    puts addresses of its own before the one the gateway appended. Meanwhile a client at
    203.0.113.5 is served with a token the service has never seen (its first call), and
    another client's bad token is UNAUTHENTICATED, not ``rate_limited``: each address has a
    budget of its own."""
    server = await serve(CallerKeys(["127.0.0.1/32", "::1/128"]))
    attacker_at = "198.51.100.66"
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as upstream:
        outcomes: Counter[tuple[str, str | None]] = Counter()
        for i in range(FLOOD):
            outcomes[await call(upstream, via(attacker_at, forged(i)))] += 1
        assert outcomes[RATE_LIMITED] >= FLOOD - BUDGET - 1, outcomes
        # Addresses of the attacker's own before the gateway's hop change nothing.
        spoofed = f"10.0.0.{secrets.randbelow(250)}, 192.0.2.{secrets.randbelow(250)}"
        assert await call(upstream, via(f"{spoofed}, {attacker_at}", forged(FLOOD))) \
            == RATE_LIMITED
        fresh = valid(Principal(Role.PLAYER, "zoe"))
        assert await call(upstream, via("203.0.113.5", fresh)) == ("OK", None)
        assert await call(upstream, via("203.0.113.9", forged(FLOOD + 1))) == UNAUTHENTICATED
        # A gateway behind another trusted proxy: the client is the last untrusted hop.
        assert await call(upstream, via("203.0.113.7, 127.0.0.1", fresh)) == ("OK", None)
        assert await call(upstream, via(f"{attacker_at}, 127.0.0.1", forged(FLOOD + 2))) \
            == RATE_LIMITED


async def test_a_forged_header_from_an_untrusted_peer_does_not_change_the_key(
        serve: Serve) -> None:
    """The service trusts another proxy (192.0.2.10), not this client: an attacker that
    sends a new ``x-forwarded-for`` with each bad token is still one connection, refused
    ``rate_limited`` past that connection's budget, whatever address it claims."""
    server = await serve(CallerKeys(["192.0.2.10"]))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        outcomes: Counter[tuple[str, str | None]] = Counter()
        for i in range(FLOOD):
            outcomes[await call(channel, via(f"198.51.100.{i % 250}", forged(i)))] += 1
        assert outcomes[RATE_LIMITED] >= FLOOD - BUDGET - 1, outcomes
        assert await call(channel, via("203.0.113.99", forged(FLOOD))) == RATE_LIMITED


async def test_a_trusted_proxy_without_the_header_is_one_client(serve: Serve) -> None:
    """A call from a trusted proxy that attests no client address (no header, or a hop that
    is not an address) is counted against the proxy's connection, as any other peer's."""
    server = await serve(CallerKeys(["127.0.0.1/32", "::1/128"]))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        outcomes: Counter[tuple[str, str | None]] = Counter()
        for i in range(FLOOD):
            metadata = forged(i) if i % 2 else via("not-an-address", forged(i))
            outcomes[await call(channel, metadata)] += 1
        assert outcomes[RATE_LIMITED] >= FLOOD - BUDGET - 1, outcomes


async def test_a_token_never_seen_from_a_connection_past_its_budget_waits_for_a_refill(
        serve: Serve) -> None:
    """The price of a flood costing no signature check (issue 17, F5): from a connection
    past its refused-call budget, a token the service has never verified is refused with
    the flood, before it is decoded; once verified (here, from another connection) it is
    served on the flooded connection too. Behind a trusted proxy the budget is the client
    address's own (above), so only the flooder's address pays this."""
    server = await serve(None)
    zoe = valid(Principal(Role.PLAYER, "zoe"))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as shared, \
            grpc.aio.insecure_channel(f"127.0.0.1:{server.port}",
                                      options=(("grpc.use_local_subchannel_pool", 1),)) as own:
        for i in range(BUDGET + 1):
            await call(shared, forged(i))
        assert await call(shared, zoe) == RATE_LIMITED
        assert await call(own, zoe) == ("OK", None)
        assert await call(shared, zoe) == ("OK", None)
