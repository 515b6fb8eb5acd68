"""A finished sit & go's facts go to PostgreSQL (``studhistory.tournament_archive``, the
archiver's step) over the real room, a real Redis (the archiver's ACL user) and a real
PostgreSQL: its entries, busts, places, prizes and ending, once, as its own view shows
them; a tournament still running is not archived. Past the command window its keys leave
Redis (issue 31), and a tournament service reading the archive answers ``GetTournament`` as
it did from Redis."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import Any

import grpc
import psycopg
import pytest

from stud.v1 import tournament_pb2 as pb
from studhistory.tournament_archive import TOMBSTONE, archive_tournaments
from studkit import keys
from studkit.auth import Principal, Role
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.redis_client import connect
from studtest.redis import TestRedis
from studtest.table import Room, act_once
from studtest.tournament_service import running_tournament
from studtools.devkeys import DevKeys
from tournament.config import Settings

from .conftest import url_for
from .test_sit_and_go_to_the_end import FAST, aggressive

pytestmark = pytest.mark.integration


def later() -> float:
    return time.time() + COMMAND_WINDOW_S + 60


async def redis_bytes(admin: Any, tid: str) -> int:
    """What the tournament's keys take in Redis (``MEMORY USAGE``, the admin's)."""
    found = await admin.keys(f"stud:tournament:{{{tid}}}:*")
    return sum([int(await admin.memory_usage(k, samples=0) or 0) for k in found])


async def test_a_finished_sit_and_go_is_archived_once(
        room: Room, room_settings: Settings, dev_keys: DevKeys, redis_server: TestRedis,
        redis_url: str, history_dsns: Any) -> None:
    names = ("ann", "bob", "cy")
    for name in names:
        await room.fund(name, 10_000)
    redis = connect(url_for(redis_server, redis_url, "archiver"))
    conn = await psycopg.AsyncConnection.connect(history_dsns.archiver, autocommit=True)
    seen: dict[str, int] = {}
    try:
        async with running_tournament(room_settings, dev_keys) as service:
            client = service.client
            config = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                         buy_in=1000, fee=100, seats=3, structure=FAST)
            await client.create("sng-arch", config)
            for name in names:
                await client.register("sng-arch", Principal(Role.PLAYER, name), f"r-{name}")
            assert (await archive_tournaments(redis, conn, seen)).archived == []
            early = await archive_tournaments(redis, conn, seen, clock=later)
            assert early.archived == early.trimmed == [] and not early.failed
            assert "sng-arch" in seen  # not over: read once, then not again until it grows
            rng = random.Random(7)
            async with asyncio.timeout(120):
                while True:
                    view = await client.get("sng-arch")
                    if view.phase == pb.TOURNAMENT_PHASE_FINISHED and all(
                            e.prize == 0 or e.place for e in view.entries) and (
                            await room.wallet.client.pool("sng-arch")).balance == 0:
                        break
                    for table in view.tables:
                        try:
                            tv = await room.client.view(table.table_id)
                        except grpc.aio.AioRpcError:
                            continue
                        await act_once(room.client, table.table_id, tv, aggressive(rng))
                    await asyncio.sleep(0.01)
            view = await client.get("sng-arch")
        # The last PaymentMade may land after the pool is empty: until it does, the
        # tournament is not over and the archiver leaves it (and reads it again once its
        # stream grew).
        async with asyncio.timeout(30):
            while True:
                outcome = await archive_tournaments(redis, conn, seen)
                assert not outcome.failed and outcome.trimmed == []
                if outcome.archived:
                    break
                await asyncio.sleep(0.05)
        assert outcome.archived == ["sng-arch"]
        assert (await archive_tournaments(redis, conn, seen)).archived == []
        # Past the command window its keys leave Redis; the service answers from PostgreSQL.
        reading = dataclasses.replace(room_settings, history_dsn=history_dsns.tournament)
        async with running_tournament(reading, dev_keys) as service:
            before = await service.client.get("sng-arch")
        admin = connect(redis_url)
        try:
            held = await redis_bytes(admin, "sng-arch")
            trimmed = await archive_tournaments(redis, conn, seen, clock=later)
            assert trimmed.trimmed == ["sng-arch"] and not trimmed.failed
            print(f"sng-arch redis bytes: before={held} after="
                  f"{await redis_bytes(admin, 'sng-arch')}")
            # Its tombstone alone stays (docs/history.md: tens of bytes, for good).
            assert await admin.keys("stud:tournament:{sng-arch}:*") == [
                keys.tournament_key("sng-arch", TOMBSTONE).encode()]
            assert 0 < await redis_bytes(admin, "sng-arch") < 128 < held
            assert not await admin.sismember(keys.tournament_index(), "sng-arch")
        finally:
            await admin.aclose()
        async with running_tournament(reading, dev_keys) as service:
            assert await service.client.get("sng-arch") == before

        async def rows(query: str) -> list[tuple[Any, ...]]:
            cur = await conn.execute(query)
            return list(await cur.fetchall())

        assert await rows("SELECT name, format, buy_in, fee FROM tournaments.tournaments") == [
            ("sng", "sit_and_go", 1000, 100)]
        assert sorted(await rows("SELECT player_id, buy_in, fee FROM tournaments.entries")) == [
            (n, 1000, 100) for n in names]
        by_player = {e.player_id: e for e in view.entries}
        places = await rows("SELECT player_id, place, place_to FROM tournaments.places")
        assert sorted(places) == sorted((p, e.place, e.place_to) for p, e in by_player.items())
        busts = await rows("SELECT player_id FROM tournaments.busts")
        assert len(busts) == 2 and {p for p, in busts} <= set(names)
        prizes = await rows("SELECT player_id, amount FROM tournaments.prizes")
        assert sum(a for _, a in prizes) == 3000
        assert {p: a for p, a in prizes} == {p: e.prize for p, e in by_player.items() if e.prize}
        (outcome_, winner), = await rows("SELECT outcome, winner FROM tournaments.endings")
        assert outcome_ == "finished" and by_player[winner].place == 1  # its player
    finally:
        await conn.close()
        await redis.aclose()
