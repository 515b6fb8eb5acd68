"""The process manager's table round asks each table for the stakes of the level the log is
at when that table's turn comes, under that level's key (a regression: a round took the
stakes from the log at its start and the key from the log after the first table's reports;
when those reports started the next level, the second table got level N's stakes under
level N+1's key, and every round after was refused ``command_id_reused`` there, the
tournament stuck; found by a loaded run of the multi-table bots test). The model is the real
one (``studtest.tournament.Run``); the app and the table are stand-ins that record what was
asked, the table refusing a key reused for another request as the real one does."""

from __future__ import annotations

from typing import Any

from studtest.tournament import Run
from tests.unit.tournament.test_model import FAST, mtt, register_paid, seat_all
from tournament import commands as c
from tournament.clients import Refused, key
from tournament.structure import Level
from tournament.table_steps import TableSteps
from tournament.tables import HandStacks, TableState


class App:
    def __init__(self, run: Run) -> None:
        self.run = run

    async def load(self, _tid: str) -> Any:
        return self.run.t

    async def execute(self, _tid: str, cmd: c.Command, _command_id: str) -> None:
        self.run.do(cmd)


class Tables:
    """Each table between hands after one hand, and stakes by command key."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.stakes_asked: dict[str, tuple[str, Level]] = {}

    async def state(self, table_id: str) -> TableState:
        seats = {s: (self.run.t.entries[e].player_id, 1000)
                 for s, e in enumerate(self.run.t.tables[table_id].seats, start=1)
                 if e is not None}
        return TableState(True, False, False, 1, seats)

    async def hand(self, table_id: str, number: int) -> HandStacks:
        seats = self.run.t.tables[table_id].seats
        stacks = tuple((s, 1000) for s, e in enumerate(seats, start=1) if e is not None)
        return HandStacks(number, stacks, stacks)

    async def stakes(self, table_id: str, level: Level, command_id: str) -> None:
        asked = (table_id, level)
        if self.stakes_asked.setdefault(command_id, asked) != asked:
            raise Refused("command_id_reused")

    async def pause(self, *_args: Any, **_kw: Any) -> None:
        pass


async def test_each_table_gets_the_stakes_of_the_level_under_its_key() -> None:
    run = mtt()
    register_paid(run, *"abcdefgh")
    run.now = 100.0
    run.do(c.Tick())
    seat_all(run)
    first, second = sorted(run.t.tables)
    assert run.t.level == 1
    run.now = 100.0 + FAST.levels[0].seconds + 1  # level 1 is over: the next report starts 2
    tables = Tables(run)
    steps = TableSteps(App(run), tables)  # type: ignore[arg-type]
    await steps._tables_now("M", run.t)
    assert run.t.level == 2
    for _ in range(2):  # the next rounds ask again under the same keys: answered, not refused
        await steps._tables_now("M", run.t)
    by_level = {(k, n): tables.stakes_asked.get(key("M", "stakes", k, n))
                for k in (first, second) for n in (1, 2)}
    assert by_level[(second, 2)] == (second, FAST.levels[1])
    assert all(asked is None or asked[1] == FAST.levels[n - 1]
               for (_k, n), asked in by_level.items())
