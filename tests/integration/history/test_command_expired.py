"""A command retried after the archiver took its record out of Redis is refused
``command_expired``, and a player's command that cannot say how old it is (neither a timed id
nor ``expected_sequence``) is refused ``command_id_untimed`` at every table, before and after
a trim; either changes nothing (issue 31; docs/history.md, "Expired commands")."""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from studhistory.archiver import archive_table
from studhistory.pgarchive import PgHistory
from studkit import keys
from studkit.commandwindow import COMMAND_WINDOW_S, MAX_SKEW_S, id_time_ms, timed_id, uuid7
from studkit.grpc_errors import rpc_error_reason
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import Room, player, running_room
from studtools.devkeys import DevKeys

from .test_archiver import HOT, play

NAMES = {1: "ann", 2: "bob", 3: "cat"}
UNTIMED = (grpc.StatusCode.INVALID_ARGUMENT, "command_id_untimed")
EXPIRED = (grpc.StatusCode.FAILED_PRECONDITION, "command_expired")


def now_ms() -> int:
    return int(time.time() * 1000)


async def refused(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), rpc_error_reason(caught.value)


async def untimed_money_is_refused(room: Room, store: EventStore, table_id: str) -> None:
    """A SitDown and a top-up with untimed ids (a UUIDv4, a hex string, a timed id's
    look-alike) and no expected_sequence: refused ``command_id_untimed``; the stream and
    the wallet unchanged."""
    client = room.client
    version, stream = await store.version(table_id), await store.read(table_id)
    balances = {n: await room.wallet.client.player_balance(n) for n in ("bob", "dan")}
    escrows = await room.wallet.client.escrows(table_id)
    for command_id in (str(uuid.uuid4()), uuid.uuid4().hex, "t12-x", "t0000000000000"):
        assert id_time_ms(command_id) is None
        assert await refused(client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=4, buy_in=10_000, command_id=command_id),
            player("dan"))) == UNTIMED
        assert await refused(client.call("AddChips", pb.AddChipsRequest(
            table_id=table_id, seat=2, amount=500, command_id=command_id),
            player("bob"))) == UNTIMED
    assert await store.version(table_id) == version
    assert await store.read(table_id) == stream
    assert {n: await room.wallet.client.player_balance(n) for n in balances} == balances
    assert await room.wallet.client.escrows(table_id) == escrows


