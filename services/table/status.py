"""A table's status as the lobby and the views show it: open, waiting (the dealer or the
wallet does not answer: transient, this process's knowledge), stopped (a reconciliation
failed: in the log) or closed (in the log)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from enum import StrEnum, unique
from typing import Final

import structlog

from table.room import Room

log = structlog.get_logger("table")

@unique
class TableStatus(StrEnum):
    """A table's status as the lobby and the views show it."""

    OPEN = "open"
    WAITING = "waiting"
    STOPPED = "stopped"
    CLOSED = "closed"


OPEN: Final = TableStatus.OPEN
WAITING: Final = TableStatus.WAITING
STOPPED: Final = TableStatus.STOPPED
CLOSED: Final = TableStatus.CLOSED


class Status:
    """The waiting part of a table's status, and the whole status of a room."""

    def __init__(self, table_id: str,
                 on_change: Callable[[str, str, str], None] | None = None) -> None:
        self.table_id = table_id
        self.waiting_for = ""
        self.outage_since: float | None = None
        self._outage_hand = 0
        self._on_change = on_change
        self._last = (OPEN, "")

    def of(self, room: Room) -> tuple[str, str]:
        """(status, reason) of ``room`` now."""
        if room.stopped:
            now = (STOPPED, room.stopped)
        elif self.waiting_for:
            now = (WAITING, self.waiting_for)
        elif room.closed:
            now = (CLOSED, "closed by an operator")
        else:
            now = (OPEN, "")
        if now != self._last:
            self._last = now
            log.info("table_status", table_id=self.table_id, status=now[0], reason=now[1])
            if self._on_change is not None:
                self._on_change(self.table_id, *now)
        return now

    def waiting(self, reason: str) -> None:
        """The dealer or the wallet does not answer (``reason``)."""
        self.waiting_for = reason

    def resumed(self) -> None:
        self.waiting_for = ""
        self.outage_since = None

    def give_up_after(self, outage_limit_s: float, hand_number: int = 0) -> float:
        """How much longer hand ``hand_number`` waits for the dealer or the wallet before
        it is void: the clock runs from the first call of the hand that went unanswered
        until one is answered, and starts again with each hand (a hand that ended while
        its clock ran, voided by an operator say, leaves none to the next)."""
        now = asyncio.get_running_loop().time()  # monotonic (simulated in sim/)
        if self.outage_since is None or self._outage_hand != hand_number:
            self.outage_since, self._outage_hand = now, hand_number
        return max(0.0, outage_limit_s - (now - self.outage_since))

    def answered(self) -> None:
        """The dealer or the wallet answered, if only to refuse: it is not out (the
        waiting reason stays until a call succeeds)."""
        self.outage_since = None
