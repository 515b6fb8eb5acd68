"""The one narrow port through which the driver and money see their table (DESIGN §5b): the
room (read), the commit interface, and the system outside the table (the clock, the dealer,
the wallet). :class:`table.actor.TableActor` is the port in the service; the unit tests drive
the driver and money through a fake one (``tests/unit/table/fakes.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from studkit.commit import Committed
from table.alarms import Alarms
from table.clients import DealerClient, WalletClient
from table.room import Room, RoomCommand, Turn

CHECKS_AT_ONCE: Final = 8
"""Tables of a replica reconciled with the wallet at a time (:attr:`Driving.checks`)."""


@dataclass(frozen=True, slots=True)
class System:
    """What the driver and money call outside the table: the time, the dealer, the wallet."""

    dealer: DealerClient
    wallet: WalletClient
    clock: Callable[[], float] = time.time


@dataclass(frozen=True)
class Driving:
    """What the drivers of one replica share: the system, the replica's one timer, its turns
    to reconcile a table with the wallet, and who hears of a status change."""

    system: System
    alarms: Alarms = field(default_factory=Alarms)
    """The replica's one timer (shared by every table of a replica)."""
    checks: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CHECKS_AT_ONCE))
    """The replica's turns to reconcile a table just loaded with the wallet: a replica
    taking a thousand tables at once asks the wallet a few at a time, never a thousand calls
    together that time out and are retried all at once."""
    on_status: Callable[[str, str, str], None] | None = None


class TablePort(Protocol):
    """One table as its driver and its money see it: the room, and the commit interface."""

    wake: asyncio.Event
    """Set by every commit (and by the replica's timer): the driver looks again."""

    @property
    def table_id(self) -> str: ...

    @property
    def room(self) -> Room: ...

    @property
    def version(self) -> int: ...

    @property
    def epoch(self) -> int | None: ...

    @property
    def fenced(self) -> bool: ...

    def fence(self) -> None:
        """Note that another owner holds the table now (an append was fenced)."""

    async def commit(self, command: RoomCommand, command_id: str, fp: str = "",
                     expected: int | None = None, *, record_empty: bool = True
                     ) -> Committed[Room]:
        """Decide ``command`` and append its events, idempotent by ``command_id``."""

    async def own(self, command: RoomCommand, command_id: str) -> bool:
        """Commit a command of the table itself; False when it is refused now."""

    async def maybe_snapshot(self) -> None:
        """Save a snapshot at a hand boundary, if one is due."""

    def hold_turn(self, turn: Turn) -> None:
        """Give the turn in progress a clock the log does not carry (a log older than
        clocks: a full turn from now), held in memory only."""

    def release_held(self) -> None:
        """Give the watchers now what an append held for the driver's next one (the driver
        waits, or its step ended without appending)."""
