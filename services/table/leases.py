"""The ownership round of a table replica (DESIGN §3: one writer per table, issue 17 F2): a
heartbeat; every lease held renewed in one batched round (a table lost or fenced dropped, one
another live replica should own handed over between hands); the tables this replica should
own taken :data:`TAKE_BATCH` at a time, the leases held renewed while a batch loads."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import structlog

from studkit.ownership import Lease, Ownership, Replica

if TYPE_CHECKING:
    from table.driver import Driver
    from table.replicas import Tables

log = structlog.get_logger("table")

TAKE_BATCH = 25
"""Tables taken at a time in a round (one lease script, then their loads side by side):
small enough that a batch is loaded well within a third of the lease, so the round can
renew the leases it already holds between two batches."""


class LeaseRounds:
    """The rounds that keep ``tables``' leases and take the tables this replica should own."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.stopping = False
        self.failed_loads = 0

    @property
    def ownership(self) -> Ownership:
        assert self.tables.ownership is not None
        return self.tables.ownership

    async def keep(self) -> None:
        """A round every third of a lease until the replica stops (a failed round logged)."""
        while not self.stopping:
            await asyncio.sleep(self.ownership.lease_ms / 3000)
            try:
                await self.rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ownership_round_failed")

    async def rebalance(self) -> None:
        """One round: heartbeat; renew the leases held (drop a table lost or fenced); take
        the tables this replica should own; hand over, between hands, one another live
        replica should own now."""
        me = self.ownership.replica
        self.tables.spread.update(await self.ownership.heartbeat())
        renewed_at = time.monotonic()
        await self._keep_held(hand_over=True)
        await self.tables.publish_summaries()
        await self._take_missing(me, renewed_at)

    async def _renew_all(self, held: list[tuple[str, Driver]]) -> list[Lease | None]:
        """Every lease held, renewed in one round of batched scripts (issue 17 F2: a burst of
        one call per table exhausted the pool that player commands need)."""
        leases = {t: d.actor.epoch or 0 for t, d in held if not d.actor.fenced}
        renewed = await self.ownership.renew_many(leases) if leases else {}
        return [renewed.get(t) for t, _d in held]

    async def _keep_held(self, *, hand_over: bool) -> None:
        """Renew every lease held in one round; drop the tables lost or fenced; with
        ``hand_over``, hand over (between hands) the tables another live replica should
        own now."""
        me = self.ownership.replica
        drivers = self.tables.drivers
        held = list(drivers.items())
        for (table_id, driver), lease in zip(held, await self._renew_all(held), strict=True):
            if drivers.get(table_id) is not driver:
                continue
            if lease is None or not lease.ok:
                log.warning("table_lost", table_id=table_id, epoch=driver.actor.epoch)
                await self.tables.drop(table_id, release=False)
                continue
            desired = self.tables.spread.desired(table_id)
            if hand_over and desired is not None and desired.id != me.id and \
                    not driver.actor.room.table.hand_in_progress:
                log.info("table_handed_over", table_id=table_id, to=desired.id)
                await self.tables.drop(table_id, release=True)

    async def _take_missing(self, me: Replica, renewed_at: float) -> None:
        """Take the tables this replica should own and does not hold: their leases
        :data:`TAKE_BATCH` at a time (one script call a batch), each batch loaded before the
        next is taken, and the leases already held renewed again whenever a third of the
        lease has passed since their last renewal (issue 17 F2: taking a thousand tables one
        by one took longer than the lease, and the first ones taken lapsed)."""
        drivers = self.tables.drivers
        wanted = []
        for table_id in await self.tables.store.table_ids():
            desired = self.tables.spread.desired(table_id) if table_id not in drivers else None
            if desired is not None and desired.id == me.id:
                wanted.append(table_id)
        for i in range(0, len(wanted), TAKE_BATCH):
            if time.monotonic() - renewed_at >= self.ownership.lease_ms / 3000:
                renewed_at = time.monotonic()
                await self._keep_held(hand_over=False)
            batch = [t for t in wanted[i:i + TAKE_BATCH] if t not in drivers]
            if not batch:
                continue
            try:
                leases = await self.ownership.acquire_many(batch)
            except Exception:
                log.exception("table_take_failed", tables=len(batch))
                continue
            taken = {t: lease.epoch for t, lease in leases.items() if lease.ok}
            for table_id in taken:  # marked at once: a call may come before its load starts
                self.tables.takeovers.mark(table_id)
            loading = asyncio.ensure_future(asyncio.gather(
                *(self.tables.load_marked(t, epoch) for t, epoch in taken.items()),
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
                        {t: e for t, e in taken.items() if t not in self.tables.drivers})
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("ownership_renewal_failed", loading=len(taken))
        except asyncio.CancelledError:
            loading.cancel()
            raise
