"""Benchmark of the pure tournament model: whole multi-table tournaments (turbo structure,
late registration through level 2, one re-entry) played by ``studtest.tournament`` against
its model of the tables, at several field sizes, side by side in one run. Prints, per field:
the entries, tables opened, hands, moves, breaks, events in the log, the time per decided
command and per event, and each size's time per event as a ratio to the smallest field's
(the fold copies a state's mappings per event, so this ratio shows how that grows with the
field). Asserts nothing about speed. Run: ``.venv/bin/python bench/bench_tournament.py
[FIELD ...]`` (default 20 60 180).
"""

from __future__ import annotations

import random
import sys
import time

from studtest.tournament import Run, final_check, play
from tournament import commands as c
from tournament import events as ev
from tournament.structure import TURBO


class Counted(Run):
    commands: int = 0
    seconds: float = 0.0

    def do(self, cmd: c.Command) -> list[ev.Event]:
        start = time.perf_counter()
        try:
            return super().do(cmd)
        finally:
            self.seconds += time.perf_counter() - start
            self.commands += 1


def one(field: int, seed: int) -> Counted:
    run = Counted(random.Random(seed))
    run.do(c.Create("B", ev.Config("bench", ev.MULTI_TABLE, 1000, 100, TURBO, seats=8,
                                   start_at=60.0, late_through_level=2, re_entries=1)))
    for i in range(field):
        run.do(c.Register(f"p{i}"))
    play(run, tick=60.0, max_steps=2_000_000)
    final_check(run)
    return run


def main(fields: list[int]) -> None:
    base = 0.0
    for field in fields:
        run = one(field, seed=field)
        events = len(run.log)
        per_event = run.seconds / events * 1e6
        base = base or per_event
        kinds = [type(e) for e in run.log]
        print(f"field={field} entries={len(run.t.field())} tables={run.t.tables_opened} "
              f"hands={run.hands} moves={run.t.moves} breaks={kinds.count(ev.BreakStarted)} "
              f"events={events} commands={run.commands} "
              f"us_per_command={run.seconds / run.commands * 1e6:.1f} "
              f"us_per_event={per_event:.1f} ratio_per_event={per_event / base:.2f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [20, 60, 180])
