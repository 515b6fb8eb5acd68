"""A watcher's inbox: the envelopes the actor fans out to one live viewer, bounded, so a
slow watcher never slows the table (it is cut off and resumes from its last sequence)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from stud.v1.envelope_pb2 import EventEnvelope


class WatcherTooSlow(Exception):
    """Raised in a watcher that fell too far behind the table; it resumes from its last
    sequence (``RESOURCE_EXHAUSTED``)."""

    reason = "watcher_too_slow"


@dataclass(eq=False)
class Watcher:
    """One live viewer's inbox: appended envelopes of the game, at most ``limit`` not yet
    taken. An append's envelopes go in at once and wake the watch once (issue 35: an
    ``asyncio.Queue`` took and gave them one at a time); the watch takes all that is there,
    in the order offered (:meth:`take`)."""

    limit: int
    pending: list[EventEnvelope] = field(default_factory=list)
    """Offered, not yet taken, in order."""
    overflowed: bool = False
    """More was offered than ``limit`` allows untaken: what fit is still sent, then the
    watch ends as too slow."""
    closed: bool = False
    """The replica no longer serves the table (handed over, lease lost, stopping): the
    watch ends, after what is pending, so that its client resumes at the owner."""
    _waiter: asyncio.Future[None] | None = None

    def offer(self, envelopes: Sequence[EventEnvelope]) -> None:
        if self.overflowed or self.closed or not envelopes:
            return
        pending = self.pending
        room = self.limit - len(pending)
        if len(envelopes) > room:
            pending.extend(envelopes[:max(0, room)])
            self.overflowed = True
        else:
            pending.extend(envelopes)
        self._wake()

    def close(self) -> None:
        """End the watch: what is pending is still sent, then the watch ends (a full inbox
        ends it as too slow, which the client resumes from the same sequence too)."""
        if self.closed:
            return
        self.closed = True
        if len(self.pending) >= self.limit:
            self.overflowed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self, most: int) -> list[EventEnvelope]:
        """The first ``most`` envelopes pending (all of them, as a rule: an append's or
        several appends'), in order, waiting for some; empty once the watch is to end
        (:attr:`overflowed` or :attr:`closed`, nothing pending)."""
        while not self.pending:
            if self.overflowed or self.closed:
                return []
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        pending = self.pending
        if len(pending) <= most:
            self.pending = []
            return pending
        taken = pending[:most]
        del pending[:most]
        return taken
