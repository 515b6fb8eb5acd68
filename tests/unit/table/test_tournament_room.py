"""A tournament table's room policy, pure (services/table/tournament.py, RULES 2.5, DESIGN
5c): each tournament command decided and folded without Redis or gRPC, each refusal, and
the players' requests a tournament table refuses."""

from __future__ import annotations

import json

import pytest

import rules
from rules import TableConfig
from rules.cards import parse_cards
from rules.commands import Fold, PostBringIn, SitIn, SitOut, StartHand, TimeOut
from rules.config import Rake
from rules.errors import Reason, RuleViolation
from rules.events import PlayerLeft, PlayerSeated, StakesChanged
from rules.testing import deal_command
from studkit.errors import BadRequest
from table.model import TableSettings
from table.room import (
    Leave,
    Open,
    Play,
    QueueTopUp,
    RequestBuyIn,
    Room,
    RoomCommand,
    RoomRefusal,
    apply,
    decide,
    due_between_hands,
)
from table.room_state import SeatResult, Stakes
from table.snapshot import from_extra, to_extra
from table.tournament import (
    AMOUNT_MAX,
    PauseDealing,
    SeatEntrant,
    SetStakes,
    TournamentRefusal,
    UnseatEntrant,
    may_deal,
)

CONFIG = TableConfig.for_stakes(200)  # 200/400, ante 40, bring-in 50
NOW = 1_000.0


def run(room: Room, command: RoomCommand, now: float = NOW) -> Room:
    decision = decide(room, command, now)
    return apply(room, decision.events, at=now, first_sequence=room.version + 1,
                 table=decision.table)


def refused(room: Room, command: RoomCommand) -> str:
    with pytest.raises((RoomRefusal, TournamentRefusal, RuleViolation, BadRequest)) as info:
        decide(room, command, NOW)
    reason = info.value.reason
    return reason.value if isinstance(reason, Reason) else str(reason)


def tournament(config: TableConfig = CONFIG) -> Room:
    return run(Room(), Open("t1", config, TableSettings(), tournament_id="mtt-1"))


def cash() -> Room:
    return run(Room(), Open("t1", CONFIG, TableSettings()))


def three_entrants() -> Room:
    room = tournament()
    for seat, (player, stack) in enumerate((("ann", 5_000), ("bob", 3_000),
                                            ("cy", 2_000)), start=1):
        room = run(room, SeatEntrant(seat, player, stack))
    return room


def in_hand(room: Room | None = None) -> Room:
    room = run(room or three_entrants(), Play(StartHand(hand_number=1, deck_commitment="c")))
    plan = rules.pending_deal(room.table)
    assert plan is not None
    cards = parse_cards("2c 9d 3h Kd 5s 7h 8c 8d Jh")
    return run(room, Play(deal_command(plan, cards[:len(plan.slots)], hide_down=True)))


def finish_by_folds(room: Room) -> Room:
    """Bring in, then everyone else folds (or times out) until the hand ends."""
    while room.table.hand_in_progress:
        hand = room.table.hand
        assert hand is not None and hand.to_act is not None
        seat = hand.to_act
        command = PostBringIn(seat=seat) if hand.bring_in_pending else Fold(seat=seat)
        room = run(room, Play(command))
    return room


def stacks(room: Room) -> dict[int, int]:
    return {n: s.stack for n, s in enumerate(room.table.seats, start=1) if s is not None}


# --- the mode ---------------------------------------------------------------------------------

def test_a_tournament_table_records_its_mode_in_the_log() -> None:
    events = decide(Room(), Open("t1", CONFIG, TableSettings(), tournament_id="mtt-1"),
                    NOW).events
    assert [type(e).__name__ for e in events] == ["TableOpened", "SettingsSet",
                                                  "TournamentModeSet"]
    room = tournament()
    assert room.tournament and room.tournament_id == "mtt-1"
    assert not cash().tournament


def test_a_tournament_table_takes_no_rake() -> None:
    raked = TableConfig.for_stakes(200, rake=Rake(500, 30))
    assert refused(Room(), Open("t1", raked, TableSettings(), "mtt-1")) == "invalid_config"


# --- seating and unseating -------------------------------------------------------------------

