"""The driver of one table (DESIGN 5a): after every change it asks the log what is pending
(cards to deal, hands to turn up, a clock running out, a hand to settle, a saga to carry on,
a seat to stand up, the next hand to start) and does it. A restart runs the same driver on
the rebuilt table, so "live" and "recovered" are one code path.

Calls to the dealer and the wallet are made outside the actor's lock; their results are
committed only if the table has not moved meanwhile (else asked again: every such call is
idempotent by its key).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
from dataclasses import replace

import structlog

import rules
from rules import ActionKind, Command, Phase
from rules.commands import Check, Fold, RevealHands, Showdown, StartHand, TimeOut, VoidHand
from studkit.store import NotOwner
from studkit.telemetry import linked
from table import metrics
from table.clients import Refused, Unreachable, key
from table.clock import deadline
from table.money import Money
from table.port import Driving, TablePort
from table.room import Leave, Play, Room, due_between_hands, next_sit_out_deadline
from table.status import Status
from table.tournament import may_deal

log = structlog.get_logger("table")

DEALER_STEPS = {Phase.DEALING: "table.deal", Phase.REVEAL: "table.reveal",
                Phase.SHOWDOWN: "table.showdown"}
"""The phases that wait on the dealer, and the name of the driver's span for each."""
PENDING_SAGA_S = 5.0
"""How soon a table with a saga still pending looks at it again (else an idle table waits
for a change only)."""
STOPPED_RECHECK_S = 30.0
"""How often a table stopped by a failed reconciliation checks the wallet again: dealing
resumes once every escrow equals its stack (a stop a transient disagreement caused heals;
a real one stays, and says so)."""


