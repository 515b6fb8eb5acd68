"""The archiver's one step for one table: copy each settled hand to PostgreSQL at once, and
trim Redis of what left the hot window, verified first (DESIGN §3a; docs/history.md).

1. **Plan** (:func:`plan`). The copy: the events after what PostgreSQL holds, up to the event
   before the first hand that is not settled yet (its ``HandSettled``), so a hand is durable
   in PostgreSQL seconds after its settlement. The trim: the events after what Redis trimmed
   before, up to the start of the oldest hand of the hot window (the latest ``keep_hands``
   hands stay in Redis), never past what is archived nor past the table's snapshot (the
   table loads from it once the head is gone), always at a hand's start (a hand lives whole
   in one store).
2. **Copy** (:meth:`History.write_segment`): in one PostgreSQL transaction, the events' exact
   bytes and SHA-256 digests, one row per hand that ended (and per player of it), the
   dealer's records of those hands (auditor schema), the rules' state after the last event,
   and the segment itself. The segment's primary key makes the write happen once: a second
   archiver, or a re-run after a crash, finds it there. Before it, the archive's end state
   continued over the stream must give the table's snapshot.
3. **Verify, then trim**: the rows read back from PostgreSQL equal a fresh read of the stream
   byte for byte, every sequence once; only then :meth:`studkit.store.EventStore.trim_head`
   (one script, a compare-and-set on the trimmed count, refused unless the snapshot covers
   the trim point).

Nothing is trimmed before it is durable and verified; a crash anywhere leaves either nothing
written (the transaction rolled back), or a segment written and not yet trimmed (a later step
trims it once it leaves the hot window).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from rules import TableState, evolve, initial_state, settlement
from rules.events import HandEnded, HandStarted
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.chain import GENESIS, verify_chain
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.mapping import event_from_envelope, is_room_event, room_event_from_envelope
from studkit.repository import FORMAT, snapshot_key, state_from_json, state_to_json
from studkit.store import EventStore, TrimRefused

DEFAULT_HOT_HANDS: Final = 20


class ArchiveError(RuntimeError):
    """A table's step could not be written or verified: nothing was trimmed."""


def digest(raw: bytes) -> bytes:
    """The SHA-256 of an envelope's stored bytes."""
    return hashlib.sha256(raw).digest()


# --- planning ------------------------------------------------------------------------------------

@dataclass
class Plan:
    """What one step would do for a table: copy ``archived+1 .. copy_to`` to PostgreSQL, and
    trim ``trimmed+1 .. trim_to`` from Redis."""

    table_id: str
    trimmed: int
    """Events trimmed from Redis so far (they are all in PostgreSQL)."""
    archived: int
    """Events in PostgreSQL so far (``>= trimmed``: a hand is copied as soon as it is settled
    and trimmed once it leaves the hot window)."""
    version: int
    copy_to: int = 0
    """Events ``archived+1 .. copy_to`` are copied now (``<= archived``: none)."""
    trim_to: int = 0
    """Events ``trimmed+1 .. trim_to`` leave Redis now (``<= trimmed``: none)."""
    hands: list[int] = field(default_factory=list)
    """The hands that end in the copied range."""
    trim_hands: list[int] = field(default_factory=list)
    """The hands whose events leave Redis."""
    note: str = ""

    @property
    def copying(self) -> bool:
        return self.copy_to > self.archived

    @property
    def trimming(self) -> bool:
        return self.trim_to > self.trimmed

    @property
    def empty(self) -> bool:
        return not self.copying and not self.trimming


async def snapshot(store: EventStore, table_id: str) -> tuple[int, TableState | None]:
    """The table's snapshot: its version and state (-1, None when absent or unusable)."""
    raw = await store.client.hgetall(snapshot_key(table_id))
    fields = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
    try:
        if int(fields["format"]) != FORMAT:
            return -1, None
        return int(fields["version"]), state_from_json(fields["state"])
    except (KeyError, ValueError, TypeError):
        return -1, None


async def raw_range(store: EventStore, table_id: str, after: int, upto: int
                    ) -> dict[int, bytes]:
    """Sequence -> the exact bytes the stream holds, for ``after+1 .. upto`` (a fresh read)."""
    found: dict[int, bytes] = {}
    start = f"0-{after + 1}"
    while True:
        entries = await store.client.xrange(keys.table_stream(table_id), min=start,
                                            max=f"0-{upto}", count=1000) or []
        for entry_id, fields in entries:
            payload = fields.get(b"envelope") if isinstance(fields, dict) else None
            if not isinstance(entry_id, bytes) or not isinstance(payload, bytes):
                raise ArchiveError(f"{table_id}: unreadable stream entry {entry_id!r}")
            found[int(entry_id.decode().split("-")[1])] = payload
            start = "(" + entry_id.decode()
        if len(entries) < 1000:
            return found


