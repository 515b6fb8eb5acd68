"""The archive step in the simulator (issue 31, docs/history.md): an archiver process that
runs the real step (:func:`studhistory.archiver.archive_table`: plan, copy, verify, trim) for
a table at random moments, on its own connection to the simulated Redis (with its faults),
into a simulated archive store (:class:`SimHistory`, PostgreSQL's part in memory), and
crashes between the copy and the trim, or between the verify and the trim, at random.

The invariants (:func:`check`): nothing leaves the simulated Redis before the archive holds
it, byte for byte as appended (never trimmed before durable); the archive and the hot stream
together are the whole log, gapless, each sequence once (where both hold one, the same
bytes); and at the end, the fold of a trimmed table's archive and stream equals the live
room (``sim.checks`` reads a table's log as the archive's head and the stream's rest).

``wrong_order`` (the invariant test only) trims first and copies after, as a broken
archiver would: the checks must see it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from sim.archiver_part import ArchiverPart, Crash
from sim.ledger_archive import LedgerArchiver
from sim.redis import SimRedis, as_client
from sim.tournament_archive import TournamentArchiver
from sim.tournaments import TournamentRoom
from studhistory import archiver
from studhistory.archiver import ArchiveError, Segment
from studkit import keys
from studkit.store import EventStore, StoreCorrupted, trimmed_key

if TYPE_CHECKING:
    from sim.world import World

KEEP_HANDS = 2
"""The hot window of the simulated tables (production keeps ``STUD_HOT_HANDS``, 20): small,
so a short run trims."""
CRASH = 0.2
"""Per step: the archiver dies right after the copy (before the verify), and, apart, right
before the trim (after the verify)."""


class SimHistory:
    """PostgreSQL's archive as :class:`studhistory.archiver.History`, in memory: a segment
    is written whole or not at all, once (its primary key)."""

    def __init__(self) -> None:
        self.segments: dict[str, list[Segment]] = {}
        self.events: dict[str, dict[int, bytes]] = {}
        self.commands: dict[str, dict[bytes, bytes]] = {}
        """Table -> command id -> its record, as the segments copied them."""
        self.crash_after_write = False

    async def last_segment(self, table_id: str) -> Segment | None:
        segments = self.segments.get(table_id)
        return segments[-1] if segments else None

    async def segment_ending(self, table_id: str, last: int) -> Segment | None:
        return next((s for s in self.segments.get(table_id, []) if s.last == last), None)

    async def write_segment(self, segment: Segment) -> bool:
        table = segment.table_id
        if any(s.first == segment.first for s in self.segments.get(table, [])):
            return False
        held = self.events.setdefault(table, {})
        for event in segment.events:
            held[event.sequence] = event.envelope
        records = self.commands.setdefault(table, {})
        for record in segment.commands:
            records[record.command_id.encode()] = record.outcome.encode()
        self.segments.setdefault(table, []).append(replace(segment, events=(), hands=()))
        if self.crash_after_write:  # committed; the archiver dies before it verifies
            raise Crash("after the copy")
        return True

    async def event_bytes(self, table_id: str, first: int, last: int) -> dict[int, bytes]:
        held = self.events.get(table_id, {})
        return {s: held[s] for s in range(first, last + 1) if s in held}

    async def records_through(self, table_id: str, upto_hand: int) -> int:
        return upto_hand


class _ArchiverRedis(SimRedis):
    """The archiver's connection: when ``armed``, it dies as the trim is sent (after the
    verify read both stores): the trim's EVAL raises before it reaches the store."""

    armed = False

    async def eval(self, script: str, numkeys: int, *args: object) -> object:
        if self.armed:
            raise Crash("after the verify, before the trim")
        return await super().eval(script, numkeys, *args)


