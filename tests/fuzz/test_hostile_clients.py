"""Hostile clients (``make fuzz``; a short run in ``make test``): hypothesis draws requests to
every RPC of every service — the table, the dealer, the wallet — built from the protobuf
descriptors with odd values (empty, huge, negative, newline and unicode ids, unknown enum
numbers, repeated fields, undecodable bodies), sent with no token, a forged or expired one,
another player's, another service's, an operator's or an auditor's, against a room with
tables and funded players (:mod:`campaigns.fuzz` has the strategies and the verdict).

Each request must get a deliberate status: never INTERNAL or UNKNOWN, never a hang (a unary
call past its deadline), never a crash; and a refused request changes nothing. The first
failure fails the test, and hypothesis shrinks it to the smallest request that fails and
prints it (``FUZZ_SEED`` reproduces a run).

The requests are sent from a worker thread on blocking channels while the room serves in
the test's event loop. ``FUZZ_CASES`` (default 300) bounds the number of requests
(hypothesis's ``max_examples``); the last line printed is
``cases=… crashes=0 internal=0 changed=0``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, Phase, given, seed, settings

from campaigns.fuzz import Case, Tally, cases, digest, judge, send, targets
from stud.v1 import table_pb2
from studkit.auth import Principal, Role, TokenBook
from studkit.redis_client import connect_sync
from studtest.redis import TestRedis
from studtest.rigged_dealer import RiggedDealing
from studtest.table import Room, fast_settings, player, running_room
from studtools.devkeys import DevKeys

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]
CASES = int(os.environ.get("FUZZ_CASES", "300"))
SEED = int(os.environ.get("FUZZ_SEED", "0"))


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
               ) -> AsyncIterator[Room]:
    # One connection per service carries every kind of bad token here: its budget of
    # refused tokens (STUD_RATE_REFUSED_PER_CONNECTION; tests/integration/studkit/
    # test_grpc_floods.py) is lifted, or most cases would be RESOURCE_EXHAUSTED before they
    # reach the checks this campaign is for.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STUD_RATE_REFUSED_PER_CONNECTION", "1000000")
        async with running_room(redis_server, redis_url, dev_keys,
                                rig=RiggedDealing(stacked=True)) as running:
            yield running


async def test_hostile_requests(room: Room, redis_url: str, dev_keys: DevKeys) -> None:
    # A quiet room: one table with one seated player (no hand can start), one empty table.
    quiet = fast_settings(next_hand_delay_ms=600_000)
    await room.client.open_table("t-open", settings=quiet)
    await room.client.open_table("t-empty", settings=quiet)
    await room.fund("ann")
    await room.client.call("SitDown", table_pb2.SitDownRequest(
        table_id="t-open", seat=1, buy_in=10_000), player("ann"))
    await room.fund("bob")
    principals: list[Principal] = [
        player("ann"), player("bob"), player("zed"), Principal(Role.OPERATOR, "ops"),
        Principal(Role.AUDITOR, "audit"), Principal(Role.SERVICE, "table"),
        Principal(Role.SERVICE, "dealer"), Principal(Role.SERVICE, "wallet")]
    books = {"ours": TokenBook(dev_keys), "forged": TokenBook(DevKeys.generate())}
    expiring = TokenBook(dev_keys, ttl_seconds=1)
    expired = {i: expiring.token(who) for i, who in enumerate(principals)}
    await asyncio.sleep(7)  # past the expiry leeway
    ports = {"stud.v1.TableService": room.table_port,
             "stud.v1.DealerService": room.dealer.port,
             "stud.v1.DealerTestingService": room.dealer.port,
             "stud.v1.WalletService": room.wallet.port}
    tally = Tally()

    def metadata(case: Case) -> tuple[tuple[str, str], ...]:
        if case.who is None:
            return ()
        if case.how == "expired":
            return (("authorization", f"Bearer {expired[case.who]}"),)
        if case.how == "garbage":
            return (("authorization", case.garbage),)
        return tuple(books[case.how].metadata(principals[case.who]))

    def run_all() -> None:
        """Hypothesis in this worker thread; blocking channels and a blocking Redis."""
        channels = {p: grpc.insecure_channel(f"127.0.0.1:{p}") for p in set(ports.values())}
        admin = connect_sync(redis_url)

        @seed(SEED)
        @settings(max_examples=CASES, deadline=None, database=None, derandomize=False,
                  phases=(Phase.generate, Phase.shrink), print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=cases(targets(), len(principals)))
        def one(case: Case) -> None:
            before = digest(admin)
            code = send(channels[ports[case.target.service]], case.target, case.body,
                        metadata(case))
            verdict = judge(code, case.target.streaming, digest(admin) != before)
            tally.add(case, code, verdict)
            assert verdict.failure is None, f"{verdict.failure}: {case!r} answered {code}"

        try:
            one()
        finally:
            for channel in channels.values():
                channel.close()
            admin.close()

    try:
        await asyncio.to_thread(run_all)
    finally:
        for port in set(ports.values()):  # every service still answers (no crash)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                try:
                    await health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(), timeout=5)
                except grpc.aio.AioRpcError:
                    tally.crashes += 1
        print(dict(tally.codes))
        print(f"hangs={tally.failures['hang']} quiet_streams={tally.codes['QUIET']}")
        print(tally.line())
    assert tally.crashes == 0
    assert tally.cases >= min(CASES, 1)