async def _latest_hand(store: EventStore, table_id: str, fallback: int) -> int:
    """The highest hand number the stream's tail names (``fallback`` when none does)."""
    entries = await store.client.xrevrange(keys.table_stream(table_id), count=64) or []
    for _, fields in entries:
        payload = fields.get(b"envelope") if isinstance(fields, dict) else None
        named = EventEnvelope.FromString(payload).hand_number if isinstance(payload, bytes) else 0
        if named:
            return max(int(named), fallback)
    return fallback


def _envelopes(raw: Mapping[int, bytes]) -> list[EventEnvelope]:
    return [EventEnvelope.FromString(raw[s]) for s in sorted(raw)]


def copy_point(envelopes: Sequence[EventEnvelope], version: int, settled_before: int) -> int:
    """How far a copy may go: up to the event before the first hand that started and is not
    settled yet (its ``HandSettled`` room event, or the legacy mark ``settled_before``), else
    every event read (the stream's ``version``)."""
    started: dict[int, int] = {}
    settled: set[int] = set()
    for env in envelopes:
        if env.event_type == "HandStarted":
            started[env.hand_number] = env.sequence
        elif env.event_type == "HandSettled":
            settled.add(room_event_from_envelope(env).hand_number)
    open_hands = [seq for hand, seq in started.items()
                  if hand not in settled and hand > settled_before]
    return min(open_hands) - 1 if open_hands else version


async def plan(store: EventStore, table_id: str, archived: int, *,
               keep_hands: int = DEFAULT_HOT_HANDS) -> Plan:
    """What ``table_id`` needs now, given ``archived`` events already in PostgreSQL: copy
    every settled hand (and the events between hands) at once, and trim the hands older than
    the latest ``keep_hands`` that are archived, never past the table's snapshot (the table
    loads from it once the head is gone), always at a hand's start (a hand is whole in one
    store)."""
    trimmed = await store.trimmed(table_id)
    version = await store.version(table_id)
    result = Plan(table_id, trimmed, archived, version)
    if archived < trimmed:
        raise ArchiveError(
            f"{table_id}: events 1..{trimmed} were trimmed but PostgreSQL's archive ends at "
            f"{archived} (archived elsewhere: import it first)")
    legacy = await store.client.get(keys.legacy_table_key(table_id, "settled"))
    settled_before = int(legacy) if legacy else 0  # a table not loaded since HandSettled
    if version > archived:
        fresh = _envelopes(await raw_range(store, table_id, archived, version))
        result.copy_to = copy_point(fresh, archived + len(fresh), settled_before)
        result.hands = sorted({e.hand_number for e in fresh
                               if e.event_type == "HandEnded" and e.sequence <= result.copy_to})
    # The trim: up to the start of the oldest hand kept, within what is archived (or being
    # archived now) and what the snapshot covers.
    snapshot_version, snap = await snapshot(store, table_id)
    latest = await _latest_hand(store, table_id, snap.hands_started if snap else 0)
    limit = min(max(archived, result.copy_to), snapshot_version)
    if latest - keep_hands < 1 or limit <= trimmed:
        result.note = "nothing older than the hot window is archived and snapshotted"
        return result
    head = _envelopes(await raw_range(store, table_id, trimmed, limit + 1))
    starts = [e for e in head if e.event_type == "HandStarted"
              and e.hand_number <= latest - keep_hands + 1 and e.sequence - 1 <= limit]
    if starts and starts[-1].sequence - 1 > trimmed:
        result.trim_to = starts[-1].sequence - 1
        result.trim_hands = sorted({e.hand_number for e in head
                                    if e.hand_number and e.sequence <= result.trim_to})
    return result


# --- what a segment holds ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ArchivedEvent:
    """One event as it goes into ``history.events``."""

    sequence: int
    hand: int
    type: str
    command_id: str
    occurred_at: datetime
    envelope: bytes
    digest: bytes


