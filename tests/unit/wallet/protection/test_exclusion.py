"""Exclusions (issue 34): never shortened, a timed one never lifted early, an indefinite one
lifted by an operator after six months and a cooling-off; an excluded player moves no money
in."""

from __future__ import annotations

import pytest

from studkit.errors import BadRequest
from tests.unit.wallet.protection.steps import T0, run
from wallet.protection import (
    DAY_MS,
    INDEFINITE_MIN_MS,
    Excluded,
    ExcludePlayer,
    LiftExclusion,
    LimitKind,
    Period,
    PlayerExcluded,
    Protection,
    ProtectionRefused,
    ProtectRule,
    SelfExclude,
    SelfExcluded,
    Usage,
    check,
    decide,
)


class TestExclusion:
    def test_an_exclusion_is_never_shortened(self) -> None:
        week = SelfExclude(player_id="alice", period=Period.WEEK)
        state, events = run(Protection(), week, T0)
        assert events == (SelfExcluded(at_ms=T0, period=Period.WEEK, until_ms=T0 + 7 * DAY_MS),)
        _, events = run(state, SelfExclude(player_id="alice", period=Period.DAY), T0 + 1)
        assert events == ()
        longer, events = run(state, SelfExclude(player_id="alice", period=Period.MONTH), T0 + 1)
        assert longer.exclusion is not None and longer.exclusion.until_ms == T0 + 1 + 30 * DAY_MS
        assert state.exclusion is not None
        assert state.exclusion.active(T0 + 7 * DAY_MS - 1)
        assert not state.exclusion.active(T0 + 7 * DAY_MS)

    def test_a_timed_exclusion_cannot_be_lifted_early_by_anyone(self) -> None:
        state, _ = run(Protection(), SelfExclude(player_id="alice", period=Period.SIX_MONTHS),
                       T0)
        lift = LiftExclusion(player_id="alice", reason="asked", operator="operator:ops")
        with pytest.raises(ProtectionRefused) as refused:
            decide(state, lift, T0 + 100 * DAY_MS)
        assert refused.value.reason == "exclusion_active"

    def test_an_indefinite_one_lifts_after_six_months_and_a_cooling_off(self) -> None:
        exclude = ExcludePlayer(player_id="alice", period=Period.INDEFINITE,
                                reason="problem gambling flagged", operator="operator:ops")
        state, events = run(Protection(), exclude, T0)
        assert events == (PlayerExcluded(at_ms=T0, period=Period.INDEFINITE, until_ms=0,
                                         operator="operator:ops",
                                         reason="problem gambling flagged"),)
        lift = LiftExclusion(player_id="alice", reason="reviewed", operator="operator:ops")
        with pytest.raises(ProtectionRefused):
            decide(state, lift, T0 + INDEFINITE_MIN_MS - 1)
        lifted, _ = run(state, lift, T0 + INDEFINITE_MIN_MS)
        assert lifted.exclusion is not None
        assert lifted.exclusion.active(T0 + INDEFINITE_MIN_MS + DAY_MS - 1)
        assert not lifted.exclusion.active(T0 + INDEFINITE_MIN_MS + DAY_MS)

    def test_an_operator_exclusion_needs_a_reason(self) -> None:
        with pytest.raises(BadRequest):
            decide(Protection(), ExcludePlayer(player_id="alice", period=Period.DAY,
                                               reason="  ", operator="operator:ops"), T0)

    def test_an_excluded_player_moves_no_money_in(self) -> None:
        state, _ = run(Protection(), SelfExclude(player_id="alice", period=Period.DAY), T0)
        rule = ProtectRule("alice", (LimitKind.DEPOSIT,), True, Usage(T0 + 1, deposit=1))
        with pytest.raises(Excluded) as refused:
            check(state, [], rule, T0 + 1)
        assert refused.value.reason == "self_excluded"
        check(state, [], rule, T0 + DAY_MS)
