"""The tournaments this replica drives (DESIGN §5c: each tournament on its own fenced stream,
one writer at a time, as the tables in §3/§4): an ownership lease per tournament, the spread
of tournaments over the live replicas, and the fence on every write of the process manager.

- **Leases** (``studkit.ownership`` under the tournament's keys: ``stud:tournament:{id}:owner``
  and ``stud:tournament:replicas``): a keeper task heartbeats and renews every lease held, in
  one round of batched scripts, every third of a lease period, whatever the process manager
  is busy with; a lease it finds lost is dropped at once.
- **Claims**: at the top of each of its rounds, between two tournaments' steps (so never
  half-way through one), the process manager hands over the tournaments another live replica
  should own now (rendezvous hashing), and takes the free or expired ones this replica should.
  A dead replica's tournaments are taken over once its heartbeat and leases run out: within a
  lease period and a round. The new owner carries each one on from its log (every step of
  the process manager is recoverable there, a move and a level included).
- **Fence**: :class:`Fenced` is the process manager's write path: every append carries the
  epoch of the lease held, so a former owner (paused, partitioned, replaced) has its appends
  refused ``not_owner`` by the store's script, changes nothing, and stops driving that
  tournament. Each refusal is logged (``stale_append_refused``) and counted
  (``stud_tournament_stale_appends_refused_total``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

import structlog

from studkit.metrics import Metrics
from studkit.ownership import Ownership, Spread
from studkit.store import NotOwner
from tournament import commands as c
from tournament.app import Outcome, TournamentApp
from tournament.state import Tournament

log = structlog.get_logger("tournament.leases")

STALE_APPENDS: str = "stud_tournament_stale_appends_refused"
"""The counter of a former owner's appends the fence refused (``_total`` when scraped)."""


class Leases:
    """The leases this replica holds (``held``: tournament id -> epoch)."""

    def __init__(self, ownership: Ownership) -> None:
        self.ownership = ownership
        self.held: dict[str, int] = {}
        self.spread = Spread()
        self.task: asyncio.Task[None] | None = None
        self.refused: set[str] = set()
        """What the last claim wanted here and could not take (another replica's lease had
        not run out yet): claimed again at the next round, not the next sweep."""

    @property
    def me(self) -> str:
        return self.ownership.replica.id

    def start(self) -> None:
        """The keeper: heartbeat and renewals every third of a lease period."""
        self.task = asyncio.create_task(self._keep(), name="tournament-leases")

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self.ownership.lease_ms / 3000)
            try:
                await self.renew()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("tournament_lease_round_failed")

    async def renew(self) -> None:
        """One keeper round: heartbeat (the live replicas), then every lease held renewed;
        a lost one is dropped (another replica owns it now). An absent answer (a master
        that failed) keeps the lease until the next round: it stays valid until it runs
        out, and the fence refuses its writes after that anyway."""
        self.spread.update(await self.ownership.heartbeat())
        held = dict(self.held)
        renewed = await self.ownership.renew_many(held) if held else {}
        for tid, lease in renewed.items():
            if not lease.ok and self.held.get(tid) == held[tid]:
                log.warning("tournament_lost", tournament_id=tid, epoch=held[tid],
                            owner=lease.owner, current=lease.epoch)
                del self.held[tid]

    async def claim(self, ids: Iterable[str]) -> list[str]:
        """Between two steps of the process manager: hand over what another live replica
        should own, take what this one should; the tournaments held now, in order."""
        if not self.spread.live:  # the first round: the keeper has not heartbeat yet
            self.spread.update(await self.ownership.heartbeat())
        wanted = set(ids)
        leaving = {t: e for t, e in self.held.items()
                   if t not in wanted or self._elsewhere(t)}
        if leaving:
            await self.release(leaving)
        free = [t for t in sorted(wanted) if t not in self.held and not self._elsewhere(t)]
        self.refused = set()
        if free:
            for tid, lease in (await self.ownership.acquire_many(free)).items():
                if lease.ok:
                    self.held[tid] = lease.epoch
                    log.info("tournament_taken", tournament_id=tid, epoch=lease.epoch)
                else:
                    self.refused.add(tid)
        return sorted(self.held)

    def _elsewhere(self, tid: str) -> bool:
        desired = self.spread.desired(tid)
        return desired is not None and desired.id != self.me

    def drop(self, tid: str, epoch: int) -> None:
        """Stop driving ``tid`` (its append was fenced at ``epoch``)."""
        if self.held.get(tid) == epoch:
            del self.held[tid]

    async def release(self, leases: dict[str, int]) -> None:
        """Hand ``leases`` back at once (another replica takes them without waiting)."""
        for tid in leases:
            self.held.pop(tid, None)
        with contextlib.suppress(Exception):
            await self.ownership.release_many(leases)
        for tid in leases:
            log.info("tournament_released", tournament_id=tid)

    async def stop(self) -> None:
        """Stop the keeper, release every lease and leave the live replicas."""
        if self.task is not None:
            while not self.task.done():
                self.task.cancel()
                await asyncio.wait({self.task}, timeout=0.1)
            self.task = None
        if self.held:
            await self.release(dict(self.held))
        with contextlib.suppress(Exception):
            await self.ownership.heartbeat(alive=False)


class Fenced:
    """The process manager's view of the app: reads as the app's, and every write carries
    the epoch of the lease held on its tournament (``NotOwner`` if none is held now)."""

    def __init__(self, app: TournamentApp, leases: Leases, metrics: Metrics) -> None:
        self.app = app
        self.leases = leases
        self.refused = metrics.counter(
            STALE_APPENDS, "Appends of the process manager the fence refused: this replica "
            "was no longer the tournament's owner (a former owner paused or partitioned).")

    def now(self) -> float:
        return self.app.now()

    async def load(self, tournament_id: str) -> Tournament:
        return await self.app.load(tournament_id)

    async def execute(self, tournament_id: str, cmd: c.Command, command_id: str) -> Outcome:
        epoch = self.leases.held.get(tournament_id)
        if epoch is None:  # lost since the round began: write nothing
            raise NotOwner(tournament_id, None, 0)
        try:
            return await self.app.execute(tournament_id, cmd, command_id, epoch=epoch)
        except NotOwner as exc:
            self.refused.inc()
            log.warning("stale_append_refused", tournament_id=tournament_id, epoch=epoch,
                        current=exc.current, command_id=command_id)
            self.leases.drop(tournament_id, epoch)
            raise
