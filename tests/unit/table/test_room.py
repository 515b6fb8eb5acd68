"""The room model, pure (services/table/room.py): its policies decided and folded without
Redis or gRPC, as the wallet's ledger is tested. Every test decides a command on a room,
folds the events it causes, and looks at the room that results."""

from __future__ import annotations

from dataclasses import replace

import pytest

import rules
from rules import TableConfig
from rules.cards import parse_cards
from rules.commands import (
    AddChips,
    Fold,
    PostBringIn,
    SitIn,
    SitOut,
    StartHand,
    TimeOut,
)
from rules.errors import Reason, RuleViolation
from rules.events import ActionTimedOut, HandEnded, HandStarted, PlayerLeft
from rules.testing import deal_command
from table import room_events as rev
from table.model import TableSettings
from table.room import (
    BUY_IN,
    CASH_OUT,
    TOP_UP,
    WALLET_BUY_IN,
    WALLET_CASH_OUT,
    WALLET_NONE,
    WALLET_REFUND,
    ApplyTopUp,
    Close,
    ConfirmBuyIn,
    DropTopUp,
    EndBuyIn,
    Leave,
    Open,
    PayCashOut,
    Play,
    QueueTopUp,
    Reconciled,
    Record,
    RefundOrphan,
    RequestBuyIn,
    Room,
    RoomCommand,
    RoomRefusal,
    SetMuck,
    Settle,
    apply,
    buy_in_range,
    decide,
    due_between_hands,
    next_sit_out_deadline,
    saga_step,
)
from table.snapshot import from_extra, to_extra

CONFIG = TableConfig()  # $2/$4: big bet 400, buy-ins 8,000..40,000 by default
NOW = 1_000.0


def run(room: Room, command: RoomCommand, now: float = NOW) -> Room:
    """``room`` after ``command`` (decided and folded, as the actor does)."""
    decision = decide(room, command, now)
    return apply(room, decision.events, at=now, first_sequence=room.version + 1,
                 table=decision.table)


def events_of(room: Room, command: RoomCommand, now: float = NOW) -> list[object]:
    return list(decide(room, command, now).events)


def opened(**settings: object) -> Room:
    return run(Room(), Open("t1", CONFIG, TableSettings(**settings)))  # type: ignore[arg-type]


def seated(room: Room, seat: int, player: str, amount: int = 10_000) -> Room:
    key = f"k-{player}-{seat}"
    room = run(room, RequestBuyIn(seat, player, amount, key, f"c-{player}"))
    return run(room, ConfirmBuyIn(seat, key))


def two_players() -> Room:
    return seated(seated(opened(), 1, "ann"), 2, "bob")


def in_hand() -> Room:
    return run(two_players(), Play(StartHand(hand_number=1, deck_commitment="c")))


def betting() -> Room:
    """Two players dealt third street: someone is to bring in."""
    room = in_hand()
    plan = rules.pending_deal(room.table)
    assert plan is not None
    cards = parse_cards("2c 9d 3h Kd 5s 7h")
    return run(room, Play(deal_command(plan, cards[:len(plan.slots)], hide_down=True)))


def refused(room: Room, command: RoomCommand, now: float = NOW) -> str:
    with pytest.raises((RoomRefusal, RuleViolation)) as info:
        decide(room, command, now)
    reason = info.value.reason
    return reason.value if isinstance(reason, Reason) else str(reason)


# --- opening and settings --------------------------------------------------------------------

def test_opening_records_the_settings_in_force_with_the_table() -> None:
    events = events_of(Room(), Open("t1", CONFIG, TableSettings()))
    assert [type(e).__name__ for e in events] == ["TableOpened", "SettingsSet"]
    room = opened()
    assert (room.settings.buy_in_min, room.settings.buy_in_max) == (8_000, 40_000)
    assert room.version == 2 and room.visible == 1


def test_explicit_buy_in_limits_are_kept() -> None:
    room = opened(buy_in_min=1_000, buy_in_max=2_000)
    assert (room.settings.buy_in_min, room.settings.buy_in_max) == (1_000, 2_000)


def test_a_table_opens_once() -> None:
    assert refused(opened(), Open("t1", CONFIG, TableSettings())) == "invalid_command"


# --- buying in -------------------------------------------------------------------------------

