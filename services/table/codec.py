"""The room's events to and from ``room.proto``'s messages, at the edge (the one codec): each
event is stored as the message of its own name with the same fields, so the bytes are those
the table wrote when its events were the messages themselves, and every stream written
before loads as it is (``tests/unit/table/test_codec.py``). The envelope around them is
:mod:`studkit.mapping.room`'s."""

from __future__ import annotations

from dataclasses import fields
from typing import Final

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1.envelope_pb2 import EventEnvelope
from studkit.mapping import room as stored
from table import room_events as rev
from table.model import settings_from_stored, settings_to_proto
from table.room_events import ROOM_EVENT_CLASSES, RoomEvent

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
