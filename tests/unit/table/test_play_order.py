"""Where a Play stream's replies go among its records (``table.play_order.ReplyOrder``,
issue 35), on crafted records and replies: an applied action's reply goes out where its
records would have been, after every record written before them (delivered by the watch
before the reply or after it), a retry's reply too; a refusal after the records it releases;
replies in the order of their actions; the stream's own applied records never again as
records; at the end, the held records, then the replies whose records never came."""

from __future__ import annotations

from stud.v1.envelope_pb2 import EventEnvelope
from table.play_order import ReplyOrder

LIVE_FROM = 10
A, B, OTHER = "player:ann/a", "player:ann/b", "player:bob/x"


def render(batch: list[EventEnvelope]) -> list[bytes]:
    assert batch, "a run rendered is never empty"
    return [b"r%d" % e.sequence for e in batch]


def order(every_own: str | None = None) -> ReplyOrder:
    return ReplyOrder(LIVE_FROM, every_own, render)


def batch(*records: tuple[int, str]) -> list[EventEnvelope]:
    return [EventEnvelope(sequence=s, command_id=c, hand_number=1) for s, c in records]


def test_a_reply_waits_for_every_record_written_before_its_action() -> None:
    o = order()
    o.started(A)
    # The reply is ready before the watch has delivered the record written before it (12).
    assert o.batch(batch((11, OTHER))) == [b"r11"]
    assert o.answered(b"reply-a", A, 13, True) == []
    assert o.batch(batch((12, OTHER), (13, A), (14, OTHER))) == [b"r12", b"reply-a", b"r14"]


def test_a_reply_whose_records_do_not_come_goes_before_the_first_record_past_it() -> None:
    o = order()
    o.started(A)
    assert o.answered(b"reply-a", A, 12, True) == []
    assert o.batch(batch((11, OTHER), (12, OTHER))) == [b"r11", b"r12"]
    assert o.batch(batch((13, OTHER))) == [b"reply-a", b"r13"]


def test_records_of_an_action_in_flight_wait_for_its_reply() -> None:
    o = order()
    o.started(A)
    assert o.batch(batch((11, OTHER), (12, A))) == []  # held: A's record, its outcome unknown
    assert o.batch(batch((13, OTHER))) == []  # behind it, in order
    assert o.answered(b"reply-a", A, 12, True) == [b"r11", b"reply-a", b"r13"]
    assert o.batch(batch((14, A))) == [b"r14"]  # past A's version: another command's again


def test_a_refusal_releases_the_held_records_before_it() -> None:
    o = order()
    o.started(A)
    assert o.batch(batch((11, A))) == []  # a unary call of the same id, say
    assert o.answered(b"refused-a", A, None, False) == [b"r11", b"refused-a"]
    assert o.mine == {}


def test_a_refusal_before_a_command_id_goes_at_once() -> None:
    o = order()
    o.started(A)
    assert o.batch(batch((11, A))) == []
    assert o.answered(b"refused", "", None, False) == [b"refused"]  # A still in flight
    assert o.answered(b"reply-a", A, 11, True) == [b"reply-a"]


def test_a_retry_whose_records_came_goes_after_the_records_it_releases() -> None:
    o = order()
    assert o.batch(batch((11, OTHER), (12, OTHER))) == [b"r11", b"r12"]
    o.started(B)
    assert o.batch(batch((13, B))) == []  # held: B in flight (its first attempt's record)
    # B's first attempt applied but its reply was lost (UNAVAILABLE): the retry is a duplicate
    # of version 13, written after the record before it, its own records left out.
    assert o.answered(b"retry-b", B, 13, False) == [b"retry-b"]
    o2 = order()
    o2.started(B)
    assert o2.batch(batch((11, OTHER), (12, B))) == []
    assert o2.answered(b"retry-b", B, 12, False) == [b"r11", b"retry-b"]


def test_a_retry_whose_records_have_not_come_waits_for_the_records_before_them() -> None:
    # A resumed stream: the watch from 8, the table at 12 (B applied at 12 on a stream
    # before); B sent again is a duplicate, written where its records would have been.
    o = ReplyOrder(12, None, render, 8)
    o.started(B)
    assert o.answered(b"retry-b", B, 12, False) == []
    assert o.batch(batch((9, OTHER), (10, OTHER), (11, OTHER))) == [b"r9", b"r10", b"r11"]
    assert o.batch(batch((12, B), (13, OTHER))) == [b"retry-b", b"r12", b"r13"]


