"""The room's one codec (services/table/codec.py): each room event, a frozen dataclass, is
stored as the ``room.proto`` message of its name with the same fields, so a stream written
when the room's events were the messages themselves loads as it is, and what the table
writes now is byte for byte what it wrote then."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import TableConfig
from stud.v1 import room_pb2 as rpb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.mapping import is_room_event
from table import room_events as rev
from table.actor import ActorDeps, TableActor, decode
from table.codec import room_event_from_proto, room_event_to_proto
from table.model import TableSettings
from table.room import (
    Close,
    ConfirmBuyIn,
    DropTopUp,
    EndBuyIn,
    Leave,
    Open,
    PayCashOut,
    QueueTopUp,
    Reconciled,
    Record,
    RequestBuyIn,
    Room,
    RoomCommand,
    SetMuck,
    Settle,
    apply,
    decide,
)
from table.room_events import ROOM_EVENT_CLASSES

# Written by the table before its room events were dataclasses (a5e9f71's successor,
# 5fde448): the envelopes of the commands below, one per event, as stored.
OLD_STREAM = (
    "0a0b5461626c654f70656e656410011a0274312801320263313a0908e8071080cab5ee01421c0a02743112160808100218c801209003282830323803400150015801",
    "0a0b53657474696e677353657410011a0274312802320263323a0908e8071080cab5ee01421c0a1a080f101e18c03e20c0b80228b8173001380240d80448880e503c",
    "0a0e427579496e52657175657374656410011a0274312803320263333a0908e8071080cab5ee01421808011203616e6e18904e22056b2d616e6e2a05632d616e6e",
    "0a0c506c6179657253656174656410011a0274312804320263343a0908e8071080cab5ee01420a08011203616e6e18904e",
    "0a0e427579496e52657175657374656410011a0274312805320263353a0908e8071080cab5ee01421808021203626f6218a84622056b2d626f622a05632d626f62",
    "0a0b427579496e4661696c656410011a0274312806320263363a0908e8071080cab5ee01421b08021203626f621a12696e73756666696369656e745f66756e6473",
    "0a0e427579496e52657175657374656410011a0274312807320263373a0908e8071080cab5ee0142180803120363617418c03e22056b2d6361742a05632d636174",
    "0a0e427579496e526566756e6444756510011a0274312808320263383a0908e8071080cab5ee01420d080312036361741a0473656174",
    "0a0d427579496e526566756e64656410011a0274312809320263393a0908e8071080cab5ee01420a0803120363617418c03e",
    "0a0b546f70557051756575656410011a027431280a32036331303a0908e8071080cab5ee01421808011203616e6e18e80722056b2d746f702a05632d746f70",
    "0a0c546f70557044726f7070656410011a027431280b32036331313a0908e8071080cab5ee01421008011203616e6e1a0772656675736564",
    "0a114d75636b507265666572656e636553657410011a027431280c32036331323a0908e8071080cab5ee01420908011203616e6e1801",
    "0a0b48616e64536574746c656410011a027431280d32036331333a0908e8071080cab5ee0142020801",
    "0a0e4465616c696e6753746f7070656410011a027431280e32036331343a0908e8071080cab5ee01420f0a0d7365617420313a2077726f6e67",
    "0a0e4465616c696e67526573756d656410011a027431280f32036331353a0908e8071080cab5ee01",
    "0a144f727068616e457363726f77526566756e64656410011a027431281032036331363a0908e8071080cab5ee0142090805120364616e1846",
    "0a0a506c617965724c65667410011a027431281132036331373a0908e8071080cab5ee01420a08011203616e6e18904e",
    "0a10436173684f757452657175657374656410011a027431281232036331383a0908e8071080cab5ee01421308011203616e6e18904e22076b2d6c65617665",
    "0a0b436173684f75745061696410011a027431281332036331393a0908e8071080cab5ee01420708011203616e6e",
    "0a0b5461626c65436c6f73656410011a027431281432036332303a0908e8071080cab5ee0142040a026f70",
)

NOW = 1_000.5
COMMANDS: tuple[RoomCommand, ...] = (
    Open("t1", TableConfig(), TableSettings(action_time_s=15.4)),
    RequestBuyIn(1, "ann", 10_000, "k-ann", "c-ann"), ConfirmBuyIn(1, "k-ann"),
    RequestBuyIn(2, "bob", 9_000, "k-bob", "c-bob"),
    EndBuyIn(2, "k-bob", "failed", "insufficient_funds"),
    RequestBuyIn(3, "cat", 8_000, "k-cat", "c-cat"), EndBuyIn(3, "k-cat", "refund_due", "seat"),
    EndBuyIn(3, "k-cat", "refunded"),
    QueueTopUp(1, "ann", 1_000, "k-top", "c-top"), DropTopUp(1, "k-top", "refused"),
    SetMuck(1, "ann", True), Settle(1, 0), Reconciled("seat 1: wrong"), Reconciled(""),
    Record((rev.OrphanEscrowRefunded(seat=5, player_id="dan", amount=70),)),
    Leave(1, "ann", "k-leave"), PayCashOut(1, "k-leave"), Close(by="op"))


def old_envelopes() -> list[EventEnvelope]:
    return [EventEnvelope.FromString(bytes.fromhex(h)) for h in OLD_STREAM]


def live() -> Room:
    room = Room()
    for command in COMMANDS:
        decision = decide(room, command, NOW)
        room = apply(room, decision.events, at=NOW, first_sequence=room.version + 1,
                     table=decision.table)
    return room


def sample(cls: type[rev.RoomEvent]) -> rev.RoomEvent:
    """An event of ``cls`` with no field at its default (so every field is on the wire)."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        kind = str(f.type)
        values[f.name] = (TableSettings(action_time_s=12.0, buy_in_min=5, buy_in_max=9)
                          if f.name == "settings" else True if kind == "bool"
                          else 7 if kind == "int" else f"{f.name}-x")
    return cls(**values)


