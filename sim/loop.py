"""Simulated time: an asyncio event loop whose clock only moves when every task waits. When
nothing is ready, the selector jumps the clock to the next timer instead of sleeping, so a
run of hours of table time takes the CPU time of its work, and the order of every callback
follows from the code and the seed alone (nothing races the wall clock)."""

from __future__ import annotations

import asyncio
import selectors
from typing import Any

EPOCH = 1_800_000_000.0
"""The simulated wall clock at time 0 (the tables' ``clock``: seconds since 1970)."""


class Stuck(RuntimeError):
    """Raised when every task waits and no timer is set: nothing can ever happen again."""


class _Selector(selectors.DefaultSelector):
    """Polls no file: the only one registered is the loop's self-pipe, which only
    ``call_soon_threadsafe`` and signals write, and such a callback is in the loop's ready
    queue already (nothing in a run uses threads or signals). A poll per loop iteration was
    a system call for nothing."""

    def __init__(self, loop: SimLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:
            raise Stuck("every task waits and no timer is set")
        self._loop.now += max(0.0, timeout)
        return []


class SimLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time (``time()`` starts at 0)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.wall_offset = EPOCH
        """Added to ``now`` for the wall clock; a clock jump moves it."""
        super().__init__(_Selector(self))
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self.now

    def wall(self) -> float:
        """The simulated ``time.time()``."""
        return self.wall_offset + self.now

    def wall_ms(self) -> int:
        return int(self.wall() * 1000)