def test_a_buy_in_reserves_the_seat_before_any_money_moves() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    assert room.saga(1) is not None and room.saga(1).kind == BUY_IN  # type: ignore[union-attr]
    assert room.table.seat(1) is None
    assert room.visible == 1  # not a game event: watchers see nothing


def test_a_confirmed_buy_in_seats_the_player_and_ends_the_saga() -> None:
    room = seated(opened(), 3, "ann", 12_000)
    seat = room.table.seat(3)
    assert seat is not None and (seat.player_id, seat.stack) == ("ann", 12_000)
    assert not room.sagas
    assert room.bank(3) == 30_000


def test_a_reserved_seat_is_taken_for_everyone_else() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    assert refused(room, RequestBuyIn(1, "bob", 10_000, "k2", "c2")) == "seat_taken"


def test_a_player_sitting_down_cannot_sit_down_twice() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    assert refused(room, RequestBuyIn(2, "ann", 10_000, "k2", "c2")) == "player_already_seated"


def test_a_seated_player_cannot_take_a_second_seat() -> None:
    assert refused(seated(opened(), 1, "ann"),
                   RequestBuyIn(2, "ann", 10_000, "k2", "c2")) == "player_already_seated"


def test_a_buy_in_outside_the_range_is_refused() -> None:
    room = opened()
    assert refused(room, RequestBuyIn(1, "ann", 7_999, "k", "c")) == "buy_in_out_of_range"
    assert refused(room, RequestBuyIn(1, "ann", 40_001, "k", "c")) == "buy_in_out_of_range"


def test_a_closed_table_takes_no_buy_in() -> None:
    room = run(opened(), Close("ops"))
    assert refused(room, RequestBuyIn(1, "ann", 10_000, "k", "c")) == "table_closed"


def test_a_failed_buy_in_frees_the_seat() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    room = run(room, EndBuyIn(1, "k1", "failed", "insufficient_funds"))
    assert not room.sagas and room.table.seat(1) is None
    run(room, RequestBuyIn(1, "bob", 10_000, "k2", "c2"))


def test_a_refund_is_due_before_it_is_paid_and_then_frees_the_seat() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    assert refused(room, EndBuyIn(1, "k1", "refunded")) == "no_refund_due"
    room = run(room, EndBuyIn(1, "k1", "refund_due", "seat_taken"))
    assert room.saga(1).refund_due  # type: ignore[union-attr]
    assert refused(room, ConfirmBuyIn(1, "k1")) == "buy_in_refunded"
    room = run(room, EndBuyIn(1, "k1", "refunded"))
    assert not room.sagas


def test_a_step_of_another_saga_is_refused() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    assert refused(room, ConfirmBuyIn(1, "other-key")) == "no_such_saga"
    assert refused(room, ApplyTopUp(1, "k1")) == "no_such_saga"


# --- the rathole rule ------------------------------------------------------------------------

def test_the_rathole_rule_asks_for_what_the_player_left_with() -> None:
    room = seated(opened(), 1, "ann", 30_000)
    room = run(room, Leave(1, "ann", "kc"), now=NOW)
    assert buy_in_range(room, "ann", NOW + 10) == (8_000, 40_000, 30_000)
    assert refused(room, RequestBuyIn(2, "ann", 10_000, "k2", "c2"), now=NOW + 10) == "rathole"
    room = run(room, PayCashOut(1, "kc"))
    run(room, RequestBuyIn(2, "ann", 30_000, "k2", "c2"), now=NOW + 10)


def test_the_rathole_window_ends() -> None:
    room = run(seated(opened(), 1, "ann", 30_000), Leave(1, "ann", "kc"))
    assert buy_in_range(room, "ann", NOW + 1801)[2] == 0


def test_a_departure_past_the_window_is_dropped_at_the_next_one() -> None:
    """The room keeps the players who left within the rathole window, not everyone who
    ever left: an older departure goes when another player leaves; the rule is unchanged."""
    room = seated(seated(opened(), 1, "ann", 30_000), 2, "bob", 20_000)
    room = run(run(room, Leave(1, "ann", "ka")), PayCashOut(1, "ka"))
    window = room.settings.rathole_window_s
    room = run(room, Leave(2, "bob", "kb"), now=NOW + window - 1)
    assert set(room.departures) == {"ann", "bob"}
    assert buy_in_range(room, "ann", NOW + window - 1)[2] == 30_000
    room = seated(run(room, PayCashOut(2, "kb")), 4, "dan")
    room = run(room, Leave(4, "dan", "kd"), now=NOW + window)
    assert set(room.departures) == {"bob", "dan"}
    assert buy_in_range(room, "ann", NOW + window)[2] == 0
    assert buy_in_range(room, "bob", NOW + window)[2] == 20_000


