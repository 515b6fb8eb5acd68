"""The room benchmark's bot over ``TableService.Play`` (``campaigns.loadbots.RoomBot``, issue
35) against the in-process room: two bots play on, each acting only on its turn, through a
table service that goes away and comes back on the same address: the bots open their streams
again from the last sequence they folded and send an unanswered action again under its
command id; every action the table applied is in its stream once."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable

import grpc
import pytest

from campaigns.loadbots import RoomBot, Window
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import TokenBook
from studtest.processes import restartable_port
from studtest.redis import TestRedis
from studtest.table import (
    Room,
    TableClient,
    fast_settings,
    player,
    running_room,
    running_table,
    table_settings,
)
from studtools.devkeys import DevKeys

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NAMES = {1: "ann", 2: "bob"}


async def until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


async def stored_commands(room: Room, table_id: str) -> Counter[str]:
    """The command ids of the table's stored events, each counted once per command."""
    stored = await room.table_deps.events.read(table_id)
    ids: Counter[str] = Counter()
    last = ""
    for event in stored:
        command = event.envelope.command_id
        if command and command != last:
            ids[command] += 1
        last = command
    return ids


async def test_play_bots_play_through_a_table_restart(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    async with running_room(redis_server, redis_url, dev_keys) as room:
        await room.table_deps.app.stop()  # our own table services from here on
        # Stopped and started again on it: a port outside the kernel's ephemeral range, which
        # the bots' reconnect attempts could take as a source port while no table serves it.
        port = restartable_port()
        settings = table_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                                  room.wallet.port, addr=f"127.0.0.1:{port}")
        tokens = TokenBook(dev_keys)
        window, stop = Window(start=0.0), asyncio.Event()
        bots = [RoomBot(f"127.0.0.1:{port}", "", seat, tokens.metadata(player(name)),
                        random.Random(seat), window, stop) for seat, name in NAMES.items()]
        tasks: list[asyncio.Task[None]] = []

        def acted(n: int) -> Callable[[], bool]:
            return lambda: len(window.latencies) >= n

        async def serving(step: Callable[[], Awaitable[None]]) -> None:
            async with running_table(settings) as (deps, _port):
                room.table_deps = deps
                await step()

        async def first() -> None:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                client = TableClient(pb_grpc.TableServiceStub(channel),  # type: ignore[no-untyped-call]
                                     tokens)
                table_id = await client.open_table(settings=fast_settings())
                for seat, name in NAMES.items():
                    await room.fund(name)
                    await client.call("SitDown", pb.SitDownRequest(
                        table_id=table_id, seat=seat, buy_in=10_000), player(name))
            for bot in bots:
                bot.table_id = table_id
                tasks.append(asyncio.create_task(bot.run(asyncio.Event())))
            await until(acted(20))

        await serving(first)
        stopped_at = len(window.latencies)
        # The bots' streams cut, their reopening refused (a retry counted) while no table
        # serves the address.
        await until(lambda: window.retries >= 1, timeout=10.0)
        await serving(lambda: until(acted(stopped_at + 20)))
        table_id = bots[0].table_id
        stop.set()
        for task in tasks:
            task.cancel()
        ended = await asyncio.gather(*tasks, return_exceptions=True)
        assert not [e for e in ended if isinstance(e, Exception)], ended
        async with running_table(settings) as (deps, _port):
            room.table_deps = deps
            commands = await stored_commands(room, table_id)
    # The restart cut each bot's stream once: UNAVAILABLE (a retry), or at times INTERNAL
    # from gRPC's core as the server went away (counted as an error, the stream resumed as
    # WatchTable's was); nothing else went wrong.
    assert all(kind.startswith("Play ") for kind in window.errors), window.first_error
    assert sum(window.errors.values()) <= len(bots)
    # Every reply a bot timed is an action the table applied once (a re-sent one answered
    # with its recorded outcome), and nothing a bot folded made it act out of turn: at most
    # the refusals of a table that moved on.
    mine = Counter({c: n for c, n in commands.items()  # stored as c:<role>:<name>:<id>
                    if any(b.id_prefix in c for b in bots)})
    assert mine and set(mine.values()) == {1}
    assert len(mine) >= len(window.latencies)
    assert window.refused * 10 <= len(window.latencies)
