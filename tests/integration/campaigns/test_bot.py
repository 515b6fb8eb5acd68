"""The campaigns' one bot against the in-process room: it plays through the router and every
command it was acknowledged for is in the stream; an error is reported, never swallowed."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from campaigns.bot import Bot, Tally
from campaigns.checks import count_commands
from campaigns.router import Router
from stud.v1 import table_pb2 as pb
from studkit import keys as studkeys
from studkit.auth import TokenBook
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import Room, player, running_room
from studtools.devkeys import DevKeys

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
               ) -> AsyncIterator[Room]:
    async with running_room(redis_server, redis_url, dev_keys) as running:
        yield running


async def test_the_bot_plays_and_each_acknowledged_command_is_in_the_stream(
        room: Room, redis_url: str, dev_keys: DevKeys) -> None:
    table_id = await room.client.open_table()
    for seat, name in ((1, "ann"), (2, "bob"), (3, "cy")):
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    router = Router([f"127.0.0.1:{room.table_port}"], TokenBook(dev_keys))
    tally = Tally()
    stop = asyncio.Event()
    task = asyncio.create_task(Bot(router, table_id, tally, random.Random(7)).run(stop))
    try:
        await room.client.wait_for(table_id, lambda v: v.hands_started >= 3, timeout=60)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await router.close()
    assert tally.errors == [] and tally.actions > 0
    admin = connect(redis_url)
    try:
        stored = await EventStore(admin).read(table_id)
        recorded = await admin.hgetall(studkeys.table_commands(table_id))
    finally:
        await admin.aclose()
    counted = count_commands([(s.stream_id, s.envelope.command_id) for s in stored], recorded,
                             [a.sequences for a in tally.acknowledged[table_id]])
    assert (counted.lost, counted.duplicate) == (0, 0), counted.problems


async def test_the_bot_reports_an_error(room: Room, dev_keys: DevKeys) -> None:
    router = Router([f"127.0.0.1:{room.table_port}"], TokenBook(dev_keys))
    tally = Tally()
    try:
        await asyncio.wait_for(Bot(router, "no-such-table", tally, random.Random(1)).run(
            asyncio.Event()), 30)
    finally:
        await router.close()
    assert len(tally.errors) == 1 and "NOT_FOUND" in tally.errors[0]
