"""The SDK's pace of a player's table calls (``studclient.pace.CallPace``), on a clock the
test moves: a burst at once, then one call every ``1 / per_s`` seconds, in the order they
came; a quiet while refills the burst and no more; a cancelled wait gives its token back.
Against the real table: tests/integration/client/test_pace.py."""

from __future__ import annotations

import asyncio

import pytest

from studclient.pace import TABLE_BURST, TABLE_CALLS_PER_S, CallPace


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_default_pace_stays_inside_the_tables_default_budget() -> None:
    """The table allows a player 100 calls a second and 200 at once
    (``studkit.limits.CallRateLimiter.from_env``): the client keeps below both."""
    from studkit.limits import CallRateLimiter
    limiter = CallRateLimiter.from_env({})
    per_player, _per_peer = limiter._rates
    assert per_player > TABLE_CALLS_PER_S
    assert per_player * limiter._burst >= TABLE_BURST


def test_calls_past_the_burst_are_due_one_every_period_in_order() -> None:
    clock = Clock()
    pace = CallPace(per_s=50, burst=3, clock=clock)
    dues = [pace.reserve() for _ in range(8)]
    assert dues[:3] == [0.0, 0.0, 0.0]
    assert dues[3:] == pytest.approx([0.02, 0.04, 0.06, 0.08, 0.10])


def test_time_passing_pays_the_waiting_calls_first() -> None:
    clock = Clock()
    pace = CallPace(per_s=10, burst=1, clock=clock)
    assert [pace.reserve() for _ in range(3)] == pytest.approx([0.0, 0.1, 0.2])
    clock.now = 0.15  # one and a half tokens refilled, both owed to the calls waiting
    assert pace.reserve() == pytest.approx(0.15)  # due at 0.3, after the two before it


def test_a_quiet_while_refills_the_burst_and_no_more() -> None:
    clock = Clock()
    pace = CallPace(per_s=100, burst=2, clock=clock)
    assert [pace.reserve() for _ in range(2)] == [0.0, 0.0]
    clock.now = 10.0  # a thousand tokens' worth, capped at two
    assert [pace.reserve() for _ in range(3)] == pytest.approx([0.0, 0.0, 0.01])


async def test_take_waits_only_past_the_burst() -> None:
    """On the loop: the calls within the burst do not wait; those past it sleep (counted in
    ``waited``) and finish in the order they came."""
    pace = CallPace(per_s=20, burst=3)
    order: list[int] = []

    async def one(i: int) -> None:
        await pace.take()
        order.append(i)

    await asyncio.gather(*(one(i) for i in range(6)))
    assert order == list(range(6))
    assert pace.waited == 3


async def test_a_cancelled_wait_gives_its_token_back() -> None:
    clock = Clock()
    pace = CallPace(per_s=10, burst=1, clock=clock)
    await pace.take()
    waiting = asyncio.ensure_future(pace.take())  # due in 0.1 s of the test's clock
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pace.reserve() == pytest.approx(0.1)  # the cancelled one's turn, not 0.2


@pytest.mark.parametrize(("per_s", "burst"), [(0, 1), (-1, 5), (10, 0.5)])
def test_a_pace_that_allows_nothing_is_refused(per_s: float, burst: float) -> None:
    with pytest.raises(ValueError):
        CallPace(per_s, burst)
