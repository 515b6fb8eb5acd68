"""Simulated watchers: an observer per table follows ``WatchTable`` (``TableApp.watch``) as a
client would, disconnects at random, and resumes from the last sequence it saw, on whichever
process owns the table then. Checked: what it received is exactly the table's game events,
in order, with no gap or repeat across its resumptions, and no event as an observer sees it
(``rules.views.event_for``) carries a down card or a mucked hand."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from rules.events import DownCardDealt, HandMucked
from rules.views import event_for
from sim.loop import pause
from sim.world import World
from studkit.auth import Principal, Role
from studkit.mapping import event_from_envelope, is_room_event

OBSERVER = Principal(Role.PLAYER, "observer")

SILENCE_S = 15.0
"""A watcher that hears nothing for this long (up to twice it) takes its process for dead or
paused and resumes elsewhere."""


class _Watchdog:
    """Expires ``timeout`` once a whole ``period`` passes with nothing heard: one timer per
    period, where a timeout moved on at each event would set (and cancel) one per event."""

    def __init__(self, timeout: asyncio.Timeout, period: float) -> None:
        self.heard = 0
        self._timeout = timeout
        self._period = period
        self._seen = 0
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_later(period, self._check)

    def _check(self) -> None:
        if self.heard == self._seen:
            self._timeout.reschedule(self._loop.time())  # expires: the stream is silent
            return
        self._seen = self.heard
        self._handle = self._loop.call_later(self._period, self._check)

    def stop(self) -> None:
        self._handle.cancel()


class TableWatcher:
    """One observer of one table."""

    def __init__(self, world: World, table_id: str, rng: random.Random) -> None:
        self.world = world
        self.table_id = table_id
        self.rng = rng
        self.received: list[int] = []
        self.problems: list[str] = []
        self.resumes = 0
        self._at = self._matched = 0
        """How far into the log, and into :attr:`received`, an earlier check matched."""

    @property
    def last(self) -> int:
        return self.received[-1] if self.received else 0

    async def run(self, until: Callable[[], bool]) -> None:
        while not until():
            proc = self.world.owner.get(self.table_id)
            if proc is None or proc.dead:
                await asyncio.sleep(1.0)
                continue
            stream: Any = None
            try:
                stream = proc.app.watch(OBSERVER, self.table_id, self.last)
                async with asyncio.timeout(None) as silence:
                    watchdog = _Watchdog(silence, SILENCE_S)
                    try:
                        while not until():
                            envelope = await stream.__anext__()
                            watchdog.heard += 1
                            self._receive(envelope)
                            if self.rng.random() < \
                                    self.world.probabilities.watcher_disconnect:
                                self.world.count("watcher_disconnected")
                                break
                    finally:
                        watchdog.stop()
            except (TimeoutError, StopAsyncIteration):
                pass  # its process died or paused: resume elsewhere
            except asyncio.CancelledError:
                raise
            except Exception:
                pass
            finally:
                if stream is not None:
                    await stream.aclose()
            self.resumes += 1
            await pause(self.rng.uniform(0.1, 2.0))

    def _receive(self, envelope: Any) -> None:
        if envelope.sequence <= self.last:
            self.problems.append(f"watch: table {self.table_id}: sequence {envelope.sequence} "
                                 f"again after {self.last}")
            return
        self.received.append(envelope.sequence)
        if envelope.event_type not in ("DownCardDealt", "HandMucked"):
            return  # no other event can carry a down card to an observer
        seen = event_for(event_from_envelope(envelope), None, False)
        if (isinstance(seen, DownCardDealt) and seen.card is not None) or \
                (isinstance(seen, HandMucked) and seen.down):
            self.problems.append(f"watch: table {self.table_id}: an observer saw a down "
                                 f"card at sequence {envelope.sequence}")

    def check(self, stored: list[Any]) -> list[str]:
        """What it received equals the stream's game events up to the last it saw (the log
        from its start: the part matched at an earlier check is not walked again)."""
        out, self.problems = self.problems, []
        at, matched, received, last = self._at, self._matched, self.received, self.last
        while at < len(stored) and stored[at].sequence <= last:
            if not is_room_event(stored[at]):
                if matched == len(received) or received[matched] != stored[at].sequence:
                    break
                matched += 1
            at += 1
        else:
            if matched == len(received):
                self._at, self._matched = at, matched
                return out
        want = [e.sequence for e in stored if not is_room_event(e) and e.sequence <= last]
        if want != self.received:
            missing = sorted(set(want) - set(self.received))[:5]
            out.append(f"watch: table {self.table_id}: received {len(self.received)} events, "
                       f"the log has {len(want)} up to {self.last} (missing {missing})")
        return out
