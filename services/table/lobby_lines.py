"""The lobby's lines of a table replica: each owned table's ``TableSummary`` written beside
its stream (a cache any replica's ``ListTables`` reads; made again from the room whenever it
moves), and a page of the lobby read from this replica's own rooms and the others' lines."""

from __future__ import annotations

import time
from collections.abc import Mapping

from stud.v1 import table_pb2 as pb
from studkit import keys
from studkit.store import EventStore
from table.driver import Driver
from table.port import Driving
from table.views import summary

SUMMARY_REFRESH_S = 60.0
"""An idle table's lobby line is made again this often (its hands per hour move on)."""


class LobbyLines:
    """The lines this replica wrote, and what each was made of."""

    def __init__(self, store: EventStore, driving: Driving) -> None:
        self.store = store
        self.driving = driving
        self._published: dict[str, bytes] = {}
        self._summarized: dict[str, tuple[object, ...]] = {}
        """What each table's last lobby line was made of (its version, status, minute)."""

    async def publish(self, drivers: Mapping[str, Driver]) -> None:
        """Write each owned table's lobby line (only the lines that changed). A line is made
        again only when its table has moved (a new event, another status) or a minute has
        passed (its hands per hour): an idle table costs a tuple comparison a round."""
        pipe = self.store.client.pipeline(transaction=False)
        changed, made = {}, {}
        minute = int(time.time() // SUMMARY_REFRESH_S)
        for table_id, driver in drivers.items():
            room = driver.actor.room
            if not room.table.opened:
                continue
            made_of = (room.version, driver.status.of(room), minute)
            if self._summarized.get(table_id) == made_of:
                continue
            made[table_id] = made_of
            line = summary(table_id, room, made_of[1],
                           self.driving.system.clock()).SerializeToString(deterministic=True)
            if self._published.get(table_id) != line:
                pipe.set(keys.table_key(table_id, "summary"), line)
                changed[table_id] = line
        if changed:
            await pipe.execute()
            self._published.update(changed)
        self._summarized.update(made)

    def forget(self, table_id: str) -> None:
        """A table this replica no longer owns: its line is another's to write."""
        self._published.pop(table_id, None)
        self._summarized.pop(table_id, None)

    async def page(self, drivers: Mapping[str, Driver], after: str = "", size: int = 500
                   ) -> tuple[list[pb.TableSummary], str]:
        """A page of open tables after table id ``after``: this replica's own live, the
        others' from their lines; and the next page's token ("" after the last)."""
        every = [t for t in await self.store.table_ids() if t > after]
        table_ids = every[:size]
        next_token = table_ids[-1] if len(every) > size else ""
        pipe = self.store.client.pipeline(transaction=False)
        for table_id in table_ids:
            pipe.get(keys.table_key(table_id, "summary"))
        out = []
        for table_id, raw in zip(table_ids, await pipe.execute(), strict=True):
            driver = drivers.get(table_id)
            if driver is not None and driver.actor.room.table.opened:
                room = driver.actor.room
                out.append(summary(table_id, room, driver.status.of(room),
                                   self.driving.system.clock()))
            elif raw:
                out.append(pb.TableSummary.FromString(raw))
        return out, next_token
