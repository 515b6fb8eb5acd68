"""Rules events <-> stored EventEnvelopes (``envelope.proto``): ``event_type`` is the event's
message name (e.g. ``"HandStarted"``, also the rules class name) and ``payload`` is that typed
message, serialized."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from google.protobuf.message import DecodeError, Message
from google.protobuf.timestamp_pb2 import Timestamp

from rules.cards import Card
from rules.events import (
    ActionTimedOut,
    AntePosted,
    BetMade,
    BringInPosted,
    Called,
    CardBurned,
    Checked,
    Completed,
    DownCardDealt,
    Event,
    Folded,
    Raised,
    UncalledBetReturned,
    UpCardDealt,
)
from stud.v1 import events_pb2 as epb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.errors import BadRequest
from studkit.mapping.events import event_from_message, event_message

SCHEMA_VERSION: Final = 1
"""The ``schema_version`` written into every envelope (see envelope.proto)."""

# event_type -> the TableEvent oneof field holding that message.
_EVENT_FIELDS: Final[dict[str, str]] = {
    f.message_type.name: f.name
    for f in epb.TableEvent.DESCRIPTOR.oneofs_by_name["event"].fields
}
# event_type -> (that oneof field, the message class): a stored payload parsed as it is.
_EVENT_MESSAGES: Final[dict[str, tuple[str, type[Message]]]] = {
    event_type: (name, type(getattr(epb.TableEvent(), name)))
    for event_type, name in _EVENT_FIELDS.items()
}


PAYLOADS_KEPT: Final = 4096
"""Payloads kept by their event (then forgotten all at once)."""
_KEPT_KINDS: Final = frozenset({
    AntePosted, DownCardDealt, UpCardDealt, CardBurned, BringInPosted, Completed, BetMade,
    Raised, Called, Checked, Folded, ActionTimedOut, UncalledBetReturned,
})
"""The events a table writes most (a dealt card, an ante, a betting action), whose fields
are values (seats, streets, amounts, a card or none): equal events make equal payloads. A
dealt card's event is kept only when its card is exactly a :class:`~rules.cards.Card` (or
none), as the rules keep theirs."""
_DEALT_KINDS: Final = (UpCardDealt, DownCardDealt)
_PAYLOADS: dict[Event, bytes] = {}
_KEPT_NAMES: Final = frozenset(kind.__name__ for kind in _KEPT_KINDS)
_EVENTS: dict[tuple[str, bytes], Event] = {}
"""The same kinds' events read back, by event type and payload (each watcher's record and
each fold read the same few again and again): an event is a value, and a payload that read
once reads the same again (one that does not read is never kept)."""


def _serialized(event: Event) -> bytes:
    data: bytes = event_message(event).SerializeToString(deterministic=True)
    return data


def payload_of(event: Event) -> bytes:
    """An envelope's ``payload`` of ``event``: its typed message, serialized. The events a
    table writes most are kept by their value (issue 35: the rules make the same ones again
    and again, and each append serialized them anew); an event is equal only to one of its
    own class, so a kept payload is always its own event's."""
    if event.__class__ not in _KEPT_KINDS or (
            isinstance(event, _DEALT_KINDS) and event.card is not None
            and event.card.__class__ is not Card):
        return _serialized(event)
    payload = _PAYLOADS.get(event)
    if payload is None:
        payload = _serialized(event)
        if len(_PAYLOADS) >= PAYLOADS_KEPT:
            _PAYLOADS.clear()
        _PAYLOADS[event] = payload
    return payload


class HoleCardInPublicRecord(ValueError):
    """Raised when a down card's value would be written into the table's public stream."""


def event_type(event: Event) -> str:
    """The envelope's ``event_type`` of an event: its message name, e.g. ``"HandStarted"``
    (the rules class and the stud.v1 message share the name)."""
    return type(event).__name__


