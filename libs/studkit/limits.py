"""Bounds on what one caller may hold open at a time, shared by the services' servers.

:class:`StreamLimiter` counts the server streams each principal and each peer (one client
connection, as ``context.peer()`` names it) has open, and refuses one more past either limit
with :class:`TooManyStreams` (``RESOURCE_EXHAUSTED``, reason ``too_many_streams``). Counts
live in this process only; nothing is awaited, so a count can never be left behind by a
cancelled stream.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from studkit.auth import Principal, Role
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


# --- call rates ------------------------------------------------------------------------------

class RateLimited(ResourceExhausted):
    """Raised when a player, or one client connection of players, calls faster than allowed;
    back off and retry."""

    default_reason = "rate_limited"


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class CallRateLimiter:
    """Token buckets: a player may make ``per_player`` calls a second (bursts up to
    ``burst_s`` seconds' worth), and one connection carrying players ``per_peer``. Services,
    operators and auditors are not limited here (they are few and trusted; a service such as
    the table must never be slowed by its players' floods).

    >>> now = [0.0]
    >>> limiter = CallRateLimiter(per_player=2, per_peer=100, burst_s=1, clock=lambda: now[0])
    >>> ann = Principal(Role.PLAYER, "ann")
    >>> limiter.check(ann, "p1"); limiter.check(ann, "p1")
    >>> limiter.check(ann, "p1")
    Traceback (most recent call last):
    ...
    studkit.limits.RateLimited: more than 2 calls a second from player:ann
    >>> now[0] = 1.0; limiter.check(ann, "p1")  # refilled
    """

    def __init__(self, per_player: float, per_peer: float, burst_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic, tracked: int = 100_000) -> None:
        self._rates = (per_player, per_peer)
        self._burst = burst_s
        self._clock = clock
        self._tracked = tracked
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CallRateLimiter:
        """``STUD_RATE_PER_PLAYER`` (calls/s, default 100) and ``STUD_RATE_PER_CONNECTION``
        (default 400)."""
        return cls(float(env.get("STUD_RATE_PER_PLAYER", "100")),
                   float(env.get("STUD_RATE_PER_CONNECTION", "400")))

    def _take(self, key: str, rate: float) -> bool:
        now = self._clock()
        capacity = max(1.0, rate * self._burst)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(capacity, now)
            self._buckets[key] = bucket
            if len(self._buckets) > self._tracked:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.stamp) * rate)
            bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def check(self, principal: Principal, peer: str) -> None:
        """Count one call; raise :class:`RateLimited` past a limit (the call is not made)."""
        if principal.role is not Role.PLAYER:
            return
        per_player, per_peer = self._rates
        if not self._take(f"p|{principal.subject}", per_player):
            raise RateLimited(f"more than {per_player:g} calls a second from "
                              f"{principal.subject}")
        if not self._take(f"c|{peer}", per_peer):
            raise RateLimited(f"more than {per_peer:g} player calls a second on one "
                              "connection")
