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
    """One live viewer's inbox: appended envelopes of the game, bounded."""

    limit: int
    queue: asyncio.Queue[EventEnvelope | None] = field(init=False)
    overflowed: bool = False
    closed: bool = False
    """The replica no longer serves the table (handed over, lease lost, stopping): the
    watch ends so that its client resumes at the owner (``None`` in the queue wakes it)."""

    def __post_init__(self) -> None:
        self.queue = asyncio.Queue(maxsize=self.limit)

    def offer(self, envelopes: Sequence[EventEnvelope]) -> None:
        for envelope in envelopes:
            if self.overflowed or self.closed:
                return
            try:
                self.queue.put_nowait(envelope)
            except asyncio.QueueFull:
                self.overflowed = True

    def close(self) -> None:
        """End the watch: what is queued is still sent, then the watch ends (a full inbox
        ends it as too slow, which the client resumes from the same sequence too)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.queue.put_nowait(None)
        except asyncio.QueueFull:
            self.overflowed = True
