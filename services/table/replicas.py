"""The tables this replica owns (DESIGN §3: one writer per table): taking them (lease, load,
drive), keeping their leases, handing them over, routing a call to the replica that owns a
table, and the lobby lines written beside each stream for every replica's ``ListTables``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable
from typing import Any

import structlog

from stud.v1 import table_pb2 as pb
from studkit.errors import NotFound, Unavailable
from studkit.ownership import Lease, Ownership, Replica, Spread, rendezvous
from studkit.store import EventStore, NotOwner
from table import metrics
from table.actor import ActorDeps, TableActor
from table.driver import Driver, cancel_until_done
from table.lobby_lines import LobbyLines
from table.migrate import migrate_side_keys
from table.port import Driving

log = structlog.get_logger("table")

TAKE_BATCH = 25
"""Tables taken at a time in a round (one lease script, then their loads side by side):
small enough that a batch is loaded well within a third of the lease, so the round can
renew the leases it already holds between two batches."""
TAKING_WAIT_S = 2.0
"""How long a call for a table this replica is taking over (its lease held, its load under
way) waits for the load before it is refused ``UNAVAILABLE`` (``taking_over``: ask again)."""


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
        self.failed_loads = 0
        self._keeper: asyncio.Task[None] | None = None
        self._stopping = False
        self.lines = LobbyLines(store, driving)
        self._taking: dict[str, asyncio.Event] = {}
        """Tables whose lease this replica holds and whose load is under way: set when the
        load ends (a call for one waits for it rather than being sent elsewhere)."""

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
            self._keeper = asyncio.create_task(self._keep(), name="table-ownership",
                                               context=contextvars.Context())
        self.ready = True

    async def stop(self) -> None:
        """Stop every driver and hand each lease back (another replica takes over at once)."""
        self._stopping = True
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

    async def _keep(self) -> None:
        assert self.ownership is not None
        while not self._stopping:
            await asyncio.sleep(self.ownership.lease_ms / 3000)
            try:
                await self.rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ownership_round_failed")

    async def _renew_all(self, held: list[tuple[str, Driver]]) -> list[Lease | None]:
        """Every lease held, renewed in one round of batched scripts (issue 17 F2: a burst of
        one call per table exhausted the pool that player commands need)."""
        assert self.ownership is not None
        leases = {t: d.actor.epoch or 0 for t, d in held if not d.actor.fenced}
        renewed = await self.ownership.renew_many(leases) if leases else {}
        return [renewed.get(t) for t, _d in held]

    async def rebalance(self) -> None:
        """One round: heartbeat; renew the leases held (drop a table lost or fenced); take
        the tables this replica should own; hand over, between hands, one another live
        replica should own now."""
        assert self.ownership is not None
        me = self.ownership.replica
        self.spread.update(await self.ownership.heartbeat())
        renewed_at = time.monotonic()
        await self._keep_held(hand_over=True)
        await self.publish_summaries()
        await self._take_missing(me, renewed_at)

    async def _keep_held(self, *, hand_over: bool) -> None:
        """Renew every lease held in one round; drop the tables lost or fenced; with
        ``hand_over``, hand over (between hands) the tables another live replica should
        own now."""
        assert self.ownership is not None
        me = self.ownership.replica
        held = list(self.drivers.items())
        for (table_id, driver), lease in zip(held, await self._renew_all(held), strict=True):
            if self.drivers.get(table_id) is not driver:
                continue
            if lease is None or not lease.ok:
                log.warning("table_lost", table_id=table_id, epoch=driver.actor.epoch)
                await self.drop(table_id, release=False)
                continue
            desired = self._desired(table_id)
            if hand_over and desired is not None and desired.id != me.id and \
                    not driver.actor.room.table.hand_in_progress:
                log.info("table_handed_over", table_id=table_id, to=desired.id)
                await self.drop(table_id, release=True)

    async def _take_missing(self, me: Replica, renewed_at: float) -> None:
        """Take the tables this replica should own and does not hold: their leases
        :data:`TAKE_BATCH` at a time (one script call a batch), each batch loaded before the
        next is taken, and the leases already held renewed again whenever a third of the
        lease has passed since their last renewal (issue 17 F2: taking a thousand tables one
        by one took longer than the lease, and the first ones taken lapsed)."""
        assert self.ownership is not None
        wanted = []
        for table_id in await self.store.table_ids():
            desired = self._desired(table_id) if table_id not in self.drivers else None
            if desired is not None and desired.id == me.id:
                wanted.append(table_id)
        for i in range(0, len(wanted), TAKE_BATCH):
            if time.monotonic() - renewed_at >= self.ownership.lease_ms / 3000:
                renewed_at = time.monotonic()
                await self._keep_held(hand_over=False)
            batch = [t for t in wanted[i:i + TAKE_BATCH] if t not in self.drivers]
            if not batch:
                continue
            try:
                leases = await self.ownership.acquire_many(batch)
            except Exception:
                log.exception("table_take_failed", tables=len(batch))
                continue
            taken = {t: lease.epoch for t, lease in leases.items() if lease.ok}
            for table_id in taken:  # marked at once: a call may come before its load starts
                self._taking[table_id] = asyncio.Event()
            loading = asyncio.ensure_future(asyncio.gather(
                *(self._load_marked(t, epoch) for t, epoch in taken.items()),
                return_exceptions=True))
            renewed_at = await self._renew_while(loading, taken, renewed_at)
            loaded = loading.result()
            for table_id, outcome in zip(taken, loaded, strict=True):
                if isinstance(outcome, asyncio.CancelledError):
                    raise outcome
                if isinstance(outcome, BaseException):
                    log.error("table_load_failed", table_id=table_id,
                              exc_info=outcome)
                    self.failed_loads += 1

    async def _renew_while(self, loading: asyncio.Future[Any],
                           taken: dict[str, int], renewed_at: float) -> float:
        """Wait for a batch's loads, renewing every lease held (the tables driven and the
        batch's own, taken but still loading) whenever a third of the lease passes: on a
        starved machine one batch's loads outlasted the lease and the first tables lapsed
        (test_many_tables failed in a CI clone with leases 155 ms past their end). Returns
        when the leases were last renewed."""
        assert self.ownership is not None
        third = self.ownership.lease_ms / 3000
        try:
            while True:
                left = third - (time.monotonic() - renewed_at)
                if left > 0:
                    done, _ = await asyncio.wait({loading}, timeout=left)
                    if done:
                        return renewed_at
                renewed_at = time.monotonic()
                try:
                    await self._keep_held(hand_over=False)
                    await self.ownership.renew_many(
                        {t: e for t, e in taken.items() if t not in self.drivers})
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("ownership_renewal_failed", loading=len(taken))
        except asyncio.CancelledError:
            loading.cancel()
            raise

    def _desired(self, table_id: str) -> Replica | None:
        """The live replica that should own ``table_id`` (rendezvous hashing)."""
        return self.spread.desired(table_id)

    async def take(self, table_id: str) -> Driver | None:
        """Acquire the table's lease and load it; None if another replica holds it."""
        assert self.ownership is not None
        lease = await self.ownership.acquire(table_id)
        if not lease.ok:
            return None
        self._taking[table_id] = asyncio.Event()
        return await self._load_marked(table_id, lease.epoch)

    async def _load_marked(self, table_id: str, epoch: int) -> Driver:
        """:meth:`_load_taken`, the table marked as being taken (:attr:`_taking`) until its
        load ends, loaded or not."""
        try:
            return await self._load_taken(table_id, epoch)
        finally:
            taking = self._taking.pop(table_id, None)
            if taking is not None:
                taking.set()

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
        if driver is None and table_id in self._taking:
            driver = await self._once_taken(table_id)
        if driver is not None and driver.actor.room.table.opened and not driver.actor.fenced:
            return driver
        if self.ownership is not None and table_id in set(await self.store.table_ids()):
            raise await self.redirect(table_id)
        raise NotFound(f"no table {table_id}", reason="unknown_table")

    async def _once_taken(self, table_id: str) -> Driver:
        """The driver of a table this replica is taking over, once its load ends (within
        :data:`TAKING_WAIT_S`). Not ``not_owner``: the owner's record names this replica,
        and a redirect named it too, sending the client back here to spin until the load
        ended."""
        taking = self._taking.get(table_id)
        if taking is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TAKING_WAIT_S):
                    await taking.wait()
        driver = self.drivers.get(table_id)
        if driver is None:
            raise Unavailable(f"table {table_id} is being taken over here: ask again",
                              reason="taking_over")
        return driver

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
