"""The room's events to and from ``room.proto``'s messages, at the edge (the one codec): each
event is stored as the message of its own name with the same fields, so the bytes are those
the table wrote when its events were the messages themselves, and every stream written
before loads as it is (``tests/unit/table/test_codec.py``). The envelope around them is
:mod:`studkit.mapping.room`'s. A turn's clock (:class:`~table.room_events.TurnStarted`) is
stored on the envelope of the event before it (``turn_clock``), as it always was: it takes
no sequence of the stream.

:func:`encode` and :func:`decode_command` are the table's edge: its events, the rules' and
the room's, to the envelopes of one command and back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Final, cast

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from rules import Event
from rules.events import HandEnded, HandStarted
from stud.v1.envelope_pb2 import EventEnvelope, TurnClock
from studkit.mapping import envelope_at, event_from_envelope, is_room_event, timestamp_of
from studkit.mapping import room as stored
from table import room_events as rev
from table.model import settings_from_stored, settings_to_proto
from table.room_events import ROOM_EVENT_CLASSES, RoomEvent, is_room

_FIELDS: Final[dict[str, tuple[type[RoomEvent], type[Message], tuple[str, ...]]]] = {
    cls.__name__: (cls, stored.ROOM_EVENTS[cls.__name__],
                   tuple(f.name for f in fields(cls)))
    for cls in ROOM_EVENT_CLASSES
}
"""event_type -> (the event's class, its message's class, the fields they share)."""


def room_event_to_proto(event: RoomEvent) -> Message:
    """The ``room.proto`` message of ``event``."""
    if isinstance(event, rev.SettingsSet):
        return stored.ROOM_EVENTS["SettingsSet"](settings=settings_to_proto(event.settings))
    _cls, message, names = _FIELDS[type(event).__name__]
    return message(**{name: getattr(event, name) for name in names})


def room_event_from_proto(message: Message) -> RoomEvent:
    """The room event a ``room.proto`` message holds."""
    name = message.DESCRIPTOR.name
    if name == "SettingsSet":
        return rev.SettingsSet(settings=settings_from_stored(message.settings))
    cls, _message, names = _FIELDS[name]
    return cls(**{n: getattr(message, n) for n in names})


def as_stored(event: RoomEvent) -> RoomEvent:
    """``event`` as it reads back once stored (settings keep whole seconds): what a table
    folds live, so that the live room equals the one folded from its log."""
    return room_event_from_proto(room_event_to_proto(event))


def room_event_from_envelope(envelope: EventEnvelope) -> RoomEvent:
    """The room event a stored envelope holds (``BadRequest`` for anything else)."""
    return room_event_from_proto(stored.room_event_from_envelope(envelope))


def room_envelope_at(event: RoomEvent, *, table_id: str, hand_number: int, command_id: str,
                     occurred_at: Timestamp) -> EventEnvelope:
    """The envelope to append for ``event``."""
    return stored.room_envelope_at(room_event_to_proto(event), table_id=table_id,
                                   hand_number=hand_number, command_id=command_id,
                                   occurred_at=occurred_at)


def turn_clock(turn: rev.TurnStarted) -> TurnClock:
    """The envelope's ``turn_clock`` of a turn (whole microseconds)."""
    clock = TurnClock()
    set_turn_clock(clock, turn)
    return clock


_SECONDS_MIN: Final = -62_135_596_800
_SECONDS_MAX: Final = 253_402_300_799
"""A Timestamp's range (0001-01-01 to 9999-12-31), as protobuf's ``FromMicroseconds``
checks it."""


def _set_time(stamp: Timestamp, seconds: float) -> None:
    """``stamp.FromMicroseconds(round(seconds * 1e6))``, set in place without protobuf's
    pure-Python helper."""
    whole, micros = divmod(round(seconds * 1e6), 1_000_000)
    if not _SECONDS_MIN <= whole <= _SECONDS_MAX:
        raise ValueError(f"Timestamp is not valid: Seconds {whole} must be in range "
                         f"[{_SECONDS_MIN}, {_SECONDS_MAX}].")
    stamp.seconds = whole
    stamp.nanos = micros * 1000


def set_turn_clock(clock: TurnClock, turn: rev.TurnStarted) -> None:
    """Write a turn into an envelope's ``turn_clock`` in place (whole microseconds): the
    same fields as :func:`turn_clock`, without a message made and copied (issue 35: one
    every action)."""
    clock.seat = turn.seat
    clock.time_bank_ms = turn.bank_ms
    _set_time(clock.started_at, turn.started_at)
    _set_time(clock.action_deadline, turn.action_deadline)
    _set_time(clock.deadline, turn.deadline)


def turn_started(clock: TurnClock) -> rev.TurnStarted:
    """The turn an envelope's ``turn_clock`` records."""
    return rev.TurnStarted(seat=clock.seat, started_at=clock.started_at.ToMicroseconds() / 1e6,
                           action_deadline=clock.action_deadline.ToMicroseconds() / 1e6,
                           deadline=clock.deadline.ToMicroseconds() / 1e6,
                           bank_ms=clock.time_bank_ms)


def decode(envelope: EventEnvelope) -> Event | RoomEvent:
    """The event a stored envelope holds, the room's or the rules' (its turn's clock
    aside: :func:`decode_command`)."""
    if is_room_event(envelope):
        return room_event_from_envelope(envelope)
    return event_from_envelope(envelope)


def decode_command(envelopes: Sequence[EventEnvelope]
                   ) -> list[Event | RoomEvent | rev.TurnStarted]:
    """The events of stored envelopes, each followed by the turn its envelope's clock
    starts, if any."""
    out: list[Event | RoomEvent | rev.TurnStarted] = []
    for envelope in envelopes:
        out.append(decode(envelope))
        if envelope.HasField("turn_clock"):
            out.append(turn_started(envelope.turn_clock))
    return out


def encode(events: Sequence[Event | RoomEvent | rev.TurnStarted], *, table_id: str,
           hand_number: int, now: float) -> list[EventEnvelope]:
    """The envelopes of one command's events (unsealed), all at ``now``: the hand number
    each belongs to (from ``hand_number``, the hand in progress or 0, on through the hand
    its events start and end), a turn's clock on the envelope before it."""
    occurred = timestamp_of(now)  # one for every envelope
    number = hand_number
    out: list[EventEnvelope] = []
    for event in events:
        if isinstance(event, rev.TurnStarted):
            set_turn_clock(out[-1].turn_clock, event)
            continue
        if isinstance(event, HandStarted):
            number = event.hand_number
        if is_room(event):
            out.append(room_envelope_at(event, table_id=table_id, hand_number=number,
                                        command_id="", occurred_at=occurred))
        else:
            out.append(envelope_at(cast(Event, event), table_id=table_id, hand_number=number,
                                   command_id="", occurred_at=occurred))
        if isinstance(event, HandEnded):
            number = 0
    return out
