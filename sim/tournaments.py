"""Tournaments in the simulator (issue 31; the archiver's step for finished tournaments,
``sim.tournament_archive``, needs their streams). The simulated room deals cash tables only,
so its tournaments are played by the tournament service's pure model, and written by the
real service:

1. **Decided by the model.** ``studtest.tournament`` plays a tournament as the process
   manager and the tables would (the model's ``decide`` for every command: registrations,
   the wallet's answers, seats, hands started and ended, moves, busts, prizes, refunds,
   ticks of its clock), choices from the run's seed. Each command is recorded with the
   clock and the seed it was decided with, and the events it led to.
2. **Written by the service.** At the simulated time each command was decided (the model's
   clock starts at the simulated wall clock when the tournament opens), the real
   :class:`tournament.app.TournamentApp` executes it on the simulated Redis (its own
   connection, with the store's faults: a failed call is retried with the same command id,
   so one applied before its reply was lost is answered from its record), with that clock
   and seed, so it decides the same events, and its event store appends them: the stream,
   its envelopes, chain, version and command records are byte for byte what the service
   writes. An outcome that differs from the model's is a violation.

Some tournaments are sit & go, some multi-table with late registration and re-entry, and
some are cancelled after their entries are paid (their buy-ins refunded): each ends
``Finished`` or ``Cancelled`` with every payment made, as the archiver's step wants.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from sim.redis import Faults, SimRedis, as_client
from studkit.auth import Principal, Role
from studtest.tournament import Run, play
from tournament import commands as c
from tournament import events as ev
from tournament.app import TournamentApp, tournament_store
from tournament.decide import decide
from tournament.state import apply
from tournament.structure import TURBO

if TYPE_CHECKING:
    from sim.world import World

TOURNAMENTS = 4
"""Tournaments opened in one run at most."""
EVERY_S = (5.0, 60.0)
"""Simulated seconds between two openings (drawn)."""
TICK_S = 30.0
"""The model's clock moves on by this much when it ticks."""
RETRY_S = 0.5
OPERATOR = Principal(Role.OPERATOR, "sim-operator")


@dataclass(frozen=True, slots=True)
class Step:
    """One command as the model decided it."""

    command: c.Command
    now: float
    seed: int
    events: tuple[ev.Event, ...]
    command_id: str


@dataclass
class Played(Run):
    """``studtest.tournament.Run``, recording every command it decides."""

    tournament_id: str = ""
    steps: list[Step] = field(default_factory=list)

    def do(self, cmd: c.Command) -> list[ev.Event]:
        seed = self.rng.randrange(2**32)
        events = decide(self.t, cmd, self.now, seed)
        self.t = apply(self.t, events)
        self.log.extend(events)
        last = self.steps[-1] if self.steps else None
        if not events and last is not None and last.command == cmd:  # a report repeated
            command_id = last.command_id  # after a crash: the same command, the same id
        else:
            command_id = f"c{len(self.steps)}"
        self.steps.append(Step(cmd, self.now, seed, tuple(events), command_id))
        return events


def planned(tournament_id: str, rng: random.Random, start: float) -> Played:
    """A whole tournament, decided by the model from ``start`` (the wall clock): a sit &
    go, a multi-table one, or (one in four) one cancelled once its entries are paid."""
    run = Played(random.Random(rng.randrange(2**32)), tournament_id=tournament_id)
    run.now = start
    kind = rng.choice(("sng", "mtt", "mtt", "cancelled"))
    if kind == "sng":
        seats = rng.randint(3, 6)
        field_size = seats
        cfg = ev.Config("sim sit & go", ev.SIT_AND_GO, 100, 10, TURBO, seats=seats)
    else:
        field_size = rng.randint(5, 12)
        cfg = ev.Config("sim multi-table", ev.MULTI_TABLE, 100, 10, TURBO,
                        seats=rng.randint(3, 6), start_at=start + 60.0,
                        late_through_level=1, re_entries=1)
    run.do(c.Create(tournament_id, cfg))
    for i in range(field_size):
        run.now += rng.uniform(0.0, 2.0)
        run.do(c.Register(f"p{i}"))
    if kind == "cancelled":
        for intent in run.intents():
            if isinstance(intent, c.SettleEntry):
                run.carry_out(intent)
        run.now += 5.0
        run.do(c.Cancel("the room closes"))
    play(run, tick=TICK_S)
    return run


def caller(cmd: c.Command) -> Principal | None:
    """Who sends ``cmd``: the operator, a player for themself, or the process manager."""
    if isinstance(cmd, c.Create | c.Cancel):
        return OPERATOR
    if isinstance(cmd, c.Register | c.ReEnter | c.Unregister):
        return Principal(Role.PLAYER, cmd.player_id)
    return None


class TournamentRoom:
    """The tournament service of a run: opens tournaments now and then, and writes each
    one's commands through the real app at the simulated times the model decided them."""

    def __init__(self, world: World, rng: random.Random,
                 report: Callable[[list[str]], None]) -> None:
        self.world = world
        self.rng = rng
        self.report = report
        p = world.probabilities
        self.redis = SimRedis(world.data, Faults(rng, 0.0005, p.store_fail_before,
                                                 p.store_fail_after))
        self.played: dict[str, Played] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.commands = self.retries = 0

    async def run(self, stop: Callable[[], bool]) -> None:
        """Open tournaments until ``stop`` (those open play on to their end)."""
        while not stop() and len(self.played) < TOURNAMENTS:
            tid = f"s{self.world.seed}-tour{len(self.played) + 1}"
            run = planned(tid, self.rng, self.world.loop.wall())
            self.played[tid] = run
            self.tasks.append(asyncio.ensure_future(self._play(run)))
            await asyncio.sleep(self.rng.uniform(*EVERY_S))

    async def finished(self) -> None:
        """Every tournament opened has written its last command."""
        await asyncio.gather(*self.tasks)

    async def _play(self, run: Played) -> None:
        """The tournament's commands, each at its time, through an app of its own whose
        clock and seed are the ones the model decided the command with."""
        loop = self.world.loop
        at: list[Step] = []
        app = TournamentApp(tournament_store(as_client(self.redis)),
                            clock=lambda: at[0].now, seed=lambda: at[0].seed)
        started, base = loop.time(), run.steps[0].now
        for step in run.steps:
            wait = started + (step.now - base) - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            at[:] = [step]
            try:
                await self._execute(app, run.tournament_id, step)
            except Exception as exc:  # the service refused what the model decided
                self.report([f"tournament {run.tournament_id}: the service refused "
                             f"{step.command_id} ({type(step.command).__name__}): "
                             f"{type(exc).__name__}: {exc}"])
                return

    async def _execute(self, app: TournamentApp, tid: str, step: Step) -> None:
        self.commands += 1
        retried = False
        while True:
            try:
                outcome = await app.execute(tid, step.command, step.command_id,
                                            by=caller(step.command))
                break
            except RedisError:  # failed before, or applied and its reply lost: again
                self.retries += 1
                retried = True
                await asyncio.sleep(RETRY_S)
        if outcome.duplicate and not retried:
            return  # the model's own repeat of a report: answered from its record
        if tuple(r.event for r in outcome.records) != step.events:
            self.report([f"tournament {tid}: the service decided {len(outcome.records)} "
                         f"events for {step.command_id} ({type(step.command).__name__}), "
                         f"the model {len(step.events)}"])
