"""The SDK's own pace of a player's table calls: :class:`CallPace`.

The table refuses a player's calls past a budget (``STUD_RATE_PER_PLAYER``, 100 calls a
second by default, two seconds' worth in a burst: ``studkit.limits.CallRateLimiter``), and
while one of them is held back refused, it refuses every other call of that player too. A
client that acts as fast as the table answers (the bots heads-up: a ``GetTable`` refresh
after each record, an action at each turn) spent that budget in a couple of seconds, and
its next action was refused ``rate_limited``. The client therefore keeps under it itself:
each table call waits its turn in a token bucket of :data:`TABLE_CALLS_PER_S` a second,
:data:`TABLE_BURST` at once, which a human's client never notices. A call that must wait
is delayed, never refused; the watch's refreshes coalesce meanwhile (one ``GetTable`` for
every record that came while it waited).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

TABLE_CALLS_PER_S: Final = 80.0
"""A player's table calls a second, kept under the table's default budget (100)."""
TABLE_BURST: Final = 80.0
"""A player's table calls at once after a quiet while (the table allows 200)."""


class CallPace:
    """A token bucket of ``per_s`` calls a second, ``burst`` at once, that callers wait on
    (:meth:`take`) in the order they came: each takes a token (:meth:`reserve`), waiting for
    it if there is none (the bucket goes below zero by the calls waiting, each waiting for
    its own). Its clock is ``clock``, else the running event loop's.

    >>> now = [0.0]
    >>> pace = CallPace(per_s=10, burst=2, clock=lambda: now[0])
    >>> [round(pace.reserve(), 3) for _ in range(4)]  # two at once, then one every 0.1 s
    [0.0, 0.0, 0.1, 0.2]
    >>> now[0] = 1.0  # a quiet second: the burst is back, and no more
    >>> [round(pace.reserve(), 3) for _ in range(3)]
    [0.0, 0.0, 0.1]
    """

    def __init__(self, per_s: float, burst: float,
                 clock: Callable[[], float] | None = None) -> None:
        if per_s <= 0 or burst < 1:
            raise ValueError(f"a pace needs per_s > 0 and burst >= 1, not {per_s}, {burst}")
        self.per_s = per_s
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._stamp: float | None = None
        self.waited = 0
        """Calls that had to wait (for tests and benchmarks)."""

    def reserve(self) -> float:
        """Take a token now: the seconds until it is due (0.0: at once)."""
        now = self._clock() if self._clock is not None else asyncio.get_running_loop().time()
        if self._stamp is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.per_s)
        self._stamp = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.per_s

    async def take(self) -> None:
        """Take a token, waiting until it is due."""
        delay = self.reserve()
        if delay <= 0:
            return
        self.waited += 1
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self._tokens += 1.0  # the call was never made: its token is back
            raise
