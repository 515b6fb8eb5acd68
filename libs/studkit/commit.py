"""The one write path every writer shares (DESIGN §5b, STYLE §9 and §11 "decide once").

A :class:`Writer` holds what it decides on, knows how to catch up with what other writers
wrote (:meth:`Writer.catch_up`) and proposes a command: decides it on what it holds and
saves the outcome, raising one of its ``conflicts`` when another writer saved first.
:func:`write` is the retry on a lost race, written once: propose; on a conflict, catch up
and propose again, at most ``attempts`` times. The wallet's ledger and the dealer's streets
are writers of this shape.

An event stream's writer is a :class:`StreamWriter`: its state and version, a pure
:meth:`StreamWriter.decide` that returns the events a command causes and the state after
them, and one fenced, conditional, idempotent append of the envelopes sealed once; the
state that deciding produced is adopted as it is (never folded again). :func:`commit` writes
one command with it and returns what was decided (:class:`Committed`).

>>> import asyncio
>>> class Counter(Writer[int, int]):
...     conflicts = (LookupError,)
...     def __init__(self) -> None:
...         self.held, self.stored, self.races = 0, 0, 1
...     async def catch_up(self) -> None:
...         self.held = self.stored
...     async def propose(self, step: int) -> int:
...         if self.races:  # another writer saved first, once
...             self.races, self.stored = 0, self.stored + 10
...         if self.held != self.stored:
...             raise LookupError("moved")
...         self.stored = self.held = self.held + step
...         return self.stored
>>> asyncio.run(write(Counter(), 1))
11
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from stud.v1.envelope_pb2 import EventEnvelope
from studkit.errors import Conflict
from studkit.store import AppendResult, EventStore, NotOwner, StreamConflict

S = TypeVar("S")
C = TypeVar("C")
R = TypeVar("R")


class Writer(ABC, Generic[C, R]):
    """One writer: it proposes a command (decides on what it holds, then saves), and
    catches up after another writer saved first (one of :attr:`conflicts` raised)."""

    conflicts: tuple[type[BaseException], ...] = ()
    """What ``propose`` raises when another writer saved first (the race is lost)."""

    @abstractmethod
    async def catch_up(self) -> None:
        """Read what other writers saved since what this one holds."""

    @abstractmethod
    async def propose(self, command: C) -> R:
        """Decide ``command`` on what this writer holds and save it; raises a refusal
        (nothing saved) or one of :attr:`conflicts` (nothing saved: catch up and again)."""


async def write(writer: Writer[C, R], command: C, *, attempts: int = 5,
                conflicts: tuple[type[BaseException], ...] | None = None,
                on_conflict: Callable[[int, BaseException], None] | None = None) -> R:
    """``writer.propose(command)``, caught up and proposed again while another writer saves
    first (one of ``conflicts``, by default the writer's), at most ``attempts`` times; then
    :class:`~studkit.errors.Conflict` (``ABORTED``: the caller may retry the request). A
    refusal ends it at once, nothing saved."""
    lost = writer.conflicts if conflicts is None else conflicts
    for attempt in range(1, attempts + 1):
        if attempt > 1:
            await writer.catch_up()
        try:
            return await writer.propose(command)
        except lost as exc:
            if on_conflict is not None:
                on_conflict(attempt, exc)
    raise Conflict(f"concurrent writers kept winning; gave up after {attempts} attempts")


@dataclass(frozen=True, slots=True)
class Proposal(Generic[S]):
    """What a command would write: its events, their envelopes and the state after them."""

    events: tuple[object, ...]
    envelopes: list[EventEnvelope]
    state: S


@dataclass(frozen=True, slots=True)
class Committed(Generic[S]):
    """An append's outcome: the events decided, the envelopes written and the state after
    them (``state`` is None and ``events`` empty for a retry of a command already recorded:
    nothing was written)."""

    result: AppendResult
    envelopes: list[EventEnvelope]
    state: S | None
    events: tuple[object, ...] = ()


def seal(envelopes: Sequence[EventEnvelope], stream_id: str, command_id: str,
         version: int) -> None:
    """Seal ``envelopes`` for an append at ``version``, in place and once: the stream, the
    command and the sequences ``version + 1, ...`` (the store then stores them as they are)."""
    for offset, envelope in enumerate(envelopes, start=1):
        envelope.table_id = stream_id
        envelope.command_id = command_id
        envelope.sequence = version + offset


@dataclass(frozen=True, slots=True)
class Append(Generic[C]):
    """One command to append: the command, its id and fingerprint (idempotency), and how
    the append is fenced (``epoch``: the writer's own lease; ``fence_with_owner``: the
    stream's current owner's epoch, read at each attempt, for a caller's command served by
    any replica: a takeover between that read and the append is a lost race). A command
    that causes no event is recorded (its retry is a duplicate) unless ``record_empty`` is
    false (a writer's own command that found nothing to do)."""

    command: C
    command_id: str
    fingerprint: str = ""
    epoch: int | None = None
    fence_with_owner: bool = False
    record_empty: bool = True


class StreamWriter(Writer[Append[C], "Committed[S]"], Generic[S, C]):
    """The writer of one fenced event stream: the state it holds and its version."""

    conflicts = (StreamConflict,)

    def __init__(self, store: EventStore, stream_id: str) -> None:
        self.store = store
        self.stream_id = stream_id

    @property
    @abstractmethod
    def state(self) -> S:
        """What this writer holds (folded from the stream up to :attr:`version`)."""

    @property
    @abstractmethod
    def version(self) -> int:
        """The stream's version :attr:`state` is folded to."""

    @abstractmethod
    def decide(self, command: C) -> Proposal[S]:
        """The events ``command`` causes on :attr:`state`, unsealed, and the state after
        them; raises a refusal (nothing is written)."""

    async def propose(self, command: Append[C]) -> Committed[S]:
        """Decide on the state held, seal once, append at the version held."""
        version = self.version
        proposal = self.decide(command.command)
        seal(proposal.envelopes, self.stream_id, command.command_id, version)
        if not proposal.envelopes and not command.record_empty:
            return Committed(AppendResult(version, ()), [], proposal.state, ())
        epoch = (await self.store.owner_epoch(self.stream_id) if command.fence_with_owner
                 else command.epoch)
        result = await self.store.append(self.stream_id, proposal.envelopes, version,
                                         command.command_id, command.fingerprint,
                                         epoch=epoch)
        if result.duplicate:
            return Committed(result, [], None, ())
        return Committed(result, proposal.envelopes, proposal.state, proposal.events)


async def commit(writer: StreamWriter[S, C], command: Append[C], *, attempts: int = 5
                 ) -> Committed[S]:
    """Decide and append one command with ``writer`` (see the module's doc). Raises the
    refusal deciding raised, :class:`~studkit.store.NotOwner` (fenced),
    :class:`~studkit.store.CommandIdReused`, or :class:`~studkit.errors.Conflict` after
    ``attempts`` lost races (a takeover is one, when fenced with the owner's epoch)."""
    return await write(writer, command, attempts=attempts,
                       conflicts=(StreamConflict, NotOwner) if command.fence_with_owner
                       else (StreamConflict,))
