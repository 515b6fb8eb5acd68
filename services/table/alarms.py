"""The replica's one timer (issue 18 part 4): every table's next wake-up (a turn's deadline,
the next hand's delay, a seat sitting out too long, a retry after an outage) is an entry in
one heap, and one ``asyncio`` timer handle is armed for the earliest of them. A driver with
nothing pending sets no alarm and waits for its table to change: an idle table costs no
timer, no task wake-up and no work.

An alarm only sets its table's ``wake`` event; an alarm set again (the driver woke early and
looks again) replaces the previous one, which is dropped when it comes up."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math


class Alarm:
    """One table's next wake-up: its event is set at ``when`` (the loop's time) unless
    cancelled first."""

    __slots__ = ("event", "live", "when")

    def __init__(self, when: float, event: asyncio.Event) -> None:
        self.when = when
        self.event = event
        self.live = True

    def cancel(self) -> None:
        self.live = False


class Alarms:
    """Every table's next wake-up, on one timer of the running loop."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Alarm]] = []
        self._order = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = math.inf

    def __len__(self) -> int:
        """Alarms pending (cancelled ones not yet dropped included)."""
        return len(self._heap)

    def set(self, event: asyncio.Event, delay: float) -> Alarm | None:
        """Set ``event`` in ``delay`` seconds; None (no alarm) for an infinite delay."""
        if math.isinf(delay):
            return None
        loop = asyncio.get_running_loop()
        alarm = Alarm(loop.time() + max(0.0, delay), event)
        heapq.heappush(self._heap, (alarm.when, next(self._order), alarm))
        if alarm.when < self._armed_at:
            self._arm(loop, alarm.when)
        return alarm

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed_at = when
        self._handle = loop.call_at(when, self._ring)

    def _ring(self) -> None:
        loop = asyncio.get_running_loop()
        self._handle, self._armed_at = None, math.inf
        now = loop.time()
        heap = self._heap
        while heap and (heap[0][0] <= now or not heap[0][2].live):
            _when, _n, alarm = heapq.heappop(heap)
            if alarm.live:
                alarm.live = False
                alarm.event.set()
        if heap:
            self._arm(loop, heap[0][0])
