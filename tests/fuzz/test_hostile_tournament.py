"""Hostile clients of the tournament service (``make fuzz``; a short run in ``make test``):
hypothesis draws requests to every RPC of ``TournamentService`` (CreateTournament to
VerifyTournament and WatchTournament), built from the protobuf descriptors with odd values
(:mod:`campaigns.fuzz`: the same strategies, principals and kinds of token as the table's,
the dealer's and the wallet's in ``test_hostile_clients.py``), against a running tournament
service over a room (dealer, wallet, table service; real gRPC, real Redis) that holds a sit &
go registering, one running at its table, a multi-table scheduled and a cancelled one. Then
the directed cases of issue 29: out-of-range timestamps in every request that carries one
(G4), the unplayable ``CreateTournament`` values (G5), a watch past the end, and the table's
``OpenTable`` zero values. (G1, command ids colliding with the manager's: in
``test_colliding_ids.py``.)

Each request must get a deliberate status (never INTERNAL or UNKNOWN, never a unary call
past its deadline), and a refused one changes nothing. The process manager changes Redis by
itself, round after round (a running tournament's clock and hands, the money of an entry
just accepted), so the campaign drives its rounds itself: a round takes a gate that each
case holds from the digest before it to the digest after it, so no round runs in between;
and after a command the service accepted, the next case waits until the manager's rounds
are quiet (three in a row change nothing). The digest is every key's but the self-changing
ones (heartbeats, leases, lobby summaries) and those of the tables the tournaments deal at
(their table service deals and times actions by itself; a tournament RPC never writes
them: only the manager calls the table service). ``FUZZ_CASES`` (default 300) bounds the
requests; the last line printed is ``tournament_cases=… crashes=0 internal=0 changed=0``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, Phase, given, seed, settings

from campaigns.fuzz import (
    ROOM_SERVICES,
    TOURNAMENT_SERVICES,
    TOURNAMENT_STRINGS,
    Case,
    Tally,
    cases,
    digest,
    judge,
    send,
    targets,
)
from stud.v1 import common_pb2 as cpb
from stud.v1 import table_pb2
from stud.v1 import tournament_pb2 as tpb
from studkit.auth import Principal, Role, TokenBook
from studkit.grpc_server import rpc_error_reason
from studkit.redis_client import connect_sync
from studtest.redis import TestRedis
from studtest.table import OPERATOR, Room, fast_settings, player, running_room
from studtest.tournament_service import RunningTournament, eventually, running_tournament
from studtools.devkeys import DevKeys
from tournament import driver
from tournament.config import Settings
from tournament.table_steps import TableSteps

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]
CASES = int(os.environ.get("FUZZ_CASES", "300"))
SEED = int(os.environ.get("FUZZ_SEED", "0"))
COMMANDS = {"CreateTournament", "CancelTournament", "Register", "Unregister", "ReEnter"}
QUIET_ROUNDS = 3
TICK_S = 0.05


def sng(seats: int) -> tpb.TournamentConfig:
    return tpb.TournamentConfig(name="sng", format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                buy_in=1000, fee=100, seats=seats,
                                structure=tpb.TournamentStructure(preset="turbo"))


def mtt(start_at: timestamp_pb2.Timestamp | dict[str, int], **fields: Any
        ) -> tpb.TournamentConfig:
    values: dict[str, Any] = dict(name="mtt", format=tpb.TOURNAMENT_FORMAT_MULTI_TABLE,
                                  buy_in=50, fee=5, seats=8, min_entrants=2,
                                  structure=tpb.TournamentStructure(preset="default"))
    values.update(fields)
    return tpb.TournamentConfig(start_at=start_at, **values)


def tournament_tables(admin: Any) -> Callable[[bytes], bool]:
    """Whether a key is a table's (or its dealer's) that a tournament deals at: a table
    ``<tournament id>.<n>`` of a tournament in the tournament index."""
    tournaments = set(admin.smembers("stud:tournament:index"))

    def skip(key: bytes) -> bool:
        for prefix in (b"stud:table:{", b"stud:dealer:{"):
            if key.startswith(prefix):
                table = key[len(prefix):].split(b"}", 1)[0]
                tid, _, number = table.rpartition(b".")
                return number.isdigit() and tid in tournaments
        return False
    return skip


def scoped(admin: Any) -> str:
    return digest(admin, skip=tournament_tables(admin))


@dataclass
class Gate:
    """The process manager's rounds, run by the test: each takes ``lock``."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    rounds: int = 0
    failures: list[str] = field(default_factory=list)