def test_the_rathole_rule_may_exceed_the_table_maximum() -> None:
    room = run(seated(opened(buy_in_max=20_000), 1, "ann", 20_000), Play(AddChips(seat=1,
                                                                                  amount=5_000)))
    room = run(room, Leave(1, "ann", "kc"))
    assert buy_in_range(room, "ann", NOW)[1] == 25_000


# --- top-ups ---------------------------------------------------------------------------------

def test_a_top_up_is_queued_then_applied() -> None:
    room = run(seated(opened(), 1, "ann"), QueueTopUp(1, "ann", 5_000, "kt", "ct"))
    assert room.saga(1).kind == TOP_UP  # type: ignore[union-attr]
    room = run(room, ApplyTopUp(1, "kt"))
    assert room.table.seat(1).stack == 15_000  # type: ignore[union-attr]
    assert not room.sagas


def test_one_money_move_per_seat_at_a_time() -> None:
    room = run(seated(opened(), 1, "ann"), QueueTopUp(1, "ann", 5_000, "kt", "ct"))
    assert refused(room, QueueTopUp(1, "ann", 1_000, "kt2", "ct2")) == "topup_pending"


def test_a_top_up_above_the_maximum_is_refused() -> None:
    room = seated(opened(), 1, "ann", 39_000)
    assert refused(room, QueueTopUp(1, "ann", 1_001, "kt", "ct")) == "above_buy_in_max"


def test_only_the_seat_s_player_tops_it_up() -> None:
    room = seated(opened(), 1, "ann")
    assert refused(room, QueueTopUp(1, "bob", 1_000, "kt", "ct")) == "not_your_seat"
    assert refused(room, QueueTopUp(2, "bob", 1_000, "kt", "ct")) == "not_your_seat"


def test_a_dropped_top_up_changes_no_stack() -> None:
    room = run(seated(opened(), 1, "ann"), QueueTopUp(1, "ann", 5_000, "kt", "ct"))
    room = run(room, DropTopUp(1, "kt", "insufficient_funds"))
    assert room.table.seat(1).stack == 10_000 and not room.sagas  # type: ignore[union-attr]


def test_a_top_up_waits_for_the_hand_to_end() -> None:
    room = run(in_hand(), QueueTopUp(1, "ann", 5_000, "kt", "ct"))
    assert saga_step(room, 1, None) is None  # the seat is in the hand
    assert refused(room, ApplyTopUp(1, "kt")) == "hand_in_progress"


# --- leaving and cashing out -----------------------------------------------------------------

def test_leaving_between_hands_stands_up_and_requests_the_cash_out_in_one_append() -> None:
    room = seated(opened(), 1, "ann")
    events = events_of(room, Leave(1, "ann", "kc"))
    assert [type(e).__name__ for e in events] == ["PlayerLeft", "CashOutRequested"]
    room = run(room, Leave(1, "ann", "kc"))
    assert room.table.seat(1) is None and room.saga(1).kind == CASH_OUT  # type: ignore[union-attr]
    assert room.saga(1).amount == 10_000  # type: ignore[union-attr]


def test_a_seat_being_paid_out_is_not_taken_until_paid() -> None:
    room = run(seated(opened(), 1, "ann"), Leave(1, "ann", "kc"))
    assert refused(room, RequestBuyIn(1, "bob", 10_000, "k2", "c2")) == "seat_taken"
    room = run(room, PayCashOut(1, "kc"))
    run(room, RequestBuyIn(1, "bob", 10_000, "k2", "c2"))


def test_leaving_during_the_hand_is_deferred_and_folded_at_the_turn() -> None:
    room = run(in_hand(), Leave(1, "ann", "kc"))
    assert room.leaving == {1: "ann"} and room.table.seat(1) is not None
    assert events_of(room, Leave(1, "ann", "kc")) == []  # asked once is enough


