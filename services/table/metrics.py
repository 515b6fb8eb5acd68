"""The table service's domain metrics (docs/operations.md "Metrics"), none labelled by a table
or a player: counters the driver and the replicas bump, and gauges read from the tables this
replica owns when Prometheus scrapes (:class:`TableGauges`).

The counters are process-wide (a test process running several replicas sums them); each
server's registry gets them with :func:`register`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections.abc import Callable, Iterator, Mapping
from typing import Final, Protocol

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from studkit import keys
from studkit.metrics import Metrics
from studkit.redis_client import Client
from table.room import Room

TURN_TIMEOUTS = Counter("stud_table_turn_timeouts", "Turns whose clock ran out (the driver "
                        "acted for the seat).", registry=None)
HANDS_VOIDED = Counter("stud_table_hands_voided", "Hands voided (the dealer or the wallet "
                       "unreachable for longer than the outage limit).", registry=None)
HANDS_ENDED = Counter("stud_table_hands_ended", "Hands ended and settled by this replica "
                      "(hands per minute: 60 * rate).", registry=None)
LEASE_TAKEOVERS = Counter("stud_table_lease_takeovers", "Tables this replica took over from "
                          "an earlier owner (a lease at an epoch above 1).", registry=None)
STALE_APPENDS = Counter("stud_table_stale_appends_refused", "Appends the fence refused: this "
                        "replica was no longer the table's owner.", registry=None)
COUNTERS: Final = (TURN_TIMEOUTS, HANDS_VOIDED, HANDS_ENDED, LEASE_TAKEOVERS, STALE_APPENDS)
BIGGEST: Final = 5
"""The streams whose length is exported (``rank`` 1..5, longest first)."""
STREAMS_EVERY_S: Final = 15.0


class HasRoom(Protocol):
    @property
    def room(self) -> Room: ...


class TableGauges(Collector):
    """Tables open and stopped, players seated, and the lengths of the longest streams, of
    the tables ``actors()`` gives (this replica's), computed at each scrape (the lengths: as
    :meth:`refresh_streams` last read them)."""

    def __init__(self, actors: Callable[[], Mapping[str, HasRoom]]) -> None:
        self._actors = actors
        self.lengths: list[int] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        rooms = [actor.room for actor in self._actors().values()]
        live = [r for r in rooms if r.table.opened and not r.closed]
        yield GaugeMetricFamily("stud_table_tables_open", "Open tables this replica owns.",
                                value=len(live))
        yield GaugeMetricFamily(
            "stud_table_tables_stopped", "Tables of this replica stopped by a failed "
            "reconciliation (escrow unequal to stacks).",
            value=sum(1 for r in live if r.stopped))
        yield GaugeMetricFamily(
            "stud_table_seated_players", "Players seated at this replica's tables.",
            value=sum(1 for r in live for seat in r.table.seats if seat is not None))
        family = GaugeMetricFamily(
            "stud_table_stream_length", "Events in Redis of this replica's longest table "
            f"streams, by rank (1 the longest, up to {BIGGEST}).", labels=("rank",))
        for rank, length in enumerate(self.lengths, start=1):
            family.add_metric((str(rank),), length)
        yield family

    async def refresh_streams(self, redis: Client) -> None:
        """Read the length (XLEN) of the :data:`BIGGEST` streams with the most events."""
        actors = self._actors()
        biggest = heapq.nlargest(BIGGEST, actors, key=lambda t: actors[t].room.version)
        lengths = [int(await redis.xlen(keys.table_stream(t))) for t in biggest]
        self.lengths = sorted(lengths, reverse=True)

    async def keep_streams(self, redis: Client, every_s: float = STREAMS_EVERY_S) -> None:
        """:meth:`refresh_streams` for ever (a background task of the service)."""
        while True:
            with contextlib.suppress(Exception):
                await self.refresh_streams(redis)
            await asyncio.sleep(every_s)


def register(metrics: Metrics, actors: Callable[[], Mapping[str, HasRoom]]) -> TableGauges:
    """The table's families on ``metrics``' registry; the gauges read ``actors()``."""
    for counter in COUNTERS:
        with contextlib.suppress(ValueError):  # already there
            metrics.registry.register(counter)
    gauges = TableGauges(actors)
    metrics.registry.register(gauges)
    return gauges