@dataclass(frozen=True, slots=True)
class HandRow:
    """One row of ``history.hands`` (and its players' rows of ``history.hand_players``)."""

    hand: int
    started_at: datetime | None
    ended_at: datetime
    first_sequence: int
    last_sequence: int
    ante: int
    small_bet: int
    big_bet: int
    bring_in: int
    pot: int
    rake: int
    players: dict[int, str]
    """Seat -> player id."""
    winners: dict[int, int]
    """Seat -> chips won."""
    nets: dict[int, int]
    """Seat -> the hand's net result (chips won less chips put in)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One archived batch of a table: events ``first .. last``."""

    table_id: str
    first: int
    last: int
    last_digest: bytes
    state: str
    """The rules' state after event ``last`` (JSON): the next segment's fold starts there."""
    events: tuple[ArchivedEvent, ...] = ()
    hands: tuple[HandRow, ...] = ()
    dealer: Mapping[int, bytes] = field(default_factory=dict)
    """Hand -> the dealer's record (``HandAudit`` bytes), for auditors."""
    commands: tuple[CommandRecord, ...] = ()
    """The command records whose events are in the segment (they leave Redis with them)."""


@dataclass(frozen=True, slots=True)
class CommandRecord:
    """One command id's record (``append.lua``): the version after it, its outcome, and the
    fingerprint of what was asked (empty when none was kept)."""

    command_id: str
    version: int
    outcome: str
    fingerprint: str


async def command_records(store: EventStore, table_id: str, after: int, upto: int
                          ) -> tuple[CommandRecord, ...]:
    """The table's command records whose outcome's version is in ``after+1 .. upto``."""
    raw = await store.client.hgetall(keys.table_commands(table_id))
    fields = {(k.decode() if isinstance(k, bytes) else str(k)):
              (v.decode() if isinstance(v, bytes) else str(v)) for k, v in raw.items()}
    out = []
    for name, outcome in fields.items():
        if name.endswith("#fp"):
            continue
        head = outcome.split(" ", 1)[0]
        if head.isdigit() and after < int(head) <= upto:
            out.append(CommandRecord(name, int(head), outcome, fields.get(name + "#fp", "")))
    return tuple(sorted(out, key=lambda r: (r.version, r.command_id)))


def _when(envelope: EventEnvelope) -> datetime:
    when: datetime = envelope.occurred_at.ToDatetime(tzinfo=UTC)
    return when


def _fold(state: TableState, envelopes: Iterable[EventEnvelope]) -> TableState:
    for env in envelopes:
        if not is_room_event(env):  # the room's own events: not the game's state
            state = evolve(state, event_from_envelope(env))
    return state


def hand_rows(start: TableState, envelopes: Sequence[EventEnvelope]) -> list[HandRow]:
    """The hands that end among ``envelopes`` (the state before them: ``start``), as rows:
    the rules' fold and their ``settlement`` give the pot, the rake and each seat's net."""
    rows = []
    state = start
    began: tuple[EventEnvelope, TableState] | None = None
    for env in envelopes:
        if is_room_event(env):
            continue
        event = event_from_envelope(env)
        state = evolve(state, event)
        if isinstance(event, HandStarted):
            began = (env, state)
        elif isinstance(event, HandEnded) and began is not None and state.hand is not None:
            first, at_start = began
            began = None
            config = at_start.config
            result = settlement(state)
            seats = result.seats if result is not None else ()
            rows.append(HandRow(
                hand=event.hand_number, started_at=_when(first), ended_at=_when(env),
                first_sequence=first.sequence, last_sequence=env.sequence,
                ante=config.ante if config else 0, small_bet=config.small_bet if config else 0,
                big_bet=config.big_bet if config else 0,
                bring_in=config.bring_in if config else 0,
                pot=result.amount_in if result is not None else 0,
                rake=result.rake if result is not None else 0,
                players={p.seat: p.player_id for p in state.hand.players},
                winners={s.seat: s.amount_won for s in seats if s.amount_won},
                nets={s.seat: s.net for s in seats}))
    return rows


# --- the store of record -------------------------------------------------------------------------

class History(Protocol):
    """PostgreSQL as the archiver sees it (:class:`studhistory.pgarchive.PgHistory`)."""

    async def last_segment(self, table_id: str) -> Segment | None:
        """The table's latest archived segment (without its rows), or None."""

    async def segment_ending(self, table_id: str, last: int) -> Segment | None:
        """The table's segment that ends at event ``last`` (without its rows), or None."""

    async def write_segment(self, segment: Segment) -> bool:
        """Write a segment with all its rows in one transaction; False when it was already
        there (written by an earlier step or another archiver), True when this call wrote it."""

    async def event_bytes(self, table_id: str, first: int, last: int) -> dict[int, bytes]:
        """Sequence -> archived envelope bytes, for ``first .. last``."""

    async def records_through(self, table_id: str, upto_hand: int) -> int:
        """The greatest hand ``h <= upto_hand`` such that every archived hand of the table up
        to ``h`` has its dealer's record row (an empty record: the dealer had none)."""


