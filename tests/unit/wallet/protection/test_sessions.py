"""Sessions and their limits (issue 34): the session time limit's events (lower at once,
longer after the cooling-off), a session as data (``seen``), when it ends
(``session_ends_at``), the projection apply.lua reads, and reality checks."""

from __future__ import annotations

import pytest

from studkit.errors import BadRequest
from tests.unit.wallet.protection.steps import MINUTE, T0, run
from wallet.ledger import LedgerEntry, LedgerView
from wallet.ledger import decide as decide_transaction
from wallet.model import BuyIn, Deposit, SeatResult, SettleHand, TxKind
from wallet.protection import (
    COOLING_OFF_MS,
    SESSION_GAP_MS,
    Protection,
    RealityCheck,
    RealityCheckSet,
    Session,
    SessionLimitSet,
    SetRealityCheck,
    SetSessionLimit,
    Usage,
    decide,
    fold,
    projection,
    reality_check,
    replay_sessions,
    seen,
    session_ends_at,
    session_from_text,
    session_limit_in,
    session_to_text,
    sessions_seen,
)


def test_a_first_and_a_lower_limit_apply_at_once_a_longer_one_waits() -> None:
    events: list[SessionLimitSet] = []

    def step(minutes: int, now: int) -> Protection:
        new = decide(fold(events), SetSessionLimit(player_id="p", minutes=minutes), now)
        events.extend(e for e in new if isinstance(e, SessionLimitSet))
        return fold(events)

    state = step(60, T0)
    assert state.session_limit is not None and state.session_limit.in_force(T0) == 60
    state = step(30, T0 + 1)
    assert state.session_limit is not None and state.session_limit.in_force(T0 + 1) == 30
    state = step(120, T0 + 2)
    limit = state.session_limit
    assert limit is not None and limit.in_force(T0 + 2) == 30
    assert limit.in_force(T0 + 2 + COOLING_OFF_MS) == 120
    assert len(events) == 3
    step(120, T0 + 3)  # the same raise again: its effective time stands
    assert len(events) == 3
    state = step(0, T0 + 4)  # none: after the cooling-off too
    limit = state.session_limit
    assert limit is not None and limit.in_force(T0 + 4) == 30
    assert limit.in_force(T0 + 4 + COOLING_OFF_MS) is None
    assert session_limit_in(projection(state), T0 + 4) == 30
    assert session_limit_in(projection(state), T0 + 4 + COOLING_OFF_MS) == 0


@pytest.mark.parametrize("minutes", [-1, 1441, 2**31 - 1])
def test_minutes_out_of_range_are_refused(minutes: int) -> None:
    with pytest.raises(BadRequest):
        decide(Protection(), SetSessionLimit(player_id="p", minutes=minutes), T0)


def test_a_session_goes_on_under_the_gap_and_a_new_one_starts_after_it() -> None:
    first = seen(None, T0)
    assert seen(first, T0 + SESSION_GAP_MS - 1) == Session(T0, T0 + SESSION_GAP_MS - 1)
    assert seen(first, T0 + SESSION_GAP_MS) == Session(T0 + SESSION_GAP_MS, T0 + SESSION_GAP_MS)
    assert session_from_text(session_to_text(first)) == first


def test_a_session_ends_at_its_start_plus_the_limit_while_it_runs() -> None:
    session = Session(T0, T0 + 50 * MINUTE)
    assert session_ends_at(60, session, T0 + 55 * MINUTE) == T0 + 60 * MINUTE
    assert session_ends_at(0, session, T0 + 55 * MINUTE) == 0
    assert session_ends_at(60, None, T0) == 0
    assert session_ends_at(60, session, T0 + 50 * MINUTE + SESSION_GAP_MS) == 0  # over: away


def test_an_interval_is_set_once_and_in_range() -> None:
    state, events = run(Protection(), SetRealityCheck(player_id="alice", minutes=30), T0)
    assert events == (RealityCheckSet(at_ms=T0, minutes=30),)
    assert state.reality_check_minutes == 30
    assert decide(state, SetRealityCheck(player_id="alice", minutes=30), T0 + 1) == ()
    for bad in (-1, 24 * 60 + 1):
        with pytest.raises(BadRequest):
            decide(state, SetRealityCheck(player_id="alice", minutes=bad), T0)

def test_the_net_result_counts_the_session_only() -> None:
    usage = [Usage(T0 - 5, loss=1_000), Usage(T0 + 10, wager=300, loss=300),
             Usage(T0 + 20, loss=-450), Usage(T0 + 99, loss=50)]
    assert reality_check(usage, T0, T0 + 60, 1) == RealityCheck(T0 + 60, 60, 150, 1)


def test_a_buy_in_and_a_settled_hand_see_their_players_and_nothing_else_does() -> None:
    buy_in = decide_transaction(BuyIn(player_id="ann", table_id="t1", seat=2, amount=100,
                                      idempotency_key="b1"), LedgerView())
    settled = decide_transaction(SettleHand(table_id="t1", hand_id="h1", results=(
        SeatResult(seat=3, player_id="cat", amount_in=10, amount_won=0),
        SeatResult(seat=1, player_id="ann", amount_in=10, amount_won=20))), LedgerView())
    deposit = decide_transaction(Deposit(player_id="ann", amount=5, idempotency_key="d1"),
                                 LedgerView())
    assert sessions_seen(buy_in) == ("ann",)
    assert sessions_seen(settled) == ("cat", "ann")
    assert sessions_seen(deposit) == ()


def test_the_sessions_are_the_fold_of_the_ledger() -> None:
    def entry(at: int, *players: str) -> LedgerEntry:
        return LedgerEntry(transaction_id=f"{at}-0", kind=TxKind.SETTLEMENT, postings=(),
                           at_ms=at, players_seen=players)

    entries = [entry(T0, "ann"), entry(T0 + 10 * MINUTE, "ann", "bob"),
               entry(T0 + 12 * MINUTE), entry(T0 + 10 * MINUTE + SESSION_GAP_MS, "bob")]
    assert replay_sessions(entries) == {
        "ann": Session(T0, T0 + 10 * MINUTE),
        "bob": Session(T0 + 10 * MINUTE + SESSION_GAP_MS, T0 + 10 * MINUTE + SESSION_GAP_MS)}
    assert replay_sessions([]) == {}
