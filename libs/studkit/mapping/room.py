"""Room events (``room.proto``) <-> stored EventEnvelopes. Room events sit beside the rules'
events in a table's stream (DESIGN §5b). Here they are the protobuf messages; the table
works with frozen dataclasses of the same names and fields (``table.room_events``), which
its codec (``table.codec``, beside the settings type they carry: studkit may not import the
table) maps to these messages. ``event_type`` is the message name (e.g.
``"BuyInRequested"``), as for the rules' events.

Every reader that folds the game (the replay, the archive, the dealer's view of a table)
skips them with :func:`is_room_event`; the table folds both kinds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from google.protobuf.message import DecodeError, Message
from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import room_pb2 as rpb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.errors import BadRequest

SCHEMA_VERSION: Final = 1

ROOM_EVENTS: Final[dict[str, type[Message]]] = {
    f.message_type.name: getattr(rpb, f.message_type.name)
    for f in rpb.RoomEvent.DESCRIPTOR.oneofs_by_name["event"].fields
}
"""event_type -> the room.proto message class."""
ROOM_EVENT_TYPES: Final = frozenset(ROOM_EVENTS)
"""Every room event's ``event_type`` (what :func:`is_room_event` looks up)."""


def is_room_event(envelope: EventEnvelope) -> bool:
    """Whether ``envelope`` holds a room event (not one of the rules')."""
    return envelope.event_type in ROOM_EVENT_TYPES


def room_envelope(event: Message, *, table_id: str, hand_number: int, command_id: str,
                  occurred_at: datetime) -> EventEnvelope:
    """The envelope to append for a room event."""
    stamp = Timestamp()
    stamp.FromDatetime(occurred_at)
    return room_envelope_at(event, table_id=table_id, hand_number=hand_number,
                            command_id=command_id, occurred_at=stamp)


def room_envelope_at(event: Message, *, table_id: str, hand_number: int, command_id: str,
                     occurred_at: Timestamp) -> EventEnvelope:
    """:func:`room_envelope` with its time already a Timestamp."""
    return EventEnvelope(
        event_type=event.DESCRIPTOR.name, schema_version=SCHEMA_VERSION, table_id=table_id,
        hand_number=hand_number, command_id=command_id,
        payload=event.SerializeToString(deterministic=True), occurred_at=occurred_at)


def room_event_from_envelope(envelope: EventEnvelope) -> Message:
    """The room event an envelope holds."""
    kind = ROOM_EVENTS.get(envelope.event_type)
    if kind is None:
        raise BadRequest("event_type", f"not a room event: {envelope.event_type!r}")
    try:
        return kind.FromString(envelope.payload)
    except DecodeError as exc:
        raise BadRequest("payload", f"not a {envelope.event_type}: {exc}") from None


def game_envelopes(envelopes: Iterable[EventEnvelope]) -> list[EventEnvelope]:
    """The rules' envelopes of a stream read (its room events left out), for a fold of
    the game."""
    return [e for e in envelopes if e.event_type not in ROOM_EVENT_TYPES]