def test_every_room_event_has_its_message_with_the_same_fields() -> None:
    """One dataclass per case of ``RoomEvent``'s oneof, of the same name and fields."""
    cases = {f.message_type.name: f.message_type
             for f in rpb.RoomEvent.DESCRIPTOR.oneofs_by_name["event"].fields}
    assert {cls.__name__ for cls in ROOM_EVENT_CLASSES} == set(cases)
    for cls in ROOM_EVENT_CLASSES:
        assert [f.name for f in fields(cls)] == [f.name for f in cases[cls.__name__].fields]


@pytest.mark.parametrize("cls", ROOM_EVENT_CLASSES, ids=lambda c: c.__name__)
def test_each_room_event_goes_to_its_message_and_back(cls: type[rev.RoomEvent]) -> None:
    event = sample(cls)
    message = room_event_to_proto(event)
    assert type(message).__name__ == cls.__name__
    assert room_event_from_proto(type(message).FromString(message.SerializeToString())) == event


def test_an_old_stream_loads_into_the_room_deciding_makes_now() -> None:
    """The stored stream folds (through the actor's load path) into the very room that
    deciding the same commands makes today."""
    actor = TableActor("t1", ActorDeps(store=cast(Any, None), redis=cast(Any, None)))
    actor.fold(old_envelopes())
    expected = live()
    assert actor.room == expected
    assert expected.closed and expected.settled == 1 and not expected.sagas
    assert expected.settings.action_time_s == 15.0  # as stored: whole seconds
    assert expected.departures == {"ann": (10_000, NOW)}


def test_the_table_writes_the_bytes_it_wrote_before() -> None:
    """Every room event of the old stream, decoded and encoded again, is the same payload;
    and deciding the commands again makes the same room events, in order."""
    stored = [e for e in old_envelopes() if is_room_event(e)]
    decoded = [decode(e) for e in stored]
    assert all(isinstance(e, ROOM_EVENT_CLASSES) for e in decoded)
    again = [room_event_to_proto(cast(rev.RoomEvent, e)).SerializeToString(deterministic=True)
             for e in decoded]
    assert again == [e.payload for e in stored]
    room, made = Room(), []
    for command in COMMANDS:
        decision = decide(room, command, NOW)
        made += [e for e in decision.events if isinstance(e, ROOM_EVENT_CLASSES)]
        room = apply(room, decision.events, at=NOW, first_sequence=room.version + 1,
                     table=decision.table)
    assert made == decoded


