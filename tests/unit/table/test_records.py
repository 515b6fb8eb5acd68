"""The watch's records serialized once for all viewers who may see them alike
(``table.views.Records``, issue 35): each viewer's bytes are the record ``record_for`` makes
for that viewer, a down card never reaches a viewer ``event_for`` hides it from (however the
viewers come in), and a batched message is the record with the others in its ``more``."""

from __future__ import annotations

import itertools

import pytest

from rules.cards import parse_cards
from rules.events import Checked, DownCardDealt, HandMucked
from rules.streets import Street
from stud.v1 import table_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.mapping.envelope import envelope_at, timestamp_of
from table.views import Records, batch_bytes, record_for


def _envelope(event: object, sequence: int) -> EventEnvelope:
    envelope = envelope_at(event, table_id="t1", hand_number=3, command_id="",  # type: ignore[arg-type]
                           occurred_at=timestamp_of(1_700_000_000.25))
    envelope.sequence = sequence
    return envelope


DOWN = _envelope(DownCardDealt(seat=2, street=Street.THIRD), 7)  # stored without its card
SECRET = _envelope(HandMucked(seat=4, down=tuple(parse_cards("9s 2d 5c"))), 8)
PUBLIC = _envelope(Checked(seat=1), 9)
VIEWERS = [(None, False), (1, True), (2, True), (2, False), (4, True), (4, False), (5, False)]


@pytest.mark.parametrize("order", [*itertools.permutations(VIEWERS[:4]), VIEWERS])
def test_each_viewer_gets_its_own_record_whoever_asked_first(
        order: list[tuple[int | None, bool]]) -> None:
    records = Records()
    for envelope in (DOWN, SECRET, PUBLIC):
        for viewer, dealt_in in order:
            data = records.record_bytes(envelope, viewer, dealt_in)
            assert pb.TableEventRecord.FromString(data) == record_for(envelope, viewer,
                                                                      dealt_in)


@pytest.mark.parametrize("first", VIEWERS)
def test_mucked_down_cards_reach_their_seat_and_the_players_dealt_in_only(
        first: tuple[int | None, bool]) -> None:
    records = Records()
    records.record_bytes(SECRET, *first)
    for viewer, dealt_in in VIEWERS:
        seen = pb.TableEventRecord.FromString(records.record_bytes(SECRET, viewer, dealt_in))
        assert len(seen.event.hand_mucked.down) == (3 if viewer == 4 or dealt_in else 0)


def test_the_same_record_is_made_once_for_viewers_who_see_it_alike() -> None:
    records = Records()
    assert records.record_bytes(PUBLIC, None, False) is records.record_bytes(PUBLIC, 3, True)
    assert records.record_bytes(DOWN, None, False) is records.record_bytes(DOWN, 2, True)
    shown = records.record_bytes(SECRET, 1, True)
    assert records.record_bytes(SECRET, 4, False) is shown
    hidden = records.record_bytes(SECRET, 5, False)
    assert hidden != shown and records.record_bytes(SECRET, 5, False) is hidden


def test_an_equal_envelope_of_another_read_is_made_again_and_the_kept_are_bounded() -> None:
    records = Records(kept=2)
    first = records.record_bytes(PUBLIC, None, False)
    again = EventEnvelope.FromString(PUBLIC.SerializeToString())
    assert records.record_bytes(again, None, False) == first
    assert records.record_bytes(again, None, False) is not first  # its own entry
    for sequence in range(20, 30):
        records.record_bytes(_envelope(Checked(seat=2), sequence), None, False)
    assert len(records._entries) == 2


def test_a_batch_is_the_first_record_with_the_others_in_more() -> None:
    records = Records()
    parts = [records.record_bytes(e, 4, True) for e in (DOWN, SECRET, PUBLIC)]
    message = record_for(DOWN, 4, True)
    message.more.extend([record_for(SECRET, 4, True), record_for(PUBLIC, 4, True)])
    assert pb.TableEventRecord.FromString(batch_bytes(parts)) == message
    assert batch_bytes(parts) == message.SerializeToString()
    assert batch_bytes(parts[:1]) == parts[0]


def test_every_record_is_byte_for_byte_the_record_protobuf_makes() -> None:
    """Each viewer's bytes of every game event of random tables (every kind a table writes,
    down cards stored without their value, hands 0 and on, sequences past one byte) are the
    bytes of ``record_for``'s message, serialized by protobuf (the shared record is written
    from the event's kept payload: issue 35)."""
    import random
    from dataclasses import replace

    from studtest.random_tables import play_random_tables

    envelopes: list[EventEnvelope] = []

    def observer(_table: object) -> object:
        def observe(_state: object, _command: object, events: tuple[object, ...]) -> None:
            for event in events:
                if isinstance(event, DownCardDealt):
                    event = replace(event, card=None)
                envelope = envelope_at(
                    event, table_id="t1", hand_number=len(envelopes) % 3,  # type: ignore[arg-type]
                    command_id="", occurred_at=timestamp_of(1_700_000_000 + len(envelopes)))
                envelope.sequence = len(envelopes) * 37
                envelopes.append(envelope)
        return observe

    play_random_tables(random.Random(35), 6, observer, hands=3)  # type: ignore[arg-type]
    kinds = {e.event_type for e in envelopes}
    assert {"HandStarted", "UpCardDealt", "Called", "HandShown", "PotAwarded"} <= kinds
    records = Records()
    for envelope in envelopes:
        for viewer, dealt_in in VIEWERS:
            assert records.record_bytes(envelope, viewer, dealt_in) == record_for(
                envelope, viewer, dealt_in).SerializeToString()