def test_an_entrant_is_seated_with_the_tournament_stack() -> None:
    room = tournament()
    events = decide(room, SeatEntrant(3, "ann", 7_500), NOW).events
    assert events == (PlayerSeated(seat=3, player_id="ann", stack=7_500),)
    room = run(room, SeatEntrant(3, "ann", 7_500))
    seat = room.table.seat(3)
    assert seat is not None and (seat.player_id, seat.stack) == ("ann", 7_500)
    assert room.sagas == {}  # no money saga: no wallet


@pytest.mark.parametrize(("command", "reason"), [
    (SeatEntrant(1, "dan", 1_000), "seat_taken"),
    (SeatEntrant(4, "ann", 1_000), "already_seated"),
    (SeatEntrant(9, "dan", 1_000), "bad_request"),
    (SeatEntrant(0, "dan", 1_000), "bad_request"),
    (SeatEntrant(4, "dan", 0), "bad_request"),
    (SeatEntrant(4, "dan", -5), "bad_request"),
    (SeatEntrant(4, "dan", AMOUNT_MAX + 1), "bad_request"),
])
def test_seating_refusals(command: SeatEntrant, reason: str) -> None:
    assert refused(three_entrants(), command) == reason


def test_a_six_seat_table_refuses_seat_seven() -> None:
    room = tournament(TableConfig.for_stakes(200, seats=6))
    with pytest.raises(BadRequest):
        decide(room, SeatEntrant(7, "ann", 1_000), NOW)


def test_an_entrant_may_be_seated_during_a_hand_and_waits_for_the_next() -> None:
    room = in_hand()
    room = run(room, SeatEntrant(4, "dan", 4_000))
    hand = room.table.hand
    assert hand is not None and not hand.has_player(4)
    room = finish_by_folds(room)
    room = run(room, Play(StartHand(hand_number=2)))
    assert room.table.hand is not None and room.table.hand.has_player(4)


def test_unseat_answers_the_stack_between_hands() -> None:
    room = three_entrants()
    events = decide(room, UnseatEntrant(2, "bob"), NOW).events
    assert events == (PlayerLeft(seat=2, player_id="bob", stack=3_000),)
    room = run(room, UnseatEntrant(2, "bob"))
    assert room.table.seat(2) is None and room.sagas == {}  # no cash-out


def test_unseat_is_refused_while_the_seat_is_in_a_hand() -> None:
    room = in_hand()
    assert refused(room, UnseatEntrant(2, "bob")) == "hand_in_progress"


def test_a_seat_not_in_the_hand_may_be_unseated_during_it() -> None:
    room = run(in_hand(), SeatEntrant(4, "dan", 4_000))
    room = run(room, UnseatEntrant(4, "dan"))
    assert room.table.seat(4) is None


@pytest.mark.parametrize("command", [UnseatEntrant(2, "ann"), UnseatEntrant(5, "ann")])
def test_unseat_names_the_seat_and_its_player(command: UnseatEntrant) -> None:
    assert refused(three_entrants(), command) == "not_that_players_seat"


def test_a_busted_seat_is_not_dealt_in() -> None:
    room = three_entrants()
    config = room.table.config
    assert config is not None
    seats = list(room.table.seats)
    bob = seats[1]
    assert bob is not None
    from dataclasses import replace
    room = replace(room, table=replace(room.table, seats=(
        seats[0], replace(bob, stack=0), *seats[2:])))
    room = run(room, Play(StartHand(hand_number=1)))
    assert room.table.hand is not None and not room.table.hand.has_player(2)


# --- stakes ------------------------------------------------------------------------------------

NEW = Stakes(small_bet=400, big_bet=800, ante=100, bring_in=100)


def test_stakes_between_hands_are_the_rules_event_at_once() -> None:
    room = three_entrants()
    events = decide(room, SetStakes(NEW), NOW).events
    assert events == (StakesChanged(small_bet=400, big_bet=800, ante=100, bring_in=100),)
    room = run(room, SetStakes(NEW))
    config = room.table.config
    assert config is not None
    assert (config.small_bet, config.big_bet, config.ante, config.bring_in) == (400, 800,
                                                                                100, 100)
    assert config.seats == CONFIG.seats and config.max_raises == CONFIG.max_raises