class Archiver(ArchiverPart):
    """The archiver process: each simulated second, each table's step with probability
    ``world.probabilities.archive``, then the wallet's ledger's (``sim.ledger_archive``)
    with the same probability (drawn from a source of its own, so the tables' steps are
    the ones they were before the ledger was archived); and the tournaments'
    (``sim.tournament_archive``), of the tournaments ``sim.tournaments`` plays."""

    def __init__(self, world: World, table_ids: list[str],
                 report: Callable[[list[str]], None] = lambda _found: None) -> None:
        super().__init__(world)
        self.table_ids = table_ids
        self.rng = random.Random(f"{world.seed}:archive")
        self.history = SimHistory()
        world.archive = self.history
        self.redis = _ArchiverRedis(world.data, self._store_faults(self.rng))
        self.store = EventStore(as_client(self.redis))
        self.wrong_order = False
        self.trims = 0
        self.ledger = LedgerArchiver(world, random.Random(f"{world.seed}:ledger-archive"))
        self.room = TournamentRoom(world, random.Random(f"{world.seed}:tournaments"), report)
        self.tournaments = TournamentArchiver(
            world, self.room, random.Random(f"{world.seed}:tournament-archive"))

    async def run(self, stop: Callable[[], bool]) -> None:
        """The tables' and the ledger's steps; the tournaments (``sim.tournaments``) and
        their step (``sim.tournament_archive``) in tasks of their own, from sources of
        their own."""
        tasks = [asyncio.ensure_future(self.room.run(stop)),
                 asyncio.ensure_future(self.tournaments.run(stop))]
        try:
            await self._tables(stop)
        finally:
            await asyncio.gather(*tasks)

    async def _tables(self, stop: Callable[[], bool]) -> None:
        while not stop():
            await asyncio.sleep(1.0)
            for table_id in self.table_ids:
                if self.rng.random() < self.world.probabilities.archive:
                    await self.step(table_id)
            if self.ledger.rng.random() < self.world.probabilities.archive:
                await self.ledger.step()

    async def step(self, table_id: str) -> None:
        self.steps += 1
        crash_copy = self.rng.random() < CRASH
        crash_trim = self.rng.random() < CRASH
        self.history.crash_after_write = crash_copy
        self.redis.armed = crash_trim
        try:
            if self.wrong_order:
                await self._trim_first(table_id)
            outcome = await archiver.archive_table(self.store, self.history, table_id,
                                                   keep_hands=KEEP_HANDS,
                                                   clock=self.world.loop.wall)
            if outcome.trimmed_to is not None:
                self.trims += 1
        except Crash as exc:
            self._crashed(f"archiver crash {exc} (table {table_id})")
        except (ArchiveError, RedisError, StoreCorrupted) as exc:
            self._failed(f"archiver step failed (table {table_id}): {exc}")
        finally:
            self.history.crash_after_write = False
            self.redis.armed = False

    async def _trim_first(self, table_id: str) -> None:
        """The broken order: the step's trim before its copy (what the plan trims once this
        step's copy is written: past the archive's end when the archive lags the hot
        window)."""
        last = await self.history.last_segment(table_id)
        the_plan = await archiver.plan(self.store, table_id, last.last if last else 0,
                                       keep_hands=KEEP_HANDS)
        if the_plan.trimming:
            await self.store.trim_head(table_id, the_plan.trim_to, the_plan.trimmed)


def whole(world: World, table_id: str) -> list[bytes]:
    """The table's log as stored: the archive's events up to the trimmed count, then the
    stream's (just the stream when nothing was trimmed)."""
    hot = [fields[b"envelope"] for _id, fields in
           world.data.streams.get(keys.table_stream(table_id).encode(), [])]
    trimmed = int(world.data.strings.get(trimmed_key(table_id).encode(), b"0"))
    if not trimmed or world.archive is None:
        return hot
    held = world.archive.events.get(table_id, {})
    return [held[s] for s in range(1, trimmed + 1) if s in held] + hot


def check(world: World, table_id: str, appended: list[bytes]) -> list[str]:
    """The archive's invariants for one table; ``appended``: the log's bytes as read when
    they were appended (the follower's, position = sequence - 1)."""
    history: SimHistory | None = world.archive
    if history is None:
        return []
    trimmed = int(world.data.strings.get(trimmed_key(table_id).encode(), b"0"))
    version = int(world.data.strings.get(keys.table_key(table_id, "version").encode(), b"0"))
    held = history.events.get(table_id, {})
    out = []
    missing = [s for s in range(1, trimmed + 1) if s not in held]
    if missing:
        out.append(f"archive: table {table_id}: events {missing[0]}..{missing[-1]} "
                   f"({len(missing)}) left Redis before the archive held them (trimmed "
                   f"through {trimmed})")
    archived = max(held, default=0)
    if sorted(held) != list(range(1, archived + 1)):
        out.append(f"archive: table {table_id}: the archive's sequences have a gap "
                   f"(it holds {len(held)} events up to {archived})")
    hot = world.data.streams.get(keys.table_stream(table_id).encode(), [])
    sequences = [int(entry_id.split(b"-")[1]) for entry_id, _ in hot]
    if sequences != list(range(trimmed + 1, version + 1)):
        out.append(f"archive: table {table_id}: the stream holds events "
                   f"{sequences[:1]}..{sequences[-1:]}, not {trimmed + 1}..{version}")
    for sequence, (_id, fields) in zip(sequences, hot, strict=True):
        if sequence in held and held[sequence] != fields[b"envelope"]:
            out.append(f"archive: table {table_id}: event {sequence} differs between the "
                       "archive and the stream")
            break
    for sequence, raw in held.items():
        if sequence <= len(appended) and appended[sequence - 1] != raw:
            out.append(f"archive: table {table_id}: archived event {sequence} is not the "
                       "event appended")
            break
    return out