def test_a_retry_of_an_action_delivered_before_goes_after_a_waiting_reply() -> None:
    o = order()
    assert o.batch(batch((11, OTHER))) == [b"r11"]
    o.started(A)
    assert o.answered(b"reply-a", A, 13, True) == []
    o.started(B)
    assert o.answered(b"retry-b", B, 5, False) == []  # not past the reply before it
    assert o.batch(batch((12, OTHER), (13, A))) == [b"r12", b"reply-a", b"retry-b"]


def test_a_refusal_goes_after_the_replies_still_waiting() -> None:
    o = order()
    o.started(A)
    assert o.answered(b"reply-a", A, 12, True) == []
    o.started(B)
    assert o.answered(b"refused-b", B, None, False) == []
    assert o.answered(b"refused", "", None, False) == []
    assert o.batch(batch((11, OTHER), (12, A), (13, OTHER))) == [
        b"r11", b"reply-a", b"refused-b", b"refused", b"r13"]
    o.started(B)
    assert o.answered(b"reply-b", B, 15, True) == []
    assert o.answered(b"refused-b", B, None, False) == []
    assert o.drain() == [b"reply-b", b"refused-b"]


def test_two_replies_each_in_its_place() -> None:
    o = order()
    o.started(A)
    assert o.answered(b"reply-a", A, 12, True) == []
    o.started(B)
    assert o.answered(b"reply-b", B, 14, True) == []
    assert o.batch(batch((11, OTHER), (12, A), (13, OTHER), (14, B), (15, OTHER))) == [
        b"r11", b"reply-a", b"r13", b"reply-b", b"r15"]


def test_own_records_before_the_watch_began_are_records() -> None:
    o = order()
    o.started(A)
    assert o.batch(batch((9, A), (10, A))) == [b"r9", b"r10"]


def test_skip_own_leaves_out_every_command_of_the_caller() -> None:
    o = order(every_own="player:ann/")
    assert o.batch(batch((11, "player:ann/z"), (12, OTHER))) == [b"r12"]
    assert o.batch(batch((13, "player:ann/z"))) == []


def test_the_end_gives_the_held_records_then_the_replies_whose_records_never_came() -> None:
    o = order()
    o.started(A)
    o.started(B)
    assert o.answered(b"reply-a", A, 20, True) == []
    assert o.batch(batch((11, OTHER), (12, B))) == []  # B never answers
    assert o.drain() == [b"r11", b"r12", b"reply-a"]
    assert (o.held, o.pending, o.mine) == ([], {}, {A: 20})


def test_a_retry_of_a_reply_still_waiting_goes_right_after_it() -> None:
    o = order()
    o.started(A)
    assert o.answered(b"reply-a", A, 12, True) == []
    # The same command again on the stream, answered with its recorded outcome before the
    # watch brought the first one's records: it does not overtake the reply it repeats.
    assert o.answered(b"retry-a", A, 12, False) == []
    assert o.batch(batch((11, OTHER), (12, A), (13, OTHER))) == [
        b"r11", b"reply-a", b"retry-a", b"r13"]


def test_a_retry_still_waiting_at_the_end_follows_its_reply() -> None:
    o = order()
    o.started(A)
    assert o.answered(b"reply-a", A, 12, True) == []
    assert o.answered(b"retry-a", A, 12, False) == []
    assert o.drain() == [b"reply-a", b"retry-a"]


def test_waiting_says_whether_a_reply_waits_for_its_place() -> None:
    """What the Play handler waits on before it reads the next message."""
    o = order()
    assert not o.waiting
    o.started(A)
    assert not o.waiting  # in flight, not answered
    assert o.answered(b"reply-a", A, 12, True) == []
    assert o.waiting
    assert o.batch(batch((11, OTHER), (12, A))) == [b"r11", b"reply-a"]
    assert not o.waiting
    o.started(B)
    assert o.answered(b"reply-b", B, 13, True) == []
    assert o.waiting
    assert o.drain() == [b"reply-b"]
    assert not o.waiting