def test_stakes_asked_for_during_a_hand_wait_for_its_end() -> None:
    room = in_hand()
    events = decide(room, SetStakes(NEW), NOW).events
    assert [type(e).__name__ for e in events] == ["StakesQueued"]
    room = run(room, SetStakes(NEW))
    assert room.pending_stakes == NEW
    assert room.table.config == CONFIG  # the hand in progress keeps its stakes
    assert due_between_hands(room, NOW) is None  # not while the hand is on
    room = finish_by_folds(room)
    due = due_between_hands(room, NOW)
    assert isinstance(due, Play)
    room = run(room, due)
    assert room.pending_stakes is None
    config = room.table.config
    assert config is not None and config.ante == 100
    room = run(room, Play(StartHand(hand_number=2)))
    antes = [p.hand_total for p in room.table.hand.players]  # type: ignore[union-attr]
    assert antes == [100, 100, 100]


def test_the_latest_stakes_asked_for_during_a_hand_win() -> None:
    room = run(in_hand(), SetStakes(NEW))
    later = Stakes(600, 1_200, 150, 200)
    room = run(room, SetStakes(later))
    assert room.pending_stakes == later
    assert decide(room, SetStakes(later), NOW).events == ()


def test_the_rules_refuse_stakes_mid_hand() -> None:
    room = in_hand()
    from table.tournament import change_stakes
    with pytest.raises(RuleViolation) as info:
        rules.decide(room.table, change_stakes(NEW))
    assert info.value.reason is Reason.HAND_IN_PROGRESS


@pytest.mark.parametrize("stakes", [
    Stakes(400, 400, 100, 100),  # big bet not above the small bet
    Stakes(400, 800, 100, 400),  # bring-in not below the small bet
    Stakes(400, 800, 100, 0),    # no bring-in
    Stakes(0, 800, 100, 50),
    Stakes(AMOUNT_MAX + 1, AMOUNT_MAX + 2, 0, 1),
])
def test_stakes_must_pass_rules_2_3(stakes: Stakes) -> None:
    assert refused(three_entrants(), SetStakes(stakes)) == "invalid_config"
    assert refused(in_hand(), SetStakes(stakes)) == "invalid_config"


def test_unchanged_stakes_are_no_event() -> None:
    room = three_entrants()
    same = Stakes(CONFIG.small_bet, CONFIG.big_bet, CONFIG.ante, CONFIG.bring_in)
    assert decide(room, SetStakes(same), NOW).events == ()


# --- pausing -----------------------------------------------------------------------------------

def test_pause_and_resume() -> None:
    room = three_entrants()
    room = run(room, PauseDealing(True, "break"))
    assert (room.paused, room.pause_reason) == (True, "break") and not may_deal(room)
    assert decide(room, PauseDealing(True, "break"), NOW).events == ()
    room = run(room, PauseDealing(True, "hand_for_hand"))
    assert room.pause_reason == "hand_for_hand"
    room = run(room, PauseDealing(False, "ignored"))
    assert (room.paused, room.pause_reason) == (False, "") and may_deal(room)
    assert decide(room, PauseDealing(False), NOW).events == ()


def test_a_pause_during_a_hand_lets_it_finish() -> None:
    room = run(in_hand(), PauseDealing(True, "break"))
    assert room.table.hand_in_progress
    room = finish_by_folds(room)
    assert not room.table.hand_in_progress and room.paused


def test_one_hand_deals_one_hand_then_pauses_by_itself() -> None:
    """Hand for hand (DESIGN 5c): released for one hand, the table pauses as that hand
    starts, with the reason given, and deals no second one whatever the tournament does."""
    room = run(three_entrants(), PauseDealing(True, "hand_for_hand"))
    room = run(room, PauseDealing(False, "hand_for_hand", one_hand=True))
    assert not room.paused and may_deal(room) and room.one_hand == "hand_for_hand"
    assert decide(room, PauseDealing(False, "hand_for_hand", one_hand=True), NOW).events == ()
    room = in_hand(room)
    assert room.table.hand_in_progress and not may_deal(room)
    assert (room.paused, room.pause_reason, room.one_hand) == (True, "hand_for_hand", "")
    room = finish_by_folds(room)
    assert not room.table.hand_in_progress and not may_deal(room)
    extra = json.loads(json.dumps(to_extra(room)))
    assert from_extra(room.table, room.version, extra) == room


