"""Finished tournaments leave Redis in the simulator (issue 31; docs/history.md,
"Tournaments"): the archiver's step for tournaments,
:func:`studhistory.tournament_archive.archive_tournaments` (write the stream byte for byte and
its facts in one transaction, verify against a fresh read of Redis, and once the command
window has passed trim through ``TRIM_LUA``, which leaves the tombstone), run unchanged on
the simulated Redis (its faults too) into a simulated PostgreSQL (``sim.tournament_db``:
the ``tournaments`` schema's tables in memory with their keys, answering exactly the
statements the module and the tournament service's archive reader send, through
``SimConn``). The tournaments are the ones ``sim.tournaments`` plays (the model decides,
the real service writes). The archiver dies right after the write's commit, as it sends the
trim script (after the verify), and after the script before the index is told; PostgreSQL
fails a statement now and then (a transaction rolls back whole).

The invariants (:meth:`TournamentArchiver.check`, every step of the run, and at each trim as
the script applies it): nothing leaves Redis before PostgreSQL holds every event of it, byte
for byte, with its facts, nor before the command window has passed since its last event;
the archive and Redis together are each tournament's whole stream as appended, gapless (the
stream whole in Redis, or whole in the archive with the tombstone in its place); the
tombstone only once the rows are there, naming their version; each event and each fact
stored once, however often a step was retried; the facts those of the stream
(``facts``, as the model played it). At the end, once every tournament is over and the
window has passed: each was trimmed, its tombstone and its rows there, the index and the
wake set free of it, and the tournament service reading it from the archive folds it to the
model's final state.

Sabotage knobs for the invariant tests, each breaking one invariant:
:attr:`TournamentArchiver.trim_first` (the trim before the write),
:attr:`TournamentArchiver.hasty` (the archiver's clock a command window ahead: trims within
it), :attr:`TournamentArchiver.early_tombstone` (a tombstone set before the rows are
written), ``SimTournamentDb.drop_row`` (a write loses one event row) and
``SimTournamentDb.twice`` (a write is stored twice)."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import psycopg
from redis.exceptions import RedisError

from sim.archiver_part import ArchiverPart, Crash
from sim.redis import SimRedis, as_client
from sim.tournament_db import PRIMARY_KEYS, Row, SimConn, SimTournamentDb, plain
from stud.v1.envelope_pb2 import EventEnvelope
from studhistory import tournament_archive as archiving
from studhistory.tournament_archive import (
    KEYS,
    TOMBSTONE,
    WOKEN,
    TournamentArchiveError,
    archive_tournaments,
    facts,
    record_of,
)
from studkit import keys
from studkit.commandwindow import COMMAND_WINDOW_S
from tournament.app import TournamentApp, tournament_store
from tournament.codec import record_from_envelope
from tournament.history import ArchivedTournaments
from tournament.state import Tournament, apply

if TYPE_CHECKING:
    from sim.tournaments import TournamentRoom
    from sim.world import World

CRASH = 0.25
"""Each time, apart: the archiver dies right after a write's commit, as it sends a trim
script (after the verify), and right after the script (before the index)."""
PG_FAIL = 0.01
"""Per statement: PostgreSQL fails it."""
DRAIN_S = COMMAND_WINDOW_S + 60
"""At the end, the simulated time the archiver keeps stepping once every tournament has
written its last event (its window passes)."""
class _ArchiverRedis(SimRedis):
    """The tournament archiver's connection: when ``crash`` says so, it dies as a trim
    script is sent (after the verify), or as the index is told after it (the keys gone, the
    index not)."""

    crash: Callable[[], bool] = staticmethod(lambda: False)

    async def eval(self, script: str, numkeys: int, *args: Any) -> Any:
        if self.crash():
            raise Crash("as it sent the trim script (after the verify)")
        return await super().eval(script, numkeys, *args)

    async def zrem(self, key: str, *members: str) -> int:
        if self.crash():
            raise Crash("after the trim script, before the index")
        return await super().zrem(key, *members)


def _b(value: str) -> bytes:
    return value.encode()


def _sha(raw: bytes) -> bytes:
    return hashlib.sha256(raw).digest()


class TournamentArchiver(ArchiverPart):
    """The tournaments' part of the archiver process, and the checks of their archive."""

    def __init__(self, world: World, room: TournamentRoom, rng: random.Random) -> None:
        super().__init__(world)
        self.room = room
        self.rng = rng
        self.db = SimTournamentDb()
        self.redis = _ArchiverRedis(world.data, self._store_faults(rng))
        self.conn = SimConn(self.db, rng, PG_FAIL)
        self.seen: dict[str, int] = {}
        world.data.on_tournament_trim = self._trimming
        world.data.on_set = self._set
        self.trim_first = False
        """The sabotage: each step trims every tournament that is over first, archived or
        not."""
        self.hasty = False
        """The sabotage: the archiver's clock runs a command window ahead."""
        self.early_tombstone = False
        """The sabotage: each step sets the tombstone of every tournament that is over before
        its rows are written."""
        self.trimmed = self.read_back = 0
        """Trim scripts that removed a tournament's keys; tournaments read back at the end."""
        self._checked: dict[str, tuple[int, int, bool]] = {}
        """Tournament -> what its last check saw (rows, stream length, tombstone): checked
        again only when one changed."""

    def _clock(self) -> float:
        return self.world.loop.wall() + (COMMAND_WINDOW_S if self.hasty else 0.0)

    # --- the step ----------------------------------------------------------------------

    async def run(self, stop: Callable[[], bool], *, scan: bool = False) -> None:
        """Each simulated second, the step with the run's archive probability (the
        archiver's tournaments part, beside its tables' and its ledger's); with ``scan``
        (after the run's own steps), the checks after each second too."""
        while not stop():
            await asyncio.sleep(1.0)
            if self.rng.random() < self.world.probabilities.archive:
                await self.step()
            if scan:
                self._scan()

    async def step(self, *, faults: bool = True) -> None:
        self.steps += 1
        if not faults:
            self.redis.faults.fail_before = self.redis.faults.fail_after = 0.0
        self.db.crash = self.redis.crash = (self._crash if faults else lambda: False)
        self.conn.fail = PG_FAIL if faults else 0.0
        try:
            if self.trim_first:
                await self._sabotage(trim=True)
            if self.early_tombstone:
                await self._sabotage(trim=False)
            out = await archive_tournaments(
                as_client(self.redis), cast(psycopg.AsyncConnection[Any], self.conn),
                self.seen, command_window_s=COMMAND_WINDOW_S, clock=self._clock)
            for tid, why in sorted(out.failed.items()):
                self._failed(f"tournament archiver step failed ({tid}): {why}")
        except Crash as exc:
            self.seen = {}  # a new process starts with nothing seen
            self._crashed(f"tournament archiver crash {exc}")
        except (RedisError, psycopg.Error, TournamentArchiveError) as exc:
            self._failed(f"tournament archiver step failed: {type(exc).__name__}: {exc}")

    def _crash(self) -> bool:
        return self.rng.random() < CRASH

    async def _sabotage(self, *, trim: bool) -> None:
        """The broken archivers: for each tournament that is over (its stream says so),
        the trim before any write, or the tombstone before the rows."""
        for tid in sorted(self.room.played):
            hot = await archiving.stream_raw(as_client(self.redis), tid)
            if not hot or facts([record_of(raw) for _, raw in hot]).ending is None:
                continue
            if trim:
                await archiving.trim(as_client(self.redis), tid, len(hot), _sha(hot[-1][1]))
            elif not self.db.events.get(tid):
                await self.redis.set(keys.tournament_key(tid, TOMBSTONE), len(hot))

    async def drain(self) -> None:
        """The end: every tournament plays to its end, the archiver steps on (its faults
        too) until the window of the last has passed, then without faults until none is
        left to trim."""
        await self.room.finished()
        loop = self.world.loop
        until = loop.time() + DRAIN_S
        await self.run(lambda: loop.time() >= until, scan=True)
        for _ in range(5):
            await self.step(faults=False)
            self._scan()

    # --- the checks --------------------------------------------------------------------

    def _trimming(self, events_key: bytes, version: int) -> None:
        """As the trim script removes a tournament's keys: PostgreSQL holds every event of
        it byte for byte and its facts, and its last event is a command window old."""
        tid = events_key.decode().split("{", 1)[1].split("}", 1)[0]
        self.trimmed += 1
        at = f"at its trim, t={self.world.loop.time():.3f}"
        stream = [f[b"envelope"] for _, f in self.world.data.streams.get(events_key, [])]
        rows = {int(r[1]): bytes(r[5]) for r in self.db.events.get(tid, [])}
        if [rows.get(s) for s in range(1, version + 1)] != stream or not \
                self.db.facts_of(tid)["endings"]:
            held = sum(1 for s, raw in enumerate(stream, 1) if rows.get(s) == raw)
            self._report(f"tournament archive: {tid} left Redis before PostgreSQL held it "
                         f"({held} of its {len(stream)} events there byte for byte, "
                         f"{'with' if self.db.facts_of(tid)['endings'] else 'without'} its "
                         f"ending; {at})")
        if stream:
            last = record_of(stream[-1]).seconds
            now = self.world.loop.wall()
            if now < last + COMMAND_WINDOW_S:
                self._report(f"tournament archive: {tid} left Redis {now - last:.0f} s after "
                             f"its last event, within the command window "
                             f"({COMMAND_WINDOW_S} s; {at})")

    def _set(self, key: bytes) -> None:
        """As a tournament's tombstone is set outside the trim script: PostgreSQL holds the
        version it names (every event, and the ending)."""
        name = key.decode()
        if not (name.startswith(keys.TOURNAMENT_PREFIX) and name.endswith(f"}}:{TOMBSTONE}")):
            return
        tid = name.split("{", 1)[1].split("}", 1)[0]
        version = int(self.world.data.strings[key])
        held = len({int(r[1]) for r in self.db.events.get(tid, [])})
        if held < version or not self.db.facts_of(tid)["endings"]:
            self._report(f"tournament archive: {tid}: its tombstone names version {version} "
                         f"while PostgreSQL holds {held} events (as it was set, "
                         f"t={self.world.loop.time():.3f})")

    def check(self) -> list[str]:
        """Each tournament across the archive and Redis, against its stream as appended
        (only those whose rows, stream or tombstone changed since the last check): what was
        found since the last call."""
        self._scan()
        return self.take()

    def _scan(self) -> None:
        data = self.world.data
        for tid in sorted(self.room.played):
            events_key = _b(keys.tournament_key(tid, "events"))
            appended = data.tournament_log.get(events_key, [])
            rows = self.db.events.get(tid, [])
            hot = data.streams.get(events_key, [])
            mark = data.strings.get(_b(keys.tournament_key(tid, TOMBSTONE)))
            seen = (len(rows), len(hot), mark is not None)
            if self._checked.get(tid) == seen:
                continue
            self._checked[tid] = seen
            for line in self._one(tid, appended, rows, hot, mark):
                self._report(line)

    def _one(self, tid: str, appended: list[bytes], rows: list[Row],
             hot: list[tuple[bytes, dict[bytes, bytes]]], mark: bytes | None) -> list[str]:
        out = []
        name = f"tournament archive: {tid}"
        sequences = Counter(int(r[1]) for r in rows)
        twice = sorted(s for s, n in sequences.items() if n > 1)
        if twice:
            out.append(f"{name}: PostgreSQL holds events {twice[:5]} more than once")
        if rows and sorted(sequences) != list(range(1, len(appended) + 1)):
            missing = sorted(set(range(1, len(appended) + 1)) - set(sequences))
            out.append(f"{name}: PostgreSQL holds {len(sequences)} of its "
                       f"{len(appended)} events (a gap: {missing[:5]} missing)")
        for r in rows:
            s, raw = int(r[1]), bytes(r[5])
            if s > len(appended) or raw != appended[s - 1] or bytes(r[6]) != _sha(raw):
                out.append(f"{name}: event {s} in PostgreSQL is not the event appended")
                break
        if hot and ([f[b"envelope"] for _, f in hot] != appended or
                    [i for i, _ in hot] != [b"0-%d" % s for s in range(1, len(hot) + 1)]):
            out.append(f"{name}: Redis's stream holds {len(hot)} events, not the "
                       f"{len(appended)} appended")
        if not hot and appended and (mark is None or sorted(sequences) != list(
                range(1, len(appended) + 1))):
            out.append(f"{name}: neither Redis nor PostgreSQL holds its whole stream "
                       f"({len(sequences)} of {len(appended)} archived, "
                       f"{'a' if mark is not None else 'no'} tombstone)")
        if mark is not None and (int(mark) != len(appended) or len(sequences) != int(mark)
                                 or not self.db.facts_of(tid)["endings"]):
            out.append(f"{name}: its tombstone names version {int(mark)} while PostgreSQL "
                       f"holds {len(sequences)} events"
                       f"{'' if self.db.facts_of(tid)['endings'] else ' and no ending'}")
        out += self._facts(tid, appended)
        return out

    def _facts(self, tid: str, appended: list[bytes]) -> list[str]:
        """Its facts once each, and those of its stream (none while it is not over)."""
        held = self.db.facts_of(tid)
        if not any(held.values()):
            return []
        name = f"tournament archive: {tid}"
        out = []
        for table, rows in held.items():
            keys_ = Counter(r[:PRIMARY_KEYS[table]] for r in rows)
            if any(n > 1 for n in keys_.values()):
                out.append(f"{name}: PostgreSQL holds a row of tournaments.{table} more "
                           "than once")
        want = facts([record_of(raw) for raw in appended])
        expected = {"tournaments": [want.tournament] if want.tournament else [],
                    "entries": want.entries, "busts": want.busts, "places": want.places,
                    "prizes": want.prizes, "refunds": want.refunds,
                    "endings": [want.ending] if want.ending else []}
        for table, rows in expected.items():
            rows = [tuple(plain(v) for v in r) for r in rows]
            if sorted(map(repr, held[table])) != sorted(map(repr, rows)) and not any(
                    "more than once" in line for line in out):
                out.append(f"{name}: tournaments.{table} holds {len(held[table])} rows, "
                           f"its stream's facts {len(rows)}")
        return out

    async def end_check(self) -> list[str]:
        """At the end, after :meth:`drain`: each tournament left Redis whole (its tombstone
        its version, no key of it left, the index and the wake set free of it), and the
        tournament service reads it from the archive as the model played it."""
        self._checked.clear()
        self._scan()
        data = self.world.data
        reader = ArchivedTournaments("simulated")
        reader._conn = cast(psycopg.AsyncConnection[Any], SimConn(self.db))
        app = TournamentApp(tournament_store(as_client(SimRedis(data))), archive=reader)
        index = data.sets.get(_b(keys.tournament_index()), set())
        woken = data.zsets.get(_b(WOKEN), {})
        for tid, run in sorted(self.room.played.items()):
            name = f"tournament archive: {tid}"
            left = [k for k in KEYS if _b(keys.tournament_key(tid, k)) in data.strings
                    or _b(keys.tournament_key(tid, k)) in data.hashes
                    or _b(keys.tournament_key(tid, k)) in data.streams]
            if left or _b(tid) in index or _b(tid) in woken:
                self._report(f"{name}: not trimmed at the end (keys {left} left, "
                             f"{'in' if _b(tid) in index else 'not in'} the index)")
                continue
            try:
                loaded = await app.load(tid)
            except Exception as exc:  # the service's refusal: it cannot read it back
                self._report(f"{name}: the tournament service cannot read it back: "
                             f"{type(exc).__name__}: {exc}")
                continue
            self.read_back += 1
            appended = data.tournament_log.get(_b(keys.tournament_key(tid, "events")), [])
            folded = apply(Tournament(), (record_from_envelope(
                EventEnvelope.FromString(raw)).event for raw in appended))
            if loaded != folded or (loaded.version, loaded.phase) != (run.t.version,
                                                                        run.t.phase):
                self._report(f"{name}: the tournament service reads it from the archive "
                             f"at version {loaded.version} in phase {loaded.phase}, its "
                             f"stream as appended folds to {folded.version}, the model "
                             f"ended at {run.t.version} in {run.t.phase}")
        return self.take()

    def summary(self) -> dict[str, int]:
        return {"tournaments": len(self.room.played),
                "tournament_events": sum(len(r.log) for r in self.room.played.values()),
                "tournament_steps": self.steps, "tournament_crashes": self.crashes,
                "tournament_failed": self.failed, "tournament_written": self.db.commits,
                "tournament_trimmed": self.trimmed, "tournament_read_back": self.read_back}