def test_leaving_after_the_hand_ends_waits_for_its_settlement() -> None:
    """Found by the simulator (seed 10): a leave between the hand's end and its settlement
    cashed the seat out of the wallet before the settlement, whose posting then found the
    seat released; the table never settled again. It waits for the settlement now."""
    room = betting()
    hand = room.table.hand
    assert hand is not None and hand.to_act is not None
    first = hand.to_act
    room = run(room, Play(PostBringIn(seat=first)))
    other = room.table.hand.to_act if room.table.hand is not None else None
    assert other is not None and other != first
    room = run(room, Play(Fold(seat=other)))
    assert room.table.hand is not None and room.table.hand.is_over and room.settled == 0
    player = room.table.seat(other)
    assert player is not None
    assert [type(e) for e in events_of(room, Leave(other, player.player_id, "kc"))] == [
        rev.LeaveRequested]
    settled = run(run(room, Leave(other, player.player_id, "kc")), Settle(1, 0))
    assert due_between_hands(settled, NOW) == Leave(other, player.player_id, "")
    assert PlayerLeft in [type(e) for e in events_of(settled, Leave(other, player.player_id,
                                                                    "kc"))]


def test_leaving_with_a_top_up_in_flight_waits_for_it() -> None:
    """F1: a leave and a top-up at once can never strand chips: the leave waits for the
    top-up's saga, then stands the seat up with the whole stack."""
    room = run(seated(opened(), 1, "ann"), QueueTopUp(1, "ann", 5_000, "kt", "ct"))
    room = run(room, Leave(1, "ann", "kc"))
    assert room.leaving == {1: "ann"} and room.saga(1).kind == TOP_UP  # type: ignore[union-attr]
    assert refused(room, QueueTopUp(1, "ann", 1_000, "kt2", "ct2")) == "topup_pending"
    assert due_between_hands(room, NOW) is None  # the saga first
    room = run(room, ApplyTopUp(1, "kt"))
    due = due_between_hands(room, NOW)
    assert isinstance(due, Leave) and due.seat == 1
    room = run(room, replace(due, wallet_key="kc2"))
    assert room.saga(1).amount == 15_000  # type: ignore[union-attr]


def test_a_leaving_seat_takes_no_top_up() -> None:
    room = run(in_hand(), Leave(1, "ann", "kc"))
    assert refused(room, QueueTopUp(1, "ann", 1_000, "kt", "ct")) == "leaving"


def test_a_seat_time_out_while_leaving_does_not_count_towards_sitting_out() -> None:
    room = run(in_hand(), Leave(1, "ann", "kc"))
    f = apply(room, [ActionTimedOut(seat=1)], at=NOW, first_sequence=room.version + 1)
    assert 1 not in f.timed_out


# --- sitting out -----------------------------------------------------------------------------

def test_too_many_time_outs_sit_a_seat_out() -> None:
    room = two_players()
    for n in (1, 2):
        room = apply(room, [HandStarted(hand_number=n, seats=(1, 2)), ActionTimedOut(seat=1),
                            HandEnded(hand_number=n)], at=NOW, first_sequence=room.version + 1,
                     table=room.table)
    assert room.timeout_streak == {1: 2, 2: 0}
    assert due_between_hands(room, NOW) == Play(SitOut(seat=1))


def test_a_seat_sitting_out_past_the_limit_is_stood_up() -> None:
    room = run(seated(opened(sit_out_limit_s=60), 1, "ann"), Play(SitOut(seat=1)), now=NOW)
    assert due_between_hands(room, NOW + 59) is None
    assert next_sit_out_deadline(room, NOW + 59) == pytest.approx(1.0)
    due = due_between_hands(room, NOW + 60)
    assert isinstance(due, Leave) and due.seat == 1


def test_sitting_in_clears_the_sit_out_clock() -> None:
    room = run(seated(opened(sit_out_limit_s=60), 1, "ann"), Play(SitOut(seat=1)))
    room = run(room, Play(SitIn(seat=1)))
    assert room.sat_out_since == {} and due_between_hands(room, NOW + 600) is None


def test_a_closed_table_stands_everyone_up_between_hands() -> None:
    room = run(two_players(), Close("ops"))
    assert room.closed
    due = due_between_hands(room, NOW)
    assert isinstance(due, Leave) and due.seat == 1
    assert events_of(room, Close("ops")) == []