def test_one_hand_survives_a_snapshot_taken_before_the_hand() -> None:
    room = run(run(three_entrants(), PauseDealing(True, "hand_for_hand")),
               PauseDealing(False, "hand_for_hand", one_hand=True))
    again = from_extra(room.table, room.version, json.loads(json.dumps(to_extra(room))))
    assert again.one_hand == "hand_for_hand"
    assert in_hand(again).paused


def test_a_plain_release_ends_one_hand() -> None:
    room = run(three_entrants(), PauseDealing(False, "hand_for_hand", one_hand=True))
    room = run(room, PauseDealing(False))
    assert room.one_hand == "" and not in_hand(room).paused


def test_one_hand_is_refused_with_a_pause() -> None:
    assert refused(three_entrants(), PauseDealing(True, "break", one_hand=True)) \
        == "bad_request"


def test_a_long_pause_reason_is_refused() -> None:
    assert refused(three_entrants(), PauseDealing(True, "x" * 65)) == "bad_request"


# --- refused at a cash table, and what a tournament table refuses its players -----------------

@pytest.mark.parametrize("command", [
    SeatEntrant(1, "ann", 1_000), UnseatEntrant(1, "ann"), SetStakes(NEW),
    PauseDealing(True, "break"),
])
def test_the_tournament_commands_need_a_tournament_table(command: RoomCommand) -> None:
    assert refused(cash(), command) == "not_tournament_table"


@pytest.mark.parametrize("command", [
    RequestBuyIn(4, "dan", 1_000, "k", "c"), QueueTopUp(1, "ann", 100, "k", "c"),
    Leave(1, "ann", "k"), Play(SitOut(seat=1)),
])
def test_players_cannot_change_their_seats_or_money(command: RoomCommand) -> None:
    room = three_entrants()
    assert refused(room, command) == "tournament_table"


def test_sitting_in_is_the_rules_business() -> None:
    assert refused(three_entrants(), Play(SitIn(seat=1))) == "invalid_command"


def test_a_timed_out_seat_stays_dealt_in() -> None:
    """RULES 2.5: no auto sit-out however often a seat times out."""
    room = three_entrants()
    for number in range(1, 5):
        room = run(room, Play(StartHand(hand_number=number)))
        plan = rules.pending_deal(room.table)
        assert plan is not None
        cards = parse_cards("2c 9d 3h Kd 5s 7h 8c 8d Jh")
        room = run(room, Play(deal_command(plan, cards[:len(plan.slots)], hide_down=True)))
        while room.table.hand_in_progress:
            hand = room.table.hand
            assert hand is not None and hand.to_act is not None
            room = run(room, Play(TimeOut(seat=hand.to_act)))
        assert due_between_hands(room, NOW + 10_000) is None
    assert all(not s.sitting_out for s in room.table.seats if s is not None)


def test_a_closed_tournament_table_stands_nobody_up() -> None:
    from table.room import Close
    room = run(three_entrants(), Close(by="ops"))
    assert room.closed and due_between_hands(room, NOW + 10_000) is None
    assert refused(room, SeatEntrant(5, "dan", 1_000)) == "table_closed"
    room = run(room, UnseatEntrant(1, "ann"))  # the tournament takes its players off
    assert room.table.seat(1) is None and room.sagas == {}


# --- each hand's stacks, folded from the log ---------------------------------------------------

def test_each_hand_records_every_seats_stack_at_its_start_and_end() -> None:
    room = finish_by_folds(in_hand())
    result = room.results[1]
    before = {1: 5_000, 2: 3_000, 3: 2_000}
    assert [r.stack_start for r in result] == [before[r.seat] for r in result]
    assert {r.seat: r.stack_end for r in result} == stacks(room)
    assert sum(r.stack_end for r in result) == sum(before.values())  # no rake


def test_a_voided_hand_gives_every_stack_back() -> None:
    from rules.commands import VoidHand
    room = run(in_hand(), Play(VoidHand(reason="dealer unreachable")))
    assert all(r.stack_start == r.stack_end for r in room.results[1])


def test_a_snapshot_keeps_the_tournament_state() -> None:
    room = run(run(in_hand(), SetStakes(NEW)), PauseDealing(True, "break"))
    room = finish_by_folds(room)
    extra = json.loads(json.dumps(to_extra(room)))
    again = from_extra(room.table, room.version, extra)
    assert again == room
    assert again.tournament_id == "mtt-1" and again.paused
    assert isinstance(again.results[1][0], SeatResult)
