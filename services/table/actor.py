"""One table, owned by this process: its folded state, the commands that change it, and the
driver that plays the hand (DESIGN 5a).

Every change goes the same way, live or recovered: decide with the rules, append at the
expected version (one unit of work: :meth:`TableActor.commit`), fold the appended envelopes
with :meth:`TableActor._apply`, wake the driver. The driver asks the rules what is pending —
cards to deal, hands to turn up, a clock to run, a hand to settle, the next hand to start —
and does it; calls to the dealer and the wallet are made outside the lock and their results
committed only if the table has not moved meanwhile (else they are asked again: every such call
is idempotent). A restart loads the log and runs the same driver, so there is one code path.

The table never holds a face-down card before showdown: the dealer's Deal reply carries down
cards as "dealt" only, and :mod:`table.clients` drops any value it might carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import structlog
from redis.typing import EncodableT, FieldT

import rules
from rules import Command, Event, Phase, TableState, decide, evolve, initial_state
from rules.commands import (
    AddChips,
    LeaveSeat,
    OpenTable,
    RevealHands,
    Showdown,
    SitDown,
    SitOut,
    StartHand,
    TimeOut,
    VoidHand,
)
from rules.errors import RuleViolation
from rules.events import (
    ActionTimedOut,
    BetMade,
    BringInPosted,
    Called,
    Checked,
    Completed,
    Folded,
    HandEnded,
    HandStarted,
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    Raised,
)
from rules.settlement import settlement as settle_query
from rules.streets import Street
from stud.v1 import wallet_pb2 as wpb
from stud.v1.envelope_pb2 import EventEnvelope, TurnClock
from studkit import keys
from studkit.errors import FailedPrecondition
from studkit.mapping import envelope_for, event_from_envelope
from studkit.redis_client import Client
from studkit.repository import TableRepository
from studkit.store import AppendResult, EventStore, NotOwner, StreamConflict, TrimmedRange
from studkit.uow import unit_of_work
from table.clients import DealerClient, Refused, Unreachable, WalletClient, key
from table.model import TableSettings

log = structlog.get_logger("table")

ACTIONS: Final = (BringInPosted, Completed, BetMade, Raised, Called, Checked, Folded,
                  ActionTimedOut)
SEATINGS_KEPT: Final = 200
"""Hands whose seating (who was dealt in where) a snapshot keeps, for hand histories."""
STATUS_OPEN: Final = "open"
STATUS_WAITING: Final = "waiting"
STATUS_STOPPED: Final = "stopped"
STATUS_CLOSED: Final = "closed"


class Stale(FailedPrecondition):
    """Raised when a command was decided for an older state of the table."""

    default_reason = "stale"


class WatcherTooSlow(Exception):
    """Raised in a watcher that fell too far behind the table; it resumes from its last
    sequence (``RESOURCE_EXHAUSTED``)."""

    reason = "watcher_too_slow"


def fingerprint(*parts: object) -> str:
    """A command's content hash for content-checked idempotency."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else str(part).encode())
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


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


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ts(envelope_time: object) -> float:
    return float(envelope_time.ToMicroseconds()) / 1e6  # type: ignore[attr-defined]


@dataclass(eq=False)
class Watcher:
    """One live viewer's inbox: appended envelopes, bounded."""

    limit: int
    queue: asyncio.Queue[EventEnvelope] = field(init=False)
    overflowed: bool = False

    def __post_init__(self) -> None:
        self.queue = asyncio.Queue(maxsize=self.limit)

    def offer(self, envelopes: Sequence[EventEnvelope]) -> None:
        for envelope in envelopes:
            if self.overflowed:
                return
            try:
                self.queue.put_nowait(envelope)
            except asyncio.QueueFull:
                self.overflowed = True
                # Wake a consumer blocked on an empty queue is not needed: it is full.


@dataclass
class Intents:
    """What seats asked for that applies later: leave after the hand, a top-up after the
    hand, muck when allowed. Kept in Redis beside the stream so an owner's restart keeps
    them."""

    leaving: dict[int, str] = field(default_factory=dict)
    topups: dict[int, tuple[str, int, str]] = field(default_factory=dict)
    """seat -> (player, amount, wallet key)."""
    muck: set[int] = field(default_factory=set)
    sitdowns: dict[int, tuple[str, int, str, str]] = field(default_factory=dict)
    """seat -> (player, buy-in, command id, fingerprint): a sit-down whose buy-in may have
    moved at the wallet before its seat is recorded (written before the wallet is called)."""
    cashouts: dict[int, tuple[str, str]] = field(default_factory=dict)
    """seat -> (player, wallet key): a seat stood up whose escrow is still to go back to its
    player (written before the wallet is called; paid between hands if the wallet was
    unreachable then)."""


