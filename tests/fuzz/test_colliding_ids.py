"""Command ids that collide with the ones the services derive from their logs (``make fuzz``;
a short run in ``make test``; issue 29, G1): hypothesis draws players' registrations and
withdrawals, and the operator's cancel, at a sit & go over the real tournament and wallet
services (real gRPC, real Redis), each with a command id drawn mostly from the ids the
tournament's process manager derives (``settle.e2``, ``tick.7``, ``seated.e1.<t>.1.2``,
``hs.<t>.1.1``, ``off.m1``, ...), the table's own (``h1:deal:3``, refused as malformed) and
the wallet keys' shape (``tk-…``).

Each request gets a deliberate status (never INTERNAL or UNKNOWN), and whatever the ids, the
tournament's money goes through: every entry is settled, and a cancel refunds everyone to an
empty pool (no hand is dealt: no table service here). ``FUZZ_CASES`` (default 300) sets the
number of scenarios at one in 30 (at least 5); the last line printed is
``tournament_scenarios=… requests=… internal=0 stuck=0``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.redis import TestRedis
from studtest.tournament_service import RunningTournament, eventually, running_tournament
from studtest.wallet import RunningWallet, running_wallet
from studtools.devkeys import DevKeys
from tournament.config import Settings
from wallet.config import Settings as WalletSettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]
SCENARIOS = max(5, int(os.environ.get("FUZZ_CASES", "300")) // 30)
SEED = int(os.environ.get("FUZZ_SEED", "0"))
PLAYERS = ("p0", "p1", "p2", "p3")
FUNDS = 10_000
SNG = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=1000,
                          fee=100, seats=3, structure=pb.TournamentStructure(preset="turbo"))
NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED}


def derived_ids(tid: str) -> list[str]:
    """The ids the services derive from their logs, for tournament ``tid``'s first table."""
    table = f"{tid}.1"
    out = [f"settle.e{i}" for i in range(1, 6)] + [f"tick.{v}" for v in range(1, 16)]
    out += [f"seated.e{i}.{table}.{s}" for i in range(1, 4) for s in range(1, 4)]
    out += [f"freed.{table}.{s}.e{i}" for i in range(1, 4) for s in range(1, 4)]
    out += [f"hs.{table}.1", f"hr.{table}.1", f"he.{table}.1", "off.m1", "on.m1",
            "paid.refund", "refund.e1", "prize.e1", "create", "c-1", "pm.settle.e1",
            "h1:deal:3", "s:due:StartHand:3", "tk-" + "0" * 40]
    return out


@dataclass(frozen=True)
class Step:
    kind: str  # register, unregister, re_enter
    player: int
    pick: int  # which derived id (or a fresh one past the list)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Step], int]:
    steps = draw(st.lists(st.builds(Step, st.sampled_from(["register", "register",
                                                            "unregister"]),
                                    st.integers(0, len(PLAYERS) - 1), st.integers(0, 80)),
                          min_size=1, max_size=6))
    return steps, draw(st.integers(0, 80))


@pytest.fixture
async def services(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
                   ) -> AsyncIterator[tuple[RunningWallet, RunningTournament]]:
    def url(user: str) -> str:
        return redis_server.server.url_for(user) if redis_server.server is not None \
            else redis_url
    with pytest.MonkeyPatch.context() as patch:  # one connection carries every refusal
        patch.setenv("STUD_RATE_REFUSED_PER_CONNECTION", "1000000")
        async with running_wallet(WalletSettings(addr="127.0.0.1:0", redis_url=url("wallet"),
                                                 auth_keys=dev_keys.key_set()),
                                  dev_keys) as wallet:
            settings = Settings(addr="127.0.0.1:0", redis_url=url("tournament"),
                                auth_keys=dev_keys.key_set(),
                                service_key=dev_keys.service_key("tournament"),
                                wallet_target=f"127.0.0.1:{wallet.port}", tick_s=0.05)
            async with running_tournament(settings, dev_keys) as tournament:
                yield wallet, tournament


async def test_ids_that_collide_with_derived_ones_stop_no_money(
        services: tuple[RunningWallet, RunningTournament]) -> None:
    wallet, tournament = services
    client = tournament.client
    for name in PLAYERS:
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, FUNDS, f"d-{name}")
    loop = asyncio.get_running_loop()
    numbers = itertools.count(1)
    codes: Counter[str] = Counter()
    stuck: list[str] = []

    async def scenario(steps: list[Step], cancel_pick: int) -> None:
        tid = f"fz{next(numbers)}"
        ids = derived_ids(tid)

        def chosen(pick: int, n: int) -> str:
            return ids[pick] if pick < len(ids) else f"fresh-{n}"
        await client.create(tid, SNG)
        for n, s in enumerate(steps):
            who = Principal(Role.PLAYER, PLAYERS[s.player])
            call = client.register if s.kind == "register" else client.unregister
            try:
                await call(tid, who, chosen(s.pick, n))
                codes["OK"] += 1
            except grpc.aio.AioRpcError as exc:
                codes[exc.code().name] += 1
                assert exc.code() not in NEVER, f"{s} in {tid}: {exc.code()} {exc.details()}"

        async def settled() -> bool:
            view = await client.get(tid)
            return all(e.paid for e in view.entries)
        try:
            await eventually(settled)
            view = await client.get(tid)
            if view.phase in (pb.TOURNAMENT_PHASE_REGISTERING, pb.TOURNAMENT_PHASE_RUNNING):
                try:
                    await client.cancel(tid, "fuzz", chosen(cancel_pick, 99))
                    codes["OK"] += 1
                except grpc.aio.AioRpcError as exc:
                    # a malformed id (the table's "h1:deal:3") is refused and changes
                    # nothing: the cancel is made again with a fresh id, since a tournament
                    # left open keeps its players' money from the next scenarios' check
                    codes[exc.code().name] += 1
                    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT, \
                        f"cancel of {tid}: {exc.code()} {exc.details()}"
                    await client.cancel(tid, "fuzz", f"cancel-{tid}")

            async def refunded() -> bool:
                if (await wallet.client.pool(tid)).balance != 0:
                    return False
                return all([await wallet.client.player_balance(p) == FUNDS
                            for p in PLAYERS])
            await eventually(refunded)
        except AssertionError:
            stuck.append(tid)
            raise AssertionError(f"{tid} stuck: {steps} cancel id {cancel_pick}") from None

    def run_all() -> None:
        @seed(SEED)
        @settings(max_examples=SCENARIOS, deadline=None, database=None,
                  phases=(Phase.generate, Phase.shrink), print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=scenarios())
        def one(case: tuple[list[Step], int]) -> None:
            asyncio.run_coroutine_threadsafe(scenario(*case), loop).result(timeout=120)
        one()

    try:
        await asyncio.to_thread(run_all)
    finally:
        print(dict(codes))
        print(f"tournament_scenarios={next(numbers) - 1} requests={sum(codes.values())} "
              f"internal={codes['INTERNAL'] + codes['UNKNOWN']} stuck={len(stuck)}")
