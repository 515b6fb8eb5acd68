"""``make tournament``'s checks come out false on bad data (and true on good)."""

from __future__ import annotations

from campaigns.tourney_checks import (
    EntrySeen,
    Seat,
    TableSeen,
    bot_problems,
    bubble_reached,
    bust_rounds,
    enough,
    hand_for_hand_problems,
    hand_for_hand_state,
    kill_problems,
    observe,
    payout_problems,
    places_problems,
)


def test_chips_at_the_tables_in_the_hand_and_in_a_move_are_summed() -> None:
    tables = [TableSeen("t1", (Seat("ann", 700, in_hand=100), Seat("bob", 900, in_hand=300))),
              TableSeen("t2", (Seat("cid", 1000),))]
    alive = [EntrySeen("e1", "ann", 800), EntrySeen("e2", "bob", 1200),
             EntrySeen("e3", "cid", 1000), EntrySeen("e4", "dan", 1000)]  # dan: in a move
    seen = observe(tables, alive)
    assert seen.problems == [] and seen.chips == 4000


def test_seated_twice_nowhere_or_outside_the_field_are_problems() -> None:
    twice = observe([TableSeen("t1", (Seat("ann", 500),)), TableSeen("t2", (Seat("ann", 500),))],
                    [EntrySeen("e1", "ann", 1000)])
    assert twice.problems == ["ann seated twice: t1, t2"]
    nowhere = observe([TableSeen("t1", (Seat("ann", 1000),))],
                      [EntrySeen("e1", "ann", 1000), EntrySeen("e2", "bob", 1000, placed=False)])
    assert nowhere.problems == ["bob (e2) seated nowhere"]
    stranger = observe([TableSeen("t1", (Seat("eve", 10),))], [])
    assert stranger.problems == ["eve seated at t1 but not in the field"]
    busted = observe([TableSeen("t1", (Seat("ann", 0),))], [], busted=["ann"])
    assert busted.problems == [] and busted.chips == 0


def test_a_settling_hand_or_an_unrecorded_unseat_is_indeterminate() -> None:
    assert observe([TableSeen("t1", (Seat("ann", 10),), settling=True)],
                   [EntrySeen("e1", "ann", 10)]).chips is None
    assert observe([TableSeen("t1", ())],
                   [EntrySeen("e1", "ann", 10, moving_unrecorded=True)]).chips is None


def test_places_must_be_a_permutation_with_ties_as_wide_as_their_number() -> None:
    assert places_problems([(1, 0), (2, 0), (3, 4), (3, 4)]) == []
    assert places_problems([(1, 0), (3, 0)]) == ["places [1, 3] are not 1..2"]
    assert places_problems([(1, 0), (2, 3)]) != []
    assert places_problems([(1, 0), (0, 0)]) != []  # an entry with no place


def test_payouts_unpaid_short_a_pool_left_or_paid_twice_are_problems() -> None:
    good = payout_problems({"p1": 70, "p2": 30}, ["p1", "p2"], 100, 0,
                           {"ann": 70, "bob": 30, "cid": 0}, {"ann": 70, "bob": 30})
    assert good == []
    assert payout_problems({"p1": 70, "p2": 30}, ["p1"], 100, 30, {}, {}) == [
        "prizes never paid: ['p2']", "the pool account holds 30 at the end"]
    assert payout_problems({"p1": 70}, ["p1"], 100, 0, {}, {}) == [
        "prizes sum to 70, the pool is 100"]
    assert payout_problems({"p1": 70, "p2": 30}, ["p1", "p2"], 100, 0,
                           {"ann": 140, "bob": 30}, {"ann": 70, "bob": 30}) == [
        "ann holds 140, won 70"]


def test_a_run_without_hands_moves_or_kills_cannot_pass() -> None:
    assert enough(5, 2, 1) == []
    assert enough(0, 0, 0) == ["no hand was played", "no player was moved",
                               "nothing was killed"]


def test_a_kind_asked_for_and_not_killed_is_a_problem() -> None:
    asked = ["tournament", "table", "dealer", "wallet", "redis", "tournament"]
    every = {"tournament": 2, "table": 1, "dealer": 1, "wallet": 1, "redis": 1}
    assert kill_problems(asked, every) == []
    assert kill_problems(asked, {**every, "redis": 0, "wallet": 0}) == [
        "no wallet was killed", "no redis was killed"]
    assert kill_problems(asked[:2], {"tournament": 1, "table": 1}) == []  # only two asked


def test_hand_for_hand_states_from_the_logs_switches() -> None:
    assert hand_for_hand_state([]) == "never"
    assert hand_for_hand_state([True]) == "entered"
    assert hand_for_hand_state([True, False]) == "entered_and_left"
    assert hand_for_hand_state([True, False, True]) == "entered"


def test_a_multi_table_bubble_without_hand_for_hand_is_a_problem() -> None:
    one_by_one = [1] * 59  # 60 entrants, 9 paid, tables of 8: the bubble is 10 left
    assert hand_for_hand_problems("entered_and_left", 60, 9, 8, one_by_one) == (
        "entered_and_left", [])
    assert hand_for_hand_problems("never", 60, 9, 8, one_by_one) == ("never", [
        "the field came down to 10 left at several tables and never went hand for hand"])
    assert hand_for_hand_problems("entered", 60, 9, 8, one_by_one) == (
        "entered", ["hand for hand was entered and never left"])
    # A bubble that fits one table is not due; one a hand busting two skipped is no problem.
    assert hand_for_hand_problems("never", 8, 2, 4, [1] * 7) == ("not_due", [])
    skipped = [1] * 49 + [2] + [1] * 8  # 11 left, then 9
    assert not bubble_reached(60, 9, skipped) and bubble_reached(60, 9, one_by_one)
    assert hand_for_hand_problems("never", 60, 9, 8, skipped) == ("skipped", [])


def test_busts_are_grouped_by_their_round_in_the_logs_order() -> None:
    assert bust_rounds([]) == []
    assert bust_rounds([4, 4, 5, 7, 7, 7]) == [2, 1, 3]


def test_a_bot_process_with_errors_or_no_tally_is_a_problem() -> None:
    good = "tournament=T bots=8 actions=118 moves=2 busts=7 errors=0 phase=finished"
    assert bot_problems({"bots0": good}) == []
    assert bot_problems({"bots0": good, "bots1": good.replace("errors=0", "errors=1")}) == [
        "bots1 reported errors=1"]
    assert bot_problems({"bots0": "Traceback (most recent call last):"}) == [
        "bots0 ended without its errors= tally"]
