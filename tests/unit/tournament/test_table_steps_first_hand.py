"""A tournament table deals no hand until every seat its draw gave it is filled (issue 29,
RULES 2.5), whatever step the tournament service dies at: the table is paused ("seating")
before its first ``SeatEntrant`` and resumed only by a round that finds the whole draw
seated. The model is the real one (``studtest.tournament.Run``); the app is a stand-in for
the log, the tables a stand-in that deals hand 1 as the real one does (as soon as two seats
are filled and dealing is not paused), and the service is killed once at each step of the
rounds in turn (after a table call took effect, or before the log recorded a step), then
restarted as a new process manager."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from studtest.tournament import Run
from tests.unit.tournament.test_model import mtt, register_paid
from tournament import commands as c
from tournament.clients import Refused
from tournament.structure import Level
from tournament.table_steps import SEATING, TableSteps
from tournament.tables import HandStacks, TableState


class Crash(Exception):
    pass


class Clock:
    """The steps left before the service dies (-1: never)."""

    def __init__(self, steps: int) -> None:
        self.left = steps

    def step(self) -> None:
        if self.left == 0:
            self.left = -1
            raise Crash("the tournament service is killed")
        self.left -= self.left > 0


class App:
    def __init__(self, run: Run, clock: Clock) -> None:
        self.run = run
        self.clock = clock

    async def load(self, _tid: str) -> Any:
        return self.run.t

    async def execute(self, _tid: str, cmd: c.Command, _command_id: str) -> None:
        self.clock.step()  # killed before the log records it
        self.run.do(cmd)


@dataclass
class FakeTable:
    paused: bool = False
    reason: str = ""
    seats: dict[int, tuple[str, int]] = field(default_factory=dict)
    hands: int = 0
    first_hand: tuple[int, ...] = ()

    def deal(self) -> None:
        if not self.paused and len(self.seats) >= 2 and not self.hands:
            self.hands = 1
            self.first_hand = tuple(sorted(self.seats))


class Tables:
    """Tables that deal hand 1 as soon as two seats are filled and dealing is not paused
    (hand 1 never ends here); each call that changes a table takes effect, then may be the
    last thing the service does."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.tables: dict[str, FakeTable] = {}

    def _done(self, table_id: str) -> None:
        self.tables[table_id].deal()
        self.clock.step()  # killed after the table took the call

    async def open(self, _tid: str, table_id: str, *_args: Any) -> None:
        self.tables.setdefault(table_id, FakeTable())
        self._done(table_id)

    async def state(self, table_id: str) -> TableState:
        t = self.tables.get(table_id)
        if t is None:
            return TableState(False, False, False, 0, {})
        return TableState(True, bool(t.hands), t.paused, t.hands, dict(t.seats))

    async def stakes(self, table_id: str, _level: Level, _command_id: str) -> None:
        pass

    async def hand(self, _table_id: str, _number: int) -> HandStacks | None:
        return None  # in progress

    async def pause(self, table_id: str, paused: bool, reason: str, _command_id: str,
                    one_hand: bool = False) -> None:
        t = self.tables[table_id]
        t.paused, t.reason = paused, reason
        self._done(table_id)

    async def seat(self, table_id: str, seat: int, player_id: str, stack: int,
                   _command_id: str) -> None:
        t = self.tables[table_id]
        if t.seats.get(seat, (player_id, 0))[0] != player_id:
            raise Refused("seat_taken")
        t.seats[seat] = (player_id, stack)
        self._done(table_id)

    async def close(self, *_args: Any) -> None:
        pass


async def _run_to_first_hands(crash_at: int) -> tuple[Run, Tables, bool]:
    run = mtt()
    register_paid(run, *"abcdefgh")
    run.now = 100.0
    run.do(c.Tick())
    clock = Clock(crash_at)
    app, tables = App(run, clock), Tables(clock)
    crashed = False
    steps = TableSteps(app, tables)  # type: ignore[arg-type]
    for _ in range(20):
        try:
            await steps.round("M")
        except Crash:
            crashed = True
            steps = TableSteps(app, tables)  # type: ignore[arg-type]  # a new process
        if len(tables.tables) == len(run.t.tables) and all(
                t.hands for t in tables.tables.values()):
            break
    return run, tables, crashed


async def test_each_table_deals_hand_one_to_its_whole_draw() -> None:
    run, tables, _ = await _run_to_first_hands(-1)
    assert len(tables.tables) == 2
    for k, table in run.t.tables.items():
        draw = tuple(s for s, e in enumerate(table.seats, start=1) if e is not None)
        assert tables.tables[k].first_hand == draw
        assert not tables.tables[k].paused


@pytest.mark.parametrize("crash_at", range(0, 32))
async def test_a_crash_at_any_step_never_lets_a_table_deal_before_its_draw_is_seated(
        crash_at: int) -> None:
    run, tables, crashed = await _run_to_first_hands(crash_at)
    for k, table in run.t.tables.items():
        draw = tuple(s for s, e in enumerate(table.seats, start=1) if e is not None)
        assert tables.tables[k].first_hand == draw, (crash_at, crashed)


async def test_the_pause_while_seating_is_named() -> None:
    run = mtt()
    register_paid(run, *"abcd")
    run.now = 100.0
    run.do(c.Tick())
    clock = Clock(-1)
    tables = Tables(clock)
    steps = TableSteps(App(run, clock), tables)  # type: ignore[arg-type]
    await steps._tables_now("M", run.t)  # opened and paused, nobody seated yet
    (table,) = tables.tables.values()
    assert (table.paused, table.reason, table.seats) == (True, SEATING, {})