class RecordUnavailable(ArchiveError):
    """The dealer could not give a hand's record now (it is down): the copy waits for it,
    so no hand is archived without the record its auditors need."""


class DealerRecords(Protocol):
    """The dealer as the archiver sees it."""

    async def record(self, table_id: str, hand: int) -> bytes | None:
        """A hand's record (``GetAudit``): its bytes, None when the dealer has none (no deck
        was made for the hand); :class:`RecordUnavailable` when it cannot answer now."""

    async def release(self, table_id: str, through_hand: int) -> int:
        """Let the dealer forget its keys of hands up to ``through_hand`` (``ReleaseHands``);
        the hand it has released through; :class:`RecordUnavailable` when it cannot now."""


@dataclass
class Outcome:
    """What one step did for one table."""

    plan: Plan
    wrote: bool = False
    """Whether this step wrote the segment (False: nothing to copy, a dry run, or another
    archiver wrote the same range first)."""
    trimmed_to: int | None = None
    """The trimmed count after the step (None: no trim was done)."""
    dry_run: bool = False
    ended: list[datetime] = field(default_factory=list)
    """When each hand this step wrote ended (for the archive's lag)."""
    released_through: int = 0
    """The hand the dealer forgot its keys through after this step's trim (0: not asked)."""

    def describe(self) -> str:
        p = self.plan
        if p.empty:
            return f"table {p.table_id}: nothing to do ({p.note or 'up to date'})"
        parts = []
        if p.copying:
            hands = f"hands {p.hands[0]}-{p.hands[-1]}" if p.hands else "no hand over"
            parts.append(f"{'would copy' if self.dry_run else 'copied'} events "
                         f"{p.archived + 1}-{p.copy_to} ({hands}) to PostgreSQL")
        if p.trimming:
            verb = "would trim" if self.dry_run else "verified and trimmed"
            parts.append(f"{verb} events {p.trimmed + 1}-{p.trim_to} from Redis")
        return f"table {p.table_id}: " + "; ".join(parts)


async def _base(history: History, table_id: str, archived: int) -> TableState:
    """The rules' state after event ``archived`` (what the archive ends with)."""
    if archived == 0:
        return initial_state()
    last = await history.segment_ending(table_id, archived)
    if last is None:
        raise ArchiveError(f"{table_id}: no archived segment ends at {archived}")
    return state_from_json(last.state)


async def _segment(store: EventStore, the_plan: Plan, base: TableState,
                   dealer: DealerRecords | None, chain_start: bytes | None) -> Segment:
    table_id, start, upto = the_plan.table_id, the_plan.archived, the_plan.copy_to
    raw = await raw_range(store, table_id, start, upto)
    if sorted(raw) != list(range(start + 1, upto + 1)):
        raise ArchiveError(f"{table_id}: the stream does not hold events {start + 1}-{upto}")
    envelopes = _envelopes(raw)
    # The chain runs on from the archive into this segment (docs/history.md, "The chain"):
    # the first event links to the archive's last digest, and every link holds.
    broken = verify_chain(table_id, (raw[s] for s in sorted(raw)), start=chain_start)
    if broken is not None:
        raise ArchiveError(f"{table_id}: {broken.line()}: nothing copied")
    events = tuple(ArchivedEvent(e.sequence, e.hand_number, e.event_type, e.command_id,
                                 _when(e), raw[e.sequence], digest(raw[e.sequence]))
                   for e in envelopes)
    records: dict[int, bytes] = {}
    if dealer is not None:
        for hand in the_plan.hands:
            record = await dealer.record(table_id, hand)
            records[hand] = record if record is not None else b""  # b"": the dealer has none
    return Segment(table_id, start + 1, upto, events[-1].digest,
                   state_to_json(_fold(base, envelopes)), events,
                   tuple(hand_rows(base, envelopes)), records,
                   await command_records(store, table_id, start, upto))


async def _check_against_snapshot(store: EventStore, table_id: str, archived: int,
                                  state: TableState) -> None:
    """The archive's state at ``archived``, continued over the stream to the table's
    snapshot, must be the snapshot's state (when the snapshot is past it)."""
    snapshot_version, snapshot_state = await snapshot(store, table_id)
    if snapshot_state is None or snapshot_version < archived:
        return
    tail = await raw_range(store, table_id, archived, snapshot_version)
    if state_to_json(_fold(state, _envelopes(tail))) != state_to_json(snapshot_state):
        raise ArchiveError(f"{table_id}: the rules' fold of the archive and the stream does "
                           f"not give the snapshot's state at {snapshot_version}")


