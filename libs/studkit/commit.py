"""The one write path of an event stream (DESIGN §5b, STYLE §11 "decide once"): decide on the
current state, the envelopes sealed once, one fenced, conditional, idempotent append, and
the state that deciding produced adopted as it is (never folded again). The retry on a lost
race is :func:`studkit.uow.unit_of_work`'s, the one retry loop every writer shares.

A writer gives three things: the state it holds and its version (``current``), how to fold
what another writer appended meanwhile (``catch_up``), and ``propose(state, version)``, which
returns the sealed envelopes and the state after them, or raises a refusal (nothing is
written).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from stud.v1.envelope_pb2 import EventEnvelope
from studkit.store import AppendResult, EventStore, NotOwner, StreamConflict
from studkit.uow import unit_of_work

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Proposal(Generic[S]):
    """What a command would write, and the state after it."""

    envelopes: list[EventEnvelope]
    state: S


@dataclass(frozen=True, slots=True)
class Committed(Generic[S]):
    """An append's outcome: the envelopes written and the state after them (``state`` is
    None for a retry of a command already recorded: nothing was written)."""

    result: AppendResult
    envelopes: list[EventEnvelope]
    state: S | None


def seal(envelopes: Sequence[EventEnvelope], stream_id: str, command_id: str,
         version: int) -> None:
    """Seal ``envelopes`` for an append at ``version``, in place and once: the stream, the
    command and the sequences ``version + 1, ...`` (the store then stores them as they are)."""
    for offset, envelope in enumerate(envelopes, start=1):
        envelope.table_id = stream_id
        envelope.command_id = command_id
        envelope.sequence = version + offset


async def commit(store: EventStore, stream_id: str, *,
                 current: Callable[[], tuple[S, int]],
                 catch_up: Callable[[], Awaitable[None]],
                 propose: Callable[[S, int], Proposal[S]],
                 command_id: str, fingerprint: str = "", epoch: int | None = None,
                 fence: Callable[[], Awaitable[int | None]] | None = None,
                 attempts: int = 5, record_empty: bool = True) -> Committed[S]:
    """Decide and append one command (see the module's doc). Raises the refusal ``propose``
    raised, :class:`~studkit.store.NotOwner` (fenced), :class:`~studkit.store.CommandIdReused`,
    or :class:`~studkit.errors.Conflict` after ``attempts`` lost races. A command that
    causes no event is still recorded (its retry is a duplicate) unless ``record_empty`` is
    false (a writer's own command that found nothing to do).

    ``epoch`` fences the append with the writer's own lease. ``fence`` instead reads the
    epoch to append with at each attempt (a caller's command served by any replica, fenced
    with the stream's current owner's): a takeover between that read and the append is a
    lost race like another writer's append, decided again."""
    behind = False
    conflicts: tuple[type[BaseException], ...] = (
        (StreamConflict,) if fence is None else (StreamConflict, NotOwner))

    async def load() -> tuple[S, int]:
        if behind:
            await catch_up()
        return current()

    def decide(loaded: tuple[S, int]) -> Proposal[S]:
        proposal = propose(*loaded)
        seal(proposal.envelopes, stream_id, command_id, loaded[1])
        return proposal

    async def save(loaded: tuple[S, int], proposal: Proposal[S]) -> Committed[S]:
        if not proposal.envelopes and not record_empty:
            return Committed(AppendResult(loaded[1], ()), [], proposal.state)
        fenced = epoch if fence is None else await fence()
        result = await store.append(stream_id, proposal.envelopes, loaded[1], command_id,
                                    fingerprint, epoch=fenced)
        if result.duplicate:
            return Committed(result, [], None)
        return Committed(result, proposal.envelopes, proposal.state)

    def lost(_attempt: int, _exc: BaseException) -> None:
        nonlocal behind
        behind = True

    return await unit_of_work(load, decide, save, conflicts=conflicts,
                              attempts=attempts, on_conflict=lost)