# --- the time bank ---------------------------------------------------------------------------

def test_the_time_bank_is_used_after_the_action_time() -> None:
    from table.clock import fresh_turn
    room = betting()
    seat = room.table.hand.to_act  # type: ignore[union-attr]
    turn = fresh_turn(room, seat, NOW)
    room = replace(room, turn=turn)
    late = turn.action_deadline + 5
    action = PostBringIn(seat=seat)
    room = run(room, Play(action), now=late)
    assert room.bank(seat) == 25_000 and room.turn is None


# --- muck, settlement, reconciliation --------------------------------------------------------

def test_a_muck_preference_is_the_seat_player_s_and_recorded_once() -> None:
    room = run(seated(opened(), 1, "ann"), SetMuck(1, "ann", True))
    assert room.muck == {1}
    assert events_of(room, SetMuck(1, "ann", True)) == []
    assert refused(room, SetMuck(1, "bob", False)) == "not_your_seat"
    assert run(room, SetMuck(1, "ann", False)).muck == frozenset()


def test_a_hand_is_settled_once() -> None:
    room = run(opened(), Settle(1, 0))
    assert room.settled == 1
    assert refused(room, Settle(1, 0)) == "settled"


def test_a_failed_reconciliation_stops_dealing_until_one_passes() -> None:
    room = run(opened(), Reconciled("seat 1: escrow 5 vs table 6"))
    assert room.stopped == "seat 1: escrow 5 vs table 6"
    assert events_of(room, Reconciled("seat 1: escrow 5 vs table 6")) == []
    room = run(room, Reconciled(""))
    assert room.stopped == ""
    assert events_of(room, Reconciled("")) == []


def test_an_orphan_escrow_is_refunded_only_while_no_saga_or_seat_accounts_for_it() -> None:
    """An escrow with neither a seat nor a saga is recorded as refunded; one a sit-down's saga
    took meanwhile (a retry after a restart, with the buy-in's own key), or the player's own
    seat, is not an orphan by the time the refund is decided."""
    assert events_of(opened(), RefundOrphan(4, "ann", 10_000)) == [
        rev.OrphanEscrowRefunded(seat=4, player_id="ann", amount=10_000)]
    saga = run(opened(), RequestBuyIn(4, "ann", 10_000, "k-ann", "c-ann"))
    assert refused(saga, RefundOrphan(4, "ann", 10_000)) == "not_an_orphan"
    assert refused(seated(opened(), 4, "ann"), RefundOrphan(4, "ann", 10_000)) == "not_an_orphan"
    # another player's seat over ann's escrow: hers is still an orphan
    assert events_of(seated(opened(), 4, "bob"), RefundOrphan(4, "ann", 10_000)) == [
        rev.OrphanEscrowRefunded(seat=4, player_id="ann", amount=10_000)]


# --- carrying a saga on after a crash --------------------------------------------------------

def test_a_buy_in_whose_money_reached_the_wallet_is_seated_after_a_crash() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    assert saga_step(room, 1, ("ann", 10_000)) == (WALLET_NONE, ConfirmBuyIn(1, "k1"))


def test_a_buy_in_whose_money_never_moved_ends_after_a_crash() -> None:
    room = run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1"))
    assert saga_step(room, 1, None) == (WALLET_NONE, EndBuyIn(1, "k1", "failed", "abandoned"))


def test_a_refund_due_is_paid_after_a_crash() -> None:
    room = run(run(opened(), RequestBuyIn(1, "ann", 10_000, "k1", "c1")),
               EndBuyIn(1, "k1", "refund_due"))
    assert saga_step(room, 1, ("ann", 10_000)) == (WALLET_REFUND,
                                                   EndBuyIn(1, "k1", "refunded"))


def test_a_cash_out_and_a_top_up_are_carried_on_with_their_keys() -> None:
    room = run(seated(opened(), 1, "ann"), QueueTopUp(1, "ann", 5_000, "kt", "ct"))
    assert saga_step(room, 1, ("ann", 10_000)) == (WALLET_BUY_IN, ApplyTopUp(1, "kt"))
    room = run(seated(opened(), 1, "ann"), Leave(1, "ann", "kc"))
    assert saga_step(room, 1, ("ann", 10_000)) == (WALLET_CASH_OUT, PayCashOut(1, "kc"))


