"""One table owned by this process: its room (folded from its stream), the one write path,
and the watchers (DESIGN §5b). The actor commits and fans out; what is pending is the
driver's business (:mod:`table.driver`), money the money module's (:mod:`table.money`).

Every change goes one way, live or recovered: the room decides once (:func:`table.room.decide`),
the envelopes are sealed once, appended fenced, conditionally and idempotently
(:func:`studkit.commit.commit`), and the state that deciding produced becomes the table's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce

import structlog

from rules import Phase
from rules.errors import RuleViolation
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.commit import Append, Committed, Proposal, StreamWriter, commit
from studkit.errors import FailedPrecondition
from studkit.mapping import is_room_event
from studkit.redis_client import Client
from studkit.repository import TableRepository
from studkit.store import AppendResult, CommandIdReused, EventStore, NotOwner, TrimmedRange
from table import metrics
from table.clock import as_logged, next_turn
from table.codec import decode, decode_command, encode
from table.inbox import Watcher
from table.room import Room, RoomCommand, Turn, apply, decide
from table.room_events import TurnStarted
from table.room_state import updated
from table.snapshot import from_extra, to_extra

__all__ = ["ActorDeps", "Asked", "Stale", "TableActor", "decode"]
"""(``decode``, the codec's, is read from here by the simulator's checks.)"""

log = structlog.get_logger("table")

FOLLOWED_PHASES = frozenset({Phase.DEALING, Phase.REVEAL, Phase.SHOWDOWN})
"""The phases after which the driver appends again at once, with no player to wait for (the
dealer's cards, a runout's or the showdown's hands, the hand's end)."""
HOLD_S = 2.0
"""The longest an append's game events wait for the driver's next append; the driver gives
them to the watchers as soon as it waits on the dealer or ends a step without appending
(:meth:`TableActor.release_held`), so this is a backstop only."""


REFUSALS: tuple[type[BaseException], ...] = (RuleViolation, FailedPrecondition, NotOwner,
                                            CommandIdReused)
"""What a commit raises when it appended nothing: a refusal (anything else, a cancel or a
store error, may have come after its append landed)."""


class Stale(FailedPrecondition):
    """Raised when a command was decided for an older state of the table."""

    default_reason = "stale"


@dataclass
class ActorDeps:
    """What the actor itself uses: the store, the time its commands are decided at, the
    watchers' buffer and how often it snapshots (the dealer and the wallet are the driver's
    and money's: :class:`table.port.System`)."""

    store: EventStore
    redis: Client
    clock: Callable[[], float] = time.time
    watcher_buffer: int = 1000
    snapshot_every: int = 25


def evolve(room: Room, envelope: EventEnvelope) -> Room:
    """``room`` with one stored envelope folded in: its event (and the turn its clock
    starts, if any) at the envelope's time and sequence. Folding a command's envelopes one
    at a time gives the room its decision made (``tests/sim/test_fold.py``), at no more cost
    than folding them together (17 against 18-19 us an event over 1,300-1,500-event logs of
    the simulator)."""
    return apply(room, decode_command((envelope,)),
                 at=float(envelope.occurred_at.ToMicroseconds()) / 1e6,
                 first_sequence=envelope.sequence)


@dataclass(frozen=True, slots=True)
class Asked:
    """A room command to commit, and the table version its caller decided on (None: any)."""

    command: RoomCommand
    expected: int | None = None


