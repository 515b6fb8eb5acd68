"""Bugs the simulator found, each at the lowest level that shows it (on the simulated store
and network, which ``test_store_contract.py`` holds to the real ones)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from rules import ActionKind, Phase, Street, legal_actions
from rules.commands import Call, Check, PostBringIn
from sim.loop import SimLoop
from sim.network import NetFaults
from sim.players import CONFIG, SETTINGS, Table
from sim.run import cancel_all
from sim.world import Probabilities, World
from studkit.auth import Principal, Role
from studkit.commandwindow import timed_id
from studkit.store import NotOwner
from table.actor import TableActor
from wallet.model import AccountId, AccountKind

_COMMANDS: dict[ActionKind, Callable[[int], PostBringIn | Call | Check]] = {
    ActionKind.BRING_IN: lambda s: PostBringIn(seat=s), ActionKind.CALL: lambda s: Call(seat=s),
    ActionKind.CHECK: lambda s: Check(seat=s)}


def cid(world: World, label: str) -> str:
    """A player's command id, timed by the simulated clock (docs/history.md, "Expired
    commands": the table refuses a player's untimed id without expected_sequence)."""
    return timed_id(world.loop.wall_ms(), label)


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
        await new.app.sit_down(Principal(Role.PLAYER, "t-p0"), "t", cid(world, "c1"), 1,
                               amount, "fp", None)
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
            await proc.app.sit_down(Principal(Role.PLAYER, player), "t", cid(world, f"c{n}"),
                                    n, amount, f"fp{n}", None)
        await proc.app.sit_out(Principal(Role.PLAYER, table.players[0]), "t",
                               cid(world, "out"), 1, "fpo", None)
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
        await proc.app.sit_down(player, "t", cid(world, "c1"), 1, amount, "fp1", None)
        before = actor.version
        proc.redis.faults.rng = random.Random(1)
        proc.redis.faults.fail_after = 1.0  # the next write is applied, its reply lost
        out = cid(world, "out")
        with pytest.raises(RedisTimeoutError):
            await proc.app.sit_out(player, "t", out, 1, "fpo", None)
        proc.redis.faults.fail_after = 0.0
        assert actor.version == before  # the live table has not seen its own append
        again = await proc.app.sit_out(player, "t", out, 1, "fpo", None)
        assert again.duplicate
        assert actor.version == before + 1 == await actor.deps.store.version("t")
        holder = actor.room.table.seat(1)
        assert holder is not None and holder.sitting_out

    run(body)


def test_a_long_betting_round_does_not_use_up_the_wait_for_the_dealer() -> None:
    """Found reading the driver (issue 19's profile): every wake-up in a betting round
    started the hand's outage clock, which only a dealer's answer stops, so after a round
    longer than the outage limit the next street's first lost call voided the hand at
    once. The clock now starts when the table first waits for the dealer or the wallet."""
    async def body(world: World) -> None:
        proc = world.new_process()
        await world.take("t", proc)
        table = Table(world, "t", players=2)
        await table.open()  # outage_limit_s=30
        actor = proc.app.actor_of("t")
        assert actor is not None
        amount = SETTINGS.for_config(CONFIG).buy_in_min
        for n, name in enumerate(table.players, start=1):
            await proc.app.sit_down(Principal(Role.PLAYER, name), "t", cid(world, f"c{n}"),
                                    n, amount, f"fp{n}", None)
        while not (actor.room.table.hand_in_progress and actor.room.table.hand is not None
                   and actor.room.table.hand.phase == Phase.BETTING):
            await asyncio.sleep(0.1)
        acted = 0
        while actor.room.table.hand.phase == Phase.BETTING:  # each player thinks for 18 s
            await asyncio.sleep(18)
            legal = legal_actions(actor.room.table)
            assert legal is not None
            pick = next(a for a in legal.actions if a.kind in (
                ActionKind.BRING_IN, ActionKind.CALL, ActionKind.CHECK))
            if actor.room.table.hand.street == Street.THIRD and acted == 1:
                # The street's last action: the dealer loses the next street's first call
                # (a 3 s deadline), then answers again.
                proc.dealer_channel.faults = NetFaults(lose_request=1.0)
                world.loop.call_later(1.0, setattr, proc.dealer_channel, "faults",
                                      NetFaults())
            await proc.app.act(Principal(Role.PLAYER, table.players[legal.seat - 1]), "t",
                               cid(world, f"a{acted}"), legal.seat,
                               _COMMANDS[pick.kind](legal.seat), f"fpa{acted}", None)
            acted += 1
        assert acted == 2  # a 36 s round, past the 30 s limit
        while actor.room.table.hand.phase == Phase.DEALING:
            await asyncio.sleep(0.1)
        assert world.counter.counts.get("dealer_request_lost") == 1
        assert not actor.room.table.hand.voided
        assert actor.room.table.hand.street == Street.FOURTH

    run(body)
