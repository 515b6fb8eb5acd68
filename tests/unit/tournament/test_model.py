"""The tournament model's decisions (services/tournament/decide.py and conduct.py): each
refused command raises and yields nothing; each accepted one yields its events."""

from __future__ import annotations

import random

import pytest

from studkit.errors import AlreadyExists, FailedPrecondition, NotFound
from studtest.tournament import Run
from tournament import commands as c
from tournament import events as ev
from tournament.conduct import BREAK, H4H
from tournament.structure import Level, Structure
from tournament.views import view

FAST = Structure(levels=(Level(10, 20, 50, 100, 60), Level(20, 30, 100, 200, 60),
                         Level(40, 50, 200, 400, 60)),
                 starting_stack=1000, break_every=2, break_seconds=30)


def sng(seats: int = 3) -> Run:
    run = Run(random.Random(1))
    run.do(c.Create("S", ev.Config("sng", ev.SIT_AND_GO, 100, 10, FAST, seats=seats)))
    return run


def mtt(**kw: int) -> Run:
    run = Run(random.Random(2))
    args = {"seats": 4, "min_entrants": 4, "late_through_level": 0, "re_entries": 0, **kw}
    run.do(c.Create("M", ev.Config("mtt", ev.MULTI_TABLE, 100, 10, FAST, start_at=100.0,
                                   **args)))
    return run


def register_paid(run: Run, *players: str) -> None:
    for p in players:
        (req,) = run.do(c.Register(p))
        assert isinstance(req, ev.EntryRequested)
        run.do(c.SettleEntry(req.entry_id, True))


def seat_all(run: Run) -> None:
    for e in run.t.field():
        if e.table_id and not e.seated:
            run.carry_out(c.ConfirmSeat(e.entry_id))


def hand(run: Run, table: str, end: dict[int, int]) -> list[ev.Event]:
    """One hand at ``table`` that ends with ``end`` (seat -> chips; other seats unchanged)."""
    w = run.world
    run.table_step("start", table)
    hand_no = w.in_hand.pop(table)
    stacks = {**w.starts[table], **end}
    for s, chips in stacks.items():
        w.seats[table][s] = (w.seats[table][s][0], chips)
    return run.do(c.ReportHandEnded(table, hand_no, tuple(sorted(stacks.items()))))


def test_a_sit_and_go_starts_when_full_and_then_takes_nobody() -> None:
    run = sng(3)
    register_paid(run, "p1", "p2")
    assert run.t.phase == "registering"
    (req,) = run.do(c.Register("p3"))
    assert run.t.phase == "registering"  # the last buy-in is still being charged
    events = run.do(c.SettleEntry(req.entry_id, True))
    kinds = [type(e).__name__ for e in events]
    assert kinds[:4] == ["EntryPaid", "Started", "LevelStarted", "TableOpened"]
    assert kinds.count("SeatAssigned") == 3 and "RegistrationClosed" in kinds
    assert run.t.pool() == 300
    with pytest.raises(FailedPrecondition) as refused:
        run.do(c.Register("p4"))
    assert refused.value.reason == "registration_closed"


def test_registering_twice_unregistering_and_a_refused_charge() -> None:
    run = sng(3)
    register_paid(run, "p1")
    before = run.t
    with pytest.raises(AlreadyExists):
        run.do(c.Register("p1"))
    assert run.t is before
    (req,) = run.do(c.Register("p2"))
    with pytest.raises(FailedPrecondition) as pending:
        run.do(c.Unregister("p2"))
    assert pending.value.reason == "payment_pending"
    assert run.do(c.SettleEntry(req.entry_id, False, "short")) == [
        ev.EntryDropped(req.entry_id, "short")]
    assert run.do(c.SettleEntry(req.entry_id, True)) == []  # settled once
    events = run.do(c.Unregister("p1"))
    assert events[1] == ev.RefundDue("refund/e1", "e1", "p1", 100, 10)
    with pytest.raises(NotFound):
        run.do(c.Unregister("p1"))
    assert run.t.field() == []


def test_unregistering_after_the_start_is_refused() -> None:
    run = sng(2)
    register_paid(run, "p1", "p2")
    with pytest.raises(FailedPrecondition) as started:
        run.do(c.Unregister("p1"))
    assert started.value.reason == "started"