class TableActor(StreamWriter[Room, Asked]):
    """One table's room, its one write path (the writer of its stream) and its watchers."""

    def __init__(self, table_id: str, deps: ActorDeps, epoch: int | None = None) -> None:
        super().__init__(deps.store, table_id)
        self.table_id = table_id
        self.deps = deps
        self.epoch = epoch
        self.room = Room()
        self.lock = asyncio.Lock()
        self.wake = asyncio.Event()
        self.watchers: set[Watcher] = set()
        self.fenced = False
        self.snapshot_hand = 0
        self._held: list[EventEnvelope] = []
        """Game envelopes appended but not yet fanned out: the driver's next append follows
        at once (:data:`FOLLOWED_PHASES`), and the watchers get both in one go (issue 35)."""
        self._release: asyncio.TimerHandle | None = None
        self._following: set[asyncio.Task[None]] = set()
        """The catch-ups after cancelled commits under way (:meth:`_follow_store`)."""

    @property
    def version(self) -> int:
        return self.room.version

    def fence(self) -> None:
        """Note that another owner holds the table now (an append was fenced)."""
        self.fenced = True
        self.release_held()

    def hold_turn(self, turn: Turn) -> None:
        """Give the turn in progress a clock the log does not carry (a log older than
        clocks: a full turn from now), held in memory only."""
        self.room = updated(self.room, {"turn": turn})

    # --- loading -------------------------------------------------------------------------

    async def load(self) -> None:
        """The table from its snapshot (a cache of the fold) and the events after it."""
        loaded = await TableRepository(self.deps.store).load(self.table_id)
        self.room = from_extra(loaded.state, loaded.version, loaded.extra)
        self.snapshot_hand = loaded.state.hands_started
        self.fold([stored.envelope for stored in loaded.after])

    def fold(self, envelopes: Sequence[EventEnvelope]) -> None:
        """Fold stored envelopes in (the next ones of the stream, in order): a plain reduce,
        an envelope at a time (:func:`evolve`)."""
        self.room = reduce(evolve, envelopes, self.room)

    async def catch_up(self) -> None:
        """Fold what the store holds beyond the room: another writer's appends (then this
        one's append is refused anyway), or this one's own whose outcome it never took (its
        reply lost). The driver is woken, as after any append: what it waits for may be
        among them (a hand over, a betting round complete)."""
        stored = await self.deps.store.read(self.table_id, from_version=self.version)
        if stored:
            envelopes = [s.envelope for s in stored]
            self.fold(envelopes)
            self._fan_out(envelopes)
            self.wake.set()

    async def maybe_snapshot(self) -> None:
        """Every ``snapshot_every`` hands, at a hand boundary, save a snapshot."""
        room = self.room
        hands = room.table.hands_started
        if room.table.hand_in_progress or hands - self.snapshot_hand < self.deps.snapshot_every:
            return
        await TableRepository(self.deps.store).save_snapshot(
            self.table_id, room.version, room.table, to_extra(room))
        self.snapshot_hand = hands
        log.info("snapshot_saved", version=room.version, hands=hands)

    # --- the one write path --------------------------------------------------------------

    @property
    def state(self) -> Room:
        return self.room

    def decide(self, command: Asked) -> Proposal[Room]:
        """The events ``command`` causes on the room held, their envelopes (unsealed) and
        the room after them (the turn's clock last)."""
        room, version, expected = self.room, self.version, command.expected
        if expected is not None and not room.visible <= expected <= version:
            raise Stale(f"the table is at sequence {room.visible}, not {expected}")
        now = as_logged(self.deps.clock())
        decision = decide(room, command.command, now)
        events = decision.events
        after = apply(room, events, at=now, first_sequence=version + 1, table=decision.table)
        turn = next_turn(room, after, events, now)
        if turn is not None and events:
            started = TurnStarted(seat=turn.seat, started_at=turn.started_at,
                                  action_deadline=turn.action_deadline,
                                  deadline=turn.deadline, bank_ms=turn.bank_ms)
            events = (*events, started)
            after = updated(after, {"turn": turn})
        hand = room.table.hand
        number = hand.hand_number if hand is not None and room.table.hand_in_progress else 0
        envelopes = encode(events, table_id=self.table_id, hand_number=number, now=now)
        return Proposal(events, envelopes, after)

    async def commit(self, command: RoomCommand, command_id: str, fp: str = "",
                     expected: int | None = None, *, record_empty: bool = True
                     ) -> Committed[Room]:
        """Decide ``command`` and append its events (see the module's doc). A retry of an
        applied command gets the recorded outcome and its envelopes.

        A commit whose caller was cancelled (a client gone, a Play stream ended) or whose
        append failed without a refusal (a store timeout: ``UNAVAILABLE``) may leave an
        append that landed but was not folded: the room then catches up with the store at
        once, in a task of its own (:meth:`_follow_store`), so the table never waits for
        its clock with the store ahead of it, and its watchers get those events (issue
        35's review). The commit itself runs in the caller's task: its caller goes on
        before the driver it wakes (a sit-down marks its saga as carried before the driver
        looks at it)."""
        async with self.lock:
            try:
                return await self._commit(command, command_id, fp, expected, record_empty)
            except REFUSALS:
                raise
            except BaseException:
                self._follow_store()
                raise

    def _follow_store(self) -> None:
        """Catch up with the store (once the lock is free) after a commit was cancelled:
        its append may have landed."""
        following = asyncio.get_running_loop().create_task(self._follow())
        self._following.add(following)
        following.add_done_callback(self._following.discard)

    async def _follow(self) -> None:
        try:
            async with self.lock:
                await self.catch_up()
        except Exception as exc:  # the next command catches up anyway (a conflict)
            log.warning("catch_up_failed", table_id=self.table_id, error=repr(exc))

    async def _commit(self, command: RoomCommand, command_id: str, fp: str,
                      expected: int | None, record_empty: bool) -> Committed[Room]:
        """:meth:`commit`'s body, the lock held."""
        try:
            done = await commit(self, Append(
                Asked(command, expected), command_id, fp, epoch=self.epoch,
                record_empty=record_empty))
        except NotOwner as exc:
            log.warning("stale_append_refused", table_id=self.table_id, epoch=self.epoch,
                        current=exc.current)
            metrics.STALE_APPENDS.inc()
            self.fenced = True
            self.wake.set()
            raise
        except (RuleViolation, FailedPrecondition):
            # A retry of a command that was applied is refused by today's state (not
            # your turn, stale): answer with the recorded outcome instead.
            recorded = await self.deps.store.recorded(self.table_id, command_id, fp)
            if recorded is None:
                raise
            if recorded.version > self.version:
                await self.catch_up()
            return Committed(recorded, await self.recorded_envelopes(recorded), None)
        if done.state is None:
            if done.result.version > self.version:
                # Its own append, applied but its reply lost (a store timeout): the retry
                # is a duplicate, so fold what the store holds, or the driver would ask
                # again for ever (found by the simulator, seed 107).
                await self.catch_up()
            return Committed(done.result, await self.recorded_envelopes(done.result), None)
        self.room = done.state
        self._fan_out(done.envelopes)
        self.wake.set()
        return done

    async def own(self, command: RoomCommand, command_id: str) -> bool:
        """Commit a command of the table itself; False when it is refused now (the driver
        looks again)."""
        try:
            await self.commit(command, f"s:{command_id}", record_empty=False)
        except (RuleViolation, FailedPrecondition) as exc:
            log.info("system_command_refused", command=type(command).__name__,
                     reason=getattr(exc, "reason", ""))
            return False
        return True

    async def recorded_envelopes(self, result: AppendResult) -> list[EventEnvelope]:
        """The envelopes a recorded command wrote (none once archived)."""
        count = len(result.stream_ids)
        if not count:
            return []
        try:
            stored = await self.deps.store.read(self.table_id,
                                                from_version=result.version - count,
                                                strict=True)
        except TrimmedRange:
            return []
        return [s.envelope for s in stored[:count]]

    # --- watchers ------------------------------------------------------------------------

    def subscribe(self) -> Watcher:
        """A new watcher of this table's live envelopes (:meth:`unsubscribe` it)."""
        watcher = Watcher(limit=self.deps.watcher_buffer)
        self.watchers.add(watcher)
        return watcher

    def unsubscribe(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def close_watchers(self) -> None:
        """End every live watch of this table here (the replica let it go), after what was
        held for them."""
        self.release_held()
        for watcher in list(self.watchers):
            watcher.close()

    def _fan_out(self, envelopes: Sequence[EventEnvelope]) -> None:
        """Offer the game envelopes of an append to every watcher. When the driver appends
        again at once (the table waits on the dealer: a street's cards, a runout, the
        showdown), they are held for that append (while the driver's call goes on:
        :meth:`release_held`), and the watchers get both in one message of a batched watch
        (issue 35: one message a watcher fewer for each street and showdown; never a hand's
        start, :meth:`_started_now`). A watch that subscribes meanwhile reads them from the
        store; its sequence check drops them when they come again."""
        visible = [e for e in envelopes if not is_room_event(e)]
        if self._held:
            visible = self._held + visible
            self._held = []
            if self._release is not None:
                self._release.cancel()
                self._release = None
        if not visible:
            return
        table = self.room.table
        hand = table.hand
        if table.hand_in_progress and hand is not None and hand.phase in FOLLOWED_PHASES \
                and not self.fenced and hand.hand_number not in self._started_now(visible):
            self._held = visible
            self._release = asyncio.get_running_loop().call_later(HOLD_S, self.release_held)
            return
        for watcher in list(self.watchers):
            watcher.offer(visible)

    @staticmethod
    def _started_now(visible: Sequence[EventEnvelope]) -> set[int]:
        """The hands whose ``HandStarted`` is among ``visible``: never held, since the
        players open their seeds for the deal when they see it (docs/fairness.md; held until
        the cards, every seed came too late)."""
        return {e.hand_number for e in visible if e.event_type == "HandStarted"}

    def release_held(self) -> None:
        """Offer what is held to the watchers now (the driver waits on the dealer, or its
        step ended without appending; the replica lets the table go)."""
        if self._release is not None:
            self._release.cancel()
            self._release = None
        held, self._held = self._held, []
        if held:
            for watcher in list(self.watchers):
                watcher.offer(held)
