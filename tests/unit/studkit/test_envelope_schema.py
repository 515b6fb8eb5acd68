"""Stored events stay readable as the schema grows (docs/events.md): fields are only ever
added, never renumbered or reused, and removed ones are ``reserved``.

The "old" and "new" releases of a message are built at test time from descriptors, so the
test needs no second copy of the generated code.
"""

from __future__ import annotations

from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)
from google.protobuf.message import Message  # type: ignore[import-untyped]

from stud.v1.envelope_pb2 import EventEnvelope

F = descriptor_pb2.FieldDescriptorProto


def message_class(
    package: str, name: str, fields: list[tuple[str, int, int]], reserved: tuple[int, ...] = ()
) -> type[Message]:
    """A proto3 message class with ``fields`` as (name, number, type)."""
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"{package.replace('.', '/')}/{name.lower()}.proto", package=package, syntax="proto3"
    )
    message = proto.message_type.add(name=name)
    for field_name, number, kind in fields:
        message.field.add(name=field_name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    for number in reserved:
        message.reserved_range.add(start=number, end=number + 1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    cls: type[Message] = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{package}.{name}")
    )
    return cls


# Release 1 of an event, and release 2: `rake` added as field 3, `note` (4) removed and
# reserved. A change of meaning of `stack` would have been a new event type instead.
PotV1 = message_class("probe.v1", "PotAwarded", [
    ("seat", 1, F.TYPE_UINT32), ("amount", 2, F.TYPE_UINT64), ("note", 4, F.TYPE_STRING),
])
PotV2 = message_class("probe.v2", "PotAwarded", [
    ("seat", 1, F.TYPE_UINT32), ("amount", 2, F.TYPE_UINT64), ("rake", 3, F.TYPE_UINT64),
], reserved=(4,))

# The envelope as a first release might have written it: only fields 1 to 5.
EnvelopeV0 = message_class("probe.v0", "EventEnvelope", [
    ("event_type", 1, F.TYPE_STRING), ("schema_version", 2, F.TYPE_UINT32),
    ("table_id", 3, F.TYPE_STRING), ("hand_number", 4, F.TYPE_UINT64),
    ("sequence", 5, F.TYPE_UINT64),
])


class TestSchemaGrowth:
    def test_new_reader_parses_old_event_with_new_field_at_default(self) -> None:
        """Bytes written by release 1 parse with release 2; the added field reads 0."""
        old = PotV1(seat=3, amount=450)
        new = PotV2.FromString(old.SerializeToString())
        assert (new.seat, new.amount, new.rake) == (3, 450, 0)

    def test_new_reader_skips_a_removed_and_reserved_field(self) -> None:
        """An old event still carrying a field since removed parses; the field is ignored
        (its number is reserved so nothing can ever reinterpret it)."""
        old = PotV1(seat=3, amount=450, note="legacy")
        new = PotV2.FromString(old.SerializeToString())
        assert (new.seat, new.amount) == (3, 450)

    def test_old_reader_keeps_unknown_new_fields_when_reserialising(self) -> None:
        """A not-yet-upgraded reader parses a newer event and, re-serialising it, keeps the
        fields it does not know (proto3 keeps unknown fields)."""
        newer = PotV2(seat=1, amount=90, rake=5).SerializeToString()
        old = PotV1.FromString(newer)
        assert (old.seat, old.amount) == (1, 90)
        assert PotV2.FromString(old.SerializeToString()).rake == 5

    def test_todays_envelope_parses_an_envelope_lacking_newer_fields(self) -> None:
        """An envelope written before command_id, occurred_at and payload existed parses
        with today's EventEnvelope; the missing fields read as unset."""
        raw = EnvelopeV0(event_type="HandStarted", schema_version=1, table_id="t1",
                         hand_number=2, sequence=9).SerializeToString()
        envelope = EventEnvelope.FromString(raw)
        assert (envelope.event_type, envelope.table_id, envelope.hand_number,
                envelope.sequence) == ("HandStarted", "t1", 2, 9)
        assert envelope.command_id == "" and envelope.payload == b""
        assert not envelope.HasField("occurred_at")

    def test_envelope_field_numbers_never_change(self) -> None:
        """The envelope's field numbers are the storage format: this pins them."""
        numbers = {f.name: f.number for f in EventEnvelope.DESCRIPTOR.fields}
        assert numbers == {
            "event_type": 1, "schema_version": 2, "table_id": 3, "hand_number": 4,
            "sequence": 5, "command_id": 6, "occurred_at": 7, "payload": 8,
            "turn_clock": 9, "prev_digest": 10, "traceparent": 11,
        }