def test_a_turns_clock_is_an_event_stored_on_the_envelope_before_it() -> None:
    """A deal that gives a seat the turn decides a ``TurnStarted`` after the rules' events;
    it is stored as the last envelope's ``turn_clock`` (no envelope, no sequence of its
    own), and folding the sealed envelopes gives the room deciding made."""
    from rules import pending_deal
    from rules.cards import parse_cards
    from rules.commands import StartHand
    from rules.testing import deal_command
    from studkit.commit import seal
    from table.actor import Asked
    from table.room import Play
    from table.room_events import TurnStarted

    room = live_seated()
    room = run_at(room, Play(StartHand(hand_number=1, deck_commitment="c")))
    plan = pending_deal(room.table)
    assert plan is not None
    deal = deal_command(plan, parse_cards("2c 9d 3h Kd 5s 7h")[:len(plan.slots)],
                        hide_down=True)
    actor = TableActor("t1", ActorDeps(store=cast(Any, None), redis=cast(Any, None),
                                       clock=lambda: NOW + 1))
    actor.room = room
    proposal = actor.decide(Asked(Play(deal)))
    started = proposal.events[-1]
    assert isinstance(started, TurnStarted) and started.started_at == NOW + 1
    assert started.deadline > started.action_deadline > started.started_at
    assert len(proposal.envelopes) == len(proposal.events) - 1
    assert [e.HasField("turn_clock") for e in proposal.envelopes][-2:] == [False, True]
    seal(proposal.envelopes, "t1", "s:deal", room.version)
    folded = TableActor("t1", ActorDeps(store=cast(Any, None), redis=cast(Any, None)))
    folded.room = room
    folded.fold(proposal.envelopes)
    assert folded.room == proposal.state and folded.room.turn is not None
    assert folded.room.version == room.version + len(proposal.envelopes)


def live_seated() -> Room:
    room = run_at(Room(), COMMANDS[0])
    for seat, player in ((1, "ann"), (2, "bob")):
        room = run_at(room, RequestBuyIn(seat, player, 10_000, f"k{seat}", f"c{seat}"))
        room = run_at(room, ConfirmBuyIn(seat, f"k{seat}"))
    return room


def run_at(room: Room, command: RoomCommand) -> Room:
    decision = decide(room, command, NOW)
    return apply(room, decision.events, at=NOW, first_sequence=room.version + 1,
                 table=decision.table)


@given(st.tuples(*[st.floats(min_value=-1e12, max_value=1e12,
                             allow_nan=False, allow_infinity=False)] * 3),
       st.integers(0, 8), st.integers(0, 2**31 - 1))
def test_a_turns_clock_is_set_as_protobuf_sets_it(times: tuple[float, float, float],
                                                  seat: int, bank_ms: int) -> None:
    """The envelope's ``turn_clock``, set in place (issue 35), is field for field and byte
    for byte the message protobuf's ``FromMicroseconds`` makes; past a Timestamp's range
    both refuse with the same ValueError."""
    from stud.v1.envelope_pb2 import TurnClock
    from table.codec import set_turn_clock
    from table.room_events import TurnStarted

    turn = TurnStarted(seat=seat, started_at=times[0], action_deadline=times[1],
                       deadline=times[2], bank_ms=bank_ms)
    expected = TurnClock(seat=seat, time_bank_ms=bank_ms)
    failed: str | None = None
    try:
        expected.started_at.FromMicroseconds(round(turn.started_at * 1e6))
        expected.action_deadline.FromMicroseconds(round(turn.action_deadline * 1e6))
        expected.deadline.FromMicroseconds(round(turn.deadline * 1e6))
    except ValueError as exc:
        failed = str(exc)
    envelope = EventEnvelope()
    if failed is not None:
        with pytest.raises(ValueError) as raised:
            set_turn_clock(envelope.turn_clock, turn)
        assert str(raised.value) == failed
        return
    set_turn_clock(envelope.turn_clock, turn)
    assert envelope.turn_clock == expected
    assert envelope.SerializeToString() == EventEnvelope(turn_clock=expected).SerializeToString()
