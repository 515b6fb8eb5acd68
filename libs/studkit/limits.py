"""Bounds on what one caller may hold open at a time, shared by the services' servers.

:class:`StreamLimiter` counts the server streams each principal and each peer (one client
connection, as ``context.peer()`` names it) has open, and refuses one more past either limit
with :class:`TooManyStreams` (``RESOURCE_EXHAUSTED``, reason ``too_many_streams``). Counts
live in this process only; nothing is awaited, so a count can never be left behind by a
cancelled stream.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator

from studkit.auth import Principal
from studkit.errors import ResourceExhausted


class TooManyStreams(ResourceExhausted):
    """Raised when a caller, or its connection, already has as many streams open as allowed;
    close one (or wait for one to end) and retry."""

    default_reason = "too_many_streams"


class StreamLimiter:
    """At most ``per_principal`` open streams per caller and ``per_peer`` per connection.

    >>> import asyncio
    >>> from studkit.auth import Role
    >>> limiter = StreamLimiter(per_principal=1, per_peer=5)
    >>> ann = Principal(Role.PLAYER, "ann")
    >>> async def twice() -> str:
    ...     async with limiter.hold(ann, "ipv4:127.0.0.1:5000"):
    ...         try:
    ...             async with limiter.hold(ann, "ipv4:127.0.0.1:5001"):
    ...                 return "opened"
    ...         except TooManyStreams as exc:
    ...             return exc.reason
    >>> asyncio.run(twice()), limiter.open_streams(ann)
    ('too_many_streams', 0)
    """

    def __init__(self, per_principal: int, per_peer: int) -> None:
        if per_principal < 1 or per_peer < 1:
            raise ValueError("stream limits must be at least 1")
        self.per_principal = per_principal
        self.per_peer = per_peer
        self._principals: Counter[str] = Counter()
        self._peers: Counter[str] = Counter()

    @contextlib.asynccontextmanager
    async def hold(self, principal: Principal, peer: str) -> AsyncIterator[None]:
        """Count one stream of ``principal`` on ``peer`` while the block runs; raise
        :class:`TooManyStreams` instead when either is at its limit."""
        who = principal.subject
        if self._principals[who] >= self.per_principal:
            raise TooManyStreams(
                f"{who} already has {self.per_principal} streams open (the limit)")
        if self._peers[peer] >= self.per_peer:
            raise TooManyStreams(
                f"this connection already has {self.per_peer} streams open (the limit)")
        self._principals[who] += 1
        self._peers[peer] += 1
        try:
            yield
        finally:
            _release(self._principals, who)
            _release(self._peers, peer)

    def open_streams(self, principal: Principal) -> int:
        """How many streams ``principal`` has open now."""
        return self._principals[principal.subject]

    def open_on_peer(self, peer: str) -> int:
        """How many streams are open on connection ``peer`` now."""
        return self._peers[peer]

    def tracked(self) -> int:
        """How many principals and peers have an entry (both drop to zero when idle)."""
        return len(self._principals) + len(self._peers)


def _release(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]