def test_a_multi_table_below_its_minimum_is_cancelled_and_refunded_in_full() -> None:
    run = mtt(min_entrants=4)
    register_paid(run, "p1", "p2", "p3")
    run.now = 99.0
    assert run.do(c.Tick()) == []
    run.now = 100.0
    events = run.do(c.Tick())
    assert events[0] == ev.Cancelled("below_minimum", 100.0)
    refunds = [e for e in events if isinstance(e, ev.RefundDue)]
    assert [(r.player_id, r.buy_in, r.fee) for r in refunds] == [
        ("p1", 100, 10), ("p2", 100, 10), ("p3", 100, 10)]


def started_mtt(players: int, **kw: int) -> Run:
    run = mtt(**kw)
    register_paid(run, *[f"p{i}" for i in range(1, players + 1)])
    run.now = 100.0
    run.do(c.Tick())
    seat_all(run)
    return run


def test_the_clock_moves_the_levels_holds_the_tables_for_a_break_and_closes_late_entry(
) -> None:
    run = started_mtt(8, late_through_level=1)
    assert run.t.registration_open and run.t.level == 1
    run.now = 160.0
    events = run.do(c.Tick())
    assert events[0] == ev.LevelStarted(2, 160.0)
    assert ev.RegistrationClosed(160.0) in events
    run.now = 220.0
    events = run.do(c.Tick())
    assert events[0] == ev.BreakStarted(2, 220.0)
    assert all(BREAK in t.holds for t in run.t.tables.values())
    run.now = 250.0
    events = run.do(c.Tick())
    assert events[0] == ev.LevelStarted(3, 250.0)
    assert not any(t.holds for t in run.t.tables.values())


def test_players_busted_on_one_hand_are_ranked_by_their_starting_stacks() -> None:
    run = sng(4)
    register_paid(run, "p1", "p2", "p3", "p4")
    seat_all(run)
    (table,) = run.t.tables
    seats = {e: run.t.entries[e].seat for e in run.t.alive()}
    s1, s2, s3, s4 = (seats[e] for e in ("e1", "e2", "e3", "e4"))
    hand(run, table, {s1: 1500, s2: 500})  # e1 1500, e2 500, e3 1000, e4 1000
    events = hand(run, table, {s1: 4000, s2: 0, s3: 0, s4: 0})
    busts = [e for e in events if isinstance(e, ev.Busted)]
    assert {b.entry_id for b in busts} == {"e2", "e3", "e4"} and len({b.round for b in busts}) == 1
    places = {s.entry: (s.place, s.place_to) for s in run.t.standings()}
    assert places == {"e1": (1, 1), "e3": (2, 3), "e4": (2, 3), "e2": (4, 4)}
    prizes = {p.entry_id: p.amount for p in run.t.payments.values()
              if isinstance(p, ev.PrizeDue)}
    # pool 400: 260/140; e3 and e4 share place 2 and 3: 140 + 0, 70 each
    assert prizes == {"e1": 260, "e3": 70, "e4": 70}
    assert run.t.phase == "finished" and run.t.winner == "e1"


def test_a_repeated_report_changes_nothing_and_a_report_that_makes_chips_is_refused() -> None:
    run = sng(2)
    register_paid(run, "p1", "p2")
    seat_all(run)
    (table,) = run.t.tables
    run.table_step("start", table)
    start = tuple(sorted(run.world.starts[table].items()))
    assert run.do(c.ReportHandStarted(table, 1, start)) == []
    bad = tuple((s, chips + 1) for s, chips in start)
    with pytest.raises(FailedPrecondition) as made:
        run.do(c.ReportHandEnded(table, 1, bad))
    assert made.value.reason == "chips_not_conserved"
    ended = run.do(c.ReportHandEnded(table, 1, start))
    assert ended == [ev.HandEnded(table, 1, start)]
    assert run.do(c.ReportHandEnded(table, 1, start)) == []
    with pytest.raises(NotFound):
        run.do(c.ReportHandEnded("S.9", 1, start))