async def _verify_trim(store: EventStore, history: History, the_plan: Plan) -> None:
    """What leaves Redis is in PostgreSQL, every sequence once, byte for byte (a fresh read
    of both)."""
    table_id, start, upto = the_plan.table_id, the_plan.trimmed, the_plan.trim_to
    archived = await history.event_bytes(table_id, start + 1, upto)
    stream = await raw_range(store, table_id, start, upto)
    wanted = list(range(start + 1, upto + 1))
    if sorted(archived) != wanted or sorted(stream) != wanted:
        raise ArchiveError(f"{table_id}: PostgreSQL does not hold events {start + 1}-{upto} "
                           "exactly once")
    for sequence, raw in stream.items():
        if archived[sequence] != raw:
            raise ArchiveError(f"{table_id}: event {sequence} in PostgreSQL differs from the "
                               "stream")


async def archive_table(store: EventStore, history: History, table_id: str, *,
                        keep_hands: int = DEFAULT_HOT_HANDS,
                        dealer: DealerRecords | None = None, dry_run: bool = False,
                        command_window_s: float = COMMAND_WINDOW_S,
                        clock: Callable[[], float] = time.time) -> Outcome:
    """One step for one table (the module's docstring): copy what is settled, then trim what
    left the hot window, verified first. :class:`ArchiveError` when something could not be
    written or verified (nothing trimmed). The command records of the last
    ``command_window_s`` (at least :data:`studkit.commandwindow.COMMAND_WINDOW_S`) of
    ``clock`` (Unix seconds) stay in Redis."""
    if command_window_s < COMMAND_WINDOW_S:
        raise ValueError(f"command_window_s must be at least {COMMAND_WINDOW_S}")
    last = await history.last_segment(table_id)
    archived = last.last if last is not None else 0
    the_plan = await plan(store, table_id, archived, keep_hands=keep_hands)
    outcome = Outcome(the_plan, dry_run=dry_run)
    if the_plan.empty or dry_run:
        return outcome
    if the_plan.copying:
        base = await _base(history, table_id, archived)
        await _check_against_snapshot(store, table_id, archived, base)
        segment = await _segment(store, the_plan, base, dealer,
                                 last.last_digest if last is not None else GENESIS)
        outcome.wrote = await history.write_segment(segment)
        outcome.ended = [h.ended_at for h in segment.hands] if outcome.wrote else []
        if not outcome.wrote:  # another archiver wrote this range first: the same bytes?
            there = await history.segment_ending(table_id, segment.last)
            if there is None or there.first != segment.first:
                raise ArchiveError(f"{table_id}: another archiver wrote a different segment")
    if the_plan.trimming:
        await _verify_trim(store, history, the_plan)
        kept = await _commands_upto(store, table_id, the_plan.trimmed, the_plan.trim_to,
                                    int((clock() - command_window_s) * 1000))
        outcome.trimmed_to = await _trim(store, table_id, the_plan.trim_to, the_plan.trimmed,
                                         kept)
    if dealer is not None and the_plan.trim_hands and outcome.trimmed_to is not None:
        # The dealer forgets the hands that left Redis, once every record up to them is here
        # (a failure is tried again by the next trim: the mark is the archive's, not ours).
        through = await history.records_through(table_id, the_plan.trim_hands[-1])
        if through:
            with contextlib.suppress(RecordUnavailable):
                outcome.released_through = await dealer.release(table_id, through)
    return outcome


async def _commands_upto(store: EventStore, table_id: str, start: int, upto: int,
                         cutoff_ms: int) -> int:
    """The last event of ``start+1 .. upto`` that happened at or before ``cutoff_ms`` (0:
    none): the command records up to it may leave Redis, the idempotency window's stay
    (:mod:`studkit.commandwindow`; a later trim takes them)."""
    raw = await raw_range(store, table_id, start, upto)
    done = [e.sequence for e in _envelopes(raw)
            if e.occurred_at.ToMilliseconds() <= cutoff_ms]
    return max(done, default=0)


async def _trim(store: EventStore, table_id: str, upto: int, expected: int,
                commands_upto: int) -> int:
    try:
        return await store.trim_head(table_id, upto, expected, commands_upto=commands_upto)
    except TrimRefused as exc:
        raise ArchiveError(str(exc)) from exc


def as_json(value: Mapping[int, Any]) -> str:
    """A seat-keyed mapping as the JSON the hand rows store (string keys, sorted)."""
    return json.dumps({str(k): v for k, v in sorted(value.items())}, separators=(",", ":"))
