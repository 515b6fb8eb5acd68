"""The seat's one serialized money path (services/table/seat_money.py), on its own."""

from __future__ import annotations

import asyncio

import pytest

from studkit.errors import Unavailable
from table.seat_money import SeatMoney


async def spin(times: int = 20) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_a_free_seat_is_carried_without_a_yield() -> None:
    """A caller that has just recorded its saga takes its seat before any other coroutine
    (the driver woken by the append) runs."""
    seats = SeatMoney()
    others_ran = []
    other = asyncio.create_task(asyncio.sleep(0, result=None))
    other.add_done_callback(lambda _: others_ran.append(True))
    async with seats.carrying(3, 1.0):
        assert seats.carried(3) and others_ran == []
        assert seats.free([1, 3, 5]) == [1, 5]
    assert not seats.carried(3) and seats.free([3]) == [3]
    await other


async def test_the_driver_holding_a_seat_makes_a_caller_wait_then_refuses_it_seat_busy(
        ) -> None:
    seats = SeatMoney()
    release = asyncio.Event()

    async def driver() -> None:
        async with seats.holding([4, 2]):
            await release.wait()

    task = asyncio.create_task(driver())
    await spin()
    assert seats.free([2, 3, 4]) == [3]
    with pytest.raises(Unavailable) as busy:
        async with seats.carrying(2, 0.05):
            raise AssertionError("carried while held")
    assert busy.value.reason == "seat_busy" and not seats.carried(2)
    waiting = asyncio.create_task(seats.carrying(4, 5.0).__aenter__())
    await spin()
    assert not waiting.done()  # waits its turn
    release.set()
    await task
    await waiting
    assert seats.carried(4)


async def test_a_buy_in_waits_for_a_refund_in_flight_on_its_seat_only() -> None:
    seats = SeatMoney()
    await seats.refund_done(4)  # none in flight: at once
    paid = asyncio.Event()

    async def refund() -> None:
        async with seats.refunding(4):
            await paid.wait()

    task = asyncio.create_task(refund())
    await spin()
    await asyncio.wait_for(seats.refund_done(3), 1.0)  # another seat: at once
    waiting = asyncio.create_task(seats.refund_done(4))
    await spin()
    assert not waiting.done()
    paid.set()
    await task
    await asyncio.wait_for(waiting, 1.0)
    await asyncio.wait_for(seats.refund_done(4), 1.0)  # over: at once again