def bust_one(run: Run, table: str) -> str:
    """A hand at ``table`` in which its first player loses everything to the second."""
    live = [s for s, e in enumerate(run.t.tables[table].seats, 1) if e in run.t.alive()]
    loser, winner = live[0], live[1]
    chips = run.world.seats[table]
    entry = chips[loser][0]
    hand(run, table, {loser: 0, winner: chips[winner][1] + chips[loser][1]})
    return entry


def test_a_move_waits_for_the_hand_and_a_repeat_of_it_is_a_no_op() -> None:
    run = started_mtt(7)  # 4 and 3 at two tables of 4
    counts = {k: sum(1 for s in t.seats if s) for k, t in run.t.tables.items()}
    long_table = max(counts, key=lambda k: counts[k])
    short = min(counts, key=lambda k: counts[k])
    run.table_step("start", long_table)
    bust_one(run, short)  # 4 against 2 now
    assert run.t.move is None  # the long table is in a hand: nobody leaves it
    assert "balance" in run.t.tables[long_table].holds
    with pytest.raises(NotFound):
        run.do(c.ConfirmUnseated("m1", 1000))
    end_even(run, long_table)
    move = run.t.move
    assert move is not None and move.from_table == long_table and move.to_table == short
    assert move.to_seat == max(s for s, e in enumerate(run.t.tables[short].seats, 1)
                               if e is None)
    stack = run.world.seats[long_table][move.from_seat][1]
    run.carry_out(c.ConfirmUnseated(move.move_id, stack))
    assert run.do(c.ConfirmUnseated(move.move_id, stack)) == []
    run.carry_out(c.ConfirmReseated(move.move_id))
    assert run.do(c.ConfirmReseated(move.move_id)) == []
    assert run.do(c.ConfirmUnseated(move.move_id, stack)) == []
    entry = run.t.entries[move.entry_id]
    assert (entry.table_id, entry.seat, entry.chips) == (short, move.to_seat, stack)
    assert "balance" not in run.t.tables[long_table].holds


def test_nobody_is_unseated_for_a_move_while_the_table_is_in_a_hand() -> None:
    run = started_mtt(7)
    counts = {k: sum(1 for s in t.seats if s) for k, t in run.t.tables.items()}
    long_table = max(counts, key=lambda k: counts[k])
    short = min(counts, key=lambda k: counts[k])
    bust_one(run, short)
    move = run.t.move
    assert move is not None
    run.table_step("start", long_table)  # the pause came too late: a hand started
    with pytest.raises(FailedPrecondition) as in_hand:
        run.do(c.ConfirmUnseated(move.move_id, 1000))
    assert in_hand.value.reason == "hand_in_progress"


def test_re_entry_is_for_a_busted_player_while_registration_is_open() -> None:
    run = started_mtt(4, late_through_level=2, re_entries=1)
    with pytest.raises(FailedPrecondition) as still_in:
        run.do(c.ReEnter("p1"))
    assert still_in.value.reason == "still_in"
    with pytest.raises(FailedPrecondition):
        run.do(c.ReEnter("nobody"))
    e1 = run.t.entries["e1"]
    table = run.t.tables[e1.table_id]
    other = next(s for s, e in enumerate(table.seats, 1) if e and e != "e1")
    hand(run, e1.table_id, {e1.seat: 0, other: 2000})
    assert run.t.entries["e1"].bust is not None
    (req,) = run.do(c.ReEnter("p1"))
    run.do(c.SettleEntry(req.entry_id, True))
    assert run.t.entries[req.entry_id].number == 2 and run.t.entries[req.entry_id].table_id
    assert run.t.pool() == 500


def test_cancel_before_any_bust_refunds_everything_after_a_bust_splits_by_chips() -> None:
    run = started_mtt(4)
    events = run.do(c.Cancel("operator"))
    assert sum(e.buy_in + e.fee for e in events if isinstance(e, ev.RefundDue)) == 440
    run = started_mtt(5)
    e1 = run.t.entries["e1"]
    table = run.t.tables[e1.table_id]
    other = next(s for s, e in enumerate(table.seats, 1) if e and e != "e1")
    hand(run, e1.table_id, {e1.seat: 0, other: 2000})
    events = run.do(c.Cancel("operator"))
    shares = {e.entry_id: e.amount for e in events if isinstance(e, ev.PrizeDue)}
    assert sum(shares.values()) == 500 and "e1" not in shares
    assert max(shares.values()) == shares[table.seats[other - 1] or ""]
    with pytest.raises(FailedPrecondition):
        run.do(c.Cancel("again"))


