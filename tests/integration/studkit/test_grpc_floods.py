"""Floods of refused calls are cheap (issue 17, F5), over a real in-process grpc.aio server:
a connection sending forged, garbage or missing tokens is refused RESOURCE_EXHAUSTED past its
budget of refusals, before any signature is checked; the same bad token is checked once;
refusals' log lines are sampled (the first of each window, then a summary line) while every
call is counted; and other clients carry on meanwhile."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from structlog.testing import capture_logs

from studkit.auth import KeySet, Principal, Role, TokenVerifier, bearer_metadata
from studkit.grpc_server import (
    GrpcServer,
    create_grpc_server,
    current_principal,
    log_summary,
    rpc_error_reason,
)
from studkit.limits import CallRateLimiter, LogSampler
from studkit.metrics import REQUESTS, SUPPRESSED_LINES
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration

SERVICE = "test.v1.Floods"
KEYS = DevKeys.generate()
REFUSED_PER_S = 5.0
BURST_S = 2.0
BUDGET = REFUSED_PER_S * BURST_S
"""Refused calls one connection may make at once (then REFUSED_PER_S a second)."""
FIRST_LINES = 5
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
Request = health_pb2.HealthCheckRequest


class CountingVerifier(TokenVerifier):
    """The real verifier, counting the tokens it decodes and checks the signature of."""

    def __init__(self, keys: KeySet) -> None:
        super().__init__(keys)
        self.checked = 0

    def _verify(self, token: str) -> Principal:
        self.checked += 1
        return super()._verify(token)


async def echo(request: Any, context: grpc.aio.ServicerContext) -> bytes:
    return current_principal().subject.encode()


def add_echo(_servicer: object, server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(echo, Request.FromString, lambda b: b)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Echo": handler}),))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(i: int) -> str:
    """A well-formed token under the issuer's kid with valid claims and a random signature:
    only the signature check can refuse it. Each ``i`` gives a different token."""
    header = b64(json.dumps({"alg": "EdDSA", "kid": KEYS.issuer().kid}).encode())
    now = int(time.time())
    claims = {"sub": f"player:eve{i}", "role": "player", "iat": now, "exp": now + 600,
              "iss": "stud-hilo"}
    return f"{header}.{b64(json.dumps(claims).encode())}.{b64(secrets.token_bytes(64))}"


def valid(who: Principal) -> tuple[tuple[str, str]]:
    return bearer_metadata(KEYS.issuer_for(who).issue(who, 600))


@pytest.fixture
def verifier() -> CountingVerifier:
    return CountingVerifier(KEYS.key_set())


@pytest.fixture
def rates() -> CallRateLimiter:
    """The limits under test; rate-limited calls answered at once (the hold has a test of
    its own), so that a flood of hundreds of sequential calls stays short."""
    return CallRateLimiter(per_player=100, per_peer=400, burst_s=BURST_S,
                           refused_per_peer=REFUSED_PER_S, refused_burst_s=BURST_S, hold_s=0.0)


@pytest.fixture
async def server(verifier: CountingVerifier, rates: CallRateLimiter
                 ) -> AsyncIterator[GrpcServer]:
    sampler = LogSampler(log_summary, first=FIRST_LINES, window_s=0.5)
    running = create_grpc_server("127.0.0.1:0", [(add_echo, None, SERVICE)],
                                 verifier=verifier, rates=rates, log_sampler=sampler)
    await running.start()
    yield running
    await running.stop(None)


async def connection(server: GrpcServer) -> grpc.aio.Channel:
    """A channel with a TCP connection of its own (a peer of its own to the server)."""
    return grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=OWN_CONNECTION)


async def call(channel: grpc.aio.Channel, metadata: Any) -> tuple[str, str | None]:
    """(status code name, stud-reason) of one Echo call."""
    try:
        await channel.unary_unary(f"/{SERVICE}/Echo",
                                  request_serializer=Request.SerializeToString)(
            Request(), metadata=metadata, timeout=10)
        return "OK", None
    except grpc.aio.AioRpcError as exc:
        return exc.code().name, rpc_error_reason(exc)


def counted(server: GrpcServer, code: str) -> float:
    return server.metrics.sample(f"{REQUESTS}_total", service=SERVICE, method="Echo",
                                 code=code)


BAD_TOKENS = {
    "forged": lambda i: bearer_metadata(forged(i)),
    "garbage": lambda i: bearer_metadata(b64(secrets.token_bytes(40))),
    "missing": lambda i: (),
}


@pytest.mark.parametrize("kind", sorted(BAD_TOKENS))
async def test_a_flood_of_bad_tokens_is_refused_before_any_check_past_its_budget(
        server: GrpcServer, verifier: CountingVerifier, kind: str) -> None:
    """300 calls from one connection, each with a different bad token: the first BUDGET or
    so are UNAUTHENTICATED (each checked once), every later one RESOURCE_EXHAUSTED
    rate_limited without its token being decoded or its signature checked. Another
    connection's valid caller is served all along; every call is counted."""
    flooder, other = await connection(server), await connection(server)
    calls = 300
    started = time.monotonic()
    outcomes: Counter[tuple[str, str | None]] = Counter()
    amy = valid(Principal(Role.PLAYER, "amy"))
    served = 0
    for i in range(calls):
        outcomes[await call(flooder, BAD_TOKENS[kind](i))] += 1
        if i % 50 == 0:
            served += (await call(other, amy))[0] == "OK"
    elapsed = time.monotonic() - started
    allowed = BUDGET + REFUSED_PER_S * elapsed + 1
    unauthenticated = sum(n for (code, _), n in outcomes.items() if code == "UNAUTHENTICATED")
    assert BUDGET <= unauthenticated <= allowed
    assert outcomes[("RESOURCE_EXHAUSTED", "rate_limited")] == calls - unauthenticated
    # Checked: each bad token refused UNAUTHENTICATED (a missing one has nothing to check),
    # and amy's once.
    assert verifier.checked <= unauthenticated + 1
    assert served == calls // 50
    assert counted(server, "UNAUTHENTICATED") + counted(server, "RESOURCE_EXHAUSTED") == calls
    await flooder.close()
    await other.close()