@dataclass
class Setup:
    room: Room
    tournament: RunningTournament
    gate: Gate
    loop: asyncio.AbstractEventLoop

    def hold(self) -> None:
        """From a worker thread: no round of the manager until :meth:`free`."""
        asyncio.run_coroutine_threadsafe(self.gate.lock.acquire(), self.loop).result(60)

    def free(self) -> None:
        self.loop.call_soon_threadsafe(self.gate.lock.release)

    def quiet(self, admin: Any, timeout_s: float = 60.0) -> None:
        """From a worker thread: wait until :data:`QUIET_ROUNDS` rounds in a row changed
        nothing (what an accepted command set going is done)."""
        deadline = time.monotonic() + timeout_s
        last, seen, still = scoped(admin), self.gate.rounds, 0
        while still < QUIET_ROUNDS:
            while self.gate.rounds == seen:
                if time.monotonic() > deadline:
                    raise AssertionError("the process manager's rounds never went quiet")
                time.sleep(0.01)
            seen = self.gate.rounds
            now = scoped(admin)
            still = still + 1 if now == last else 0
            last = now


async def gated_rounds(tournament: RunningTournament, gate: Gate) -> None:
    """The service's own process manager stopped, its rounds (the same :class:`Rounds`, the
    same writer, leases and tables) run here, each under the gate."""
    deps = tournament.deps
    deps.stopping.set()
    if deps.task is not None:
        await asyncio.wait_for(deps.task, 10)
    deps.stopping.clear()
    rounds = driver.Rounds(deps.app, deps.wallet, TableSteps(deps.writer, deps.tables),
                           writer=deps.writer, leases=deps.leases)

    async def run() -> None:
        while not deps.stopping.is_set():
            async with gate.lock:
                try:
                    await rounds.round(deps.stopping)
                except Exception as exc:  # Redis away: as driver.run, the next round
                    gate.failures.append(repr(exc))
                gate.rounds += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(deps.stopping.wait(), TICK_S)
    deps.task = asyncio.create_task(run())


@pytest.fixture
async def setup(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
                ) -> AsyncIterator[Setup]:
    def url(user: str) -> str:
        return redis_server.server.url_for(user) if redis_server.server is not None \
            else redis_url
    # one connection per service carries every kind of bad token (test_hostile_clients.py)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STUD_RATE_REFUSED_PER_CONNECTION", "1000000")
        async with running_room(redis_server, redis_url, dev_keys) as room:
            quiet = fast_settings(next_hand_delay_ms=600_000)
            await room.client.open_table("t-open", settings=quiet)
            await room.client.open_table("t-empty", settings=quiet)
            for name in ("ann", "bob", "r1", "r2"):
                await room.fund(name)
            await room.client.call("SitDown", table_pb2.SitDownRequest(
                table_id="t-open", seat=1, buy_in=10_000), player("ann"))
            settings = Settings(addr="127.0.0.1:0", redis_url=url("tournament"),
                                auth_keys=dev_keys.key_set(),
                                service_key=dev_keys.service_key("tournament"),
                                wallet_target=f"127.0.0.1:{room.wallet.port}",
                                table_target=f"127.0.0.1:{room.table_port}", tick_s=TICK_S,
                                table_settings=fast_settings())
            async with running_tournament(settings, dev_keys) as tournament:
                client = tournament.client
                # a sit & go registering (8 seats: never filled by the fuzz's two funded
                # players), one running, a multi-table in a day, one cancelled
                await client.create("sng-open", sng(8))
                await client.register("sng-open", player("bob"), "r-bob")
                await client.create("run", sng(2))
                await client.register("run", player("r1"), "r-1")
                await client.register("run", player("r2"), "r-2")
                await client.create("mtt", mtt({"seconds": int(time.time()) + 86_400}))
                await client.create("gone", sng(3))
                await client.cancel("gone", "fuzz", "c-gone")

                async def running() -> bool:
                    view = await client.get("run")
                    return view.phase == tpb.TOURNAMENT_PHASE_RUNNING and bool(view.tables)
                await eventually(running, 30)
                gate = Gate()
                await gated_rounds(tournament, gate)
                yield Setup(room, tournament, gate, asyncio.get_running_loop())
                assert not gate.failures, gate.failures[:3]


