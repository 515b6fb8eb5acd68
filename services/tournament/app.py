"""The tournament's use cases: load a tournament from its stream, decide a command, append
its events at the version it was decided on (the store's script: conditional, idempotent by
command id), and read or follow the stream.

Each tournament is one fenced stream ``stud:tournament:{id}:events`` written by the same
event store as the tables' (``studkit.store``); its events are ``stud.v1.TournamentEvent``
messages in the store's envelopes. Two write paths (docs/tournament.md, "Replicas"):

- the process manager's (``epoch=`` the lease this replica holds, :mod:`tournament.leases`):
  fenced, a former owner's append is refused ``not_owner`` (:class:`NotOwner` raised);
- a caller's command (create, register, unregister, re-enter, cancel), served by any
  replica: appended with the stream's current owner epoch, read just before, and decided
  again if a takeover moved it in between. The version condition orders it with the
  owner's appends and the command id makes a retry a replay, so it is never lost nor
  applied twice. The app keeps each tournament's folded state with its
version and reads only what is new, so a replica that did not write an event still sees it.

A tournament over, paid out and past the idempotency window leaves Redis for PostgreSQL
(the archiver: ``studhistory.tournament_archive``); the app reads it there through
:class:`tournament.archived.ArchivedReads` (the port :class:`tournament.archived.Archive`,
over PostgreSQL :class:`tournament.history.ArchivedTournaments`) when its stream is gone, so
its reads answer as before (docs/tournament.md, "Finished tournaments").
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, cast

import structlog
from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.auth import Forbidden, Principal, Role, require_role
from studkit.commit import Append, Proposal, StreamWriter, commit
from studkit.errors import AlreadyExists, Conflict, NotFound
from studkit.fingerprint import of_command
from studkit.store import (
    AppendResult,
    CommandIdReused,
    EventStore,
    StoredEvent,
)
from tournament import commands as c
from tournament import events as ev
from tournament.archived import NO_ARCHIVE, Archive, ArchivedReads
from tournament.codec import (
    EVENT_TYPE,
    event_at,
    event_to_proto,
    record_from_envelope,
    timestamp,
)
from tournament.codec import Record as Record  # re-exported: the records an Outcome holds
from tournament.decide import decide
from tournament.state import Tournament, apply

STATES_KEPT: Final = 1024
"""Folded tournaments a process keeps (least recently read goes first)."""
WOKEN: Final = f"{keys.TOURNAMENT_PREFIX}woken"
"""A sorted set: each tournament not over and the time of the latest event a caller's command
appended to it (any replica's), which wakes the process manager's next round for it (issue
29, G8: a round no longer steps every tournament); the owner removes it once it is over."""
Clock = Callable[[], float]
log = structlog.get_logger("tournament.app")


def tournament_store(client: object) -> EventStore:
    """The event store over the tournament service's own keys."""
    return EventStore(client, key=keys.tournament_key,  # type: ignore[arg-type]
                      index=keys.tournament_index())


class TournamentWriter(StreamWriter[Tournament, c.Command]):
    """One tournament's stream as one command is written to it: the tournament it decides
    on (its own: the app's cache may let it go), caught up from the stream after a lost
    race, and the time its last decision was taken at."""

    def __init__(self, store: EventStore, tournament_id: str,
                 load: Callable[[str], Awaitable[Tournament]], clock: Clock,
                 seed: Callable[[], int],
                 envelope: Callable[[ev.Event, float], EventEnvelope], *,
                 creating: bool) -> None:
        super().__init__(store, tournament_id)
        self.held = Tournament()
        self.decided_at = 0.0
        self._load, self._clock, self._seed = load, clock, seed
        self._to_envelope = envelope
        self._creating = creating

    @property
    def state(self) -> Tournament:
        return self.held

    @property
    def version(self) -> int:
        return self.held.version

    async def catch_up(self) -> None:
        try:
            self.held = await self._load(self.stream_id)
        except NotFound as exc:
            if not self._creating:  # only its creation writes a tournament's first event
                raise
            if exc.reason == "archived":  # its stream left Redis: the id is taken for good
                raise AlreadyExists(f"tournament {self.stream_id} exists (archived)",
                                    reason="tournament_exists") from None

    def decide(self, command: c.Command) -> Proposal[Tournament]:
        now = self._clock()
        events = tuple(decide(self.held, command, now, self._seed()))
        self.decided_at = now
        return Proposal(events, [self._to_envelope(e, now) for e in events],
                        apply(self.held, events))


@dataclass(frozen=True, slots=True)
class Outcome:
    version: int
    records: tuple[Record, ...]
    duplicate: bool


def _record(stored: StoredEvent) -> Record:
    return record_from_envelope(stored.envelope)


def _fingerprint(cmd: c.Command) -> str:
    """The command's fingerprint: the one canonical form (:func:`studkit.fingerprint.
    of_command`, which a field added with a default leaves as it was)."""
    return of_command(cmd)


def legacy_fingerprint(cmd: c.Command) -> str:
    """The form before (a hash of ``repr(cmd)``, which every new field changed, so a deploy
    that added one refused every retry in flight): read only, so a retry of a command
    recorded with it is still recognised."""
    return hashlib.sha256(repr(cmd).encode()).hexdigest()[:32]


MANAGER: Final = "pm"
"""The namespace of the process manager's own command ids (``pm:tick.7``, ``pm:settle.e2``):
no caller's, whose ids are stored under their principal (:func:`stored_id`), and no role
is named so."""


def stored_id(by: Principal | None, command_id: str) -> str:
    """The id a command is recorded under: the caller's own namespace (``player:ann/r-1``:
    the principal, then the id the caller chose, which holds no ``/``) or the process
    manager's (``pm:settle.e2``, ``by`` None). A caller's id can never equal another
    caller's nor one the manager derives from the log (issue 29, G1: a player registering
    as ``settle.e2`` blocked that entry's settlement, and every refund and prize after it).

    >>> stored_id(None, "settle.e2"), stored_id(Principal(Role.PLAYER, "ann"), "settle.e2")
    ('pm:settle.e2', 'player:ann/settle.e2')
    """
    return f"{MANAGER}:{command_id}" if by is None else f"{by.subject}/{command_id}"


class Writer(Protocol):
    """What the process manager's steps read and write through (:class:`TournamentApp`,
    or its fenced view :class:`tournament.leases.Fenced`)."""

    async def load(self, tournament_id: str) -> Tournament: ...

    async def execute(self, tournament_id: str, cmd: c.Command,
                      command_id: str) -> Outcome: ...


class TournamentApp:
    """Commands and reads of every tournament, over one event store."""

    def __init__(self, store: EventStore, *, clock: Clock = time.time,
                 seed: Callable[[], int] = lambda: int.from_bytes(os.urandom(8), "big"),
                 conflict_retries: int = 5,
                 archive: Archive | None = None) -> None:
        self._store = store
        self.archived = ArchivedReads(store.client, archive)
        """The read path of tournaments whose stream left Redis."""
        self._clock = clock
        self._seed = seed
        self._retries = conflict_retries
        self._states: OrderedDict[str, Tournament] = OrderedDict()
        """Folded tournaments, the :data:`STATES_KEPT` most recently read (a process that
        runs for months has seen every tournament of those months: one no longer kept is
        folded again from its stream when it is next read)."""

    @property
    def store(self) -> EventStore:
        return self._store

    def now(self) -> float:
        return self._clock()

    @property
    def archive(self) -> Archive | None:
        return self.archived.archive

    async def load(self, tournament_id: str) -> Tournament:
        """The tournament folded up to its stream's end, or from the archive once its
        stream left Redis (``NotFound`` if neither has it). One round trip to Redis (its
        version and what is new), a second for an id with no stream (its tombstone);
        PostgreSQL only for a tournament the archiver trimmed (its tombstone says so), once."""
        t = self._states.get(tournament_id, Tournament())
        tail = await self._store.tail(tournament_id, t.version)
        if tail.events:
            t = apply(t, (_record(s).event for s in tail.events))
        elif tail.version == 0 and not self.archived.final(tournament_id):
            try:
                t = await self.archived.carry_on(tournament_id, t)
            except NotFound:
                self._states.pop(tournament_id, None)
                raise
        if t.config is None:
            raise NotFound(f"no tournament {tournament_id}" + (
                "" if self.archive is not None else f" in Redis ({NO_ARCHIVE})"),
                reason="no_tournament")
        self._keep(tournament_id, t)
        return t

    async def lobby(self, before: str | None, phase: str, batch: int
                    ) -> AsyncIterator[tuple[str, str | None]]:
        """The tournaments the lobby lists, ids in descending order, those before ``before``
        only (None: from the last): each with how it ended if it is listed from the archive
        (its stream left Redis), None if it is in Redis. Redis's index is read once, first
        (so one that leaves it meanwhile is in the archive, committed before its trim); the
        archive in keyset pages of ``batch`` as the walk needs them, of ``phase`` only when
        one is asked (an archived tournament's phase is how it ended), so a page of the lobby
        reads a page of the archive, whatever it holds. One in both stores (copied, not yet
        trimmed) is listed once, from Redis. PostgreSQL down: the rest of the walk lists
        Redis's tournaments alone (``tournament_archive_listing_failed``), so live
        tournaments stay listed through an outage of the archive."""
        hot = sorted((t for t in await self._store.table_ids()
                      if before is None or t < before), reverse=True)
        async for line in self.archived.lobby(hot, before, phase, batch):
            yield line

    def _keep(self, tournament_id: str, t: Tournament) -> None:
        kept = self._states.get(tournament_id)
        if kept is None or kept.version <= t.version:  # never one older than is kept
            self._states[tournament_id] = t
        self._states.move_to_end(tournament_id)
        while len(self._states) > STATES_KEPT:
            gone, _ = self._states.popitem(last=False)
            self.archived.forget(gone)

    async def ids(self) -> list[str]:
        return await self._store.table_ids()

    async def execute(self, tournament_id: str, cmd: c.Command, command_id: str, *,
                      epoch: int | None = None, by: Principal | None = None) -> Outcome:
        """Decide ``cmd`` on the latest state and append its events (idempotent by
        ``command_id`` in the namespace of ``by``: a retry answers the recorded outcome,
        nothing new written).

        ``by``: the caller whose command it is, None for the process manager's own (each has
        its namespace of ids, :func:`stored_id`). ``epoch``: the lease the process manager
        holds (fenced: :class:`NotOwner` if it is not the stream's any more, nothing
        written). None: a caller's command, appended with the owner's current epoch (none
        before the first lease)."""
        fingerprint = _fingerprint(cmd)
        chosen, command_id = command_id, stored_id(by, command_id)
        try:
            recorded = await self._recorded(tournament_id, command_id, cmd)
            if recorded is None and by is not None:
                recorded = await self._legacy(tournament_id, chosen, cmd)
        except CommandIdReused as exc:
            raise self._reused(chosen) from exc
        if recorded is not None:
            return await self._replay(tournament_id, recorded)
        writer = TournamentWriter(self._store, tournament_id, self.load, self._clock,
                                  self._seed, self._envelope,
                                  creating=isinstance(cmd, c.Create))
        await writer.catch_up()
        if by is not None:
            await self.archived.refuse_expired(tournament_id, command_id, chosen)
        try:
            done = await commit(writer, Append(cmd, command_id, fingerprint, epoch=epoch,
                                               fence_with_owner=epoch is None,
                                               record_empty=False),
                                attempts=self._retries)
        except CommandIdReused as exc:
            # recorded meanwhile: a retry of the same command (in the old form too) answers
            try:
                recorded = await self._recorded(tournament_id, command_id, cmd, exc)
            except CommandIdReused:
                recorded = None
            if recorded is None:
                raise self._reused(chosen) from exc
            return await self._replay(tournament_id, recorded)
        except Conflict:
            raise Conflict("the tournament kept changing; retry", reason="conflict") from None
        if done.result.duplicate:
            return await self._replay(tournament_id, done.result)
        events, now = cast(tuple[ev.Event, ...], done.events), writer.decided_at
        if not events:
            return Outcome(done.result.version, (), False)
        if by is not None:
            await self._wake(tournament_id, now)
        assert done.state is not None
        self._keep(tournament_id, done.state)
        first = done.result.version - len(events)
        records = tuple(Record(first + i, event_at(e) or now, e)
                        for i, e in enumerate(events, start=1))
        return Outcome(done.result.version, records, False)

    async def _recorded(self, tournament_id: str, command_id: str, cmd: c.Command,
                        reused: CommandIdReused | None = None) -> AppendResult | None:
        """The recorded outcome of ``command_id`` if it is ``cmd``'s, by its fingerprint or
        the legacy one (a retry across the deploy that changed the form); None if it was
        never recorded; :class:`CommandIdReused` if it was recorded for another command.
        ``reused``: the store already said the fingerprint differs."""
        if reused is None:
            try:
                return await self._store.recorded(tournament_id, command_id, _fingerprint(cmd))
            except CommandIdReused as exc:
                reused = exc
        try:
            return await self._store.recorded(tournament_id, command_id,
                                              legacy_fingerprint(cmd))
        except CommandIdReused:
            raise reused from None

    async def _legacy(self, tournament_id: str, command_id: str,
                      cmd: c.Command) -> AppendResult | None:
        """A caller's command recorded under its bare id, before ids had namespaces: the
        caller's retry across that deploy is answered from it when it is the same command
        (its fingerprint); an id recorded for another command (another caller's, or the
        process manager's own of those days) is not this caller's and is left alone."""
        try:
            return await self._recorded(tournament_id, command_id, cmd)
        except CommandIdReused:
            return None

    async def _wake(self, tournament_id: str, now: float) -> None:
        """Mark ``tournament_id`` woken at ``now`` (:data:`WOKEN`). Best effort: after the
        append, so a failure here (logged) leaves the command applied and the tournament to
        the process manager's periodic sweep of every tournament."""
        try:
            await self._store.client.zadd(WOKEN, {tournament_id: now})
        except Exception:
            log.warning("tournament_wake_failed", tournament_id=tournament_id, exc_info=True)

    async def woken_since(self, since: float) -> dict[str, float]:
        """The tournaments a caller's event woke after ``since``, with when."""
        rows = cast(list[tuple[bytes | str, float]], await self._store.client.zrangebyscore(
            WOKEN, f"({since}", "+inf", withscores=True))
        out: dict[str, float] = {}
        for member, score in rows:
            out[member.decode() if isinstance(member, bytes) else member] = float(score)
        return out

    async def versions(self, ids: Sequence[str]) -> dict[str, int]:
        """Each tournament's stream version (0: none), pipelined a thousand at a time: what
        a sweep of the process manager compares with the versions it stepped."""
        out: dict[str, int] = {}
        for i in range(0, len(ids), 1000):
            chunk = ids[i:i + 1000]
            async with self._store.client.pipeline(transaction=False) as pipe:
                for tid in chunk:
                    pipe.get(keys.tournament_key(tid, "version"))
                raw = await pipe.execute()
            out.update((tid, int(v) if v is not None else 0)
                       for tid, v in zip(chunk, raw, strict=True))
        return out

    async def forget(self, tournament_id: str) -> None:
        """A tournament over: no event wakes it any more."""
        await self._store.client.zrem(WOKEN, tournament_id)

    @staticmethod
    def _reused(command_id: str) -> AlreadyExists:
        return AlreadyExists(f"command id {command_id} was used for another command",
                             reason="command_id_reused")

    async def _replay(self, tournament_id: str, result: AppendResult) -> Outcome:
        """The recorded outcome of a command already appended (its events re-read)."""
        last = result.version
        first = last - len(result.stream_ids) + 1
        stored = await self._store.read(tournament_id, first - 1) if result.stream_ids else []
        records = tuple(_record(s) for s in stored if s.envelope.sequence <= last)
        return Outcome(last, records, True)

    def _envelope(self, e: ev.Event, now: float) -> EventEnvelope:
        at: Timestamp = timestamp(event_at(e) or now)
        return EventEnvelope(event_type=EVENT_TYPE, schema_version=1, occurred_at=at,
                             payload=event_to_proto(e).SerializeToString())

    # --- use cases -------------------------------------------------------------------------

    async def create(self, who: Principal, tournament_id: str, config: ev.Config,
                     command_id: str) -> Outcome:
        require_role(who, Role.OPERATOR)
        return await self.execute(tournament_id, c.Create(tournament_id, config), command_id,
                                  by=who)

    async def cancel(self, who: Principal, tournament_id: str, reason: str,
                     command_id: str) -> Outcome:
        require_role(who, Role.OPERATOR)
        return await self.execute(tournament_id, c.Cancel(reason), command_id, by=who)

    async def player_command(self, who: Principal, tournament_id: str,
                             make: Callable[[str], c.Command], command_id: str) -> Outcome:
        """Register, unregister or re-enter: a player, for themself (the token's name)."""
        if who.role is not Role.PLAYER:
            raise Forbidden("only a player enters a tournament, for themself",
                            reason="players_only")
        return await self.execute(tournament_id, make(who.name), command_id, by=who)

    async def records(self, tournament_id: str, after: int) -> list[Record]:
        """The records after ``after``: Redis's, or the archive's for an archived one."""
        stored = await self._store.read(tournament_id, after)
        if stored or not self.archived.final(tournament_id):
            return [_record(s) for s in stored]
        return await self.archived.records(tournament_id, after)

    async def follow(self, tournament_id: str, after: int,
                     poll_s: float = 0.2) -> AsyncIterator[Record]:
        """The records after ``after``, then each new one as it is appended (an archived
        tournament's, then nothing more: it is over)."""
        await self.load(tournament_id)
        if self.archived.final(tournament_id):
            for record in await self.records(tournament_id, after):
                yield record
            await asyncio.Event().wait()  # open until the caller goes, as a live one's
        while True:
            batch = await self.records(tournament_id, after)
            for record in batch:
                yield record
                after = record.sequence
            if not batch:
                await asyncio.sleep(poll_s)