async def test_the_same_forged_token_is_checked_once(
        server: GrpcServer, verifier: CountingVerifier) -> None:
    """Sent again and again (from fresh connections, so no connection budget runs out), one
    forged token costs one signature check; the refusal stays UNAUTHENTICATED."""
    token = bearer_metadata(forged(0))
    for _ in range(5):
        channel = await connection(server)
        for _ in range(4):
            assert (await call(channel, token))[0] == "UNAUTHENTICATED"
        await channel.close()
    assert verifier.checked == 1


async def test_refusal_logs_are_sampled_and_every_refusal_counted(
        server: GrpcServer) -> None:
    """A player's flood past their rate (valid token, 400 calls at once on one connection):
    at most FIRST_LINES ``rpc_rejected`` lines per code and reason and window, one
    ``rpc_rejected_summary`` line with the number left out once the window ends; the metrics
    count every call, the suppressed lines too."""
    flooder = await connection(server)
    metadata = valid(Principal(Role.PLAYER, "flood"))
    calls = 600
    loop = asyncio.get_running_loop()
    with capture_logs() as logs:
        started = loop.time()
        outcomes = Counter(await asyncio.gather(*(call(flooder, metadata)
                                                  for _ in range(calls))))
        elapsed = loop.time() - started
        await asyncio.sleep(0.8)  # the sampling window ends: its summary is written
    refused = outcomes[("RESOURCE_EXHAUSTED", "rate_limited")]
    assert outcomes[("OK", None)] + refused == calls
    # The player's bucket (100 a second, 2 s of burst) let through what it held and what
    # refilled while the flood lasted (a busy machine serves it more slowly), no more; the
    # rest were refused, more of them than the lines a window logs.
    assert outcomes[("OK", None)] <= 100 * BURST_S + 100 * elapsed + 1
    assert refused > FIRST_LINES * 2
    lines = [e for e in logs if e["event"] == "rpc_rejected"]
    summaries = [e for e in logs if e["event"] == "rpc_rejected_summary"]
    windows = 1 + len(summaries)
    assert 1 <= len(lines) <= FIRST_LINES * windows
    assert {(e["code"], e["reason"]) for e in summaries} == {("RESOURCE_EXHAUSTED",
                                                              "rate_limited")}
    assert sum(e["suppressed"] for e in summaries) == refused - len(lines)
    assert counted(server, "RESOURCE_EXHAUSTED") == refused
    assert counted(server, "OK") == outcomes[("OK", None)]
    assert server.metrics.sample(f"{SUPPRESSED_LINES}_total",
                                 code="RESOURCE_EXHAUSTED") == refused - len(lines)
    await flooder.close()


