"""Two tournament replicas on one Redis (real gRPC, a real wallet): each tournament is driven
by the replica that holds its lease, and only by it (the ones rendezvous hashing gives it);
a paused former owner that resumes after another replica took its tournament over has its
append refused ``not_owner`` by the fence, changes nothing, and counts the refusal; a killed
owner's sit & go is played to the end by the other replica (the table service, the dealer
and the wallet real too)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from stud.v1 import tournament_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.auth import Principal, Role
from studkit.ownership import Replica, rendezvous
from studkit.store import AppendResult
from studtest.table import Room, act_once
from studtest.tournament_service import (
    OffsetClock,
    RunningTournament,
    eventually,
    freeze,
    kill,
    running_tournament,
)
from studtest.wallet import RunningWallet
from studtools.devkeys import DevKeys
from tests.integration.tournament.test_sit_and_go_to_the_end import aggressive
from tournament.bootstrap import TournamentDeps
from tournament.config import Settings
from tournament.driver import over
from tournament.leases import STALE_APPENDS

pytestmark = pytest.mark.integration

LEASE_MS = 3000
"""The replicas' lease (the product's default): both share this test's event loop, so a
stall of the loop longer than a lease would expire both at once and the first to wake would
take the other's tournaments (600 ms did, on a loaded machine)."""
QUIET_S = 0.6
"""How long a test watches for something that must not happen (a few rounds of the process
manager at the services' tick_s of 0.05 s)."""
START_S = 3600
"""How far after its creation a test's multi-table tournament starts by the replicas' shared
clock: it starts when the test moves the clock there, not when a busy machine gets there."""
SNG = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100,
                          fee=10, seats=3, structure=pb.TournamentStructure(preset="turbo"))
A, B = Replica("a", "127.0.0.1:0"), Replica("b", "127.0.0.1:0")


def player(name: str) -> Principal:
    return Principal(Role.PLAYER, name)


def owned_by(replica: Replica, n: int, prefix: str) -> list[str]:
    """``n`` tournament ids that rendezvous hashing gives ``replica`` of A and B."""
    ids = (f"{prefix}{i}" for i in range(1000))
    return [t for t in ids if rendezvous(t, [A, B]) == replica][:n]


async def owner(running: RunningTournament, tid: str) -> str:
    raw = await running.deps.redis.hget(keys.tournament_owner(tid), "replica")
    return "" if raw is None else raw.decode()


async def lease_over(running: RunningTournament, tid: str, replica: Replica) -> bool:
    """``replica``'s lease on ``tid`` has run out by Redis's clock (the one the leases are
    kept by), or another replica holds it now."""
    held_by, expires = await running.deps.redis.hmget(keys.tournament_owner(tid),
                                                      ["replica", "expires"])
    seconds, micros = await running.deps.redis.time()
    return held_by != replica.id.encode() or \
        int(expires or 0) <= seconds * 1000 + micros // 1000


def stale(running: RunningTournament) -> float:
    return running.deps.metrics.sample(f"{STALE_APPENDS}_total")