@dataclass
class ActorDeps:
    """What a table needs from the outside."""

    store: EventStore
    redis: Client
    dealer: DealerClient
    wallet: WalletClient
    clock: Callable[[], float] = time.time
    watcher_buffer: int = 1000
    snapshot_every: int = 25
    """Hands between snapshots (taken at a hand boundary, after the settlement)."""
    on_status: Callable[[str, str, str], None] | None = None
    """(table id, status, reason) whenever the status changes (metrics)."""


class TableActor:
    """One table: state, commands, driver, watchers."""

    def __init__(self, table_id: str, deps: ActorDeps, settings: TableSettings) -> None:
        self.table_id = table_id
        self.deps = deps
        self.settings = settings
        self.state: TableState = initial_state()
        self.version = 0
        self.lock = asyncio.Lock()
        self.wake = asyncio.Event()
        self.turn: TurnClock | None = None
        self.banks: dict[int, int] = {}
        self.seatings: dict[int, dict[int, str]] = {}
        self.timeout_streak: dict[int, int] = {}
        self.timed_out: set[int] = set()
        self.sat_out_since: dict[int, float] = {}
        self.departures: dict[str, tuple[int, float]] = {}
        self.hand_started_at: deque[float] = deque(maxlen=500)
        self.last_hand_ended_at = 0.0
        self.intents = Intents()
        self.sagas: dict[int, int] = {}
        """seat -> money moves the room's calls have in flight for it (a sit-down, a
        top-up, a leave: the wallet moves first, then the log records): a reconciliation
        meanwhile passes over the seat (see :meth:`saga`)."""
        self.settled = 0
        self.status = STATUS_OPEN
        self.status_reason = ""
        self.closed = False
        self.repaired = False
        self.watchers: set[Watcher] = set()
        self.task: asyncio.Task[None] | None = None
        self._outage_since: float | None = None
        self.snapshot_hand = 0
        self.epoch: int | None = None
        """The fencing epoch of this replica's lease on the table (None: no ownership)."""
        self.fenced = False
        """Set when an append was refused as not the owner's: this actor must stop."""
        self.stopping = False
        """Set by :meth:`stop`: the driver loop ends."""

    # --- keys beside the stream ----------------------------------------------------------

    def _key(self, suffix: str) -> str:
        return keys.table_key(self.table_id, suffix)

    async def _save_intents(self) -> None:
        mapping: dict[FieldT, EncodableT] = {}
        for seat, player in self.intents.leaving.items():
            mapping[f"leave:{seat}"] = player
        for seat, (player, amount, wkey) in self.intents.topups.items():
            mapping[f"topup:{seat}"] = f"{player} {amount} {wkey}"
        for seat in self.intents.muck:
            mapping[f"muck:{seat}"] = "1"
        for seat, (player, amount, cid, fp) in self.intents.sitdowns.items():
            mapping[f"sit:{seat}"] = f"{player} {amount} {cid} {fp}"
        for seat, (player, wkey) in self.intents.cashouts.items():
            mapping[f"cashout:{seat}"] = f"{player} {wkey}"
        pipe = self.deps.redis.pipeline(transaction=True)
        pipe.delete(self._key("intents"))
        if mapping:
            pipe.hset(self._key("intents"), mapping=mapping)
        await pipe.execute()

    async def _load_aux(self) -> None:
        raw = await self.deps.redis.hgetall(self._key("intents"))
        for k, v in raw.items():
            kind, _, seat = _text(k).partition(":")
            value = _text(v)
            if kind == "leave":
                self.intents.leaving[int(seat)] = value
            elif kind == "topup":
                player, amount, wkey = value.split(" ")
                self.intents.topups[int(seat)] = (player, int(amount), wkey)
            elif kind == "muck":
                self.intents.muck.add(int(seat))
            elif kind == "sit":
                player, amount, cid, fp = value.split(" ")
                self.intents.sitdowns[int(seat)] = (player, int(amount), cid, fp)
            elif kind == "cashout":
                player, wkey = value.split(" ")
                self.intents.cashouts[int(seat)] = (player, wkey)
        settled = await self.deps.redis.get(self._key("settled"))
        self.settled = int(settled) if settled else 0
        self.closed = bool(await self.deps.redis.get(self._key("closed")))
        if self.closed:
            self._set_status(STATUS_CLOSED, "closed by an operator")

    # --- loading and folding -------------------------------------------------------------

    async def load(self) -> None:
        """Load the table through the repository (its snapshot, then the events after it,
        folded by :meth:`_apply`) and its intents."""
        loaded = await TableRepository(self.deps.store).load(self.table_id)
        self.state, self.version = loaded.state, loaded.version
        self._restore(loaded.extra)
        self.snapshot_hand = loaded.state.hands_started
        for stored in loaded.after:
            self._apply(stored.envelope)
        await self._load_aux()

    def _extra(self) -> dict[str, object]:
        """The room's own data derived from the log, saved beside a snapshot."""
        recent = sorted(self.seatings)[-SEATINGS_KEPT:]
        return {
            "banks": self.banks, "timeout_streak": self.timeout_streak,
            "sat_out_since": self.sat_out_since,
            "departures": {p: list(v) for p, v in self.departures.items()},
            "hand_started_at": list(self.hand_started_at),
            "last_hand_ended_at": self.last_hand_ended_at,
            "seatings": {n: self.seatings[n] for n in recent},
        }

    def _restore(self, extra: dict[str, Any]) -> None:
        def by_seat(name: str, kind: type) -> dict[int, Any]:
            return {int(k): kind(v) for k, v in extra.get(name, {}).items()}

        self.banks = by_seat("banks", int)
        self.timeout_streak = by_seat("timeout_streak", int)
        self.sat_out_since = by_seat("sat_out_since", float)
        self.departures = {p: (int(v[0]), float(v[1]))
                           for p, v in extra.get("departures", {}).items()}
        self.hand_started_at.extend(float(t) for t in extra.get("hand_started_at", []))
        self.last_hand_ended_at = float(extra.get("last_hand_ended_at", 0.0))
        self.seatings = {int(n): {int(s): str(p) for s, p in seats.items()}
                         for n, seats in extra.get("seatings", {}).items()}

    async def _maybe_snapshot(self) -> None:
        """Every ``snapshot_every`` hands, at a hand boundary, save a snapshot."""
        hands = self.state.hands_started
        if self.state.hand_in_progress or hands - self.snapshot_hand < self.deps.snapshot_every:
            return
        await TableRepository(self.deps.store).save_snapshot(
            self.table_id, self.version, self.state, self._extra())
        self.snapshot_hand = hands
        log.info("snapshot_saved", version=self.version, hands=hands)

    def _apply(self, envelope: EventEnvelope) -> None:
        """Fold one stored envelope into the state and the room's bookkeeping."""
        event = event_from_envelope(envelope)
        at = _ts(envelope.occurred_at)
        before = self.state
        if isinstance(event, HandStarted):
            self.seatings[event.hand_number] = {
                s: seat.player_id for s in event.seats
                if (seat := before.seat(s)) is not None}
            self.hand_started_at.append(at)
            self.timed_out = set()
        if isinstance(event, ACTIONS) and self.turn is not None and event.seat == self.turn.seat:
            used_ms = max(0, int((at - _ts(self.turn.action_deadline)) * 1000))
            self.banks[event.seat] = max(0, int(self.turn.time_bank_ms) - used_ms)
            self.turn = None
        if isinstance(event, ActionTimedOut) and event.seat not in self.intents.leaving:
            self.timed_out.add(event.seat)
        self.state = evolve(self.state, event)
        self.version = envelope.sequence or self.version + 1
        if isinstance(event, HandEnded):
            self.last_hand_ended_at = at
            self.turn = None
            for s in self.seatings.get(event.hand_number, {}):
                self.timeout_streak[s] = self.timeout_streak.get(s, 0) + 1 if (
                    s in self.timed_out) else 0
        elif isinstance(event, PlayerSeated):
            self.banks[event.seat] = int(self.settings.time_bank_s * 1000)
            self.timeout_streak.pop(event.seat, None)
            self.sat_out_since.pop(event.seat, None)
        elif isinstance(event, PlayerLeft):
            self.departures[event.player_id] = (event.stack, at)
            self.sat_out_since.pop(event.seat, None)
            self.timeout_streak.pop(event.seat, None)
        elif isinstance(event, PlayerSatOut):
            self.sat_out_since[event.seat] = at
        elif isinstance(event, PlayerSatIn):
            self.sat_out_since.pop(event.seat, None)
            self.timeout_streak.pop(event.seat, None)
        if envelope.HasField("turn_clock"):
            self.turn = envelope.turn_clock

    # --- the unit of work ----------------------------------------------------------------

    def _hand_number_for(self, state: TableState, event: Event) -> int:
        if isinstance(event, HandStarted):
            return event.hand_number
        return state.hand.hand_number if state.hand_in_progress and state.hand else 0

    def _envelopes(self, events: Sequence[Event], command_id: str) -> list[EventEnvelope]:
        now = self.deps.clock()
        occurred = datetime.fromtimestamp(now, UTC)
        state = self.state
        out = []
        for event in events:
            out.append(envelope_for(event, table_id=self.table_id,
                                    hand_number=self._hand_number_for(state, event),
                                    command_id=command_id, occurred_at=occurred))
            state = evolve(state, event)
        hand = state.hand
        if out and hand is not None and hand.phase == Phase.BETTING and hand.to_act:
            seat = hand.to_act
            bank = self.banks.get(seat, int(self.settings.time_bank_s * 1000))
            if self.turn is not None and self.turn.seat == seat and not any(
                    isinstance(e, ACTIONS) and e.seat == seat for e in events):
                # The same turn goes on (e.g. a seat sat out meanwhile): keep its clock.
                out[-1].turn_clock.CopyFrom(self.turn)
            else:
                clock = TurnClock(seat=seat, time_bank_ms=bank)
                clock.started_at.FromMicroseconds(int(now * 1e6))
                action_deadline = now + self.settings.action_time_s
                clock.action_deadline.FromMicroseconds(int(action_deadline * 1e6))
                clock.deadline.FromMicroseconds(int((action_deadline + bank / 1000) * 1e6))
                out[-1].turn_clock.CopyFrom(clock)
        return out

    async def commit(self, command: Command, command_id: str, fp: str = "",
                     expected_sequence: int | None = None,
                     precheck: Callable[[TableState], None] | None = None
                     ) -> tuple[AppendResult, list[EventEnvelope]]:
        """Decide ``command`` on the current state and append its events at the current
        version (the lock serialises this process's writers; a conflict means another
        writer appended: reload and decide again). Returns the append's outcome and the
        envelopes it wrote (the recorded ones for a duplicate)."""
        async with self.lock:
            behind = False

            async def load() -> TableState:
                if behind:  # another writer appended: fold what it wrote
                    await self._catch_up()
                return self.state

            def decide_(state: TableState) -> list[EventEnvelope]:
                if expected_sequence is not None and expected_sequence != self.version:
                    raise Stale(f"the table is at sequence {self.version}, not "
                                f"{expected_sequence}")
                if precheck is not None:
                    precheck(state)
                return self._envelopes(decide(state, command), command_id)

            async def save(_state: TableState, envelopes: list[EventEnvelope]
                           ) -> tuple[AppendResult, list[EventEnvelope]]:
                result = await self.deps.store.append(
                    self.table_id, envelopes, self.version, command_id, fp, epoch=self.epoch)
                return result, envelopes

            def lost(_attempt: int, _exc: BaseException) -> None:
                nonlocal behind
                behind = True

            try:
                result, envelopes = await unit_of_work(
                    load, decide_, save, conflicts=(StreamConflict,), on_conflict=lost)
            except NotOwner as exc:
                # Another replica took the table over: the fence refused this append.
                log.warning("stale_append_refused", table_id=self.table_id, epoch=self.epoch,
                            current=exc.current)
                self.fenced = True
                self.wake.set()
                raise
            except (RuleViolation, FailedPrecondition):
                # A retry of a command that was applied is refused by today's state (not
                # your turn, stale): answer with the recorded outcome instead.
                recorded = await self.deps.store.recorded(self.table_id, command_id, fp)
                if recorded is None:
                    raise
                return recorded, await self._recorded_envelopes(recorded)
            if result.duplicate:
                return result, await self._recorded_envelopes(result)
            first = result.version - len(envelopes)
            for offset, envelope in enumerate(envelopes, start=1):
                envelope.sequence = first + offset
                envelope.table_id = self.table_id
                envelope.command_id = command_id
                self._apply(envelope)
            for watcher in list(self.watchers):
                watcher.offer(envelopes)
            self.wake.set()
            return result, envelopes

    async def _catch_up(self) -> None:
        for stored in await self.deps.store.read(self.table_id, from_version=self.version):
            self._apply(stored.envelope)
            for watcher in list(self.watchers):
                watcher.offer([stored.envelope])

    async def _recorded_envelopes(self, result: AppendResult) -> list[EventEnvelope]:
        count = len(result.stream_ids)
        if not count:
            return []
        first = result.version - count
        try:
            stored = await self.deps.store.read(self.table_id, from_version=first, strict=True)
        except TrimmedRange:
            return []  # the command's events were archived: the outcome is its version

        return [s.envelope for s in stored[:count]]

    async def system(self, command: Command, command_id: str) -> bool:
        """Commit a command of the table itself; False when the rules refuse it now (the
        driver looks again)."""
        try:
            await self.commit(command, f"s:{command_id}")
        except RuleViolation as exc:
            log.info("system_command_refused", command=type(command).__name__,
                     reason=exc.reason.value)
            return False
        return True

    # --- status --------------------------------------------------------------------------

    def _set_status(self, status: str, reason: str) -> None:
        if (status, reason) != (self.status, self.status_reason):
            self.status, self.status_reason = status, reason
            log.info("table_status", table_id=self.table_id, status=status, reason=reason)
            if self.deps.on_status is not None:
                self.deps.on_status(self.table_id, status, reason)

    def _waiting(self, reason: str) -> None:
        if self.status in (STATUS_OPEN, STATUS_WAITING):
            self._set_status(STATUS_WAITING, reason)

    def _resumed(self) -> None:
        self._outage_since = None
        if self.status == STATUS_WAITING:
            self._set_status(STATUS_CLOSED if self.closed else STATUS_OPEN, "")

    # --- the driver ----------------------------------------------------------------------

    def start(self) -> None:
        """Run the driver in the background."""
        # A fresh context: the driver must not inherit the log context of the RPC that
        # happened to create the table.
        self.task = asyncio.create_task(self._run(), name=f"table:{self.table_id}",
                                        context=contextvars.Context())

    async def stop(self) -> None:
        """Stop the driver. Cancelled until it is done: on Python 3.11 ``asyncio.wait_for``
        (inside redis-py) can swallow a cancel that lands as a command completes, so one
        cancel is not enough; the ``stopping`` flag ends the loop in that case too."""
        self.stopping = True
        await cancel_until_done(self.task)

    async def _run(self) -> None:
        structlog.contextvars.bind_contextvars(table_id=self.table_id)
        while not self.stopping:
            await self._run_once()

    async def _run_once(self) -> None:
        """One turn of the driver loop: a step, then wait as long as it says (or until a
        change wakes the driver)."""
        try:
            delay = await self.step()
        except asyncio.CancelledError:
            raise
        except NotOwner:
            self.fenced = True
            self.stopping = True
            log.warning("table_fenced", epoch=self.epoch)
            return
        except Unreachable as exc:
            log.warning("table_waiting", detail=str(exc))
            delay = 0.5
        except Exception:
            log.exception("table_step_failed")
            delay = 1.0
        if delay is None:
            return
        self.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), timeout=max(0.0, delay))

    def _give_up_after(self) -> float:
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
        return max(0.0, self.settings.outage_limit_s - (now - self._outage_since))

    async def step(self) -> float | None:
        """Do the next thing the table needs; None to look again at once, else how long to
        wait (unless woken)."""
        state, version = self.state, self.version
        hand = state.hand
        if not state.opened:
            return 5.0
        if hand is not None and state.hand_in_progress:
            return await self._drive_hand(state, version)
        if self.status == STATUS_STOPPED:
            return 5.0
        if hand is not None and hand.is_over and self.settled < hand.hand_number:
            await self._settle(state)
            return None
        if not self.repaired:
            await self._repair()
            self.repaired = True
            return None
        if await self._between_hands(state):
            return None
        return await self._maybe_start(state)

    async def _drive_hand(self, state: TableState, version: int) -> float | None:
        hand = state.hand
        assert hand is not None
        n = hand.hand_number
        on_wait = self._waiting
        try:
            if hand.phase == Phase.DEALING:
                plan = rules.pending_deal(state)
                if plan is None:
                    return 1.0
                deal = await self.deps.dealer.deal(self.table_id, n, plan,
                                                   self._give_up_after(), on_wait)
                self._resumed()
                if self.version == version:
                    await self.system(deal, f"h{n}:deal:{int(plan.street)}")
                return None
            if hand.phase in (Phase.REVEAL, Phase.SHOWDOWN):
                hands = await self.deps.dealer.reveal(self.table_id, n, (),
                                                      self._give_up_after(), on_wait)
                self._resumed()
                if self.version != version:
                    return None
                if hand.phase == Phase.REVEAL:
                    await self.system(RevealHands(hands=hands), f"h{n}:reveal")
                else:
                    in_hand = {p.seat for p in hand.in_hand}
                    await self.system(
                        Showdown(hands=hands,
                                 muck_requests=frozenset(self.intents.muck & in_hand)),
                        f"h{n}:showdown")
                return None
        except Unreachable as exc:
            await self._void(n, f"{exc.service} unreachable")
            return None
        except Refused as exc:
            log.error("dealer_refused", hand_number=n, code=exc.code.name, reason=exc.reason)
            self._waiting(f"dealer refused: {exc.reason or exc.code.name}")
            return 2.0
        if hand.phase == Phase.BETTING and hand.to_act:
            seat = hand.to_act
            if seat in self.intents.leaving:
                await self.system(TimeOut(seat=seat), f"h{n}:leave:{version}")
                return None
            deadline = self.turn_deadline()
            now = self.deps.clock()
            if deadline is not None and now >= deadline:
                await self.system(TimeOut(seat=seat), f"h{n}:timeout:{version}")
                return None
            return None if deadline is None else deadline - now
        return 1.0

    def turn_deadline(self) -> float | None:
        """When the turn of the seat to act runs out (from the log's clock)."""
        hand = self.state.hand
        if hand is None or hand.phase != Phase.BETTING or not hand.to_act:
            return None
        if self.turn is not None and self.turn.seat == hand.to_act:
            return _ts(self.turn.deadline)
        # No clock in the log (it predates clocks): give a full turn from now.
        bank = self.banks.get(hand.to_act, int(self.settings.time_bank_s * 1000))
        clock = TurnClock(seat=hand.to_act, time_bank_ms=bank)
        now = self.deps.clock()
        clock.started_at.FromMicroseconds(int(now * 1e6))
        clock.action_deadline.FromMicroseconds(int((now + self.settings.action_time_s) * 1e6))
        clock.deadline.FromMicroseconds(
            int((now + self.settings.action_time_s + bank / 1000) * 1e6))
        self.turn = clock
        return _ts(clock.deadline)

    async def _void(self, hand_number: int, reason: str) -> None:
        log.error("hand_voided", hand_number=hand_number, reason=reason)
        await self.system(VoidHand(reason=reason), f"h{hand_number}:void")
        self._resumed()

    # --- money ---------------------------------------------------------------------------

    async def _settle(self, state: TableState) -> None:
        settlement = settle_query(state)
        hand = state.hand
        assert hand is not None and settlement is not None
        config = state.config
        assert config is not None
        request = wpb.SettleHandRequest(
            table_id=self.table_id, hand_number=hand.hand_number, rake=settlement.rake,
            ended_on_street=wpb.SettleHandRequest.Street.Value(
                f"STREET_{(settlement.ended_on or Street.THIRD).name}"),
            seats=[wpb.SettlementSeat(seat=s.seat, player_id=s.player_id,
                                      amount_in=s.amount_in, amount_won=s.amount_won)
                   for s in settlement.seats])
        rake = getattr(config, "rake", None)
        if rake is not None:
            request.rake_policy.percent_bps = rake.percent_bps
            request.rake_policy.cap = rake.cap
        await self.deps.wallet.settle(request, on_wait=self._waiting)
        await self.deps.redis.set(self._key("settled"), hand.hand_number)
        self.settled = hand.hand_number
        self._resumed()
        log.info("hand_settled", hand_number=hand.hand_number, rake=settlement.rake)
        if self.repaired:
            ok = await self.reconcile()
        else:
            # The first settlement since a (re)start: what a crash left (an escrow with no
            # seat, a top-up paid but not added) is repaired before the reconciliation,
            # never taken for a mismatch that stops the table.
            ok = await self._repair()
            self.repaired = True
        if ok:
            await self._maybe_snapshot()

    async def reconcile(self) -> bool:
        """Every seat's escrow must equal its stack; else the table stops dealing."""
        reply = await self.deps.wallet.reconcile(self.table_id, on_wait=self._waiting)
        escrows = {s.seat: (s.player_id, s.balance) for s in reply.seats}
        wrong = []
        for number in range(1, len(self.state.seats) + 1):
            seat = self.state.seat(number)
            held = escrows.get(number)
            want = None if seat is None else (seat.player_id, seat.stack)
            if number in self.sagas:
                continue  # a sit-down, top-up or leave is between the wallet and the log
            if held is not None and self.intents.cashouts.get(number, ("",))[0] == held[0]:
                continue  # stood up, to be paid out before the next hand
            if want is None and held is not None and self.intents.sitdowns.get(
                    number, ("", 0))[:2] == held:
                continue  # a buy-in that landed after its call gave up: seated next
            topup = self.intents.topups.get(number)
            if want is not None and topup is not None and topup[0] == want[0] \
                    and held == (want[0], want[1] + topup[1]):
                continue  # a top-up paid while a hand was on: added before the next one
            if held != want and not (held is None and want is not None and want[1] == 0):
                wrong.append(f"seat {number}: escrow {held} vs table {want}")
        if wrong:
            self._set_status(STATUS_STOPPED, "; ".join(wrong))
            log.error("reconciliation_failed", detail=self.status_reason)
            return False
        return True

    async def _repair(self) -> bool:
        """After a restart: money moved for a seat the log does not hold (a crash between
        the wallet and the append) completes the sit-down it was for, or else is refunded;
        a top-up paid but not added is added."""
        reply = await self.deps.wallet.reconcile(self.table_id, on_wait=self._waiting)
        for held in reply.seats:
            if held.seat in self.intents.cashouts:
                continue  # a seat stood up: paid out between hands
            seat = self.state.seat(held.seat) if held.seat <= len(self.state.seats) else None
            if seat is None and await self._complete_sit_down(held.seat, held.player_id,
                                                              held.balance):
                continue
            if seat is None or seat.player_id != held.player_id:
                log.warning("orphan_escrow_refunded", seat=held.seat, amount=held.balance)
                await self.deps.wallet.cash_out(
                    held.player_id, self.table_id, held.seat,
                    key(self.table_id, "orphan", held.seat, held.player_id, self.version),
                    on_wait=self._waiting)
            elif held.balance > seat.stack:
                topup = self.intents.topups.get(held.seat)
                if topup is not None and topup[0] == held.player_id:
                    await self._add_chips(held.seat, held.balance - seat.stack, topup[2])
        return await self.reconcile()

    @contextlib.asynccontextmanager
    async def saga(self, seat: int) -> AsyncIterator[None]:
        """Mark a money move of ``seat`` in flight (wallet, then log) for its duration."""
        self.sagas[seat] = self.sagas.get(seat, 0) + 1
        try:
            yield
        finally:
            self.sagas[seat] -= 1
            if not self.sagas[seat]:
                del self.sagas[seat]

    async def _complete_sit_down(self, seat: int, player: str, escrow: int) -> bool:
        """Record the sit-down whose buy-in the wallet holds (with the client's command id,
        so its retry gets this outcome); False if there is none or the rules refuse it."""
        pending = self.intents.sitdowns.get(seat)
        if pending is None or pending[:2] != (player, escrow):
            return False
        _player, amount, cid, fp = pending
        try:
            await self.commit(SitDown(seat=seat, player_id=player, stack=amount), cid, fp)
        except (RuleViolation, FailedPrecondition):
            return False
        log.info("sit_down_completed", seat=seat, amount=amount)
        await self.drop_sit_down(seat, cid)
        return True

    async def _resolve_sit_down(self, seat: int) -> None:
        """A sit-down whose call gave up on the wallet (no call is on it now): seated if
        its buy-in reached the wallet after all, refunded if it cannot be seated, else
        forgotten."""
        player, amount, cid, _fp = self.intents.sitdowns[seat]
        reply = await self.deps.wallet.reconcile(self.table_id, on_wait=self._waiting)
        held = {s.seat: (s.player_id, s.balance) for s in reply.seats}.get(seat)
        if held == (player, amount) and not await self._complete_sit_down(seat, player,
                                                                           amount):
            log.warning("sit_down_refunded", seat=seat, amount=amount)
            await self.deps.wallet.cash_out(player, self.table_id, seat,
                                            key(self.table_id, cid, "refund"),
                                            on_wait=self._waiting)
        await self.drop_sit_down(seat, cid)

    async def drop_sit_down(self, seat: int, command_id: str) -> None:
        """Forget the sit-down intent of ``command_id`` (a newer one of the seat stays)."""
        pending = self.intents.sitdowns.get(seat)
        if pending is not None and pending[2] == command_id:
            del self.intents.sitdowns[seat]
            await self._save_intents()

    async def _add_chips(self, seat: int, amount: int, wallet_key: str
                         ) -> tuple[AppendResult, list[EventEnvelope]]:
        """Record a top-up the wallet has made (one command id per wallet key: whoever
        records it first, the seat's RPC or the driver, the other gets the duplicate) and
        drop its intent (only this one: a newer top-up of the seat stays)."""
        done = await self.commit(AddChips(seat=seat, amount=amount), f"s:topup:{wallet_key}")
        if (pending := self.intents.topups.get(seat)) is not None and pending[2] == wallet_key:
            del self.intents.topups[seat]
            await self._save_intents()
        return done

    async def leave(self, seat: int, command_id: str, wait_s: float | None = None
                    ) -> list[EventEnvelope]:
        """Stand ``seat`` up and cash it out (between hands, or not dealt in). With
        ``wait_s`` an unreachable wallet is waited for that long at most: the cash-out
        stays an intent, paid by the driver between hands."""
        player = self.state.seat(seat)
        _result, written = await self.commit(LeaveSeat(seat=seat), command_id)
        left = [e for e in written if e.event_type == "PlayerLeft"]
        self.intents.leaving.pop(seat, None)
        self.intents.muck.discard(seat)
        if player is not None and left:
            self.intents.cashouts[seat] = (
                player.player_id, key(self.table_id, "leave", seat, left[0].sequence))
        await self._save_intents()
        if seat in self.intents.cashouts:
            await self._cash_out(seat, wait_s)
        return written

    async def _cash_out(self, seat: int, wait_s: float | None = None) -> None:
        """Pay the escrow of a seat stood up back to its player (with the intent's key: a
        repeat is a replay) and drop the intent; an unreachable wallet leaves it."""
        player, wallet_key = self.intents.cashouts[seat]
        try:
            await self.deps.wallet.cash_out(player, self.table_id, seat, wallet_key,
                                            give_up_after=wait_s, on_wait=self._waiting)
        except Unreachable as exc:
            log.warning("cash_out_pending", seat=seat, detail=str(exc))
            self.wake.set()
            return
        except Refused as exc:  # the seat is no longer the player's at the wallet: paid
            log.warning("cash_out_refused", seat=seat, reason=exc.reason)
        self._resumed()
        if self.intents.cashouts.get(seat) == (player, wallet_key):
            del self.intents.cashouts[seat]
            await self._save_intents()

    async def _between_hands(self, state: TableState) -> bool:
        """Leaves, top-ups, sit-outs due between hands; True if something was done."""
        for seat in sorted(self.intents.cashouts):
            await self._cash_out(seat)
            return True
        for seat in sorted(set(self.intents.sitdowns) - set(self.sagas)):
            await self._resolve_sit_down(seat)
            return True
        for seat in sorted(self.intents.leaving):
            await self.leave(seat, f"s:leave:{seat}:{self.version}")
            return True
        for seat, (player, amount, wkey) in sorted(self.intents.topups.items()):
            holder = state.seat(seat)
            if holder is None or holder.player_id != player:
                self.intents.topups.pop(seat)
                await self._save_intents()
                return True
            try:
                await self.deps.wallet.buy_in(player, self.table_id, seat, amount, wkey)
            except Refused as exc:
                log.info("topup_refused", seat=seat, reason=exc.reason)
                self.intents.topups.pop(seat)
                await self._save_intents()
                return True
            await self._add_chips(seat, amount, wkey)
            return True
        limit = self.settings.timeouts_before_sit_out
        for number in range(1, len(state.seats) + 1):
            seat_ = state.seat(number)
            if seat_ is None:
                continue
            if not seat_.sitting_out and self.timeout_streak.get(number, 0) >= limit:
                self.timeout_streak[number] = 0
                if await self.system(SitOut(seat=number), f"auto-sitout:{number}:{self.version}"):
                    return True
            since = self.sat_out_since.get(number)
            if seat_.sitting_out and since is not None and (
                    self.deps.clock() - since >= self.settings.sit_out_limit_s):
                await self.leave(number, f"s:stood-up:{number}:{self.version}")
                return True
            if self.closed:
                await self.leave(number, f"s:closed:{number}:{self.version}")
                return True
        return False

    async def _maybe_start(self, state: TableState) -> float | None:
        if self.closed:
            return 5.0
        n = state.hands_started + 1
        try:
            decide(state, StartHand(hand_number=n))
        except RuleViolation:
            # Not enough eligible players: a command wakes the driver, or a seat sitting
            # out reaches the table's limit (it is stood up then, not at the next look).
            now = self.deps.clock()
            return max(0.0, min([5.0, *(
                since + self.settings.sit_out_limit_s - now
                for number, since in self.sat_out_since.items()
                if (seat := state.seat(number)) is not None and seat.sitting_out)]))
        wait = self.last_hand_ended_at + self.settings.next_hand_delay_ms / 1000 - (
            self.deps.clock())
        if wait > 0:
            return wait
        version = self.version
        try:
            commitment = await self.deps.dealer.start_hand(self.table_id, n, None, self._waiting)
        except Refused as exc:
            log.error("dealer_refused_start", hand_number=n, reason=exc.reason)
            return 2.0
        self._resumed()
        if self.version == version:
            await self.system(StartHand(hand_number=n, deck_commitment=commitment),
                              f"h{n}:start")
        return None

    # --- commands from the room ----------------------------------------------------------

    async def open(self, command: OpenTable, command_id: str, fp: str
                   ) -> tuple[AppendResult, list[EventEnvelope]]:
        """Record the table's opening."""
        return await self.commit(command, command_id, fp)

    async def close(self) -> None:
        """No further hand; everyone is stood up after the current one."""
        await self.deps.redis.set(self._key("closed"), "1")
        self.closed = True
        self._set_status(STATUS_CLOSED, "closed by an operator")
        self.wake.set()

    async def set_intent(self, change: Callable[[Intents], None]) -> None:
        """Change the seats' intents and persist them."""
        async with self.lock:
            change(self.intents)
            await self._save_intents()
        self.wake.set()

    def hands_per_hour(self) -> int:
        """Hands started over the last hour."""
        cutoff = self.deps.clock() - 3600
        return sum(1 for t in self.hand_started_at if t >= cutoff)