async def test_a_rate_limited_call_is_held_before_its_answer(
        verifier: CountingVerifier) -> None:
    """Past its budget, a connection's calls are answered RESOURCE_EXHAUSTED after the hold
    and one after another (at most ``answers_per_peer`` a second, whatever the flooder keeps
    in flight), never past the call's deadline, and at most ``max_held`` wait at once."""
    # One refused token allowed, then one per 5 s: nothing refills during the test.
    rates = CallRateLimiter(per_player=100, per_peer=400, refused_per_peer=0.2,
                            refused_burst_s=5, hold_s=0.3, answers_per_peer=20, max_held=4)
    server = create_grpc_server("127.0.0.1:0", [(add_echo, None, SERVICE)],
                                verifier=verifier, rates=rates)
    await server.start()
    flooder = await connection(server)
    garbage = bearer_metadata("not-a-token")
    while (await call(flooder, garbage))[0] == "UNAUTHENTICATED":
        pass  # spend the connection's budget
    began = time.monotonic()
    assert await call(flooder, garbage) == ("RESOURCE_EXHAUSTED", "rate_limited")
    assert time.monotonic() - began >= 0.3  # a sleep's lower bound, not a speed
    short = flooder.unary_unary(f"/{SERVICE}/Echo",
                                request_serializer=Request.SerializeToString)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await short(Request(), metadata=garbage, timeout=0.25)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    peak = 0

    async def watch_held() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rates.held())
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_held())
    began = time.monotonic()
    outcomes = await asyncio.gather(*(call(flooder, garbage) for _ in range(12)))
    watcher.cancel()
    assert set(outcomes) == {("RESOURCE_EXHAUSTED", "rate_limited")}
    assert 1 <= peak <= 4
    # The four held ones were answered one after another: 0.3 s, then 1/20 s apart.
    assert time.monotonic() - began >= 0.3 + 3 / 20
    await flooder.close()
    await server.stop(None)


async def test_a_player_flooding_past_their_rate_is_served_nothing_while_held(
        verifier: CountingVerifier) -> None:
    """A player keeping 32 calls in flight on one connection for 2 s, with a rate of 50 a
    second (1 s of burst): once a call of theirs is held, none is served, so the flood gets
    its burst and then refusals only (before this, it was served its whole rate, 50 more a
    second, the cost that slowed other tables: issue 17, F5). Another player is served all
    along, and the flooder is served again once it stops and its refusals are answered."""
    rates = CallRateLimiter(per_player=50, per_peer=400, burst_s=1.0, hold_s=0.2,
                            answers_per_peer=20)
    server = create_grpc_server("127.0.0.1:0", [(add_echo, None, SERVICE)],
                                verifier=verifier, rates=rates)
    await server.start()
    flooder, other = await connection(server), await connection(server)
    eve, amy = valid(Principal(Role.PLAYER, "eve")), valid(Principal(Role.PLAYER, "amy"))
    outcomes: Counter[tuple[str, str | None]] = Counter()
    first_held: list[float] = []
    holding = rates.hold

    async def hold(*args: Any, **kwargs: Any) -> None:
        if not first_held:
            first_held.append(time.monotonic())
        await holding(*args, **kwargs)

    rates.hold = hold  # type: ignore[method-assign]
    started = time.monotonic()
    deadline = started + 2.0

    async def worker() -> None:
        while time.monotonic() < deadline:
            outcomes[await call(flooder, eve)] += 1

    flood = asyncio.gather(*(worker() for _ in range(32)))
    served_other = 0
    while time.monotonic() < deadline:
        served_other += (await call(other, amy))[0] == "OK"
        await asyncio.sleep(0.1)
    await flood
    assert served_other >= 5
    assert outcomes[("RESOURCE_EXHAUSTED", "rate_limited")] > 0
    # The burst (50) and what refilled until the first call was held (a busy machine
    # serves the burst more slowly), and the odd call between two held ones at most: not
    # 50 a second more.
    assert first_held
    assert outcomes[("OK", None)] <= 50 + 50 * (first_held[0] - started) + 10, outcomes
    while rates.held():
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)  # a refill for eve
    assert await call(flooder, eve) == ("OK", None)
    await flooder.close()
    await other.close()
    await server.stop(None)