class Calls:
    """The wallet port of one replica, recording which tournaments it moved money for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.tournaments: set[str] = set()

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.inner, name)
        if name in ("balance", "pool", "exclusion"):  # reads (Register's check, the verdict,
            # the exclusions at a start): no money
            return method  # type: ignore[no-any-return]

        async def call(tournament_id: str, *args: Any) -> None:
            self.tournaments.add(tournament_id)
            await method(tournament_id, *args)
        return call


class Gate:
    """Holds the replica's appends of commands whose id starts with ``prefix`` while shut
    (``shut``: from the start): a process paused between deciding and writing."""

    def __init__(self, deps: TournamentDeps, prefix: str, shut: bool = False) -> None:
        self.prefix = prefix
        self.open = asyncio.Event()
        if not shut:
            self.open.set()
        self.holding = asyncio.Event()
        store = deps.app.store
        self._append = store.append
        store.append = self.append  # type: ignore[method-assign]

    async def append(self, tid: str, envelopes: Sequence[EventEnvelope], expected: int,
                     command_id: str, *args: Any, **kwargs: Any) -> AppendResult:
        if command_id.startswith(self.prefix) and not self.open.is_set():
            self.holding.set()
            await self.open.wait()
        return await self._append(tid, envelopes, expected, command_id, *args, **kwargs)


def settings_for(base: Settings, replica: Replica, **changes: Any) -> Settings:
    return dataclasses.replace(base, replica_id=replica.id, lease_ms=LEASE_MS, **changes)


@contextlib.asynccontextmanager
async def two(base: Settings, dev_keys: DevKeys,
              prepare: Callable[[TournamentDeps], None] | None = None,
              clock: OffsetClock | None = None
              ) -> AsyncIterator[tuple[RunningTournament, RunningTournament]]:
    """Replicas A and B; ``clock``: the time both decide by (None: the wall clock)."""
    async with running_tournament(settings_for(base, A), dev_keys, prepare=prepare,
                                  clock=clock) as a, \
            running_tournament(settings_for(base, B), dev_keys, prepare=prepare,
                               clock=clock) as b:
        async def both_live() -> bool:  # else the first to start takes all, then hands over
            return all(len(r.deps.leases.spread.live) == 2 for r in (a, b))
        await eventually(both_live)
        yield a, b


async def funded(wallet: RunningWallet, *names: str, funds: int = 1000) -> None:
    for name in names:
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, funds, f"d-{name}")


async def test_two_replicas_split_the_tournaments_and_each_drives_only_its_own(
        tournament: RunningTournament, wallet: RunningWallet, dev_keys: DevKeys) -> None:
    await tournament.deps.stop_driver()  # the fixture's replica leaves: only A and B drive
    names = [f"p{i}" for i in range(6)]
    await funded(wallet, *names)
    mine = {A.id: owned_by(A, 3, "s"), B.id: owned_by(B, 3, "s")}
    calls: dict[str, Calls] = {}

    def record(deps: TournamentDeps) -> None:
        deps.wallet = calls[deps.leases.me] = Calls(deps.wallet)  # type: ignore[assignment]

    async with two(tournament.settings, dev_keys, record) as (a, b):
        for i, tid in enumerate(mine[A.id] + mine[B.id]):
            await a.client.create(tid, SNG)
            await b.client.register(tid, player(names[i]), f"r-{tid}")

        async def all_paid() -> bool:
            views = [await a.client.get(t) for ids in mine.values() for t in ids]
            return all(v.entries[0].paid for v in views)
        await eventually(all_paid)
        for running in (a, b):
            me = running.deps.leases.me
            assert sorted(running.deps.leases.held) == sorted(mine[me])
            assert [await owner(running, t) for t in mine[me]] == [me] * 3
            assert calls[me].tournaments == set(mine[me])
            assert stale(running) == 0
    for name in names:
        assert await wallet.client.player_balance(name) == 1000 - 110


async def test_a_paused_former_owner_that_resumes_changes_nothing(
        tournament: RunningTournament, wallet: RunningWallet, dev_keys: DevKeys) -> None:
    await tournament.deps.stop_driver()
    await funded(wallet, "ann", "bob")
    (tid,) = owned_by(A, 1, "m")
    gates: dict[str, Gate] = {}

    def gate(deps: TournamentDeps) -> None:
        # Shut from the start: a tick before the start time decides nothing and writes
        # nothing, so the first append it holds is the start's (shutting it after ann's
        # charge raced the start on a loaded machine: the start's tick went through).
        gates[deps.leases.me] = Gate(deps, "pm:tick.", shut=True)

    clock = OffsetClock()  # both replicas decide by it: the start comes when it is moved
    async with two(tournament.settings, dev_keys, gate, clock) as (a, b):
        start = int(clock()) + START_S
        config = pb.TournamentConfig(name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE,
                                     buy_in=100, fee=10, seats=3, min_entrants=3,
                                     structure=pb.TournamentStructure(preset="turbo"),
                                     start_at={"seconds": start})
        await b.client.create(tid, config)
        await b.client.register(tid, player("ann"), "r-ann")

        async def ann_paid() -> bool:
            return bool((await b.client.get(tid)).entries[0].paid)

        async def paid_or_held() -> bool:
            return gates[A.id].holding.is_set() or await ann_paid()
        await eventually(paid_or_held)
        # not before its time: A's ticks before the start decide and write nothing
        assert await ann_paid() and not gates[A.id].holding.is_set()
        assert await owner(a, tid) == A.id
        epoch = a.deps.leases.held[tid]
        clock.jump_to(start)  # ann is paid: the start time comes
        # At its start time, A decides the cancel below the minimum field and is held there.
        await asyncio.wait_for(gates[A.id].holding.wait(), 10)
        await freeze(a)  # and A's keeper with it: a paused process
        await b.client.register(tid, player("bob"), "r-bob")  # any replica serves a caller
        await eventually(lambda: lease_over(b, tid, A), 10 + LEASE_MS / 1000)
        # B claims a departed replica's tournaments when it sees it leave. A's lease can
        # outlive its last heartbeat (it took the tournament, or renewed it, after that
        # heartbeat), so that claim may have been refused: B claims again at its next rounds,
        # not only at its next sweep (SWEEP_S, 30 s on this clock, which does not move here).

        async def taken_over() -> bool:
            return await owner(b, tid) == B.id
        await eventually(taken_over)

        async def b_done() -> bool:
            return over(await b.deps.app.load(tid))
        await eventually(b_done)  # bob paid, the field below 3 at the start: cancelled
        before = await b.deps.app.store.read(tid)
        assert stale(a) == 0
        gates[A.id].open.set()  # A resumes with its decision and its lease's epoch

        async def refused() -> bool:
            return stale(a) >= 1
        await eventually(refused)
        assert tid not in a.deps.leases.held
        await asyncio.sleep(QUIET_S)  # A's next rounds (it owns nothing now)
        after = await b.deps.app.store.read(tid)
        assert [(s.stream_id, s.envelope) for s in after] == \
            [(s.stream_id, s.envelope) for s in before]
        assert int(await b.deps.app.store.owner_epoch(tid) or 0) > epoch
        assert stale(b) == 0
    t = await tournament.deps.app.load(tid)
    assert t.phase == "cancelled" and set(t.payments) <= t.paid
    for name in ("ann", "bob"):  # each charged once and refunded once
        assert await wallet.client.player_balance(name) == 1000
    assert (await wallet.client.pool(tid)).balance == 0


FAST = pb.TournamentStructure(starting_stack=300, levels=[
    pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=2),
    pb.TournamentLevel(ante=25, bring_in=50, small_bet=150, big_bet=300, seconds=600)])


async def test_a_killed_owners_sit_and_go_is_finished_by_the_other_replica(
        room: Room, room_settings: Settings, dev_keys: DevKeys) -> None:
    base = room_settings
    names = ("ann", "bob", "cy")
    for name in names:
        await room.fund(name, 10_000)
    (tid,) = owned_by(A, 1, "k")
    rng = random.Random(3)
    killed_at: float | None = None
    taken_over = False
    async with two(base, dev_keys) as (a, b):
        config = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                     buy_in=1000, fee=100, seats=3, structure=FAST)
        await b.client.create(tid, config)
        for name in names:
            await b.client.register(tid, player(name), f"r-{name}")
        async with asyncio.timeout(180):
            while True:
                t = await b.deps.app.load(tid)
                if over(t):
                    break
                if killed_at is None and any(k.last_hand or k.in_hand
                                             for k in t.tables.values()):
                    assert await owner(b, tid) == A.id
                    print(f"killed at level {t.level}, version {t.version}")
                    killed_at = time.monotonic()
                    await kill(a)  # mid-hand or between hands, mid-level
                if killed_at is not None and not taken_over and await owner(b, tid) == B.id:
                    taken_over = True
                    print(f"taken over {time.monotonic() - killed_at:.2f} s after the kill "
                          f"(lease {LEASE_MS} ms)")
                for table_id in list(t.tables):
                    with contextlib.suppress(Exception):
                        tv = await room.client.view(table_id)
                        await act_once(room.client, table_id, tv, aggressive(rng))
                await asyncio.sleep(0.01)
        assert killed_at is not None and taken_over
        assert await owner(b, tid) == B.id
        assert stale(b) == 0
        view = await b.client.get(tid)
    assert view.phase == pb.TOURNAMENT_PHASE_FINISHED
    prizes = {e.player_id: e.prize for e in view.entries}
    assert sum(prizes.values()) == 3000 == sum(view.prizes)  # paid once each, from the pool
    assert (await room.wallet.client.pool(tid)).balance == 0
    for name in names:
        assert await room.wallet.client.player_balance(name) == 10_000 - 1100 + prizes[name]
