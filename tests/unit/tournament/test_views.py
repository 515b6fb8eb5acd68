"""What ``GetTournament`` and ``ListTournaments`` show (services/tournament/views.py), read
from the folded log at an instant."""

from __future__ import annotations

import random

import pytest

from stud.v1 import tournament_pb2 as pb
from studtest.tournament import Run
from tournament import commands as c
from tournament import events as ev
from tournament.structure import Level, Structure, clock_at, period_end
from tournament.views import summary, view

CLOCKED = Structure(levels=(Level(10, 20, 50, 100, 60), Level(20, 30, 100, 200, 60)),
                    starting_stack=1000, break_every=1, break_seconds=30)
"""Level 1 is 0-60 s, its break 60-90, level 2 90-150, its break 150-180, then level 2's
stakes again (the last level repeats) from 180."""


def started(at: float = 0.0) -> Run:
    run = Run(random.Random(3))
    run.now = at
    run.do(c.Create("S", ev.Config("sng", ev.SIT_AND_GO, 100, 10, CLOCKED, seats=2)))
    for p in ("p1", "p2"):
        (req,) = run.do(c.Register(p))
        assert isinstance(req, ev.EntryRequested)
        run.do(c.SettleEntry(req.entry_id, True))
    assert run.t.started_at == at
    return run


def clock(run: Run) -> tuple[int, bool, float, int]:
    out = view(run.t).clock
    return (out.level, out.on_break, out.ends_at.ToNanoseconds() / 1e9 - 1000.0,
            out.stakes.big_bet)


@pytest.mark.parametrize("late", [0.0, 0.001, 1.0, 29.0, 35.0])
def test_the_clock_is_the_logs_period_and_its_scheduled_end(late: float) -> None:
    """Issue 29: level and break came from the log, ``ends_at`` from the schedule at the
    time of the call; between a level's scheduled end and the manager's next round the view
    said "level 1, ends at 90", 90 being the end of the break after it. All three now come
    from the log's period: at every boundary, whether the manager's round is on time or
    ``late`` seconds after it, the view says the period the log is in and its end."""
    run = started(1000.0)
    assert clock(run) == (1, False, 60.0, 100)
    seen = []
    for boundary in (60.0, 90.0, 150.0, 180.0):
        seen.append(clock(run))  # the boundary passed, the manager's round not yet
        run.now = 1000.0 + boundary + late
        run.do(c.Tick())
    seen.append(clock(run))
    assert seen[0] == (1, False, 60.0, 100)
    if late < 30.0:  # each round in its period: one period a round
        assert seen[1:] == [(1, True, 90.0, 100), (2, False, 150.0, 200),
                            (2, True, 180.0, 200), (3, False, 240.0, 200)]
    for level, on_break, ends_at, _ in seen:  # the end is always the log's period's end
        assert ends_at == period_end(CLOCKED, 0.0, level, on_break)


@pytest.mark.parametrize("now", [0.0, 59.999, 60.0, 89.0, 90.0, 149.5, 180.0, 1e6 + 0.25])
def test_a_periods_end_is_where_the_schedule_ends_it(now: float) -> None:
    at = clock_at(CLOCKED, 0.0, now)
    assert period_end(CLOCKED, 0.0, at.level, at.on_break) == at.ends_at


def test_a_cancelled_tournament_has_nobody_left_in_the_lobby() -> None:
    """Issue 29: ListTournaments showed a cancelled sit & go with ``players_left: 1`` (its
    one paid entry, refunded). Registering: the paid entries; running: those still in;
    finished: the winner; cancelled: none."""
    run = Run(random.Random(4))
    run.do(c.Create("S", ev.Config("sng", ev.SIT_AND_GO, 100, 10, CLOCKED, seats=3)))
    (req,) = run.do(c.Register("p1"))
    run.do(c.SettleEntry(req.entry_id, True))
    assert (summary(run.t).entries, summary(run.t).players_left) == (1, 1)
    run.do(c.Cancel("no field"))
    line = summary(run.t)
    assert line.phase == pb.TOURNAMENT_PHASE_CANCELLED
    assert (line.entries, line.players_left, line.registration_open) == (1, 0, False)


def test_the_entries_chips_sum_to_the_fields_while_a_hand_runs() -> None:
    """Issue 29: ``chips`` was the stack at the last report, and a hand seen in progress is
    reported with the stacks the table showed then (antes posted), so the entries' chips did
    not sum to the field's while hands ran. ``chips`` is the stack at the last hand's end (or
    as seated) and sums to the field's at every step; ``hand_start_chips`` is the stack the
    hand in progress was reported started with (0 between hands)."""
    run = started(1000.0)
    (table,) = run.t.tables
    field = 2 * CLOCKED.starting_stack
    seats = {e.seat: e.entry_id for e in run.t.field()}

    def shown() -> dict[str, tuple[int, int]]:
        return {e.entry_id: (e.chips, e.hand_start_chips) for e in view(run.t).entries}

    assert shown() == {e: (1000, 0) for e in seats.values()}
    run.do(c.ReportHandStarted(table, 1, ((1, 990), (2, 990))))  # seen after the antes
    assert sum(chips for chips, _ in shown().values()) == field
    assert shown() == {e: (1000, 990) for e in seats.values()}
    run.do(c.ReportHandEnded(table, 1, ((1, 1300), (2, 700)), ((1, 1000), (2, 1000))))
    assert shown() == {seats[1]: (1300, 0), seats[2]: (700, 0)}
    run.do(c.ReportHandStarted(table, 2, ((1, 1300), (2, 700))))
    assert shown() == {seats[1]: (1300, 1300), seats[2]: (700, 700)}
    assert sum(chips for chips, _ in shown().values()) == field


def test_a_dropped_entry_is_shown_with_its_reason() -> None:
    """Issue 29: an entry whose charge the wallet refused vanished from GetTournament (it is
    not in the field); it is listed apart (``dropped_entries``) with the wallet's reason,
    a withdrawn one is not."""
    run = Run(random.Random(5))
    run.do(c.Create("S", ev.Config("sng", ev.SIT_AND_GO, 100, 10, CLOCKED, seats=3)))
    for p in ("p1", "p2", "p3"):
        run.do(c.Register(p))
    run.do(c.SettleEntry("e1", True))
    run.do(c.SettleEntry("e2", False, "insufficient_funds"))
    run.do(c.SettleEntry("e3", True))
    run.do(c.Unregister("p3"))
    out = view(run.t)
    assert [e.entry_id for e in out.entries] == ["e1"]
    assert [(e.entry_id, e.player_id, e.dropped_reason, e.paid)
            for e in out.dropped_entries] == [("e2", "p2", "insufficient_funds", False)]
