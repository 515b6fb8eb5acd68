"""A table's log folds to its live state whether it is folded a command at a time (as a
table's load and catch-up fold it) or an envelope at a time, on logs the simulation wrote
(faults on: retries, duplicates, timeouts, hands voided and restarted tables)."""

from __future__ import annotations

from sim import checks
from sim.loop import SimLoop
from sim.run import Run, cancel_all
from table.actor import TableActor


def test_a_log_folds_the_same_a_command_or_an_envelope_at_a_time() -> None:
    loop = SimLoop()
    try:
        run = Run(5, tables=2, hands=30, loop=loop)
        result = loop.run_until_complete(run.main())
        assert result.violations == [] and result.hands >= 30
        for table_id in run.table_ids:
            actor = run._actor(table_id)
            assert actor is not None
            stored = checks.envelopes(run.world, table_id)
            commands = {e.command_id for e in stored}
            assert len(commands) < len(stored)  # commands of several events are there
            by_command, one_by_one = (TableActor(table_id, actor.deps) for _ in range(2))
            by_command.fold(stored)
            for envelope in stored:
                one_by_one.fold([envelope])
            assert by_command.version == one_by_one.version == actor.version
            assert by_command.room == one_by_one.room == actor.room
    finally:
        cancel_all(loop)
        loop.close()
