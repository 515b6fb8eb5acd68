"""The tournament's events and configuration to and from ``stud.v1.tournament`` messages:
what its stream stores and what ``WatchTournament`` shows (nothing in a tournament's events
is secret). ``occurred_at`` (seconds) is the record's, not the message's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import tournament_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.errors import BadRequest
from tournament import events as ev
from tournament.structure import PRESETS, Level, Structure

_FORMATS = {ev.SIT_AND_GO: pb.TOURNAMENT_FORMAT_SIT_AND_GO,
            ev.MULTI_TABLE: pb.TOURNAMENT_FORMAT_MULTI_TABLE}


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(round(seconds * 1e9))
    return ts


def seconds(ts: Timestamp) -> float:
    return float(ts.ToNanoseconds()) / 1e9


TIMESTAMP_MIN_S = -62_135_596_800
"""0001-01-01T00:00:00Z, the first instant a ``google.protobuf.Timestamp`` may hold."""
TIMESTAMP_MAX_S = 253_402_300_799
"""9999-12-31T23:59:59Z, its last whole second."""


def instant(ts: Timestamp, field: str) -> float:
    """A request's instant in seconds, ``BadRequest`` naming ``field`` unless it is a valid
    Timestamp (years 1 to 9999, ``nanos`` 0 to 999,999,999): outside that range the
    library's conversion raises, which reached the caller as INTERNAL (issue 29, G4)."""
    if not 0 <= ts.nanos <= 999_999_999:
        raise BadRequest(field, "nanos must be 0 to 999,999,999")
    if not TIMESTAMP_MIN_S <= ts.seconds <= TIMESTAMP_MAX_S:
        raise BadRequest(field, "an instant from year 1 to year 9999 (seconds "
                                f"{TIMESTAMP_MIN_S} to {TIMESTAMP_MAX_S})")
    return seconds(ts)


def level_to_proto(level: Level) -> pb.TournamentLevel:
    return pb.TournamentLevel(ante=level.ante, bring_in=level.bring_in,
                              small_bet=level.small_bet, big_bet=level.big_bet,
                              seconds=level.seconds)


def structure_to_proto(s: Structure) -> pb.TournamentStructure:
    return pb.TournamentStructure(levels=[level_to_proto(lv) for lv in s.levels],
                                  starting_stack=s.starting_stack, break_every=s.break_every,
                                  break_seconds=s.break_seconds)


def structure_from_proto(m: pb.TournamentStructure) -> Structure:
    """A structure from a request: a preset by name, or the levels given (checked)."""
    if m.preset:
        if m.levels or m.starting_stack or m.break_every or m.break_seconds:
            raise BadRequest("structure", "a preset takes no levels, stack or breaks")
        if m.preset not in PRESETS:
            raise BadRequest("structure.preset", f"one of {sorted(PRESETS)}")
        return PRESETS[m.preset]
    levels = tuple(Level(lv.ante, lv.bring_in, lv.small_bet, lv.big_bet, lv.seconds)
                   for lv in m.levels)
    if len(levels) > 100:
        raise BadRequest("structure.levels", "at most 100 levels")
    return Structure(levels=levels, starting_stack=m.starting_stack,
                     break_every=m.break_every, break_seconds=m.break_seconds)


def config_to_proto(c: ev.Config) -> pb.TournamentConfig:
    return pb.TournamentConfig(
        name=c.name, format=_FORMATS[c.format], buy_in=c.buy_in, fee=c.fee,
        structure=structure_to_proto(c.structure), seats=c.seats,
        start_at=timestamp(c.start_at) if c.start_at else None,
        min_entrants=c.min_entrants, max_entrants=c.max_entrants,
        late_through_level=c.late_through_level, re_entries=c.re_entries,
        pace=pb.TournamentPace(action_time_s=c.pace.action_time_s,
                               time_bank_s=c.pace.time_bank_s,
                               next_hand_delay_ms=c.pace.next_hand_delay_ms)
        if c.pace != ev.Pace() else None)


