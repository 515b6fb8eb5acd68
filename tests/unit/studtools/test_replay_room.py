"""``studtools.replay_room.room_line``: every room event of ``room.proto`` has its own line
(none falls through to the bare type name), and the money, close and settlement lines say
who, which seat and how much."""

from __future__ import annotations

import pytest
from google.protobuf.message import Message

from stud.v1 import room_pb2 as rpb
from studtools.replay_room import room_line

EVENT_TYPES = [f.message_type.name for f in rpb.RoomEvent.DESCRIPTOR.oneofs_by_name[
    "event"].fields]


@pytest.mark.parametrize("name", EVENT_TYPES)
def test_every_room_event_has_a_line_of_its_own(name: str) -> None:
    event: Message = getattr(rpb, name)()
    line = room_line(event)
    assert line and line != name


@pytest.mark.parametrize(("event", "line"), [
    (rpb.BuyInRequested(seat=2, player_id="ann", amount=12_000),
     "Seat 2: ann asks to sit down with 12,000"),
    (rpb.BuyInFailed(seat=2, player_id="ann", reason="insufficient_funds"),
     "Seat 2: ann's buy-in failed (insufficient_funds)"),
    (rpb.BuyInFailed(seat=2, player_id="ann"), "Seat 2: ann's buy-in failed (refused)"),
    (rpb.BuyInRefundDue(seat=4, player_id="bob", reason="seat_taken"),
     "Seat 4: bob's buy-in to be refunded (seat_taken)"),
    (rpb.BuyInRefunded(seat=4, player_id="bob", amount=3_500),
     "Seat 4: bob's buy-in of 3,500 refunded"),
    (rpb.TopUpQueued(seat=1, player_id="cat", amount=1_000),
     "Seat 1: cat adds 1,000 (queued)"),
    (rpb.TopUpDropped(seat=1, player_id="cat", reason="rathole"),
     "Seat 1: cat's top-up dropped (rathole)"),
    (rpb.CashOutRequested(seat=5, player_id="dan", amount=20_250),
     "Seat 5: dan cashes out 20,250"),
    (rpb.CashOutPaid(seat=5, player_id="dan"), "Seat 5: dan's cash-out paid"),
    (rpb.LeaveRequested(seat=5, player_id="dan"), "Seat 5: dan leaves after the hand"),
    (rpb.TableClosed(by="ops"), "Table closed by ops"),
    (rpb.TableClosed(), "Table closed by an operator"),
    (rpb.HandSettled(hand_number=17, rake=1_250),
     "Hand #17 settled (rake 1,250; by the wallet at a cash table)"),
    (rpb.DealingStopped(reason="seat 3: escrow None vs table ('ann', 10)"),
     "Dealing stopped: seat 3: escrow None vs table ('ann', 10)"),
    (rpb.OrphanEscrowRefunded(seat=3, player_id="eve", amount=2_000),
     "Seat 3: an escrow of 2,000 the log did not know was paid back to eve"),
])
def test_a_money_close_or_settlement_line_says_who_and_how_much(event: Message,
                                                                line: str) -> None:
    assert room_line(event) == line


def test_there_are_room_events_to_check() -> None:
    assert {"TableClosed", "HandSettled", "BuyInRefunded", "OrphanEscrowRefunded",
            "CashOutPaid"} <= set(EVENT_TYPES)