PRINCIPALS: list[Principal] = [
    player("ann"), player("bob"), player("zed"), Principal(Role.OPERATOR, "ops"),
    Principal(Role.AUDITOR, "audit"), Principal(Role.SERVICE, "table"),
    Principal(Role.SERVICE, "dealer"), Principal(Role.SERVICE, "wallet"),
    Principal(Role.SERVICE, "tournament"),
    # the funded players and the operator again: their commands reach the rules more often
    player("ann"), player("bob"), Principal(Role.OPERATOR, "ops")]


async def test_hostile_tournament_requests(setup: Setup, redis_url: str,
                                           dev_keys: DevKeys) -> None:
    books = {"ours": TokenBook(dev_keys), "forged": TokenBook(DevKeys.generate())}
    expiring = TokenBook(dev_keys, ttl_seconds=1)
    expired = {i: expiring.token(who) for i, who in enumerate(PRINCIPALS)}
    await asyncio.sleep(7)  # past the expiry leeway
    port = setup.tournament.port
    tally = Tally()
    accepted = 0

    def metadata(case: Case) -> tuple[tuple[str, str], ...]:
        if case.who is None:
            return ()
        if case.how == "expired":
            return (("authorization", f"Bearer {expired[case.who]}"),)
        if case.how == "garbage":
            return (("authorization", case.garbage),)
        return tuple(books[case.how].metadata(PRINCIPALS[case.who]))

    def run_all() -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        admin = connect_sync(redis_url)
        pending = False

        @seed(SEED)
        @settings(max_examples=CASES, deadline=None, database=None, derandomize=False,
                  phases=(Phase.generate, Phase.shrink), print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=cases(targets(TOURNAMENT_SERVICES), len(PRINCIPALS), TOURNAMENT_STRINGS))
        def one(case: Case) -> None:
            nonlocal pending, accepted
            if pending:  # an accepted command's money and tables first
                setup.quiet(admin)
                pending = False
            setup.hold()
            try:
                before = scoped(admin)
                code = send(channel, case.target, case.body, metadata(case))
                changed = scoped(admin) != before
            finally:
                setup.free()
            if code == "OK" and case.target.method in COMMANDS:
                pending = True
                accepted += 1
            verdict = judge(code, case.target.streaming, changed)
            tally.add(case, code, verdict)
            assert verdict.failure is None, f"{verdict.failure}: {case!r} answered {code}"

        try:
            one()
        finally:
            channel.close()
            admin.close()

    try:
        await asyncio.to_thread(run_all)
    finally:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:  # the service still answers (no crash)
                await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=5)
            except grpc.aio.AioRpcError:
                tally.crashes += 1
        print(dict(tally.codes))
        print(f"hangs={tally.failures['hang']} quiet_streams={tally.codes['QUIET']} "
              f"accepted_commands={accepted} manager_rounds={setup.gate.rounds}")
        print(f"tournament_{tally.line()}")
    assert tally.crashes == 0
    assert tally.cases >= min(CASES, 1)


# --- directed cases (issue 29) ---------------------------------------------------------------


async def refused_changing_nothing(setup: Setup, admin: Any, call: Callable[[], Any],
                                   code: grpc.StatusCode, reason: str,
                                   detail: str = "") -> None:
    """``call()`` (a coroutine function) is refused ``code`` with ``stud-reason`` ``reason``
    (and ``detail`` in its message), the manager's rounds held off, and changes nothing."""
    async with setup.gate.lock:
        before = scoped(admin)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call()
        assert scoped(admin) == before, f"{code.name} {reason}: it changed something"
    assert info.value.code() is code, info.value.details()
    assert rpc_error_reason(info.value) == reason, info.value.details()
    assert detail in (info.value.details() or "")


def timestamp_paths(message: Any, prefix: str = "", depth: int = 0) -> list[str]:
    """The dotted paths of every google.protobuf.Timestamp field of a request type."""
    out = []
    for f in message.DESCRIPTOR.fields:
        if f.message_type is None or depth > 3:
            continue
        path = f"{prefix}{f.name}"
        if f.message_type.full_name == "google.protobuf.Timestamp":
            out.append(path)
        elif not f.is_repeated:
            out += timestamp_paths(getattr(message, f.name), f"{path}.", depth + 1)
    return out


