"""dealer.keyed_locks.KeyedLocks: one holder per key, other keys free, and no lock kept once
nobody holds or waits for it (also when the holder fails or is cancelled)."""

from __future__ import annotations

import asyncio

import pytest

from dealer.keyed_locks import KeyedLocks


async def test_one_holder_per_key_and_other_keys_free():
    locks = KeyedLocks()
    order: list[str] = []
    release = asyncio.Event()

    async def hold(key: str, name: str) -> None:
        async with locks.hold(key):
            order.append(f"{name} in")
            await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(hold("t1", "a"))
    await asyncio.sleep(0)
    second = asyncio.create_task(hold("t1", "b"))
    other = asyncio.create_task(hold("t2", "c"))
    for _ in range(3):
        await asyncio.sleep(0)
    assert order == ["a in", "c in"]  # b waits for a; c's key is free
    assert len(locks) == 2
    release.set()
    await asyncio.gather(first, second, other)
    assert order.index("a out") < order.index("b in")
    assert len(locks) == 0


async def test_no_lock_is_kept_after_a_failure_or_a_cancel():
    locks = KeyedLocks()
    with pytest.raises(RuntimeError):
        async with locks.hold("t1"):
            raise RuntimeError("boom")
    assert len(locks) == 0

    entered = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("t1"):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(holder())
    await entered.wait()
    waiter = asyncio.create_task(holder())
    await asyncio.sleep(0)
    assert len(locks) == 1
    waiter.cancel()
    task.cancel()
    await asyncio.gather(task, waiter, return_exceptions=True)
    assert len(locks) == 0
    async with locks.hold("t1"):  # the key is usable again
        assert len(locks) == 1