async def test_a_command_retried_after_its_record_left_redis_is_refused_command_expired(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        client = room.client
        table_id = await client.open_table()
        for name in (*NAMES.values(), "dan"):
            await room.fund(name)
        # Before anything was archived the rule is the same as after.
        await untimed_money_is_refused(room, store, table_id)
        sits = {}
        for seat, name in NAMES.items():
            # ann's and cat's ids were made 10 minutes ago (a client retrying for that
            # long): accepted, nothing has left this table yet. cat's is a UUIDv7.
            made = now_ms() - (COMMAND_WINDOW_S * 1000 if name in ("ann", "cat") else 0)
            command_id = uuid7(made) if name == "cat" else timed_id(made, f"sit-{name}")
            sits[name] = pb.SitDownRequest(table_id=table_id, seat=seat, buy_in=10_000,
                                           command_id=command_id)
            await client.call("SitDown", sits[name], player(name))
        # bob tops up, his client's id made 10 minutes ago too; cat with a UUIDv7 as old.
        top_up = pb.AddChipsRequest(table_id=table_id, seat=2, amount=500,
                                    command_id=timed_id(now_ms() - COMMAND_WINDOW_S * 1000,
                                                        "top-up"))
        await client.call("AddChips", top_up, player("bob"))
        cat_top_up = pb.AddChipsRequest(table_id=table_id, seat=3, amount=700,
                                        command_id=uuid7(now_ms() - COMMAND_WINDOW_S * 1000))
        await client.call("AddChips", cat_top_up, player("cat"))
        # An untimed id with expected_sequence keeps working: the sequence dates it. (Read
        # once the first hand waits for a player: while it is being dealt, a deal landing
        # after the read makes the sequence stale.)
        await client.wait_for(table_id, lambda v: v.HasField("hand") and v.hand.to_act != 0)
        with_sequence = pb.SitOutRequest(table_id=table_id, seat=3, command_id=uuid.uuid4().hex,
                                         expected_sequence=await store.version(table_id))
        await client.call("SitOut", with_sequence, player("cat"))
        await client.call("SitIn", pb.SitInRequest(
            table_id=table_id, seat=3, command_id=str(uuid.uuid4()),
            expected_sequence=await store.version(table_id)), player("cat"))
        sat_at = await store.version(table_id)
        await play(client, table_id, 6, random.Random(12))
        stored = {n: "c:player:" + n + ":" + sits[n].command_id for n in ("ann", "cat")}
        history = await PgHistory.connect(history_dsns.archiver)
        try:
            # Within the idempotency window the records stay with the events gone: a retry
            # is answered as the duplicate it is, a UUIDv7's as a t<ms>- id's.
            outcome = await archive_table(store, history, table_id, keep_hands=HOT)
            assert outcome.trimmed_to is not None and outcome.trimmed_to >= sat_at
            for name in ("ann", "cat"):
                assert await admin.hexists(keys.table_commands(table_id), stored[name])
                version = await store.version(table_id)
                reply = await client.call("SitDown", sits[name], player(name))
                assert reply.duplicate and reply.version < version
                assert await store.version(table_id) == version
            # Ten minutes on, the next step takes them.
            await play(client, table_id, 8, random.Random(13))
            await archive_table(store, history, table_id, keep_hands=HOT,
                                clock=lambda: time.time() + COMMAND_WINDOW_S)
        finally:
            await history.aclose()
        for name in ("ann", "cat"):
            assert not await admin.hexists(keys.table_commands(table_id), stored[name])
        version = await store.version(table_id)
        balances = {n: await room.wallet.client.player_balance(n) for n in NAMES.values()}

        # The late retries: their records left with their events; refused, nothing written.
        for name in ("ann", "cat"):
            assert await refused(client.call("SitDown", sits[name], player(name))) == EXPIRED
        # The late top-ups: without the check they would move the chips a second time.
        assert await refused(client.call("AddChips", top_up, player("bob"))) == EXPIRED
        assert await refused(client.call("AddChips", cat_top_up, player("cat"))) == EXPIRED
        assert {n: await room.wallet.client.player_balance(n)
                for n in NAMES.values()} == balances
        # A command decided at a sequence the archive holds, with no record: the same,
        # whatever its id.
        assert await refused(client.call("LeaveSeat", pb.LeaveSeatRequest(
            table_id=table_id, seat=3, expected_sequence=1), player("cat"))) == EXPIRED
        assert await refused(client.call("SitOut", with_sequence, player("cat"))) == EXPIRED
        # An id from the future, beyond the clocks' skew: INVALID_ARGUMENT, a UUIDv7's too.
        for future in (timed_id(now_ms() + 2 * MAX_SKEW_S * 1000, "muck"),
                       uuid7(now_ms() + 2 * MAX_SKEW_S * 1000)):
            assert await refused(client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
                table_id=table_id, seat=1, muck=True, command_id=future), player("ann"))) == (
                grpc.StatusCode.INVALID_ARGUMENT, "command_id_future")
        # After the trim an untimed id is refused as it was before (never "new").
        await untimed_money_is_refused(room, store, table_id)
        for command_id in ("t12-garbage", "t0000000000000", str(uuid.uuid4()).upper()):
            assert await refused(client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
                table_id=table_id, seat=2, muck=True, command_id=command_id),
                player("bob"))) == UNTIMED
        assert await store.version(table_id) == version

        # A fresh timed id is a new command, a UUIDv7 too.
        for seat, name, fresh in ((1, "ann", timed_id(now_ms(), "muck")),
                                  (2, "bob", uuid7(now_ms()))):
            await client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
                table_id=table_id, seat=seat, muck=True, command_id=fresh), player(name))
            assert await admin.hexists(keys.table_commands(table_id),
                                       f"c:player:{name}:{fresh}")
        # A client whose clock is 10 minutes slow: its timed id looks old, but the command
        # was decided at a version above the trimmed events, after any record that left
        # (one is written at a version at or after the command's expected_sequence): new.
        slow = pb.AddChipsRequest(table_id=table_id, seat=2, amount=300,
                                  command_id=timed_id(now_ms() - COMMAND_WINDOW_S * 1000,
                                                      "slow-clock"),
                                  expected_sequence=await store.version(table_id))
        reply = await client.call("AddChips", slow, player("bob"))
        assert not reply.duplicate and reply.version > slow.expected_sequence
        assert await admin.hexists(keys.table_commands(table_id),
                                   f"c:player:bob:{slow.command_id}")
        # A timed id from the epoch: the rule holds, it is too old.
        assert await refused(client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=2, muck=True, command_id="t0000000000000-x"),
            player("bob"))) == EXPIRED
        assert await refused(client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=2, muck=True, command_id=uuid7(0)),
            player("bob"))) == EXPIRED
    await admin.aclose()