BAD_TIMES = [{"seconds": 4_000_000_000, "nanos": -5}, {"seconds": 4_000_000_000, "nanos": 10**9},
             {"seconds": 2**62}, {"seconds": -(2**62)}, {"seconds": 253_402_300_800},
             {"seconds": -(2**63)}, {"seconds": 2**63 - 1, "nanos": 2**31 - 1}]


async def test_out_of_range_timestamps_in_every_request(setup: Setup, redis_url: str) -> None:
    """G4: every Timestamp any request of any service carries, found in the descriptors
    (today CreateTournament's config.start_at alone; a new one fails this test until it is
    given its case), set out of range: INVALID_ARGUMENT naming the field, nothing changed,
    the id still free."""
    found = {(t.path, p) for t in targets(ROOM_SERVICES + TOURNAMENT_SERVICES)
             for p in timestamp_paths(t.request())}
    assert found == {("/stud.v1.TournamentService/CreateTournament", "config.start_at")}
    client = setup.tournament.client
    admin = connect_sync(redis_url)
    try:
        for n, bad in enumerate(BAD_TIMES):
            for config in (mtt(bad), mtt(bad, format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                         min_entrants=0)):
                await refused_changing_nothing(
                    setup, admin, lambda c=config, i=n: client.create(f"g4-{i}", c),
                    grpc.StatusCode.INVALID_ARGUMENT, "bad_request", "config.start_at")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await client.get(f"g4-{n}")
            assert info.value.code() is grpc.StatusCode.NOT_FOUND
    finally:
        admin.close()


def unplayable() -> dict[str, tpb.TournamentConfig]:
    """The hostile test's G5 list: each cannot be played or paid."""
    turbo = tpb.TournamentStructure(preset="turbo")
    levels = [tpb.TournamentLevel(ante=1, bring_in=2, small_bet=4, big_bet=8, seconds=60)] * 8
    future = {"seconds": int(time.time()) + 86_400}
    return {
        "buy_in_max": tpb.TournamentConfig(name="x", format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                           buy_in=2**63 - 1, seats=3, structure=turbo),
        "fee_max": tpb.TournamentConfig(name="x", format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                        buy_in=10, fee=2**63 - 1, seats=3, structure=turbo),
        "sum_overflows": tpb.TournamentConfig(name="x",
                                              format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                              buy_in=2**62, fee=2**62, seats=3,
                                              structure=turbo),
        "stack_max": tpb.TournamentConfig(
            name="x", format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=10, seats=3,
            structure=tpb.TournamentStructure(levels=levels, starting_stack=2**63 - 1)),
        "min_entrants_0": mtt(future, min_entrants=0),
        "late_past_levels": mtt(future, late_through_level=1000,
                                structure=tpb.TournamentStructure(levels=levels,
                                                                  starting_stack=1000)),
        "nul_name": tpb.TournamentConfig(name="a\x00b", format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                         buy_in=10, seats=3, structure=turbo),
        "start_in_the_past": mtt({"seconds": 1_000_000_000}),
    }


async def test_unplayable_tournaments_are_refused(setup: Setup, redis_url: str) -> None:
    """G5: each unplayable CreateTournament is INVALID_ARGUMENT bad_request, changes nothing
    and burns no id (the same id is free after); a watch past the last event is OUT_OF_RANGE
    after_the_end, at once."""
    client = setup.tournament.client
    admin = connect_sync(redis_url)
    try:
        for name, config in unplayable().items():
            tid = f"g5-{name}".replace("_", "-")
            await refused_changing_nothing(
                setup, admin, lambda c=config, t=tid: client.create(t, c),
                grpc.StatusCode.INVALID_ARGUMENT, "bad_request")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await client.get(tid)
            assert info.value.code() is grpc.StatusCode.NOT_FOUND, name
        version = (await client.get("sng-open")).version
        for after in (2**64 - 1, version + 1):
            async def watch(a: int = after) -> None:
                call = client.stub.WatchTournament(
                    tpb.WatchTournamentRequest(tournament_id="sng-open", after_sequence=a),
                    metadata=client.md(player("ann")), timeout=10)
                try:
                    await call.read()
                finally:
                    call.cancel()
            await refused_changing_nothing(setup, admin, watch,
                                           grpc.StatusCode.OUT_OF_RANGE, "after_the_end")
    finally:
        admin.close()


