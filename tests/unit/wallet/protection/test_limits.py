"""Money limits as events (issue 34): a first or lower limit at once, a raise (or a removal)
after the cooling-off unless cancelled, decided on a clock that is data."""

from __future__ import annotations

import pytest

from studkit.errors import BadRequest
from tests.unit.wallet.protection.steps import T0, run
from wallet.protection import (
    COOLING_OFF_MS,
    DAY_MS,
    CancelLimitIncrease,
    LimitDecreased,
    LimitIncreaseCancelled,
    LimitIncreaseRequested,
    LimitKind,
    LimitSet,
    Protection,
    ProtectionRefused,
    SetLimit,
    Window,
    decide,
)


def limit(kind: LimitKind, window: Window, amount: int) -> SetLimit:
    return SetLimit(player_id="alice", kind=kind, window=window, amount=amount)


def in_force(state: Protection, kind: LimitKind, window: Window, now: int) -> int | None:
    current = state.limits.get((kind, window))
    return current.in_force(now) if current else None


class TestLimits:
    def test_a_first_limit_and_a_lower_one_apply_at_once(self) -> None:
        state, events = run(Protection(), limit(LimitKind.DEPOSIT, Window.DAY, 500), T0)
        assert events == (LimitSet(at_ms=T0, kind=LimitKind.DEPOSIT, window=Window.DAY,
                                   amount=500),)
        state, events = run(state, limit(LimitKind.DEPOSIT, Window.DAY, 200), T0 + 1)
        assert events == (LimitDecreased(at_ms=T0 + 1, kind=LimitKind.DEPOSIT,
                                         window=Window.DAY, amount=200),)
        assert in_force(state, LimitKind.DEPOSIT, Window.DAY, T0 + 1) == 200

    def test_a_raise_applies_24_hours_later_with_no_further_action(self) -> None:
        state, _ = run(Protection(), limit(LimitKind.WAGER, Window.WEEK, 100), T0)
        state, events = run(state, limit(LimitKind.WAGER, Window.WEEK, 1_000), T0 + 5)
        assert events == (LimitIncreaseRequested(at_ms=T0 + 5, kind=LimitKind.WAGER,
                                                 window=Window.WEEK,
                                                 amount=1_000,
                                                 effective_ms=T0 + 5 + COOLING_OFF_MS),)
        assert in_force(state, LimitKind.WAGER, Window.WEEK, T0 + 5 + COOLING_OFF_MS - 1) == 100
        assert in_force(state, LimitKind.WAGER, Window.WEEK, T0 + 5 + COOLING_OFF_MS) == 1_000
        # Asking again does not restart (or shorten) the cooling-off.
        again, events = run(state, limit(LimitKind.WAGER, Window.WEEK, 1_000), T0 + DAY_MS // 2)
        assert events == () and again == state

    def test_a_raise_can_be_cancelled_before_it_applies_not_after(self) -> None:
        state, _ = run(Protection(), limit(LimitKind.LOSS, Window.DAY, 100), T0)
        state, _ = run(state, limit(LimitKind.LOSS, Window.DAY, 300), T0)
        cancel = CancelLimitIncrease(player_id="alice", kind=LimitKind.LOSS, window=Window.DAY)
        cancelled, events = run(state, cancel, T0 + 10)
        assert events == (LimitIncreaseCancelled(at_ms=T0 + 10, kind=LimitKind.LOSS,
                                                 window=Window.DAY),)
        assert in_force(cancelled, LimitKind.LOSS, Window.DAY, T0 + 2 * DAY_MS) == 100
        with pytest.raises(ProtectionRefused) as refused:
            decide(state, cancel, T0 + COOLING_OFF_MS)
        assert refused.value.reason == "no_pending_increase"
        with pytest.raises(ProtectionRefused):
            decide(cancelled, cancel, T0 + 11)

    def test_a_lower_limit_drops_a_waiting_raise(self) -> None:
        state, _ = run(Protection(), limit(LimitKind.LOSS, Window.DAY, 100), T0)
        state, _ = run(state, limit(LimitKind.LOSS, Window.DAY, 300), T0)
        state, _ = run(state, limit(LimitKind.LOSS, Window.DAY, 50), T0 + 1)
        assert in_force(state, LimitKind.LOSS, Window.DAY, T0 + 3 * DAY_MS) == 50

    def test_removing_a_limit_waits_too(self) -> None:
        state, _ = run(Protection(), limit(LimitKind.DEPOSIT, Window.MONTH, 100), T0)
        state, events = run(state, limit(LimitKind.DEPOSIT, Window.MONTH, 0), T0)
        assert isinstance(events[0], LimitIncreaseRequested) and events[0].amount == 0
        assert in_force(state, LimitKind.DEPOSIT, Window.MONTH, T0 + COOLING_OFF_MS - 1) == 100
        assert in_force(state, LimitKind.DEPOSIT, Window.MONTH, T0 + COOLING_OFF_MS) is None

    def test_a_raise_after_a_due_raise_starts_from_the_raised_limit(self) -> None:
        state, _ = run(Protection(), limit(LimitKind.WAGER, Window.DAY, 100), T0)
        state, _ = run(state, limit(LimitKind.WAGER, Window.DAY, 200), T0)
        state, events = run(state, limit(LimitKind.WAGER, Window.DAY, 150), T0 + 2 * DAY_MS)
        assert events == (LimitDecreased(at_ms=T0 + 2 * DAY_MS, kind=LimitKind.WAGER,
                                         window=Window.DAY,
                                         amount=150),)

    @pytest.mark.parametrize("amount,reason", [(-1, "negative_amount"),
                                               (2**53, "amount_too_large")])
    def test_amounts_out_of_range_are_refused(self, amount: int, reason: str) -> None:
        with pytest.raises(BadRequest) as refused:
            decide(Protection(), limit(LimitKind.DEPOSIT, Window.DAY, amount), T0)
        assert refused.value.reason == reason
