"""One tournament table whose calls are refused or unanswered waits for the next round, and
only it: the tournament's other tables are still opened, seated and let deal in the same round
(issue 29, G1's second half: one refused step must never stop the others). The stuck table
never deals before its draw is seated, and deals it once the table answers again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.tournament.test_model import mtt, register_paid
from tests.unit.tournament.test_table_steps_first_hand import App, Clock, Tables
from tournament import commands as c
from tournament.clients import Refused, Unavailable
from tournament.table_steps import TableSteps


class StuckTables(Tables):
    """The tables of test_table_steps_first_hand, with one table (``stuck``) that answers
    every call with ``failure`` until it is cleared."""

    def __init__(self, clock: Clock, stuck: str, failure: Exception) -> None:
        super().__init__(clock)
        self.stuck: str | None = stuck
        self.failure = failure
        self.calls_to_stuck = 0

    def _check(self, table_id: str) -> None:
        if table_id == self.stuck:
            self.calls_to_stuck += 1
            raise self.failure

    async def open(self, tid: str, table_id: str, *args: Any) -> None:
        self._check(table_id)
        await super().open(tid, table_id, *args)

    async def pause(self, table_id: str, *args: Any, **kwargs: Any) -> None:
        self._check(table_id)
        await super().pause(table_id, *args, **kwargs)

    async def seat(self, table_id: str, *args: Any) -> None:
        self._check(table_id)
        await super().seat(table_id, *args)


@pytest.mark.parametrize("failure", [Refused("table_closed"), Unavailable("table: UNAVAILABLE")],
                         ids=["refused", "unavailable"])
async def test_a_stuck_table_does_not_stop_the_other_tables_round(failure: Exception) -> None:
    run = mtt()
    register_paid(run, *"abcdefgh")
    run.now = 100.0
    run.do(c.Tick())
    first, second = sorted(run.t.tables)
    clock = Clock(-1)
    tables = StuckTables(clock, first, failure)
    steps = TableSteps(App(run, clock), tables)  # type: ignore[arg-type]
    for _ in range(3):
        await steps.round("M")
    assert tables.calls_to_stuck >= 3  # tried again each round
    assert first not in tables.tables  # never opened, so never dealt
    draw = tuple(s for s, e in enumerate(run.t.tables[second].seats, start=1) if e is not None)
    assert tables.tables[second].first_hand == draw  # the other table dealt to its draw
    assert not tables.tables[second].paused

    tables.stuck = None  # the table answers again: it catches up on the next rounds
    for _ in range(3):
        await steps.round("M")
    draw = tuple(s for s, e in enumerate(run.t.tables[first].seats, start=1) if e is not None)
    assert tables.tables[first].first_hand == draw
