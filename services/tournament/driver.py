"""The process manager: it reacts to each tournament's decisions as its log states them, and
records each outcome as a command of its own, so a crash at any step is carried on from the
log (DESIGN §5c, STYLE §11 "sagas as events").

Each round: the clock (a ``Tick`` whose command id is the version it was decided at, so two
rounds at one version append once), the buy-in of each pending entry (``SettleEntry``), each
refund and prize (``ConfirmPayment``), then the tables (``table_steps``). Every call carries
a key derived from the log (``clients.key``). The manager's command ids are in its own
namespace (``app.stored_id``: no caller can choose one of them), and each step is taken on
its own: one refused never stops the others.

With leases (:mod:`tournament.leases`), a round drives only the tournaments this replica
holds, each write fenced by its lease's epoch: a former owner's append is refused
``not_owner`` and that tournament is left to its new owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
from collections.abc import Awaitable
from typing import Final

import structlog

from studkit.errors import ServiceError
from studkit.store import NotOwner
from studkit.telemetry import linked
from tournament import commands as c
from tournament import events as ev
from tournament import metrics
from tournament.app import Outcome, TournamentApp, Writer
from tournament.clients import Refused, Unavailable, WalletPort
from tournament.leases import Leases
from tournament.state import CANCELLED, FINISHED, REGISTERING, RUNNING, Tournament
from tournament.table_steps import TableSteps

log = structlog.get_logger("tournament.driver")


def over(t: Tournament) -> bool:
    return t.phase in (FINISHED, CANCELLED) and set(t.payments) <= t.paid \
        and all(e.paid or e.gone for e in t.field())


async def _record(app: Writer, tournament_id: str, cmd: c.Command,
                  command_id: str) -> Outcome | None:
    """Record one step's outcome; None when the tournament refuses it now (logged, and the
    next round tries again): one refused step never stops the others of the round, above
    all the payments (issue 29, G1: a settlement refused for ever left every refund and
    prize of its tournament unpaid). Fenced (:class:`NotOwner`) and anything else that is
    not a refusal stops the round of this tournament, as before."""
    try:
        return await app.execute(tournament_id, cmd, command_id)
    except ServiceError as exc:
        log.warning("tournament_step_refused", tournament_id=tournament_id,
                    command=type(cmd).__name__, command_id=command_id, reason=exc.reason,
                    detail=exc.detail)
        return None


def start_near(t: Tournament, now: float) -> bool:
    """Whether this round may start ``t``: a sit & go whose field is full (its last charge
    settled this round starts it), a multi-table whose start time has come."""
    if t.phase != REGISTERING:
        return False
    if t.cfg.format == ev.SIT_AND_GO:
        return len(t.field()) >= t.cfg.seats
    return now >= t.cfg.start_at


async def withdraw_excluded(app: Writer, wallet: WalletPort, t: Tournament) -> int | None:
    """Before the start, each paid entry whose player the wallet says is excluded now is
    withdrawn and refunded (``WithdrawExcluded``, command id ``exclude.<entry>`` in the
    manager's namespace: a repeat appends nothing); the number withdrawn, None when the
    wallet did not answer (the rest is not asked this round: an outage costs one call, not
    one per entry). A player the wallet refuses to say about stays in (the rule after the
    start then applies: docs/player-protection.md)."""
    done = 0
    for e in t.field():
        if not e.paid:
            continue  # its charge is refused by the wallet if the player is excluded
        try:
            reason = await wallet.exclusion(e.player_id)
        except Unavailable as exc:
            log.warning("tournament_exclusions_wait", tournament_id=t.tournament_id,
                        error=str(exc))
            return None
        except Refused as exc:
            log.warning("tournament_exclusion_unknown", tournament_id=t.tournament_id,
                        entry_id=e.entry_id, error=str(exc))
            continue
        if reason:
            log.info("tournament_entry_excluded", tournament_id=t.tournament_id,
                     entry_id=e.entry_id, player_id=e.player_id, reason=reason)
            done += await _record(app, t.tournament_id, c.WithdrawExcluded(e.entry_id, reason),
                                  f"exclude.{e.entry_id}") is not None
    return done


async def step(app: Writer, wallet: WalletPort, tournament_id: str,
               now: float = math.inf, checked: dict[str, int] | None = None) -> int:
    """One round for one tournament: before a start that may come now (``now``; the default
    always checks), the excluded entrants withdrawn; the clock, then each money step due,
    each on its own (a refusal of one leaves the others to be taken); the number of steps
    taken. ``checked`` (the process manager's, per tournament: the version whose entrants
    were last asked about) asks the wallet once per version of the log, so a start held
    back (a charge in flight) costs no call per entry every round."""
    t = await app.load(tournament_id)
    done = 0
    if start_near(t, now) and (checked is None or checked.get(tournament_id) != t.version):
        n = await withdraw_excluded(app, wallet, t)
        if n:
            done += n
            t = await app.load(tournament_id)
        if n is not None and checked is not None:
            checked[tournament_id] = t.version
    if t.phase not in (FINISHED, CANCELLED):
        out = await _record(app, tournament_id, c.Tick(), f"tick.{t.version}")
        done += bool(out is not None and out.records)
        t = await app.load(tournament_id)
    for e in t.field():
        if e.paid:
            continue
        try:
            await wallet.enter(tournament_id, e.entry_id, e.player_id, t.cfg.buy_in, t.cfg.fee)
            cmd = c.SettleEntry(e.entry_id, True)
        except Refused as refused:
            cmd = c.SettleEntry(e.entry_id, False, refused.reason)
        except Unavailable:
            continue
        done += await _record(app, tournament_id, cmd, f"settle.{e.entry_id}") is not None
    t = await app.load(tournament_id)
    for payment_id, p in t.payments.items():
        if payment_id in t.paid:
            continue
        try:
            if isinstance(p, ev.RefundDue):
                await wallet.refund(tournament_id, p.entry_id, p.player_id)
            else:
                await wallet.pay(tournament_id, payment_id, p.player_id, p.amount, p.place)
        except (Refused, Unavailable) as exc:
            log.warning("tournament_payment_waits", tournament_id=tournament_id,
                        payment_id=payment_id, error=str(exc))
            continue
        done += await _record(app, tournament_id, c.ConfirmPayment(payment_id),
                              f"paid.{payment_id}") is not None
    return done


SWEEP_S: Final = 30.0
"""Every this many seconds a round reads the version of every tournament not over and steps
those that moved since it stepped them: the net under a wake that was lost (a process that
died between a caller's append and its wake)."""


def next_due(t: Tournament, now: float) -> float:
    """When ``t`` next has something to do by time alone (``math.inf``: only an event wakes
    it): every round while it runs (its tables move on by themselves) or has money or a
    charge in flight, its start if it is a multi-table registering, else never."""
    if t.phase == RUNNING:
        return now
    if any(not e.paid for e in t.field()) or set(t.payments) - t.paid:
        return now
    if t.phase == REGISTERING and t.cfg.format == ev.MULTI_TABLE:
        return t.cfg.start_at
    return math.inf


class Rounds:
    """The process manager's rounds (issue 29, G8: each round loaded and ticked every
    tournament not over, so its cost grew with every open tournament). A round steps only
    the tournaments due: those a caller's event woke (``TournamentApp.woken_since``, any
    replica's), those whose deadline came (:func:`next_due`: a start, or every round while
    one runs), and those just taken over; every :data:`SWEEP_S` seconds, those whose
    version moved since they were last stepped here (a wake lost between a caller's append
    and its mark; every one at a process's first round). A round's cost is flat in the idle
    ones: one sorted-set read and a look at a heap (a sweep: one pipelined read of the
    versions)."""

    def __init__(self, app: TournamentApp, wallet: WalletPort,
                 tables: TableSteps | None = None, *, writer: Writer | None = None,
                 leases: Leases | None = None, sweep_s: float = SWEEP_S) -> None:
        self.app, self.wallet, self.tables, self.leases = app, wallet, tables, leases
        self.write: Writer = app if writer is None else writer
        self.sweep_s = sweep_s
        self.finished: set[str] = set()
        self.open: set[str] = set()
        """The tournaments not over that this process knows of (the last sweep's and the
        ones woken since): what the leases are spread over."""
        self._timers: list[tuple[float, str]] = []
        self._due_at: dict[str, float] = {}
        self._woken: dict[str, float] = {}
        self._versions: dict[str, int] = {}
        """Each tournament's version when it was last stepped here."""
        self._next_sweep = -math.inf
        self._cursor = -math.inf
        self._among: frozenset[str] | None = None
        self._held: set[str] = set()
        self._checked: dict[str, int] = {}
        """Each tournament's version whose entrants were last asked about (``step``)."""
        self.stepped = 0
        """Tournaments stepped in all (the benchmark's figure)."""

    def sweep_next(self) -> None:
        """Make the next round a sweep (a benchmark's or an operator's tool)."""
        self._next_sweep = -math.inf

    def _at(self, tid: str, at: float) -> None:
        if at == math.inf:
            self._due_at.pop(tid, None)
        elif self._due_at.get(tid, math.inf) > at:
            self._due_at[tid] = at
            heapq.heappush(self._timers, (at, tid))

    def _expired(self, now: float) -> set[str]:
        out: set[str] = set()
        while self._timers and self._timers[0][0] <= now:
            at, tid = heapq.heappop(self._timers)
            if self._due_at.get(tid) == at:
                del self._due_at[tid]
                out.add(tid)
        return out

    async def _due(self, now: float) -> tuple[set[str], bool]:
        """The tournaments due now, and whether the set of tournaments may have changed (a
        sweep, or one this process did not know of)."""
        if now >= self._next_sweep:
            # the wakes this sweep answers (the next rounds read them again, within their
            # margin), read before the ids so that a tournament created between the two is
            # in the ids
            woken = await self.app.woken_since(now - WOKEN_MARGIN_S)
            self.open = {t for t in await self.app.ids() if t not in self.finished}
            self._next_sweep, self._cursor = now + self.sweep_s, now
            self._woken = woken
            # what changed since it was last stepped (an event whose wake was lost), or was
            # never stepped here (the first sweep: every one), and what is due by time
            versions = await self.app.versions(sorted(self.open))
            moved = {t for t, v in versions.items() if self._versions.get(t) != v}
            return moved | self._expired(now), True
        woken = await self.app.woken_since(self._cursor - WOKEN_MARGIN_S)
        self._cursor = now
        new = {t for t, at in woken.items()
               if t not in self.finished and at > self._woken.get(t, -math.inf)}
        self._woken.update((t, woken[t]) for t in new)
        fresh = bool(new - self.open)
        self.open |= new
        return new | self._expired(now), fresh

    async def _claim(self, due: set[str], changed: bool) -> set[str]:
        """With leases: hand over and take tournaments when it may change anything (a sweep,
        a tournament new to this process, the live replicas changed, a lease lost); the due
        ones held, and the ones just taken (stepped at once)."""
        assert self.leases is not None
        among = frozenset(self.leases.spread.live)
        if (changed or self.leases.refused or among != self._among
                or self._held != set(self.leases.held)):
            before = set(self.leases.held)
            try:
                await self.leases.claim(sorted(self.open))
                # Settled only once every tournament this replica should own is taken: a
                # dead replica's lease can outlive its heartbeat by a moment, and its
                # tournaments are claimed again next round, not at the next sweep.
                if not self.leases.refused:
                    self._among = frozenset(self.leases.spread.live)
            except Exception:
                log.exception("tournament_claims_failed")
            due |= set(self.leases.held) - before
            self._held = set(self.leases.held)
        return {t for t in due if t in self.leases.held}

    async def round(self, stop: asyncio.Event | None = None) -> int:
        """One round: each tournament due stepped; the number stepped."""
        now = self.app.now()
        due, changed = await self._due(now)
        if self.leases is not None:
            due = await self._claim(due, changed)
        stepped = 0
        for tournament_id in sorted(due):
            if stop is not None and stop.is_set():
                self._at(tournament_id, now)  # not stepped: the next round
                continue
            if self.leases is not None and tournament_id not in self.leases.held:
                continue  # lost during this round: its new owner drives it
            stepped += 1
            await self._step(tournament_id)
        self.stepped += stepped
        return stepped

    async def _step(self, tournament_id: str) -> None:
        # A step for what was appended: its trace links to that append (studkit.telemetry).
        with linked(tournament_id, "tournament.step"):
            await self._step_once(tournament_id)

    async def _step_once(self, tournament_id: str) -> None:
        # The money steps and the table steps each on their own: a table that refuses (or a
        # step of theirs the log refuses) never holds a payment back, nor the reverse.
        if not await _guarded(tournament_id, step(self.write, self.wallet, tournament_id,
                                                  self.app.now(), self._checked)):
            return
        if self.tables is not None and not await _guarded(
                tournament_id, self.tables.round(tournament_id)):
            return
        try:
            t = await self.app.load(tournament_id)
        except Exception:
            self._at(tournament_id, self.app.now())  # try again next round
            return
        self._versions[tournament_id] = t.version
        metrics.GAUGES.seen(t, over(t))
        if over(t):
            self.finished.add(tournament_id)
            self.open.discard(tournament_id)
            self._due_at.pop(tournament_id, None)
            self._woken.pop(tournament_id, None)
            self._versions.pop(tournament_id, None)
            self._checked.pop(tournament_id, None)
            with contextlib.suppress(Exception):
                await self.app.forget(tournament_id)
        else:
            self._at(tournament_id, next_due(t, self.app.now()))


WOKEN_MARGIN_S: Final = 5.0
"""How far back a round reads the woken tournaments before its previous read (the callers'
clocks may lag this replica's); a tournament is stepped once per wake all the same."""


async def run(app: TournamentApp, wallet: WalletPort, tick_s: float,
              stop: asyncio.Event, tables: TableSteps | None = None, *,
              writer: Writer | None = None, leases: Leases | None = None,
              sweep_s: float = SWEEP_S) -> None:
    """Round after round (:class:`Rounds`: the tournaments due), until ``stop`` is set (a
    flag, not only a cancellation: a cancellation that lands inside a Redis call may be
    absorbed by the client's retry). With ``leases``, only the tournaments this replica
    holds, through ``writer`` (fenced by their epochs); without, every tournament, through
    ``app``."""
    rounds = Rounds(app, wallet, tables, writer=writer, leases=leases, sweep_s=sweep_s)
    while not stop.is_set():
        try:
            await rounds.round(stop)
        except Exception:  # Redis away: the next round tries again
            log.exception("tournament_round_failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), tick_s)


async def _guarded(tournament_id: str, steps: Awaitable[int]) -> bool:
    """Run one part of a tournament's round; False when it was fenced (the tournament is
    not ours now: nothing more of it this round). A refusal or a failure is logged and the
    next round tries again."""
    try:
        await steps
    except NotOwner:  # fenced (logged and counted by the writer): not ours now
        return False
    except ServiceError as exc:  # a lost race or a refusal: the next round retries
        log.info("tournament_step_refused", tournament_id=tournament_id,
                 reason=exc.reason, detail=exc.detail)
    except (Refused, Unavailable) as exc:  # the table or the wallet: the same
        log.info("tournament_call_waits", tournament_id=tournament_id, error=str(exc))
    except Exception:
        log.exception("tournament_step_failed", tournament_id=tournament_id)
    return True
