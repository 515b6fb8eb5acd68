"""Protobuf <-> rules values for the wire contracts (``protos/stud/v1``), pure: cards, table
configs, legal actions, events, commands and the event envelope.

Every ``*_from_proto`` validates what the rules cannot see on the wire (an unset oneof, an
unspecified or unknown enum value, a malformed card, a negative amount, a seat out of 1..8, a
missing required message, an unsafe id) and raises :class:`~studkit.errors.BadRequest` naming
the field by its path, e.g. ``deal_street.cards[2].card.rank``. Whether a well-formed command
is legal now is the rules' business (``RuleViolation``), not this package's.

>>> from rules.cards import Card
>>> card_from_proto(card_to_proto(Card.parse("Ah")))
Card('Ah')
>>> from stud.v1 import common_pb2
>>> card_from_proto(common_pb2.Card(rank=common_pb2.RANK_ACE))
Traceback (most recent call last):
...
studkit.errors.BadRequest: card.suit: not a suit: 0
"""

from studkit.mapping.commands import command_from_proto, command_to_proto
from studkit.mapping.common import (
    MAX_SEAT,
    card_from_proto,
    card_to_proto,
    config_from_proto,
    config_to_proto,
    legal_actions_from_proto,
    legal_actions_to_proto,
    street_from_proto,
    street_to_proto,
)
from studkit.mapping.envelope import (
    SCHEMA_VERSION,
    envelope_at,
    envelope_for,
    event_from_envelope,
    event_type,
    payload_of,
    table_event_from_envelope,
    timestamp,
    timestamp_of,
)
from studkit.mapping.events import (
    event_from_message,
    event_from_proto,
    event_message,
    event_to_proto,
)
from studkit.mapping.room import (
    ROOM_EVENT_TYPES,
    ROOM_EVENTS,
    game_envelopes,
    is_room_event,
    room_envelope,
    room_envelope_at,
    room_event_from_envelope,
)

__all__ = [
    "MAX_SEAT",
    "ROOM_EVENTS",
    "ROOM_EVENT_TYPES",
    "SCHEMA_VERSION",
    "card_from_proto",
    "card_to_proto",
    "command_from_proto",
    "command_to_proto",
    "config_from_proto",
    "config_to_proto",
    "envelope_at",
    "envelope_for",
    "event_from_envelope",
    "event_from_message",
    "event_from_proto",
    "event_message",
    "event_to_proto",
    "event_type",
    "game_envelopes",
    "is_room_event",
    "legal_actions_from_proto",
    "legal_actions_to_proto",
    "payload_of",
    "room_envelope",
    "room_envelope_at",
    "room_event_from_envelope",
    "street_from_proto",
    "street_to_proto",
    "table_event_from_envelope",
    "timestamp",
    "timestamp_of",
]
