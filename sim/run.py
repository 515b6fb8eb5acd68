"""One seeded run: open the tables, let the players play while the faults fall, check the
invariants after every step (one simulated second), then let every table settle (faults
off, players leave) and check the end state. The same seed gives the same run, event for
event: :func:`digest` hashes every table's log."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog

from rules import Phase
from sim import archive, checks
from sim.loop import SimLoop, pause
from sim.network import NetFaults
from sim.players import BANKROLL, Table
from sim.watchers import TableWatcher
from sim.world import Probabilities, Process, World
from studkit.store import trimmed_key
from table.actor import TableActor
from table.room import Room

STEP_S = 1.0
STUCK_S = 300.0
"""A table that could deal (two players seated and in, not closed or stopped) starts its next
hand within this much simulated time, or it is stuck."""


@dataclass
class Result:
    """What a run did and found."""

    seed: int
    hands: int = 0
    faults: int = 0
    steps: int = 0
    violations: list[str] = field(default_factory=list)
    first_step: int | None = None
    digest: str = ""
    log: list[str] = field(default_factory=list)
    """The faults and restarts, with their simulated times."""
    tail: list[str] = field(default_factory=list)
    """The events leading up to the first violation."""
    fault_counts: dict[str, int] = field(default_factory=dict)
    watched: int = 0
    aimed: dict[str, int] = field(default_factory=dict)
    """The calls the aimed crashes came right after, by name."""
    cpu_s: float = 0.0
    """The CPU time the run took (its process's; the machine may be shared)."""
    archive: dict[str, int] = field(default_factory=dict)
    """With the archiver (``--archive``): its steps, trims, crashes, failed steps, and the
    events trimmed from the simulated Redis in all."""
    """Events the watchers received (across their resumptions)."""


class Run:
    """The run of one seed."""

    def __init__(self, seed: int, tables: int, hands: int, loop: SimLoop,
                 probabilities: Probabilities | None = None,
                 tweak: Callable[[World], None] | None = None,
                 sabotage: Callable[[Run], None] | None = None) -> None:
        self.loop = loop
        self.world = World(seed, loop, probabilities or Probabilities())
        if tweak is not None:
            tweak(self.world)
        self.target = hands
        self.table_ids = [f"s{seed}t{i}" for i in range(tables)]
        self.tables: dict[str, Table] = {}
        self.followers: dict[str, checks.Follower] = {}
        self.watchers: dict[str, TableWatcher] = {}
        self.ledger_read = 0
        self.settled: Counter[tuple[str, str]] = Counter()
        self.result = Result(seed)
        self.world.data.audit = checks.Audit(self.world, self._violate)
        self.archiver = (archive.Archiver(self.world, self.table_ids, self._violate)
                         if self.world.probabilities.archive else None)
        self.progress: dict[str, tuple[int, float]] = {}
        self.done = False
        self.background: set[asyncio.Task[None]] = set()
        self.sabotage = sabotage
        self.ending = False
        self.settling = False
        self.aimed: Counter[str] = Counter()
        """The calls the aimed crashes came right after, by name."""
        """For the invariant tests: called at every step, before the checks, to break
        something on purpose."""

    # --- the run -------------------------------------------------------------------------

    async def main(self) -> Result:
        world = self.world
        for table_id in self.table_ids:
            proc = world.new_process()
            await self._take(table_id, proc)
            table = Table(world, table_id, players=6)
            await table.open()
            self.tables[table_id] = table
            self.followers[table_id] = checks.Follower(world, table_id,
                                                       proc.app.tables.deps_for())
            self.watchers[table_id] = TableWatcher(world, table_id, world.rngs.watchers)
        players = [asyncio.ensure_future(t.run(lambda: self.done)) for t in self.tables.values()]
        players += [asyncio.ensure_future(w.run(lambda: self.done or self.ending))
                    for w in self.watchers.values()]
        faults = asyncio.ensure_future(self._faults())
        if self.archiver is not None:
            players.append(asyncio.ensure_future(self.archiver.run(lambda: self.done)))
        while not self.done:
            await pause(STEP_S)
            self.result.steps += 1
            if self.sabotage is not None:
                self.sabotage(self)
            self._check_step()
            if self.result.violations or self._hands() >= self.target:
                self.done = True
        faults.cancel()
        await asyncio.gather(*players, faults, return_exceptions=True)
        if self.archiver is not None:  # what its last step saw after the run's last check
            self._violate(self.archiver.ledger.take())
            self._violate(self.archiver.tournaments.check())
        if not self.result.violations:
            await self._settle()
        self.result.hands = self._hands()
        self.result.faults = world.faults()
        self.result.fault_counts = dict(world.counter.counts)
        self.result.aimed = dict(self.aimed)
        self.result.watched = sum(len(w.received) for w in self.watchers.values())
        self.result.digest = self.digest()
        if self.archiver is not None and not self.result.violations:
            await self._tournaments_end(self.archiver)
        return self.result

    def _hands(self) -> int:
        total = 0
        for table_id in self.table_ids:
            actor = self._actor(table_id)
            if actor is not None:
                total += actor.room.settled
        return total

    def _actor(self, table_id: str) -> TableActor | None:
        proc = self.world.owner.get(table_id)
        return None if proc is None else proc.actor(table_id)

    # --- faults --------------------------------------------------------------------------

    async def _faults(self) -> None:
        world, rng, p = self.world, self.world.rngs.faults, self.world.probabilities
        while True:
            await pause(1.0)
            for table_id in self.table_ids:
                proc = world.owner.get(table_id)
                if proc is None or proc.dead:
                    continue
                roll = rng.random()
                if roll < p.crash_per_s:
                    world.count("crash")
                    self._note(f"crash {proc.name} (table {table_id})")
                    proc.kill()
                    del world.owner[table_id]
                    self._background(self._restart(table_id, rng.uniform(0.5, 5.0)))
                elif roll < p.crash_per_s + p.takeover_per_s:
                    world.count("takeover")
                    self._background(self._takeover(table_id, proc, rng.uniform(5, 30)))
            if rng.random() < p.clock_jump_per_s:
                world.count("clock_jump")
                jump = rng.uniform(-2.0, 40.0)
                self.loop.wall_offset += jump
                self._note(f"clock jump {jump:+.1f}s")

    def _background(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _restart(self, table_id: str, after: float) -> None:
        await asyncio.sleep(after)
        proc = self.world.new_process()
        self._note(f"restart {proc.name} (table {table_id})")
        await self._take(table_id, proc)

    async def _take(self, table_id: str, proc: Process) -> None:
        """Take the table, again at the next round while its load fails (as the replicas'
        ownership round does)."""
        while True:
            try:
                await self.world.take(table_id, proc)
                self._aim(proc)
                return
            except Exception as exc:  # a store fault during the load
                self._note(f"load failed on {proc.name}: {type(exc).__name__}")
                await asyncio.sleep(1.0)

    def _aim(self, proc: Process) -> None:
        """Maybe arm an aimed crash: right after the process's N-th store or network call
        returns, before it acts on the answer (N from the seed)."""
        world = self.world
        p, rng = world.probabilities, world.rngs.aimed
        if self.settling or not p.aimed_crash or rng.random() >= p.aimed_crash:
            return
        proc.aimed = rng.randint(1, p.aimed_within)
        proc.on_aimed = self._aimed_crash

    def _aimed_crash(self, proc: Process, call: str) -> None:
        world, table_id = self.world, proc.table_id
        world.count("aimed_crash")
        self.aimed[call] += 1
        self._note(f"aimed crash {proc.name} (table {table_id}) as {call} returned")
        proc.kill()
        if world.owner.get(table_id) is proc:
            del world.owner[table_id]
            self._background(self._restart(table_id, world.rngs.aimed.uniform(0.5, 5.0)))

    async def _takeover(self, table_id: str, old: Process, pause: float) -> None:
        """``old`` stops (a long pause: GC, SIGSTOP, a partition) past its lease; a new
        process takes the table with the next epoch; ``old`` resumes, is fenced, and is
        retired at its next lease round."""
        world = self.world
        old.pause()
        self._note(f"pause {old.name} (table {table_id})")
        await asyncio.sleep(3.5)  # the lease runs out
        new = world.new_process()
        self._note(f"takeover {new.name} (table {table_id})")
        await self._take(table_id, new)
        await asyncio.sleep(pause)
        old.resume()
        self._note(f"resume {old.name}")
        await asyncio.sleep(1.0)  # its lease round finds the table lost
        old.kill()

    def _note(self, line: str) -> None:
        self.result.log.append(f"t={self.loop.time():9.3f} {line}")

    # --- invariants ----------------------------------------------------------------------

    def _violate(self, found: list[str]) -> None:
        if found and not self.result.violations:
            self.result.first_step = self.result.steps
            self.result.tail = self._tail(found[0])
        self.result.violations += found

    def _tail(self, violation: str, count: int = 25) -> list[str]:
        """The events leading up to a violation: the last ones of the tables it names (of
        every table when it names none)."""
        named = [t for t in self.table_ids if f"table {t}" in violation] or self.table_ids
        out = []
        for table_id in named:
            for e in checks.envelopes(self.world, table_id)[-count:]:
                out.append(f"{table_id} #{e.sequence} hand {e.hand_number} {e.event_type} "
                           f"command={e.command_id}")
        return out

    def _check_step(self) -> None:
        world = self.world
        self._violate(checks.chips(world, self._deposited()))
        found, self.settled = checks.ledger(world, self.ledger_read, self.settled)
        self._violate([line for line in found if line not in self.result.violations])
        self.ledger_read = checks.ledger_length(world)
        self._violate([f"refusal: {line}" for line in world.counter.internal])
        world.counter.internal.clear()
        for table_id, table in self.tables.items():
            self._violate([f"refusal: table {table_id}: {line}" for line in table.internal])
            table.internal.clear()
            actor = self._actor(table_id)
            self._violate(self.followers[table_id].step(actor))
            if self.result.steps % 30 == 0:
                self._violate(self.watchers[table_id].check(self.followers[table_id].log))
            if actor is not None:
                self._stuck(table_id, actor.room)
            if self.archiver is not None and self.result.steps % 10 == 0:
                self._violate(archive.check(world, table_id, self.followers[table_id].raw))
        if self.archiver is not None:
            self._violate(self.archiver.ledger.check())
            self._violate(self.archiver.tournaments.check())

    def _deposited(self) -> int:
        return BANKROLL * sum(len(t.players) for t in self.tables.values())

    def _stuck(self, table_id: str, room: Room) -> None:
        now = self.loop.time()
        started = room.table.hands_started
        last = self.progress.get(table_id)
        if last is None or last[0] != started:
            self.progress[table_id] = (started, now)
            return
        if room.stopped:
            self._violate([f"stuck: table {table_id} stopped: {room.stopped}"])
            return
        able = [s for s in room.table.seats if s is not None and not s.sitting_out
                and s.stack > 0]
        if room.closed or len(able) < 2:
            self.progress[table_id] = (started, now)
            return
        if now - last[1] > STUCK_S:
            hand = room.table.hand
            phase = hand.phase.value if hand is not None else "between hands"
            self._violate([f"stuck: table {table_id}: no hand for {now - last[1]:.0f}s "
                           f"({phase}, hand {started}, sagas {dict(room.sagas)})"])

    async def _settle(self) -> None:
        """Faults off; every process resumed; let the hands end and the sagas finish; then
        the end state's invariants."""
        world = self.world
        self.settling = True
        world.probabilities.net = NetFaults()
        for channel in world.channels_of():
            channel.faults = world.probabilities.net
        for proc in world.processes:
            proc.redis.faults.fail_before = proc.redis.faults.fail_after = 0.0
            proc.aimed = 0
        for table_id in self.table_ids:
            if table_id not in world.owner:
                await self._take(table_id, world.new_process())
        for _ in range(600):
            await asyncio.sleep(1.0)
            if all(self._quiet(t) for t in self.table_ids):
                break
        self.ending = True
        if self.sabotage is not None:
            self.sabotage(self)
        world_checks, settled = checks.ledger(world)
        self._violate(world_checks)
        self._violate(checks.chips(world, self._deposited()))
        self._violate(checks.fenced(world))
        self._violate(checks.protection(world))
        for table_id in self.table_ids:
            actor = self._actor(table_id)
            if actor is None or not self._quiet(table_id):
                self._violate([f"stuck: table {table_id} did not settle at the end"])
                continue
            follower = self.followers[table_id]
            final = follower.final(actor)
            if final is None:  # an entry changed after it was read: check it all again
                self._violate([f"log: table {table_id}: a stored entry changed after it "
                               f"was read"])
                stored = checks.envelopes(world, table_id)
                final = (checks.fold_equals_live(table_id, actor, stored)
                         + checks.secrecy(table_id, stored))
            else:  # the whole stream, read byte for byte as stored, parsed once
                stored = follower.log
            self._violate(final)
            self._violate(checks.command_ids(world, table_id, stored))
            self._violate(checks.exclusions(world, table_id, stored))
            self._violate(checks.settled_once(world, table_id, stored, settled))
            self._violate(checks.escrows(world, table_id, actor.room))
            self._violate(self.watchers[table_id].check(stored))
            if self.archiver is not None:
                self._archive_end(table_id, actor)
        if self.archiver is not None:
            a = self.archiver
            await a.ledger.statements(sorted(world.data.statement_log))
            self._violate(a.ledger.check())
            self.result.log += a.log + a.ledger.log
            trimmed = sum(int(world.data.strings.get(trimmed_key(t).encode(), b"0"))
                          for t in self.table_ids)
            self.result.archive = {"steps": a.steps, "trims": a.trims, "crashes": a.crashes,
                                   "failed": a.failed, "trimmed": trimmed,
                                   **a.ledger.summary()}

    async def _tournaments_end(self, a: archive.Archiver) -> None:
        """After the tables' end (and the digest of their logs): the tournaments play to
        their end and the archiver moves them all, past their command window; then their
        invariants at the end."""
        await a.tournaments.drain()
        self._violate(await a.tournaments.end_check())
        self.result.log += a.tournaments.log
        self.result.archive.update(a.tournaments.summary())
        self.result.archive["tournament_commands"] = a.room.commands

    def _archive_end(self, table_id: str, actor: TableActor) -> None:
        """The archive's invariants at the end, and the replay of the table from the
        archive's head and the stream's rest, which must equal the live room."""
        world = self.world
        self._violate(archive.check(world, table_id, self.followers[table_id].raw))
        if int(world.data.strings.get(trimmed_key(table_id).encode(), b"0")):
            self._violate([f"replay: {line}" for line in checks.fold_equals_live(
                table_id, actor, checks.envelopes(world, table_id))])

    def _quiet(self, table_id: str) -> bool:
        actor = self._actor(table_id)
        if actor is None:
            return False
        room = actor.room
        hand = room.table.hand
        return (not room.table.hand_in_progress and not room.sagas and
                (hand is None or room.settled >= hand.hand_number) and
                (hand is None or hand.phase != Phase.BETTING))

    def digest(self) -> str:
        h = hashlib.sha256()
        for table_id in self.table_ids:
            for payload in checks.stream_after(self.world, table_id, 0):
                h.update(payload)  # each as stored: a deterministic serialization
        return h.hexdigest()[:16]


def run_seed(seed: int, tables: int = 4, hands: int = 200,
             probabilities: Probabilities | None = None,
             tweak: Callable[[World], None] | None = None,
             sabotage: Callable[[Run], None] | None = None) -> Result:
    """Run one seed to ``hands`` settled hands (or its first violation)."""
    structlog.configure(processors=[], logger_factory=_Quiet)
    loop = SimLoop()
    started = time.process_time()
    try:
        run = Run(seed, tables, hands, loop, probabilities, tweak, sabotage)
        result = loop.run_until_complete(run.main())
        result.cpu_s = time.process_time() - started
        return result
    finally:
        cancel_all(loop)
        loop.close()


def cancel_all(loop: SimLoop) -> None:
    """Every task left (drivers, calls in flight) cancelled and finished before the loop
    closes."""
    for _ in range(5):
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if not pending:
            return
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.wait(pending, timeout=5))


class _Quiet:
    """structlog's logger in a run: the services' log lines are dropped (CPU)."""

    def __init__(self, *_args: object) -> None:
        pass

    def __getattr__(self, _name: str) -> Callable[..., None]:
        return lambda *a, **k: None