def bust_one_in_hand(run: Run, table: str) -> str:
    """End the hand in progress at ``table``: its first player loses all to the second."""
    hand_no = run.world.in_hand.pop(table)
    start = run.world.starts[table]
    loser, winner = sorted(start)[:2]
    end = {**start, loser: 0, winner: start[winner] + start[loser]}
    for s, chips in end.items():
        run.world.seats[table][s] = (run.world.seats[table][s][0], chips)
    run.do(c.ReportHandEnded(table, hand_no, tuple(sorted(end.items()))))
    return run.world.seats[table][loser][0]


def end_even(run: Run, table: str) -> None:
    """End the hand in progress at ``table`` with every stack as it started."""
    hand_no = run.world.in_hand.pop(table)
    start = tuple(sorted(run.world.starts[table].items()))
    run.do(c.ReportHandEnded(table, hand_no, start))


def settle(run: Run) -> None:
    while run.intents():
        run.carry_out(run.intents()[0])


def test_hand_for_hand_on_the_bubble_one_hand_a_table_a_round() -> None:
    run = started_mtt(10, seats=3)  # 10 at four tables of 3; 3 places paid
    while len(run.t.alive()) > 4:
        table = max(run.t.tables, key=lambda k: sum(
            1 for e in run.t.tables[k].seats if e in run.t.alive()))
        bust_one(run, table)
        settle(run)
    assert len(run.t.tables) == 2 and run.t.hand_for_hand and run.t.h4h_round == 1
    a, b = sorted(run.t.tables)
    assert run.t.h4h_waiting == {a, b} and not run.t.tables[a].holds
    run.table_step("start", a)
    assert H4H in run.t.tables[a].holds  # one hand, then it waits for b
    assert ("start", a) not in run.table_steps()
    end_even(run, a)
    assert run.t.h4h_round == 1
    run.table_step("start", b)
    end_even(run, b)
    assert run.t.h4h_round == 2 and not run.t.tables[a].holds
    # round 2: both tables deal; one player busts at each; the bubble bursts with the first,
    # and the second still shares its round (ranked with it by the stacks at the start)
    run.table_step("start", a)
    run.table_step("start", b)
    ea = bust_one_in_hand(run, a)
    assert not run.t.hand_for_hand and run.t.entries[ea].bust is not None
    eb = bust_one_in_hand(run, b)
    assert run.t.entries[ea].bust.round == run.t.entries[eb].bust.round  # type: ignore[union-attr]
    assert not run.t.hand_for_hand and len(run.t.alive()) == 2
    places = {s.entry: (s.place, s.place_to) for s in run.t.standings()}
    sa, sb = (run.t.entries[e].bust.start_stack for e in (ea, eb))  # type: ignore[union-attr]
    if sa == sb:
        assert places[ea] == places[eb] == (3, 4)
    else:
        assert places[ea if sa > sb else eb] == (3, 3)
        assert places[eb if sa > sb else ea] == (4, 4)
    settle(run)
    assert len(run.t.tables) == 1  # the two left fit on one table: one broke


def test_a_mover_who_busts_in_the_hand_their_table_was_finishing_does_not_move() -> None:
    run = started_mtt(7)
    counts = {k: sum(1 for s in t.seats if s) for k, t in run.t.tables.items()}
    long_table = max(counts, key=lambda k: counts[k])
    short = min(counts, key=lambda k: counts[k])
    bust_one(run, short)
    move = run.t.move
    assert move is not None and move.move_id == "m1"
    run.table_step("start", long_table)  # dealt before the pause arrived
    hand_no = run.world.in_hand.pop(long_table)
    start = run.world.starts[long_table]
    other = next(s for s in start if s != move.from_seat)
    end = {**start, move.from_seat: 0, other: start[other] + start[move.from_seat]}
    events = run.do(c.ReportHandEnded(long_table, hand_no, tuple(sorted(end.items()))))
    assert ev.MoveCancelled("m1", "busted") in events
    assert run.t.entries[move.entry_id].bust is not None
    assert run.t.move is None and run.t.moves_started == 1  # 3 and 2 left: balanced
    assert run.do(c.ConfirmUnseated("m1", 500)) == []  # a late step of it changes nothing
    layout = run.t.layout()
    assert all(not (s or "").startswith(">") for seats in layout.values() for s in seats)


