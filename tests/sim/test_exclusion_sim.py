"""Exclusion at a cash table in the simulator (issue 34): players exclude themselves among
their actions (``--protection``), the wallet's settlement names them and the table stands
them up after the hand, so no hand is dealt to an excluded player after their current hand
(``sim.checks.exclusions``); a table that stops standing them up is seen."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim import network
from sim.run import run_seed
from sim.world import Probabilities, World

RATE = 0.02
SEED, TABLES, HANDS = 34, 2, 30


def _excluded_players(world: World) -> int:
    return sum(1 for kind, _p, text, _c, _b in world.data.protection_log
               if kind == "event" and '"SelfExcluded"' in text)


def test_excluded_players_are_dealt_no_hand_after_their_current_one() -> None:
    seen: dict[str, World] = {}
    result = run_seed(SEED, tables=TABLES, hands=HANDS,
                      probabilities=replace(Probabilities(), protection=RATE),
                      tweak=lambda world: seen.update(world=world))
    assert not [v for v in result.violations if v.startswith("exclusion: ")]
    assert result.violations == []
    assert _excluded_players(seen["world"]) > 0


def test_a_table_that_does_not_stand_them_up_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settlement's reply names no excluded seat, so the table stands nobody up: the
    excluded players are dealt in again, and the check finds it."""
    monkeypatch.setattr(network, "excluded_seats", lambda *_args: [])
    result = run_seed(SEED, tables=TABLES, hands=HANDS,
                      probabilities=replace(Probabilities(), protection=RATE))
    assert any(v.startswith("exclusion: ") for v in result.violations), result.violations[:5]