def config_from_proto(m: pb.TournamentConfig) -> ev.Config:
    """A configuration from a request or the stream; ``BadRequest`` names the bad field."""
    formats = {v: k for k, v in _FORMATS.items()}
    if m.format not in formats:
        raise BadRequest("config.format", "sit_and_go or multi_table")
    if not m.HasField("structure"):
        raise BadRequest("config.structure", "required (a preset or levels)")
    return ev.Config(
        name=m.name, format=formats[m.format], buy_in=m.buy_in, fee=m.fee,
        structure=structure_from_proto(m.structure), seats=m.seats or 8,
        start_at=instant(m.start_at, "config.start_at") if m.HasField("start_at") else 0.0,
        min_entrants=m.min_entrants or 2, max_entrants=m.max_entrants,
        late_through_level=m.late_through_level, re_entries=m.re_entries,
        pace=ev.Pace(m.pace.action_time_s, m.pace.time_bank_s, m.pace.next_hand_delay_ms))


def config_from_request(m: pb.TournamentConfig) -> ev.Config:
    """A configuration from a ``CreateTournament``: what only a request can get wrong
    (``min_entrants`` 0 of a multi-table, which the stream reads as 2, is refused), then
    :func:`config_from_proto`. The rest (what can be played and paid) is the create's
    decision, ``Config.playable``."""
    if m.format == pb.TOURNAMENT_FORMAT_MULTI_TABLE and m.min_entrants < 2:
        raise BadRequest("config.min_entrants", "a multi-table tournament needs at least 2")
    return config_from_proto(m)


def _stacks(stacks: ev.Stacks) -> list[pb.TableStack]:
    return [pb.TableStack(seat=s, chips=c) for s, c in stacks]


def _unstacks(stacks: Any) -> ev.Stacks:
    return tuple((s.seat, s.chips) for s in stacks)


# each event kind: (its field in the oneof, the event's fields, those fields' proto names)
_PLAIN: dict[type[Any], tuple[str, tuple[str, ...]]] = {
    ev.EntryPaid: ("entry_paid", ("entry_id",)),
    ev.EntryDropped: ("entry_dropped", ("entry_id", "reason")),
    ev.EntryWithdrawn: ("entry_withdrawn", ("entry_id", "reason")),
    ev.TableOpened: ("table_opened", ("table_id",)),
    ev.TableClosed: ("table_closed", ("table_id",)),
    ev.SeatAssigned: ("seat_assigned", ("entry_id", "table_id", "seat", "stack")),
    ev.SeatConfirmed: ("seat_confirmed", ("entry_id",)),
    ev.TableHeld: ("table_held", ("table_id", "reason")),
    ev.TableReleased: ("table_released", ("table_id", "reason")),
    ev.SeatFreed: ("seat_freed", ("table_id", "seat")),
    ev.MoveStarted: ("move_started", ("move_id", "entry_id", "from_table", "from_seat",
                                      "to_table", "to_seat")),
    ev.MoveUnseated: ("move_unseated", ("move_id", "stack")),
    ev.MoveSeated: ("move_seated", ("move_id",)),
    ev.MoveCancelled: ("move_cancelled", ("move_id", "reason")),
    ev.TableBreaking: ("table_breaking", ("table_id",)),
    ev.TableKept: ("table_kept", ("table_id",)),
    ev.HandForHand: ("hand_for_hand", ("on",)),
    ev.RefundDue: ("refund_due", ("payment_id", "entry_id", "player_id", "buy_in", "fee")),
    ev.PrizeDue: ("prize_due", ("payment_id", "entry_id", "player_id", "amount", "place",
                                "place_to")),
    ev.PaymentMade: ("payment_made", ("payment_id",)),
}
_TIMED: dict[type[Any], tuple[str, tuple[str, ...]]] = {
    ev.EntryRequested: ("entry_requested", ("entry_id", "player_id")),
    ev.Started: ("started", ("seed",)),
    ev.RegistrationClosed: ("registration_closed", ()),
    ev.LevelStarted: ("level_started", ("level",)),
    ev.BreakStarted: ("break_started", ("after_level",)),
    ev.Cancelled: ("cancelled", ("reason",)),
    ev.Finished: ("finished", ("winner",)),
}
_HANDS = {ev.HandStarted: "hand_started", ev.HandEnded: "hand_ended"}
_KINDS = {name: kind for kind, (name, _) in (_PLAIN | _TIMED).items()}


