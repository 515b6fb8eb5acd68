"""Simulated time: an asyncio event loop whose clock only moves when every task waits. When
nothing is ready, the clock jumps to the next timer instead of sleeping, so a run of hours of
table time takes the CPU time of its work, and the order of every callback follows from the
code and the seed alone (nothing races the wall clock).

The loop's iteration is its own (``_run_once``): it polls no file (nothing in a run uses
sockets, threads or signals), and its timers are one heap of ``(when, order, timer)``
tuples, compared in C, where the stock loop compares its handles in Python. A timer is a
``TimerHandle`` (``call_at``, and ``asyncio.sleep`` through it) or a bare future (:func:`pause`,
the simulated store's and network's latencies: no handle, no callback, one iteration less)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import selectors
from asyncio import Handle, TimerHandle
from collections.abc import Awaitable, Callable
from typing import Any

EPOCH = 1_800_000_000.0
"""The simulated wall clock at time 0 (the tables' ``clock``: seconds since 1970)."""


class Stuck(RuntimeError):
    """Raised when every task waits and no timer is set: nothing can ever happen again."""


class SimLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time (``time()`` starts at 0)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.wall_offset = EPOCH
        """Added to ``now`` for the wall clock; a clock jump moves it."""
        super().__init__(selectors.DefaultSelector())
        self._clock_resolution = 1e-9
        self._timers: list[tuple[float, int, Any]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def wall(self) -> float:
        """The simulated ``time.time()``."""
        return self.wall_offset + self.now

    def wall_ms(self) -> int:
        return int(self.wall() * 1000)

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                context: Any = None) -> TimerHandle:
        handle = TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._timers, (when, next(self._order), handle))
        handle._scheduled = True  # type: ignore[attr-defined]
        return handle

    def call_soon(self, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                  context: Any = None) -> Handle:
        """``call_soon`` without the stock loop's checks (closed, debug, the thread): every
        task's every wake-up comes through here."""
        handle = Handle(callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def wait(self, delay: float) -> asyncio.Future[None]:
        """A future done ``delay`` from now (cancelled with its waiter)."""
        future: asyncio.Future[None] = self.create_future()
        heapq.heappush(self._timers, (self.now + delay, next(self._order), future))
        return future

    def _run_once(self) -> None:
        timers, ready = self._timers, self._ready  # type: ignore[attr-defined]
        if not ready and not self._stopping:  # type: ignore[attr-defined]
            while timers and _gone(timers[0][2]):
                heapq.heappop(timers)
            if not timers:
                raise Stuck("every task waits and no timer is set")
            when = timers[0][0]
            if when > self.now:
                self.now = when
        end = self.now + self._clock_resolution
        while timers and timers[0][0] < end:
            timer = heapq.heappop(timers)[2]
            if type(timer) is TimerHandle:
                if not timer._cancelled:
                    timer._scheduled = False  # type: ignore[attr-defined]
                    ready.append(timer)
            elif not timer.done():
                timer.set_result(None)  # its waiter is now in ``ready``
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()


def _gone(timer: Any) -> bool:
    return bool(timer._cancelled) if type(timer) is TimerHandle else bool(timer.done())


def pause(delay: float) -> Awaitable[None]:
    """``asyncio.sleep(delay)``; on a :class:`SimLoop`, its cheaper :meth:`SimLoop.wait`."""
    loop = asyncio.get_running_loop()
    if type(loop) is SimLoop:
        return loop.wait(delay)
    return asyncio.sleep(delay)
