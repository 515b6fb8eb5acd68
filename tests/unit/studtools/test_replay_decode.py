"""``studtools.replay_source.decode_all``: a log's stored envelopes decoded in one loop give the
values decoding each gives (``decode_stored``; with the stream's entry ids, ``decode_entry``),
room events and envelopes written before they carried a sequence included."""

from __future__ import annotations

from datetime import UTC, datetime

from rules import TableConfig, public_event
from rules.events import Called, Checked, HandStarted, TableOpened
from stud.v1 import room_pb2 as rpb
from studkit.mapping import room_envelope
from studkit.mapping.envelope import envelope_for
from studtools.replay_hands import Logged
from studtools.replay_source import RoomLogged, decode_all, decode_entry, decode_stored

WHEN = datetime(2026, 12, 6, 3, 30, 15, 250_000, tzinfo=UTC)


def stored() -> list[bytes]:
    events = [TableOpened(table_id="t1", config=TableConfig()),
              HandStarted(hand_number=1, seats=(1, 2)),
              Checked(seat=1), Called(seat=2, amount=100), Checked(seat=1)]
    out = []
    for sequence, event in enumerate(events, 1):
        envelope = envelope_for(public_event(event), table_id="t1", hand_number=1,
                                command_id=f"c{sequence}", occurred_at=WHEN)
        envelope.sequence = sequence
        out.append(envelope.SerializeToString())
    room = room_envelope(rpb.HandSettled(hand_number=1, rake=50), table_id="t1",
                         hand_number=1, command_id="settle", occurred_at=WHEN)
    room.sequence = len(out) + 1
    out.append(room.SerializeToString())
    return out


def test_one_loop_decodes_as_each_envelope_alone() -> None:
    payloads = stored()
    decoded = decode_all(payloads)
    assert decoded == [decode_stored(p) for p in payloads]
    assert [type(d) for d in decoded] == [Logged] * 5 + [RoomLogged]
    assert [d.sequence for d in decoded] == [1, 2, 3, 4, 5, 6]
    first = decoded[2]
    assert isinstance(first, Logged) and first.event == Checked(seat=1)
    assert first.command_id == "c3" and first.occurred_at == WHEN.timestamp()


def test_an_envelope_without_a_sequence_takes_its_entry_id() -> None:
    from stud.v1.envelope_pb2 import EventEnvelope

    old = []
    for payload in stored():
        envelope = EventEnvelope.FromString(payload)
        envelope.sequence = 0
        old.append(envelope.SerializeToString())
    ids = [f"0-{40 + i}".encode() for i in range(len(old))]
    decoded = decode_all(old, ids)
    assert decoded == [decode_entry(i, p) for i, p in zip(ids, old, strict=True)]
    assert [d.sequence for d in decoded[:5]] == [40, 41, 42, 43, 44]
