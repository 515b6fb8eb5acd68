"""The replica's one timer: alarms ring in order, a cancelled one never rings, an infinite
delay sets none, and one timer handle is armed whatever the number of alarms."""

from __future__ import annotations

import asyncio
import math

from table.alarms import Alarms


async def test_alarms_ring_in_order_and_a_cancelled_one_never() -> None:
    alarms = Alarms()
    events = [asyncio.Event() for _ in range(3)]
    rung: list[int] = []

    async def wait(i: int) -> None:
        await events[i].wait()
        rung.append(i)

    tasks = [asyncio.create_task(wait(i)) for i in range(3)]
    alarms.set(events[2], 0.06)
    alarms.set(events[0], 0.02)
    alarms.set(events[1], 0.04).cancel()  # type: ignore[union-attr]
    await asyncio.sleep(0.12)
    assert rung == [0, 2]
    assert not events[1].is_set()
    assert len(alarms) == 0
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_an_infinite_delay_sets_no_alarm() -> None:
    alarms = Alarms()
    event = asyncio.Event()
    assert alarms.set(event, math.inf) is None
    assert len(alarms) == 0


async def test_many_alarms_share_one_timer_handle() -> None:
    alarms = Alarms()
    loop = asyncio.get_running_loop()
    before = len(loop._scheduled)  # type: ignore[attr-defined]
    events = [asyncio.Event() for _ in range(100)]
    for i, event in enumerate(events):
        alarms.set(event, 0.01 + i / 10_000)
    assert len(loop._scheduled) - before == 1  # type: ignore[attr-defined]
    await asyncio.sleep(0.05)
    assert all(e.is_set() for e in events)
