"""The SDK's pace of a player's table calls (``studclient.pace.CallPace``), on the event
loop's clock: a burst at once, then one call every ``1 / per_s`` seconds, in the order they
came; a cancelled wait gives its token back. Against the real table:
tests/integration/client/test_pace.py."""

from __future__ import annotations

import asyncio

import pytest

from studclient.pace import TABLE_BURST, TABLE_CALLS_PER_S, CallPace


def test_the_default_pace_stays_inside_the_tables_default_budget() -> None:
    """The table allows a player 100 calls a second and 200 at once
    (``studkit.limits.CallRateLimiter.from_env``): the client keeps below both."""
    from studkit.limits import CallRateLimiter
    limiter = CallRateLimiter.from_env({})
    per_player, _per_peer = limiter._rates
    assert per_player > TABLE_CALLS_PER_S
    assert per_player * limiter._burst >= TABLE_BURST


async def test_calls_past_the_burst_wait_their_turn_in_order() -> None:
    pace, loop = CallPace(per_s=50, burst=3), asyncio.get_running_loop()
    start = loop.time()
    finished: list[tuple[int, float]] = []

    async def one(i: int) -> None:
        await pace.take()
        finished.append((i, loop.time() - start))

    await asyncio.gather(*(one(i) for i in range(8)))
    assert [i for i, _ in finished] == list(range(8))
    at_once = [t for _, t in finished[:3]]
    assert max(at_once) < 0.015
    # The five past the burst: one every 20 ms (never earlier; timers may fire late).
    for k, (_, t) in enumerate(finished[3:], start=1):
        assert t >= k * 0.02 - 0.002
    assert pace.waited == 5


async def test_a_quiet_while_refills_the_burst_and_no_more() -> None:
    pace = CallPace(per_s=100, burst=2)
    for _ in range(2):
        await pace.take()
    await asyncio.sleep(0.1)  # ten tokens' worth, capped at two
    for _ in range(2):
        await pace.take()
    assert pace.waited == 0
    await pace.take()
    assert pace.waited == 1


async def test_a_cancelled_wait_gives_its_token_back() -> None:
    pace = CallPace(per_s=10, burst=1)
    await pace.take()
    waiting = asyncio.ensure_future(pace.take())
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    loop = asyncio.get_running_loop()
    start = loop.time()
    await pace.take()  # due 0.1 s after the first, not 0.2 s
    assert loop.time() - start < 0.15


@pytest.mark.parametrize(("per_s", "burst"), [(0, 1), (-1, 5), (10, 0.5)])
def test_a_pace_that_allows_nothing_is_refused(per_s: float, burst: float) -> None:
    with pytest.raises(ValueError):
        CallPace(per_s, burst)
