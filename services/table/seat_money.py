"""Each seat's money moves one way at a time in this process: the seat's one serialized path.

A caller's request carrying a seat's saga on (a sit-down, a leave's cash-out, a top-up) and
the driver's roll forward of that seat (from its wallet read to its step's commit) hold the
seat's lock, so neither decides on a wallet read the other's call has made stale. An orphan
escrow's refund in flight on a seat is marked, so that a buy-in there moves only after it.
No state of the table lives here: the log says what is pending; this says who is moving it
now.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable

from studkit.errors import Unavailable


class SeatMoney:
    """The seats whose money a coroutine of this process is moving now."""

    def __init__(self) -> None:
        self._locks: dict[int, asyncio.Lock] = {}
        self._carried: set[int] = set()
        self._refunding: dict[int, asyncio.Event] = {}

    def _lock(self, seat: int) -> asyncio.Lock:
        return self._locks.setdefault(seat, asyncio.Lock())

    @contextlib.asynccontextmanager
    async def carrying(self, seat: int, wait_s: float | None = None) -> AsyncIterator[None]:
        """A caller carries the seat's saga on. A free seat is taken at once, with no yield
        (the caller has just recorded its saga, and the driver, woken by that append, must
        not roll it forward first); a busy one is waited for ``wait_s`` at most, then
        ``UNAVAILABLE seat_busy`` (retry). The caller reads its saga again inside."""
        lock = self._lock(seat)
        if not lock.locked():
            await lock.acquire()  # no waiter: returns without yielding
        else:
            try:
                await asyncio.wait_for(lock.acquire(), wait_s)
            except TimeoutError:
                raise Unavailable("the table is carrying this seat's money on now; retry",
                                  reason="seat_busy") from None
        self._carried.add(seat)
        try:
            yield
        finally:
            self._carried.discard(seat)
            lock.release()

    def carried(self, seat: int) -> bool:
        """Whether a caller carries the seat's saga on now (a check passes it over)."""
        return seat in self._carried

    def free(self, seats: Iterable[int]) -> list[int]:
        """Those of ``seats`` nobody moves now, in order."""
        return sorted(seat for seat in seats if not self._lock(seat).locked())

    @contextlib.asynccontextmanager
    async def holding(self, seats: Iterable[int]) -> AsyncIterator[None]:
        """The driver holds ``seats`` (free ones, just looked at: taken in order) while it
        reads the wallet and records its step."""
        async with contextlib.AsyncExitStack() as held:
            for seat in sorted(seats):
                await held.enter_async_context(self._lock(seat))
            yield

    @contextlib.asynccontextmanager
    async def refunding(self, seat: int) -> AsyncIterator[None]:
        """An orphan escrow's refund is in flight on ``seat`` (marked before its first
        await, released however it ends)."""
        done = self._refunding[seat] = asyncio.Event()
        try:
            yield
        finally:
            del self._refunding[seat]
            done.set()

    async def refund_done(self, seat: int) -> None:
        """Wait for a refund in flight on ``seat``, if any."""
        refunding = self._refunding.get(seat)
        if refunding is not None:
            await refunding.wait()
