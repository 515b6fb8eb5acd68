"""Bugs the simulator found, each at the lowest level that shows it (on the simulated store
and network, which ``test_store_contract.py`` holds to the real ones)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from sim.loop import SimLoop
from sim.players import CONFIG, SETTINGS, Table
from sim.run import cancel_all
from sim.world import Probabilities, World
from studkit.auth import Principal, Role
from studkit.store import NotOwner
from table.actor import TableActor
from wallet.model import AccountId, AccountKind


def run(body: Callable[[World], Awaitable[None]], seed: int = 7) -> None:
    loop = SimLoop()
    try:
        loop.run_until_complete(body(World(seed, loop, Probabilities.none())))
    finally:
        cancel_all(loop)
        loop.close()


def test_a_resumed_former_owner_pays_out_no_escrow_its_stale_room_calls_an_orphan() -> None:
    """Seed 6 of ``make sim``: an owner paused while it reconciled resumed after another
    took over and a player sat down there; its stale room knew no seat 1, so it paid the
    new player's escrow back as an orphan (before recording it: the wallet is not fenced).
    The record now comes first, and the former owner's append is refused."""
    async def body(world: World) -> None:
        old = world.new_process()
        await world.take("t", old)
        await Table(world, "t", players=2).open()
        driver = old.app.tables.drivers["t"]
        await driver.stop()
        new = world.new_process()
        await world.take("t", new)
        amount = SETTINGS.for_config(CONFIG).buy_in_min
        await new.app.sit_down(Principal(Role.PLAYER, "t-p0"), "t", "c1", 1, amount, "fp",
                               None)
        seat = AccountId(kind=AccountKind.SEAT, table_id="t", seat=1)
        assert await world.wallet_store.balance(seat) == amount
        driver.money.repaired = False
        with pytest.raises(NotOwner):
            await driver.money.check()
        assert await world.wallet_store.balance(seat) == amount

    run(body)


def test_the_live_room_keeps_times_as_the_log_does() -> None:
    """The first seed of ``make sim``: a command decided at a time finer than a microsecond
    left the live room's times (a sit-out's start, a turn's deadline) a fraction of a
    microsecond from what a fold of the log gives: the room now keeps the log's times."""
    async def body(world: World) -> None:
        proc = world.new_process()
        world.loop.wall_offset += 0.1234567  # a clock that is not on a microsecond
        await world.take("t", proc)
        table = Table(world, "t", players=2)
        await table.open()
        actor = proc.app.actor_of("t")
        assert actor is not None
        amount = SETTINGS.for_config(CONFIG).buy_in_min
        for n, player in enumerate(table.players, start=1):
            await proc.app.sit_down(Principal(Role.PLAYER, player), "t", f"c{n}", n, amount,
                                    f"fp{n}", None)
        await proc.app.sit_out(Principal(Role.PLAYER, table.players[0]), "t", "out", 1,
                               "fpo", None)
        fresh = TableActor("t", actor.deps)
        await fresh.load()
        assert actor.room.sat_out_since or actor.room.turn is not None
        assert fresh.room == actor.room
        assert all(round(t * 1e6) / 1e6 == t for t in actor.room.sat_out_since.values())

    run(body)


def test_a_retry_of_an_append_whose_reply_was_lost_catches_the_table_up() -> None:
    """Seed 107 of ``make sim``: a store call applied whose reply timed out, retried with the
    same command id, was answered "duplicate"; the table never folded its own events and
    its driver asked for the same street again and again, at once (a hot loop, the table
    stuck). The duplicate's table now catches up with the store."""
    async def body(world: World) -> None:
        proc = world.new_process()
        await world.take("t", proc)
        table = Table(world, "t", players=2)
        await table.open()
        actor = proc.app.actor_of("t")
        assert actor is not None
        amount = SETTINGS.for_config(CONFIG).buy_in_min
        player = Principal(Role.PLAYER, table.players[0])
        await proc.app.sit_down(player, "t", "c1", 1, amount, "fp1", None)
        before = actor.version
        proc.redis.faults.rng = random.Random(1)
        proc.redis.faults.fail_after = 1.0  # the next write is applied, its reply lost
        with pytest.raises(RedisTimeoutError):
            await proc.app.sit_out(player, "t", "out", 1, "fpo", None)
        proc.redis.faults.fail_after = 0.0
        assert actor.version == before  # the live table has not seen its own append
        again = await proc.app.sit_out(player, "t", "out", 1, "fpo", None)
        assert again.duplicate
        assert actor.version == before + 1 == await actor.deps.store.version("t")
        holder = actor.room.table.seat(1)
        assert holder is not None and holder.sitting_out

    run(body)