async def test_open_table_zero_values(setup: Setup, redis_url: str) -> None:
    """The table's OpenTable: ``seats: 0`` and ``big_bet: 0`` are the defaults (8 seats, the
    big bet twice the small; table.proto), accepted; what the rules refuse around them
    (1 or 9 seats, a big bet not above the small, a small bet of 1) is INVALID_ARGUMENT
    invalid_config and opens nothing."""
    client = setup.room.client
    reply = await client.call("OpenTable", table_pb2.OpenTableRequest(
        table_id="z-0", config=cpb.TableConfig(seats=0, big_bet=0),
        settings=fast_settings()), OPERATOR)
    (opened,) = [r.event.table_opened.config for r in reply.events
                 if r.event.WhichOneof("event") == "table_opened"]
    assert (opened.seats, opened.big_bet) == (8, 2 * opened.small_bet)
    admin = connect_sync(redis_url)
    try:
        for n, config in enumerate((cpb.TableConfig(seats=1), cpb.TableConfig(seats=9),
                                    cpb.TableConfig(small_bet=100, big_bet=100),
                                    cpb.TableConfig(seats=0, small_bet=1, big_bet=0))):
            tid = f"z-{n + 1}"
            await refused_changing_nothing(
                setup, admin, lambda c=config, t=tid: client.call(
                    "OpenTable", table_pb2.OpenTableRequest(table_id=t, config=c,
                                                            settings=fast_settings()),
                    OPERATOR),
                grpc.StatusCode.INVALID_ARGUMENT, "invalid_config")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await client.view(tid)
            assert info.value.code() is grpc.StatusCode.NOT_FOUND
    finally:
        admin.close()


async def test_the_digest_sees_what_a_call_could_change(setup: Setup, redis_url: str) -> None:
    """The "changed nothing" check can fail: a key written under a tournament, the wallet, a
    cash table or the table index changes the digest; only a key of a table a tournament
    deals at (``run.1``) and the heartbeats are left out."""
    admin = connect_sync(redis_url)
    try:
        async with setup.gate.lock:
            for key, seen in (("stud:tournament:{sng-open}:probe", True),
                              ("stud:tournament:{nobody}:probe", True),
                              ("stud:wallet:{wallet}:probe", True),
                              ("stud:table:{t-open}:probe", True),
                              ("stud:dealer:{t-empty}:probe", True),
                              ("stud:table:{z.1}:probe", True),
                              ("stud:table:{run.1}:probe", False),
                              ("stud:dealer:{run.1}:probe", False),
                              ("stud:tournament:replicas", False)):
                before = scoped(admin)
                admin.zadd(key, {"probe": 1})  # a member added (a new key, or the set's)
                try:
                    assert (scoped(admin) != before) is seen, key
                finally:
                    admin.zrem(key, "probe")
    finally:
        admin.close()


async def test_an_accepted_command_then_its_retry_and_a_refusal(setup: Setup,
                                                                 redis_url: str) -> None:
    """The campaign's order around an accepted command: ann's Register at the scheduled
    multi-table is accepted (it changes the log); the manager's rounds then charge it until
    they are quiet; its retry (same id) is answered as a duplicate and a second Register is
    refused ALREADY_EXISTS already_registered, each with the rounds held off, changing
    nothing."""
    client = setup.tournament.client
    admin = connect_sync(redis_url)
    try:
        async with setup.gate.lock:
            before = scoped(admin)
            reply = await client.register("mtt", player("ann"), "acc-1")
            assert scoped(admin) != before and reply.entry_id
        await asyncio.to_thread(setup.quiet, admin)
        view = await client.get("mtt")
        assert [e.paid for e in view.entries if e.player_id == "ann"] == [True]
        async with setup.gate.lock:
            before = scoped(admin)
            again = await client.register("mtt", player("ann"), "acc-1")
            assert again.duplicate and again.entry_id == reply.entry_id
            assert scoped(admin) == before
        await refused_changing_nothing(
            setup, admin, lambda: client.register("mtt", player("ann"), "acc-2"),
            grpc.StatusCode.ALREADY_EXISTS, "already_registered")
    finally:
        admin.close()
