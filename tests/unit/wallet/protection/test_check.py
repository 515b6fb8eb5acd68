"""The check with a money move (issue 34), the rule apply.lua applies: the least left wins,
a window frees what leaves it, a net win is no negative loss, and no order of buy-ins passes
a limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.wallet.protection.steps import T0
from wallet.ledger import LedgerEntry, Posting
from wallet.model import HOUSE, TxKind, player_account, seat_account
from wallet.protection import (
    DAY_MS,
    USAGE_KEPT_MS,
    WINDOW_MS,
    LimitExceeded,
    LimitKind,
    LimitSet,
    ProtectRule,
    Usage,
    Window,
    check,
    fold,
    replay_usage,
    standings,
    used,
)


class TestCheck:
    def test_the_least_left_wins_and_says_when_the_window_frees_some(self) -> None:
        state = fold([LimitSet(at_ms=T0, kind=LimitKind.WAGER, window=Window.DAY, amount=100),
                      LimitSet(at_ms=T0, kind=LimitKind.WAGER, window=Window.WEEK, amount=150),
                      LimitSet(at_ms=T0, kind=LimitKind.LOSS, window=Window.MONTH, amount=1_000)])
        usage = [Usage(T0 - 3 * DAY_MS, wager=120, loss=120), Usage(T0 - 1, wager=10, loss=10)]
        rule = ProtectRule("alice", (LimitKind.WAGER, LimitKind.LOSS), True,
                           Usage(T0, wager=30, loss=30))
        with pytest.raises(LimitExceeded) as refused:
            check(state, usage, rule, T0)
        assert refused.value.reason == "wager_limit"
        assert (refused.value.window, refused.value.remaining) == (Window.WEEK, 20)
        assert refused.value.resets_at_ms == T0 - 3 * DAY_MS + WINDOW_MS[Window.WEEK]
        check(state, usage, ProtectRule("alice", (LimitKind.WAGER, LimitKind.LOSS), True,
                                        Usage(T0, wager=20, loss=20)), T0)

    def test_a_net_win_leaves_the_loss_limit_whole_and_is_not_negative(self) -> None:
        usage = [Usage(T0 - 10, loss=100), Usage(T0 - 5, loss=-400)]
        assert used(usage, LimitKind.LOSS, Window.DAY, T0) == (0, T0 - 10 + DAY_MS)
        state = fold([LimitSet(at_ms=T0, kind=LimitKind.LOSS, window=Window.DAY, amount=50)])
        (row,) = standings(state, usage, T0)
        assert row.remaining == 50


    def test_a_move_stamped_after_now_counts(self) -> None:
        """A concurrent move applied first may carry a later time than this one's: it is
        inside the window too (the window has no end before the moves it holds)."""
        state = fold([LimitSet(at_ms=T0, kind=LimitKind.WAGER, window=Window.DAY,
                               amount=100)])
        usage = [Usage(T0 + 1, wager=80, loss=80)]
        assert used(usage, LimitKind.WAGER, Window.DAY, T0) == (80, T0 + 1 + DAY_MS)
        with pytest.raises(LimitExceeded) as refused:
            check(state, usage, ProtectRule("alice", (LimitKind.WAGER,), True,
                                            Usage(T0, wager=30, loss=30)), T0)
        assert refused.value.remaining == 20


@settings(max_examples=200, deadline=None)
@given(limit_amount=st.integers(1, 1_000), window=st.sampled_from(list(Window)),
       moves=st.lists(st.tuples(st.integers(1, 400), st.integers(0, 40 * DAY_MS)), max_size=30))
def test_no_order_of_buy_ins_passes_a_limit(limit_amount: int, window: Window,
                                            moves: list[tuple[int, int]]) -> None:
    """Buy-ins in any order and at any times, each checked against what was accepted before
    (as the one script sees them, one at a time): the accepted ones in any window never sum
    past the limit, and every refused one would have passed it."""
    state = fold([LimitSet(at_ms=0, kind=LimitKind.WAGER, window=window, amount=limit_amount)])
    accepted: list[Usage] = []
    for amount, at in sorted(moves, key=lambda m: m[1]):
        move = Usage(at, wager=amount, loss=amount)
        try:
            check(state, accepted,
                  ProtectRule("alice", (LimitKind.WAGER, LimitKind.LOSS), True, move), at)
        except LimitExceeded:
            assert used(accepted, LimitKind.WAGER, window, at)[0] + amount > limit_amount
            continue
        accepted.append(move)
    for u in accepted:  # every window that ends at an accepted move, (at - span, at]
        inside = [v.wager for v in accepted if u.at_ms - WINDOW_MS[window] < v.at_ms <= u.at_ms]
        assert sum(inside) <= limit_amount


def test_the_usage_lists_are_the_fold_of_the_ledger() -> None:
    """Each counted move of the ledger at its entry's time, newest first, the moves
    USAGE_KEPT_MS older than the latest dropped (apply.lua's list); settlements and moves of
    no player's count nothing."""
    ann, seat = player_account("ann"), seat_account("t1", 1)

    def entry(at: int, kind: TxKind, *postings: Posting) -> LedgerEntry:
        return LedgerEntry(transaction_id=f"{at}-0", kind=kind, postings=postings, at_ms=at)

    entries = [entry(T0, TxKind.BUY_IN, Posting(ann, -300), Posting(seat, 300)),
               entry(T0 + 1, TxKind.SETTLEMENT, Posting(seat, -5), Posting(HOUSE, 5)),
               entry(T0 + 2, TxKind.CASH_OUT, Posting(seat, -350), Posting(ann, 350)),
               entry(T0 + USAGE_KEPT_MS + 1, TxKind.BUY_IN, Posting(ann, -10),
                     Posting(seat, 10))]
    assert replay_usage(entries) == {"ann": [
        Usage(T0 + USAGE_KEPT_MS + 1, wager=10, loss=10), Usage(T0 + 2, loss=-350)]}
