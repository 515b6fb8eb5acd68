"""The tables this replica owns (DESIGN §3: one writer per table): taking them (lease, load,
drive), dropping them, and routing a call to the replica that owns a table. Beside it: the
ownership round that keeps their leases (``table.leases``), the wait of a call for a table
being taken over (``table.takeover``), and the lobby lines (``table.lobby_lines``)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable

import structlog

from stud.v1 import table_pb2 as pb
from studkit.errors import NotFound, Unavailable
from studkit.ownership import Ownership, Replica, Spread, rendezvous
from studkit.store import EventStore, NotOwner
from table import metrics
from table.actor import ActorDeps, TableActor
from table.driver import Driver, cancel_until_done
from table.leases import LeaseRounds
from table.lobby_lines import LobbyLines
from table.migrate import migrate_side_keys
from table.port import Driving
from table.takeover import Takeovers

log = structlog.get_logger("table")


class Tables:
    """Every table this process owns: its driver (and through it, its actor)."""

    def __init__(self, store: EventStore, deps_for: Callable[[], ActorDeps],
                 driving: Driving) -> None:
        self.store = store
        self.deps_for = deps_for
        self.driving = driving
        self.drivers: dict[str, Driver] = {}
        self._actors: dict[str, TableActor] = {}
        self.ready = False
        self.ownership: Ownership | None = None
        self.spread = Spread()
        self._keeper: asyncio.Task[None] | None = None
        self.rounds = LeaseRounds(self)
        self.lines = LobbyLines(store, driving)
        self.takeovers = Takeovers()

    @property
    def live(self) -> dict[str, Replica]:
        """The live replicas at the last heartbeat, by id."""
        return self.spread.live

    @property
    def actors(self) -> dict[str, TableActor]:
        return dict(self._actors)

    # --- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Take the tables this replica should own (rebuilt from their logs and driven),
        then keep the leases and the spread up to date in the background."""
        if self.ownership is None:
            for table_id in await self.store.table_ids():
                await self.load(table_id)
        else:
            await self.rebalance()
            self._keeper = asyncio.create_task(self.rounds.keep(), name="table-ownership",
                                               context=contextvars.Context())
        self.ready = True

    async def stop(self) -> None:
        """Stop every driver and hand each lease back (another replica takes over at once)."""
        self.rounds.stopping = True
        await cancel_until_done(self._keeper)
        drivers = list(self.drivers.items())
        for table_id, _ in drivers:
            await self.drop(table_id, release=False)
        held = {t: d.actor.epoch for t, d in drivers
                if d.actor.epoch is not None and not d.actor.fenced}
        if self.ownership is not None:
            if held:  # in one batched round, not a call per table (issue 17 F2)
                with contextlib.suppress(Exception):
                    await self.ownership.release_many(held)
            with contextlib.suppress(Exception):
                await self.ownership.heartbeat(alive=False)

    def require_ready(self) -> None:
        if not self.ready:
            raise Unavailable("the table service is starting: its tables are being rebuilt",
                              reason="starting")

    async def rebalance(self) -> None:
        """One ownership round (:meth:`LeaseRounds.rebalance`)."""
        await self.rounds.rebalance()

    async def take(self, table_id: str) -> Driver | None:
        """Acquire the table's lease and load it; None if another replica holds it."""
        assert self.ownership is not None
        lease = await self.ownership.acquire(table_id)
        if not lease.ok:
            return None
        self.takeovers.mark(table_id)
        return await self.load_marked(table_id, lease.epoch)

    async def load_marked(self, table_id: str, epoch: int) -> Driver:
        """:meth:`_load_taken`, the table marked as being taken over (:attr:`takeovers`)
        until its load ends, loaded or not."""
        try:
            return await self._load_taken(table_id, epoch)
        finally:
            self.takeovers.ended(table_id)

    async def _load_taken(self, table_id: str, epoch: int) -> Driver:
        """Load a table whose lease was just acquired at ``epoch``; the lease is released
        again if the load fails."""
        assert self.ownership is not None
        started = time.monotonic()
        try:
            driver = await self.load(table_id, epoch=epoch)
        except Exception:
            with contextlib.suppress(Exception):
                await self.ownership.release(table_id, epoch)
            raise
        if epoch > 1:  # the table had an owner before: a takeover (docs/operations.md)
            metrics.LEASE_TAKEOVERS.inc()
        log.info("table_taken", table_id=table_id, epoch=epoch,
                 load_ms=round((time.monotonic() - started) * 1000, 1))
        return driver

    async def load(self, table_id: str, epoch: int | None = None) -> Driver:
        actor = TableActor(table_id, self.deps_for(), epoch)
        await actor.load()
        await migrate_side_keys(actor)
        driver = Driver(actor, self.driving)
        self.drivers[table_id] = driver
        self._actors[table_id] = actor
        driver.start()
        log.info("table_loaded", table_id=table_id, version=actor.version, epoch=epoch)
        return driver

    async def drop(self, table_id: str, *, release: bool) -> None:
        self.lines.forget(table_id)
        driver = self.drivers.pop(table_id, None)
        actor = self._actors.pop(table_id, None)
        if driver is None or actor is None:
            return
        await driver.stop()
        actor.close_watchers()  # their clients resume at the new owner (not here, silently)
        if release and self.ownership is not None and actor.epoch is not None \
                and not actor.fenced:
            with contextlib.suppress(Exception):
                await self.ownership.release(table_id, actor.epoch)

    # --- routing -------------------------------------------------------------------------

    async def redirect(self, table_id: str) -> NotOwner:
        """Where a call for a table this replica does not own should go."""
        assert self.ownership is not None
        owner_id, epoch = await self.ownership.owner(table_id)
        # Never itself by the record: this replica knows it does not serve the table (it
        # has just handed it over, or its lease lapsed); then the live replica it is due to.
        owner = (self.live.get(owner_id) if owner_id != self.ownership.replica.id else None) \
            or rendezvous(table_id, self.live.values())
        error = NotOwner(table_id, None, epoch)
        error.error_metadata = {"owner": owner.address if owner else "",
                                "owner_id": owner.id if owner else ""}
        return error

    async def routed(self, table_id: str) -> Driver:
        """The table's driver if this replica owns it; else ``not_owner`` naming the owner
        (clients go there), or NOT_FOUND for a table that does not exist."""
        self.require_ready()
        driver = self.drivers.get(table_id)
        if driver is None and table_id in self.takeovers:
            driver = await self.takeovers.driver_once_taken(table_id, self.drivers)
        if driver is not None and driver.actor.room.table.opened and not driver.actor.fenced:
            return driver
        if self.ownership is not None and table_id in set(await self.store.table_ids()):
            raise await self.redirect(table_id)
        raise NotFound(f"no table {table_id}", reason="unknown_table")

    def actor(self, table_id: str) -> TableActor:
        """The actor of a table this replica holds (KeyError otherwise)."""
        return self._actors[table_id]

    async def routed_actor(self, table_id: str) -> TableActor:
        """The table's actor if this replica owns it (as :meth:`routed`)."""
        await self.routed(table_id)
        return self._actors[table_id]

    # --- the lobby -----------------------------------------------------------------------

    async def publish_summaries(self) -> None:
        """Write each owned table's lobby line (:meth:`LobbyLines.publish`)."""
        await self.lines.publish(self.drivers)

    async def summaries(self, after: str = "", size: int = 500
                        ) -> tuple[list[pb.TableSummary], str]:
        """A page of open tables after table id ``after`` (:meth:`LobbyLines.page`)."""
        self.require_ready()
        return await self.lines.page(self.drivers, after, size)
