"""The process manager's seating survives a crash between the table's seat and the log's
confirmation of it, even once the table has dealt that player hands (found by
``make tournament``: the retry carried the stack the log held by then, the table refused it
as ``command_id_reused``, and every round after stopped at that seat, the tournament with
it). The model is the real one (``studtest.tournament.Run``); the app and the table are
stand-ins that record what was asked, the table refusing a key reused for another request
as the real one does."""

from __future__ import annotations

from typing import Any

import pytest

from studtest.tournament import Run
from tests.unit.tournament.test_model import mtt, register_paid
from tournament import commands as c
from tournament.clients import Refused, key
from tournament.table_steps import TableSteps
from tournament.tables import TableState


class Crash(Exception):
    pass


class App:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.crash_after = -1
        """Executes left before the process dies (-1: never)."""

    async def load(self, _tid: str) -> Any:
        return self.run.t

    async def execute(self, _tid: str, cmd: c.Command, _command_id: str) -> None:
        if self.crash_after == 0:
            self.crash_after = -1
            raise Crash("killed before the log recorded it")
        self.crash_after -= self.crash_after > 0
        self.run.do(cmd)


class Table:
    """Seats by command key, as the table does: the same key and request is a duplicate,
    the same key with another request is refused."""

    def __init__(self) -> None:
        self.requests: dict[str, tuple[str, int, str, int]] = {}
        self.seats: dict[str, dict[int, tuple[str, int]]] = {}

    async def seat(self, table_id: str, seat: int, player_id: str, stack: int,
                   command_id: str) -> None:
        request = (table_id, seat, player_id, stack)
        if command_id in self.requests:
            if self.requests[command_id] != request:
                raise Refused("command_id_reused")
            return
        if seat in self.seats.setdefault(table_id, {}):
            raise Refused("seat_taken")
        self.requests[command_id] = request
        self.seats[table_id][seat] = (player_id, stack)

    async def state(self, table_id: str) -> TableState:
        return TableState(True, False, False, 0, dict(self.seats.get(table_id, {})))


async def test_a_seat_the_log_never_confirmed_is_confirmed_after_hands_changed_its_stack(
        ) -> None:
    run = mtt()
    register_paid(run, "a", "b", "c", "d")
    run.now = 100.0
    run.do(c.Tick())
    (table_id,) = run.t.tables
    app, table = App(run), Table()
    steps = TableSteps(app, table)  # type: ignore[arg-type]
    app.crash_after = 1  # the service dies right after the second seat is taken
    with pytest.raises(Crash):
        await steps._seats("M", run.t)
    (second,) = [e for e in run.t.field() if not e.seated and e.seat in table.seats[table_id]]
    assert table.seats[table_id][second.seat][0] == second.player_id
    two = second.seat
    (one,) = set(table.seats[table_id]) - {two}
    # before it is back, the table deals the two seated players a hand: the second wins 200
    run.do(c.ReportHandStarted(table_id, 1, ((one, 1000), (two, 1000))))
    run.do(c.ReportHandEnded(table_id, 1, ((one, 800), (two, 1200))))
    assert run.t.entries[second.entry_id].chips == 1200
    await steps._seats("M", run.t)  # no command_id_reused raised: the seat is confirmed
    assert all(e.seated for e in run.t.field())


async def test_a_key_reused_for_a_seat_the_player_is_not_in_is_still_refused() -> None:
    run = mtt()
    register_paid(run, "a", "b", "c", "d")
    run.now = 100.0
    run.do(c.Tick())
    (table_id,) = run.t.tables
    app, table = App(run), Table()
    first = next(e for e in run.t.field() if e.table_id)
    other = next(e for e in run.t.field() if e.table_id and e.entry_id != first.entry_id)
    table.requests[key("M", "seat", first.entry_id, table_id, first.seat)] = (
        table_id, first.seat, first.player_id, 999)
    table.seats[table_id] = {first.seat: (other.player_id, 999)}
    with pytest.raises(Refused):
        await TableSteps(app, table)._seat(  # type: ignore[arg-type]
            "M", table_id, first.seat, first.player_id, first.entry_id, first.chips)
    # in a round, the refusal makes that table wait (the next round tries again) and the
    # seat is never confirmed
    waiting: set[str] = set()
    await TableSteps(app, table)._seats("M", run.t, waiting)  # type: ignore[arg-type]
    assert waiting == {table_id}
    assert not run.t.entries[first.entry_id].seated
