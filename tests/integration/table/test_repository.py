"""The table repository: a table loads from its snapshot plus the events after it exactly as
from its whole stream, and a snapshot is only ever an optimisation (deleted or corrupted, the
table is rebuilt from the stream)."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.redis_client import connect
from studkit.repository import TableRepository, snapshot_key
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import TableClient, act_once, player, running_room, running_table
from studtest.table import table_settings as make_settings
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration


async def test_snapshot_plus_tail_equals_the_whole_stream(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys) -> None:
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room.client.open_table()
        for seat, name in {1: "ann", 2: "bob", 3: "cat"}.items():
            await room.fund(name)
            await room.client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=10_000), player(name))
        rng = random.Random(9)
        async with asyncio.timeout(60):
            while (view := await room.client.view(table_id)).hands_started < 7:
                if not await act_once(room.client, table_id, view, rng.choice):
                    await asyncio.sleep(0.01)
        admin = connect(redis_url)
        store = EventStore(admin)
        loaded = await TableRepository(store).load(table_id)
        assert loaded.version > 0, "a snapshot was taken"
        assert loaded.state.hands_started >= 4
        full = await store.read(table_id)
        # The table plays on meanwhile (its dealer deals the next hand): the tail loaded is
        # the stream right after the snapshot, up to where the load read it.
        assert loaded.after
        assert [s.envelope for s in loaded.after] == [
            s.envelope for s in full[loaded.version:loaded.version + len(loaded.after)]]
        # Hand 7 has just started and its cards are being dealt: wait until only a player's
        # action is due, so the table stands still between this view and the stop.
        async with asyncio.timeout(30):
            while not ((before := await room.client.view(table_id, player("ann"))).hand.to_act
                       and before.hand.phase == pb.HAND_PHASE_BETTING):
                await asyncio.sleep(0.02)
        await room.table_deps.app.stop()

        async def restarted_view() -> pb.TableView:
            settings = make_settings(redis_server, redis_url, dev_keys, room.dealer.port,
                                     room.wallet.port)
            async with running_table(settings) as (_deps, port), \
                    grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                client = TableClient(pb_grpc.TableServiceStub(channel), room.client.tokens)
                view = await client.view(table_id, player("ann"))
                await _deps.app.stop()
                return view

        def same(a: pb.TableView, b: pb.TableView) -> None:
            assert (a.version, a.hands_started) == (b.version, b.hands_started)
            assert [(s.seat, s.player_id, s.stack, s.time_bank_ms) for s in a.seats] == [
                (s.seat, s.player_id, s.stack, s.time_bank_ms) for s in b.seats]
            assert a.hand.players == b.hand.players
            assert a.hand.to_act == b.hand.to_act

        from_snapshot = await restarted_view()
        same(from_snapshot, before)
        await admin.delete(snapshot_key(table_id))
        same(await restarted_view(), before)
        await admin.hset(snapshot_key(table_id), mapping={"format": 1, "version": 10**6,
                                                          "state": "{}"})
        same(await restarted_view(), before)  # a snapshot ahead of the stream is ignored
        await admin.aclose()