def test_a_hand_seen_in_progress_is_settled_with_the_stacks_the_table_recorded() -> None:
    """Reported started from a view during the hand (antes posted), ended with the start the
    table recorded: conserved against that start, busts ranked by it."""
    run = sng(3)
    register_paid(run, "p1", "p2", "p3")
    seat_all(run)
    (table,) = run.t.tables
    seats = sorted(run.world.seats[table])
    during = tuple((s, 990) for s in seats)  # an ante of 10 posted
    run.do(c.ReportHandStarted(table, 1, during))
    assert run.t.tables[table].in_hand == 1
    start = tuple((s, 1000) for s in seats)
    end = ((seats[0], 3000), (seats[1], 0), (seats[2], 0))
    with pytest.raises(FailedPrecondition):
        run.do(c.ReportHandEnded(table, 1, end))  # 3000 against the view's 2970
    events = run.do(c.ReportHandEnded(table, 1, end, start))
    busts = [e for e in events if isinstance(e, ev.Busted)]
    assert {b.start_stack for b in busts} == {1000} and run.t.phase == "finished"


def test_the_entry_view_says_where_a_moving_entry_is_going() -> None:
    """Issue 29: during a move the entry view showed only the table being left (the
    destination was in MoveStarted only); it now says the table and seat it goes to, from
    the move's start until it is seated there (then its table and seat are those)."""
    run = started_mtt(7)
    counts = {k: sum(1 for s in t.seats if s) for k, t in run.t.tables.items()}
    short = min(counts, key=lambda k: counts[k])
    bust_one(run, short)
    move = run.t.move
    assert move is not None

    def shown() -> tuple[str, int, str, int]:
        (e,) = [e for e in view(run.t).entries if e.entry_id == move.entry_id]
        return e.table_id, e.seat, e.moving_to_table, e.moving_to_seat

    assert shown() == (move.from_table, move.from_seat, move.to_table, move.to_seat)
    others = [e for e in view(run.t).entries if e.entry_id != move.entry_id]
    assert all(not e.moving_to_table and not e.moving_to_seat for e in others)
    run.carry_out(c.ConfirmUnseated(move.move_id, run.world.seats[move.from_table]
                                    [move.from_seat][1]))
    assert shown() == (move.from_table, move.from_seat, move.to_table, move.to_seat)
    run.carry_out(c.ConfirmReseated(move.move_id))
    assert shown() == (move.to_table, move.to_seat, "", 0)


def test_the_end_waits_for_an_entry_still_being_charged() -> None:
    """A late entry requested while registration was open and charged after the field was
    down to one: the tournament finished without it (its buy-in then counted in the pool,
    no prize paid from it: 11,000 in the pool, 10,000 in prizes; the property test's
    example, seed 1). The end waits for the charge; the entry is seated and plays."""
    run = mtt(seats=4, min_entrants=2, late_through_level=1)
    register_paid(run, "p1", "p2")
    run.now = 100.0
    run.do(c.Tick())
    seat_all(run)
    (late,) = run.do(c.Register("p3"))  # its charge is slow
    assert isinstance(late, ev.EntryRequested)
    run.now = 100.0 + FAST.levels[0].seconds  # level 2: registration closes, p3 pending
    run.do(c.Tick())
    assert not run.t.registration_open
    (table,) = run.t.tables
    bust_one(run, table)  # one player left in, one entry still being charged
    assert run.t.phase == "running" and run.t.winner == ""
    run.do(c.SettleEntry(late.entry_id, True))
    entry = run.t.entries[late.entry_id]
    assert entry.paid and entry.table_id == table and len(run.t.alive()) == 2