def event_to_proto(e: ev.Event) -> pb.TournamentEvent:
    out = pb.TournamentEvent()
    kind = type(e)
    if isinstance(e, ev.Created):
        out.created.CopyFrom(pb.TournamentEvent.Created(
            tournament_id=e.tournament_id, config=config_to_proto(e.config)))
    elif isinstance(e, ev.HandStarted | ev.HandEnded):
        getattr(out, _HANDS[kind]).CopyFrom(getattr(pb.TournamentEvent, kind.__name__)(
            table_id=e.table_id, hand_number=e.hand_no, stacks=_stacks(e.stacks)))
    elif isinstance(e, ev.Busted):
        out.busted.CopyFrom(pb.TournamentEvent.Busted(
            entry_id=e.entry_id, table_id=e.table_id, seat=e.seat, hand_number=e.hand_no,
            start_stack=e.start_stack, round=e.round))
    elif isinstance(e, ev.HandForHandRound):
        out.hand_for_hand_round.CopyFrom(pb.TournamentEvent.HandForHandRound(
            number=e.number, tables=list(e.tables)))
    else:
        name, fields = (_PLAIN | _TIMED)[kind]
        message: Callable[..., Any] = getattr(pb.TournamentEvent, kind.__name__)
        getattr(out, name).CopyFrom(message(**{f: getattr(e, f) for f in fields}))
    return out


def event_from_proto(m: pb.TournamentEvent, at: float) -> ev.Event:
    """The event a stored message holds (``at``: its record's time)."""
    name = m.WhichOneof("kind")
    if name is None:
        raise ValueError("an empty tournament event")
    body = getattr(m, name)
    if name == "created":
        return ev.Created(body.tournament_id, config_from_proto(body.config), at)
    if name in ("hand_started", "hand_ended"):
        hand = ev.HandStarted if name == "hand_started" else ev.HandEnded
        return hand(body.table_id, body.hand_number, _unstacks(body.stacks))
    if name == "busted":
        return ev.Busted(body.entry_id, body.table_id, body.seat, body.hand_number,
                         body.start_stack, body.round)
    if name == "hand_for_hand_round":
        return ev.HandForHandRound(body.number, tuple(body.tables))
    kind = _KINDS[name]
    fields = (_PLAIN | _TIMED)[kind][1]
    values = {f: getattr(body, f) for f in fields}
    if kind in _TIMED:
        values["at"] = at
    event: ev.Event = kind(**values)
    return event


def event_at(e: ev.Event) -> float | None:
    """The instant an event carries (stored as its record's ``occurred_at``), if any."""
    return getattr(e, "at", None)


EVENT_TYPE: Final = "TournamentEvent"
"""The envelope's ``event_type`` of every event a tournament's stream holds."""


@dataclass(frozen=True, slots=True)
class Record:
    """One event of a tournament's stream, with its sequence and time."""

    sequence: int
    at: float
    event: ev.Event

    def to_proto(self) -> pb.TournamentEventRecord:
        return pb.TournamentEventRecord(sequence=self.sequence, occurred_at=timestamp(self.at),
                                        event=event_to_proto(self.event))


def record_from_envelope(envelope: EventEnvelope) -> Record:
    """The record a stored envelope holds (Redis's stream or the archive's copy of it)."""
    if envelope.event_type != EVENT_TYPE:
        raise ValueError(f"not a tournament event: {envelope.event_type}")
    at = seconds(envelope.occurred_at)
    return Record(envelope.sequence, at,
                  event_from_proto(pb.TournamentEvent.FromString(envelope.payload), at))
