"""Player protection's pure core (issue 34): limits as events with a cooling-off decided on
a clock that is data, exclusions that never shorten, and the check every money move passes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studkit.errors import BadRequest
from wallet.protection import (
    COOLING_OFF_MS,
    DAY_MS,
    INDEFINITE_MIN_MS,
    WINDOW_MS,
    CancelLimitIncrease,
    Excluded,
    ExcludePlayer,
    LiftExclusion,
    LimitDecreased,
    LimitExceeded,
    LimitIncreaseCancelled,
    LimitIncreaseRequested,
    LimitKind,
    LimitSet,
    Period,
    PlayerExcluded,
    Protection,
    ProtectionCommand,
    ProtectionEvent,
    ProtectionRefused,
    ProtectRule,
    RealityCheck,
    RealityCheckSet,
    SelfExclude,
    SelfExcluded,
    SetLimit,
    SetRealityCheck,
    Usage,
    Window,
    check,
    decide,
    event_from_json,
    event_to_json,
    evolve,
    fold,
    reality_check,
    standings,
    used,
)

T0 = 1_800_000_000_000
WAGER, LOSS, DEPOSIT = LimitKind.WAGER, LimitKind.LOSS, LimitKind.DEPOSIT
DAY, WEEK, MONTH = Window.DAY, Window.WEEK, Window.MONTH


def run(state: Protection, command: ProtectionCommand, now: int
        ) -> tuple[Protection, tuple[ProtectionEvent, ...]]:
    events = decide(state, command, now)
    for event in events:
        state = evolve(state, event)
        assert event_from_json(event_to_json(event)) == event
    return state, events


def limit(kind: LimitKind, window: Window, amount: int) -> SetLimit:
    return SetLimit(player_id="alice", kind=kind, window=window, amount=amount)


def in_force(state: Protection, kind: LimitKind, window: Window, now: int) -> int | None:
    current = state.limits.get((kind, window))
    return current.in_force(now) if current else None


class TestLimits:
    def test_a_first_limit_and_a_lower_one_apply_at_once(self) -> None:
        state, events = run(Protection(), limit(DEPOSIT, DAY, 500), T0)
        assert events == (LimitSet(at_ms=T0, kind=DEPOSIT, window=DAY, amount=500),)
        state, events = run(state, limit(DEPOSIT, DAY, 200), T0 + 1)
        assert events == (LimitDecreased(at_ms=T0 + 1, kind=DEPOSIT, window=DAY, amount=200),)
        assert in_force(state, DEPOSIT, DAY, T0 + 1) == 200

    def test_a_raise_applies_24_hours_later_with_no_further_action(self) -> None:
        state, _ = run(Protection(), limit(WAGER, WEEK, 100), T0)
        state, events = run(state, limit(WAGER, WEEK, 1_000), T0 + 5)
        assert events == (LimitIncreaseRequested(at_ms=T0 + 5, kind=WAGER, window=WEEK,
                                                 amount=1_000,
                                                 effective_ms=T0 + 5 + COOLING_OFF_MS),)
        assert in_force(state, WAGER, WEEK, T0 + 5 + COOLING_OFF_MS - 1) == 100
        assert in_force(state, WAGER, WEEK, T0 + 5 + COOLING_OFF_MS) == 1_000
        # Asking again does not restart (or shorten) the cooling-off.
        again, events = run(state, limit(WAGER, WEEK, 1_000), T0 + DAY_MS // 2)
        assert events == () and again == state

    def test_a_raise_can_be_cancelled_before_it_applies_not_after(self) -> None:
        state, _ = run(Protection(), limit(LOSS, DAY, 100), T0)
        state, _ = run(state, limit(LOSS, DAY, 300), T0)
        cancel = CancelLimitIncrease(player_id="alice", kind=LOSS, window=DAY)
        cancelled, events = run(state, cancel, T0 + 10)
        assert events == (LimitIncreaseCancelled(at_ms=T0 + 10, kind=LOSS, window=DAY),)
        assert in_force(cancelled, LOSS, DAY, T0 + 2 * DAY_MS) == 100
        with pytest.raises(ProtectionRefused) as refused:
            decide(state, cancel, T0 + COOLING_OFF_MS)
        assert refused.value.reason == "no_pending_increase"
        with pytest.raises(ProtectionRefused):
            decide(cancelled, cancel, T0 + 11)

    def test_a_lower_limit_drops_a_waiting_raise(self) -> None:
        state, _ = run(Protection(), limit(LOSS, DAY, 100), T0)
        state, _ = run(state, limit(LOSS, DAY, 300), T0)
        state, _ = run(state, limit(LOSS, DAY, 50), T0 + 1)
        assert in_force(state, LOSS, DAY, T0 + 3 * DAY_MS) == 50

    def test_removing_a_limit_waits_too(self) -> None:
        state, _ = run(Protection(), limit(DEPOSIT, MONTH, 100), T0)
        state, events = run(state, limit(DEPOSIT, MONTH, 0), T0)
        assert isinstance(events[0], LimitIncreaseRequested) and events[0].amount == 0
        assert in_force(state, DEPOSIT, MONTH, T0 + COOLING_OFF_MS - 1) == 100
        assert in_force(state, DEPOSIT, MONTH, T0 + COOLING_OFF_MS) is None

    def test_a_raise_after_a_due_raise_starts_from_the_raised_limit(self) -> None:
        state, _ = run(Protection(), limit(WAGER, DAY, 100), T0)
        state, _ = run(state, limit(WAGER, DAY, 200), T0)
        state, events = run(state, limit(WAGER, DAY, 150), T0 + 2 * DAY_MS)
        assert events == (LimitDecreased(at_ms=T0 + 2 * DAY_MS, kind=WAGER, window=DAY,
                                         amount=150),)

    @pytest.mark.parametrize("amount,reason", [(-1, "negative_amount"),
                                               (2**53, "amount_too_large")])
    def test_amounts_out_of_range_are_refused(self, amount: int, reason: str) -> None:
        with pytest.raises(BadRequest) as refused:
            decide(Protection(), limit(DEPOSIT, DAY, amount), T0)
        assert refused.value.reason == reason


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
        rule = ProtectRule("alice", (DEPOSIT,), True, Usage(T0 + 1, deposit=1))
        with pytest.raises(Excluded) as refused:
            check(state, [], rule, T0 + 1)
        assert refused.value.reason == "self_excluded"
        check(state, [], rule, T0 + DAY_MS)


class TestCheck:
    def test_the_least_left_wins_and_says_when_the_window_frees_some(self) -> None:
        state = fold([LimitSet(at_ms=T0, kind=WAGER, window=DAY, amount=100),
                      LimitSet(at_ms=T0, kind=WAGER, window=WEEK, amount=150),
                      LimitSet(at_ms=T0, kind=LOSS, window=MONTH, amount=1_000)])
        usage = [Usage(T0 - 3 * DAY_MS, wager=120, loss=120), Usage(T0 - 1, wager=10, loss=10)]
        rule = ProtectRule("alice", (WAGER, LOSS), True, Usage(T0, wager=30, loss=30))
        with pytest.raises(LimitExceeded) as refused:
            check(state, usage, rule, T0)
        assert refused.value.reason == "wager_limit"
        assert (refused.value.window, refused.value.remaining) == (WEEK, 20)
        assert refused.value.resets_at_ms == T0 - 3 * DAY_MS + WINDOW_MS[WEEK]
        check(state, usage, ProtectRule("alice", (WAGER, LOSS), True,
                                        Usage(T0, wager=20, loss=20)), T0)

    def test_a_net_win_leaves_the_loss_limit_whole_and_is_not_negative(self) -> None:
        usage = [Usage(T0 - 10, loss=100), Usage(T0 - 5, loss=-400)]
        assert used(usage, LOSS, DAY, T0) == (0, T0 - 10 + DAY_MS)
        state = fold([LimitSet(at_ms=T0, kind=LOSS, window=DAY, amount=50)])
        (row,) = standings(state, usage, T0)
        assert row.remaining == 50


@settings(max_examples=200, deadline=None)
@given(limit_amount=st.integers(1, 1_000), window=st.sampled_from(list(Window)),
       moves=st.lists(st.tuples(st.integers(1, 400), st.integers(0, 40 * DAY_MS)), max_size=30))
def test_no_order_of_buy_ins_passes_a_limit(limit_amount: int, window: Window,
                                            moves: list[tuple[int, int]]) -> None:
    """Buy-ins in any order and at any times, each checked against what was accepted before
    (as the one script sees them, one at a time): the accepted ones in any window never sum
    past the limit, and every refused one would have passed it."""
    state = fold([LimitSet(at_ms=0, kind=WAGER, window=window, amount=limit_amount)])
    accepted: list[Usage] = []
    for amount, at in sorted(moves, key=lambda m: m[1]):
        move = Usage(at, wager=amount, loss=amount)
        try:
            check(state, accepted, ProtectRule("alice", (WAGER, LOSS), True, move), at)
        except LimitExceeded:
            assert used(accepted, WAGER, window, at)[0] + amount > limit_amount
            continue
        accepted.append(move)
    for u in accepted:
        assert used(accepted, WAGER, window, u.at_ms)[0] <= limit_amount


class TestRealityChecks:
    def test_an_interval_is_set_once_and_in_range(self) -> None:
        state, events = run(Protection(), SetRealityCheck(player_id="alice", minutes=30), T0)
        assert events == (RealityCheckSet(at_ms=T0, minutes=30),)
        assert state.reality_check_minutes == 30
        assert decide(state, SetRealityCheck(player_id="alice", minutes=30), T0 + 1) == ()
        for bad in (-1, 24 * 60 + 1):
            with pytest.raises(BadRequest):
                decide(state, SetRealityCheck(player_id="alice", minutes=bad), T0)

    def test_the_net_result_counts_the_session_only(self) -> None:
        usage = [Usage(T0 - 5, loss=1_000), Usage(T0 + 10, wager=300, loss=300),
                 Usage(T0 + 20, loss=-450), Usage(T0 + 99, loss=50)]
        assert reality_check(usage, T0, T0 + 60, 1) == RealityCheck(T0 + 60, 60, 150, 1)
