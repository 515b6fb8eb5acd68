"""Player protection in the simulator (issue 34): with players setting wager and loss limits
and taking breaks among their actions, under the simulator's faults, no move passes a limit
in force or is made while excluded (``sim.checks.protection``) and the other invariants hold;
a script that stops refusing is seen."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim import scripts
from sim.run import run_seed
from sim.world import Probabilities, World

RATE = 0.02


def test_limits_and_breaks_among_the_players_actions_break_no_invariant() -> None:
    seen: dict[str, World] = {}

    def keep(world: World) -> None:
        seen["world"] = world

    result = run_seed(34, tables=2, hands=30,
                      probabilities=replace(Probabilities(), protection=RATE), tweak=keep)
    assert result.violations == []
    log = seen["world"].data.protection_log
    events = [text for kind, _p, text, _c, _b in log if kind == "event"]
    assert any('"SelfExcluded"' in e for e in events)
    assert any('"LimitSet"' in e for e in events)
    assert sum(1 for kind, *_ in log if kind == "move") > 10


def test_a_script_that_stops_refusing_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated apply.lua with its protection check switched off: moves past limits and
    while excluded are applied, and the check finds them."""
    monkeypatch.setattr(scripts, "_protect", lambda *_args: None)
    result = run_seed(34, tables=2, hands=30,
                      probabilities=replace(Probabilities(), protection=RATE))
    assert any(line.startswith("protection: ") for line in result.violations), \
        result.violations[:5]