async def cancel_until_done(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` again until it has finished (a cancel can be swallowed by
    ``asyncio.wait_for`` on Python 3.11), then collect its outcome quietly."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    if not task.cancelled():
        with contextlib.suppress(Exception):
            task.result()


def leaving_action(room: Room, seat: int) -> Command:
    """What a seat that is leaving does at its turn: the passive action a player would take
    (a check where allowed, else a fold), never a clock running out; a forced bring-in is
    posted as RULES 6.12 posts it for a seat whose time ran out."""
    legal = rules.legal_actions(room.table)
    kinds = {a.kind for a in legal.actions} if legal is not None else set()
    if ActionKind.CHECK in kinds:
        return Check(seat=seat)
    if ActionKind.FOLD in kinds:
        return Fold(seat=seat)
    return TimeOut(seat=seat)


class Driver:
    """Drives one table from its log, through its port (the room, the commit interface)
    and the system (the clock, the dealer, the wallet)."""

    def __init__(self, actor: TablePort, driving: Driving) -> None:
        self.actor = actor
        self.system = driving.system
        self._alarms = driving.alarms
        self.status = Status(actor.table_id, driving.on_status)
        self.money = Money(actor, driving.system, self.status, driving.checks)
        self.task: asyncio.Task[None] | None = None
        self.stopping = False
        self._recheck_at: float | None = None
        """When a stopped table checks the wallet again (None: it is not stopped)."""

    def start(self) -> None:
        """Run the driver in the background (in a fresh log context)."""
        self.task = asyncio.create_task(self._run(), name=f"table:{self.actor.table_id}",
                                        context=contextvars.Context())

    async def stop(self) -> None:
        """Stop the driver; the ``stopping`` flag ends the loop even if a cancel is lost."""
        self.stopping = True
        await cancel_until_done(self.task)

    async def _run(self) -> None:
        structlog.contextvars.bind_contextvars(table_id=self.actor.table_id)
        while not self.stopping:
            await self._run_once()

    async def _run_once(self) -> None:
        actor = self.actor
        try:
            delay = await self.step()
        except asyncio.CancelledError:
            raise
        except NotOwner:
            actor.fence()
            self.stopping = True
            log.warning("table_fenced", epoch=actor.epoch)
            return
        except Unreachable as exc:
            log.warning("table_waiting", detail=str(exc))
            delay = 0.5
        except Exception:
            log.exception("table_step_failed")
            delay = 1.0
        if delay is not None:  # it waits now: what an append held for it goes out
            actor.release_held()
        self.status.of(actor.room)
        if delay is None or self.stopping:
            return
        # Woken by a change of the table or by the replica's one timer (table.alarms); an
        # infinite delay sets no alarm: nothing but a change wakes an idle table.
        actor.wake.clear()
        alarm = self._alarms.set(actor.wake, delay)
        try:
            await actor.wake.wait()
        finally:
            if alarm is not None:
                alarm.cancel()

    async def step(self) -> float | None:
        """Do the next thing the table needs; None to look again at once, else how long to
        wait (unless a change wakes the driver first; ``math.inf``: until a change)."""
        room = self.actor.room
        table = room.table
        if not table.opened or self.actor.fenced:
            return 5.0
        if table.hand_in_progress:
            return await self._drive_hand()
        hand = table.hand
        if hand is not None and hand.is_over and room.settled < hand.hand_number:
            with linked(self.actor.table_id, "table.settle", hand_number=hand.hand_number):
                await self.money.settle()
            metrics.HANDS_ENDED.inc()
            return None
        if await self.money.check_once():
            return None
        if room.stopped:
            now = self.system.clock()
            if self._recheck_at is None:
                self._recheck_at = now + STOPPED_RECHECK_S
            if now < self._recheck_at:
                return min(5.0, self._recheck_at - now)
            self._recheck_at = now + STOPPED_RECHECK_S
            # The sagas first (each step idempotent by its key: a stuck leaver is paid, a
            # queued top-up moved), then a check that resumes only if it saw every seat.
            for _ in range(len(room.sagas)):  # bounded: a step refused leaves its saga
                if not await self.money.roll_forward():
                    break
            return None if await self.money.check(whole=True) else 5.0
        self._recheck_at = None
        if await self.money.roll_forward():
            return None
        now = self.system.clock()
        due = due_between_hands(room, now)
        if due is not None:
            if isinstance(due, Leave):
                due = replace(due, wallet_key=key(self.actor.table_id, "leave", due.seat,
                                                  room.version))
            if await self.actor.own(due, f"due:{type(due).__name__}:{room.version}"):
                return None
        wait = await self._maybe_start(now)
        if wait is not None and self.actor.room.sagas:
            # A saga the wallet could not carry on now (unreachable): looked at again.
            return min(wait, PENDING_SAGA_S)
        return wait

    async def _maybe_start(self, now: float) -> float | None:
        room = self.actor.room
        if room.closed or not may_deal(room):
            # Nothing to start: only a change (closing, resuming, a cash-out) wakes it.
            return math.inf
        n = room.table.hands_started + 1
        if not rules.can_start_hand(room.table):  # asked, not probed with decide
            return next_sit_out_deadline(room, now)
        wait = room.last_hand_ended_at + room.settings.next_hand_delay_ms / 1000 - now
        if wait > 0:
            return wait
        version = room.version
        with linked(self.actor.table_id, "table.start_hand", hand_number=n):
            try:
                commitment, cards = await self.system.dealer.start_hand(
                    self.actor.table_id, n, None, self.status.waiting)
            except Refused as exc:
                log.error("dealer_refused_start", hand_number=n, reason=exc.reason)
                return 2.0
            self.status.resumed()
            if self.actor.version == version:
                await self.actor.own(Play(StartHand(
                    hand_number=n, deck_commitment=commitment, card_commitment=cards)),
                    f"h{n}:start")
        return None

    async def _drive_hand(self) -> float | None:
        actor, room = self.actor, self.actor.room
        hand = room.table.hand
        assert hand is not None
        n, version = hand.hand_number, room.version
        waiting = self.status.waiting
        try:
            step = DEALER_STEPS.get(hand.phase)
            if step is not None:
                # A step for the events just appended: its trace links to their append.
                with linked(actor.table_id, step, hand_number=n):
                    return await self._deal_or_reveal()
        except Unreachable as exc:
            with linked(actor.table_id, "table.void", hand_number=n):
                log.error("hand_voided", hand_number=n, reason=f"{exc.service} unreachable")
                await actor.own(Play(VoidHand(reason=f"{exc.service} unreachable")),
                                f"h{n}:void")
            metrics.HANDS_VOIDED.inc()
            self.status.resumed()
            return None
        except Refused as exc:
            log.error("dealer_refused", hand_number=n, code=exc.code.name, reason=exc.reason)
            waiting(f"dealer refused: {exc.reason or exc.code.name}")
            self.status.answered()
            return 2.0
        if hand.phase == Phase.BETTING and hand.to_act:
            seat = hand.to_act
            if seat in room.leaving:  # checked or folded at its turn, no clock run
                await actor.own(Play(leaving_action(room, seat)), f"h{n}:leave:{version}")
                return None
            now = self.system.clock()
            due, fresh = deadline(room, now)
            if fresh is not None:  # a log older than clocks: a full turn from now
                actor.hold_turn(fresh)
            if due is not None and now >= due:
                with linked(actor.table_id, "table.timeout", hand_number=n, seat=seat):
                    timed_out = await actor.own(Play(TimeOut(seat=seat)),
                                                f"h{n}:timeout:{version}")
                if timed_out:
                    metrics.TURN_TIMEOUTS.inc()
                return None
            return None if due is None else due - now
        return 1.0

    def _waiting(self, why: str) -> None:
        """The dealer is not answering yet: the watchers get what was held for its cards
        (:meth:`TablePort.release_held`), and the table's status says it waits."""
        self.actor.release_held()
        self.status.waiting(why)

    async def _deal_or_reveal(self) -> float | None:
        """Deal the cards due, or turn the hands up (a reveal, a showdown)."""
        actor, room = self.actor, self.actor.room
        hand = room.table.hand
        assert hand is not None
        n, version = hand.hand_number, room.version
        dealer, waiting = self.system.dealer, self._waiting
        if hand.phase == Phase.DEALING:
            plan = rules.pending_deal(room.table)
            if plan is None:
                return 1.0
            # The outage clock starts here, at the first call the hand waits on (a
            # wake-up in a betting round starts none: it waits on nobody).
            give_up = self.status.give_up_after(room.settings.outage_limit_s, n)
            deal = await dealer.deal(actor.table_id, n, plan, give_up, waiting)
            self.status.resumed()
            if actor.version == version:
                await actor.own(Play(deal), f"h{n}:deal:{int(plan.street)}")
            return None
        give_up = self.status.give_up_after(room.settings.outage_limit_s, n)
        hands = await dealer.reveal(actor.table_id, n, (), give_up, waiting)
        self.status.resumed()
        if actor.version != version:
            return None
        if hand.phase == Phase.REVEAL:
            await actor.own(Play(RevealHands(hands=hands)), f"h{n}:reveal")
        else:
            in_hand = {p.seat for p in hand.in_hand}
            await actor.own(Play(Showdown(
                hands=hands, muck_requests=frozenset(room.muck & in_hand))),
                f"h{n}:showdown")
        return None
