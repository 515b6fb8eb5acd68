"""The session time limit's pure rules (issue 34): the limit's events (lower at once, longer
after the cooling-off), a session as data (``seen``), when it ends (``session_ends_at``) and
the projection apply.lua reads."""

from __future__ import annotations

import pytest

from studkit.errors import BadRequest
from wallet.protection import (
    COOLING_OFF_MS,
    SESSION_GAP_MS,
    Protection,
    Session,
    SessionLimitSet,
    SetSessionLimit,
    decide,
    fold,
    projection,
    seen,
    session_ends_at,
    session_limit_in,
)

T = 1_800_000_000_000
MINUTE = 60_000


def test_a_first_and_a_lower_limit_apply_at_once_a_longer_one_waits() -> None:
    events: list[SessionLimitSet] = []

    def step(minutes: int, now: int) -> Protection:
        new = decide(fold(events), SetSessionLimit(player_id="p", minutes=minutes), now)
        events.extend(e for e in new if isinstance(e, SessionLimitSet))
        return fold(events)

    state = step(60, T)
    assert state.session_limit is not None and state.session_limit.in_force(T) == 60
    state = step(30, T + 1)
    assert state.session_limit is not None and state.session_limit.in_force(T + 1) == 30
    state = step(120, T + 2)
    limit = state.session_limit
    assert limit is not None and limit.in_force(T + 2) == 30
    assert limit.in_force(T + 2 + COOLING_OFF_MS) == 120
    assert len(events) == 3
    step(120, T + 3)  # the same raise again: its effective time stands
    assert len(events) == 3
    state = step(0, T + 4)  # none: after the cooling-off too
    limit = state.session_limit
    assert limit is not None and limit.in_force(T + 4) == 30
    assert limit.in_force(T + 4 + COOLING_OFF_MS) is None
    assert session_limit_in(projection(state), T + 4) == 30
    assert session_limit_in(projection(state), T + 4 + COOLING_OFF_MS) == 0


@pytest.mark.parametrize("minutes", [-1, 1441, 2**31 - 1])
def test_minutes_out_of_range_are_refused(minutes: int) -> None:
    with pytest.raises(BadRequest):
        decide(Protection(), SetSessionLimit(player_id="p", minutes=minutes), T)


def test_a_session_goes_on_under_the_gap_and_a_new_one_starts_after_it() -> None:
    first = seen(None, T)
    assert seen(first, T + SESSION_GAP_MS - 1) == Session(T, T + SESSION_GAP_MS - 1)
    assert seen(first, T + SESSION_GAP_MS) == Session(T + SESSION_GAP_MS, T + SESSION_GAP_MS)
    assert Session.from_text(first.to_text()) == first


def test_a_session_ends_at_its_start_plus_the_limit_while_it_runs() -> None:
    session = Session(T, T + 50 * MINUTE)
    assert session_ends_at(60, session, T + 55 * MINUTE) == T + 60 * MINUTE
    assert session_ends_at(0, session, T + 55 * MINUTE) == 0
    assert session_ends_at(60, None, T) == 0
    assert session_ends_at(60, session, T + 50 * MINUTE + SESSION_GAP_MS) == 0  # over: away
