"""The tables a table replica is taking over (their lease held, their load under way), and the
short wait of a call for one of them: served once the load ends, else ``UNAVAILABLE``
(``taking_over``: ask again), never sent elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from studkit.errors import Unavailable
from table.driver import Driver

TAKING_WAIT_S = 2.0
"""How long a call for a table this replica is taking over (its lease held, its load under
way) waits for the load before it is refused ``UNAVAILABLE`` (``taking_over``: ask again)."""


class Takeovers:
    """Tables whose lease this replica holds and whose load is under way, each with the event
    set when its load ends (a call for one waits for it rather than being sent elsewhere)."""

    def __init__(self) -> None:
        self._taking: dict[str, asyncio.Event] = {}

    def __contains__(self, table_id: object) -> bool:
        return table_id in self._taking

    def mark(self, table_id: str) -> None:
        """The table's lease is taken and its load about to start (a call may come first)."""
        self._taking[table_id] = asyncio.Event()

    def ended(self, table_id: str) -> None:
        """The table's load ended, loaded or not: the calls waiting for it go on."""
        taking = self._taking.pop(table_id, None)
        if taking is not None:
            taking.set()

    async def driver_once_taken(self, table_id: str, drivers: Mapping[str, Driver]) -> Driver:
        """The driver of a table this replica is taking over, once its load ends (within
        :data:`TAKING_WAIT_S`). Not ``not_owner``: the owner's record names this replica,
        and a redirect named it too, sending the client back here to spin until the load
        ended."""
        taking = self._taking.get(table_id)
        if taking is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TAKING_WAIT_S):
                    await taking.wait()
        driver = drivers.get(table_id)
        if driver is None:
            raise Unavailable(f"table {table_id} is being taken over here: ask again",
                              reason="taking_over")
        return driver