def timestamp(occurred_at: datetime) -> Timestamp:
    """An envelope's ``occurred_at`` for a timezone-aware time (the writer's clock; the rules
    never read one): a writer that seals several envelopes at one time makes it once."""
    if occurred_at.tzinfo is None:
        raise ValueError("occurred_at must be timezone-aware")
    stamp = Timestamp()
    stamp.FromDatetime(occurred_at)
    return stamp


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp_of(seconds: float) -> Timestamp:
    """``timestamp(datetime.fromtimestamp(seconds, UTC))``, the same Timestamp (the time is
    rounded to the microsecond as ``fromtimestamp`` rounds it) without protobuf's
    ``FromDatetime``, which goes through a ``struct_time``: a table seals one per command."""
    delta = datetime.fromtimestamp(seconds, UTC) - _EPOCH
    return Timestamp(seconds=delta.days * 86_400 + delta.seconds,
                     nanos=delta.microseconds * 1000)


def envelope_for(
    event: Event, *, table_id: str, hand_number: int, command_id: str, occurred_at: datetime,
) -> EventEnvelope:
    """The envelope to append for ``event``: ``payload`` is the typed message named by
    ``event_type``, serialized. ``sequence`` is left to the event store. ``occurred_at`` must
    be timezone-aware (the writer's clock; the rules never read one)."""
    return envelope_at(event, table_id=table_id, hand_number=hand_number,
                       command_id=command_id, occurred_at=timestamp(occurred_at))


def envelope_at(
    event: Event, *, table_id: str, hand_number: int, command_id: str, occurred_at: Timestamp,
) -> EventEnvelope:
    """:func:`envelope_for` with its time already a Timestamp (see :func:`timestamp`)."""
    if isinstance(event, DownCardDealt) and event.card is not None:
        # Envelopes go to the table's public stream: a down card is only "a down card" there.
        raise HoleCardInPublicRecord(f"seat {event.seat}'s down card carries its value")
    return EventEnvelope(
        event_type=event_type(event), schema_version=SCHEMA_VERSION, table_id=table_id,
        hand_number=hand_number, command_id=command_id,
        payload=payload_of(event), occurred_at=occurred_at,
    )


def table_event_from_envelope(envelope: EventEnvelope) -> epb.TableEvent:
    """The TableEvent an envelope holds (not yet validated: see :func:`event_from_envelope`)."""
    if envelope.schema_version < 1:
        raise BadRequest("schema_version", "missing (envelopes start at schema_version 1)")
    name = _EVENT_FIELDS.get(envelope.event_type)
    if name is None:
        raise BadRequest("event_type", f"unknown event type {envelope.event_type!r}")
    wrapped = epb.TableEvent()
    typed = getattr(wrapped, name)
    typed.SetInParent()  # an event without fields (CardBurned) has an empty payload
    try:
        typed.MergeFromString(envelope.payload)
    except DecodeError as exc:
        raise BadRequest("payload", f"not a {envelope.event_type}: {exc}") from None
    return wrapped


def event_from_envelope(envelope: EventEnvelope) -> Event:
    """The rules event a stored envelope holds. A payload written by an older schema parses
    (absent fields read as their defaults); one written by a newer schema parses too (unknown
    fields are ignored), as long as the event type is known. Refused as
    :func:`table_event_from_envelope` refuses, and then as :func:`event_from_proto` does;
    the payload is parsed as its own message, with no TableEvent around it."""
    if envelope.schema_version < 1:
        raise BadRequest("schema_version", "missing (envelopes start at schema_version 1)")
    known = _EVENT_MESSAGES.get(envelope.event_type)
    if known is None:
        raise BadRequest("event_type", f"unknown event type {envelope.event_type!r}")
    name, kind = known
    event_type, payload = envelope.event_type, envelope.payload
    kept = event_type in _KEPT_NAMES
    if kept:
        event = _EVENTS.get((event_type, payload))
        if event is not None:
            return event
    try:
        typed = kind.FromString(payload)
    except DecodeError as exc:
        raise BadRequest("payload", f"not a {event_type}: {exc}") from None
    event = event_from_message(name, typed)
    if kept:
        if len(_EVENTS) >= PAYLOADS_KEPT:
            _EVENTS.clear()
        _EVENTS[(event_type, payload)] = event
    return event