# --- folding and snapshots -------------------------------------------------------------------

def test_folding_event_by_event_equals_deciding_once() -> None:
    """What the actor keeps after a command equals a fold of the stored events one by one
    (as a restarted owner rebuilds it)."""
    room = opened()
    stepwise = room
    for command in (RequestBuyIn(1, "ann", 10_000, "k1", "c1"), ConfirmBuyIn(1, "k1"),
                    RequestBuyIn(2, "bob", 10_000, "k2", "c2"), ConfirmBuyIn(2, "k2"),
                    SetMuck(2, "bob", True), Play(StartHand(hand_number=1)),
                    Leave(1, "ann", "kc")):
        decision = decide(room, command, NOW)
        for offset, event in enumerate(decision.events):
            stepwise = apply(stepwise, [event], at=NOW, first_sequence=room.version + 1 + offset)
        room = apply(room, decision.events, at=NOW, first_sequence=room.version + 1,
                     table=decision.table)
    assert stepwise == room


def test_a_snapshot_holds_the_whole_room() -> None:
    room = run(run(in_hand(), Leave(1, "ann", "kc")), SetMuck(2, "bob", True))
    room = run(room, Record((rev.HandSettled(hand_number=0),)))
    again = from_extra(room.table, room.version, to_extra(room))
    assert again == room


def test_a_snapshot_writes_each_value_as_asdict_does() -> None:
    """The snapshot's flat copy of a settings, saga, turn, result or stakes value is what
    ``dataclasses.asdict`` gives (it would not be if a field came to hold a dataclass)."""
    from dataclasses import asdict

    from studkit.plain import plain
    from table.room import Saga, Turn
    from table.room_state import SeatResult, Stakes
    values = [TableSettings(), Saga("buy_in", "ann", 100, "k", "c", True),
              Turn(1, 2.0, 3.0, 4.0, 5), SeatResult(1, "ann", 10, 20), Stakes(1, 2, 3, 4)]
    for value in values:
        assert plain(value) == asdict(value)
    room = run(run(in_hand(), Leave(1, "ann", "kc")), SetMuck(2, "bob", True))
    extra = to_extra(room)
    assert extra["settings"] == asdict(room.settings)
    assert extra["results"] == {n: [asdict(r) for r in seats]
                                for n, seats in room.results.items()}


def test_a_snapshot_older_than_the_room_events_keeps_the_clock() -> None:
    old = {"banks": {"1": 5}, "timeout_streak": {"2": 1}, "seatings": {"3": {"1": "ann"}}}
    room = from_extra(Room().table, 7, old)
    assert (room.banks, room.timeout_streak, room.seatings) == ({1: 5}, {2: 1}, {3: {1: "ann"}})
    assert room.visible == 7


def test_a_hand_s_first_sequence_is_indexed() -> None:
    room = in_hand()
    assert room.hand_starts == {1: room.version - 2}  # HandStarted, then two antes
    seating = room.seatings[1]
    assert seating == {1: "ann", 2: "bob"}


def test_a_player_leaving_records_the_departure() -> None:
    room = run(seated(opened(), 1, "ann"), Leave(1, "ann", "kc"), now=NOW)
    assert room.departures == {"ann": (10_000, NOW)}
    assert isinstance(decide(seated(opened(), 1, "ann"), Leave(1, "ann", "kc"), NOW).events[0],
                      PlayerLeft)


def test_folding_the_game_events_alone_matches_the_rules() -> None:
    from rules.decide import decide_and_fold
    room = betting()
    seat = room.table.hand.to_act  # type: ignore[union-attr]
    events, after = decide_and_fold(room.table, PostBringIn(seat=seat))
    folded = apply(room, events, at=NOW, first_sequence=room.version + 1)
    assert folded.table == after


def test_fold_and_time_out_use_the_rules() -> None:
    room = betting()
    seat = room.table.hand.to_act  # type: ignore[union-attr]
    room = run(room, Play(TimeOut(seat=seat)))
    assert seat in room.timed_out
    assert refused(room, Play(Fold(seat=seat))) in ("not_your_turn", "fold_not_allowed")
    assert refused(opened(), Play(AddChips(seat=1, amount=1))) == "seat_empty"
