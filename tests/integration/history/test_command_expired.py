"""A command retried after the archiver took its record out of Redis is refused
``command_expired`` and changes nothing (issue 31; docs/history.md, "Expired commands")."""

from __future__ import annotations

import random
import time
from typing import Any

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from studhistory.archiver import archive_table
from studhistory.pgarchive import PgHistory
from studkit import keys
from studkit.commandwindow import COMMAND_WINDOW_S, MAX_SKEW_S, timed_id
from studkit.grpc_errors import rpc_error_reason
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import player, running_room
from studtools.devkeys import DevKeys

from .test_archiver import HOT, play

NAMES = {1: "ann", 2: "bob", 3: "cat"}


def now_ms() -> int:
    return int(time.time() * 1000)


async def refused(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), rpc_error_reason(caught.value)


async def test_a_command_retried_after_its_record_left_redis_is_refused_command_expired(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        client = room.client
        table_id = await client.open_table()
        sits = {}
        for seat, name in NAMES.items():
            await room.fund(name)
            # ann's id was made 10 minutes ago (a client retrying for that long): accepted,
            # nothing has left this table yet.
            made = now_ms() - (COMMAND_WINDOW_S * 1000 if name == "ann" else 0)
            sits[name] = pb.SitDownRequest(table_id=table_id, seat=seat, buy_in=10_000,
                                           command_id=timed_id(made, f"sit-{name}"))
            await client.call("SitDown", sits[name], player(name))
        # bob tops up, his client's id made 10 minutes ago too.
        top_up = pb.AddChipsRequest(table_id=table_id, seat=2, amount=500,
                                    command_id=timed_id(now_ms() - COMMAND_WINDOW_S * 1000,
                                                        "top-up"))
        await client.call("AddChips", top_up, player("bob"))
        sat_at = await store.version(table_id)
        await play(client, table_id, 6, random.Random(12))
        ann_sat = "c:player:ann:" + sits["ann"].command_id
        history = await PgHistory.connect(history_dsns.archiver)
        try:
            # Within the idempotency window the records stay with the events gone: a retry
            # is answered as the duplicate it is.
            outcome = await archive_table(store, history, table_id, keep_hands=HOT)
            assert outcome.trimmed_to is not None and outcome.trimmed_to >= sat_at
            assert await admin.hexists(keys.table_commands(table_id), ann_sat)
            version = await store.version(table_id)
            reply = await client.call("SitDown", sits["ann"], player("ann"))
            assert reply.version < version and await store.version(table_id) == version
            # Ten minutes on, the next step takes them.
            await play(client, table_id, 8, random.Random(13))
            await archive_table(store, history, table_id, keep_hands=HOT,
                                clock=lambda: time.time() + COMMAND_WINDOW_S)
        finally:
            await history.aclose()
        assert not await admin.hexists(keys.table_commands(table_id), ann_sat)
        version = await store.version(table_id)

        # The late retry: its record left with its events; refused, nothing written.
        code, reason = await refused(client.call("SitDown", sits["ann"], player("ann")))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "command_expired")
        # The late top-up: without the check it would move bob's chips a second time.
        balance = await room.wallet.client.player_balance("bob")
        code, reason = await refused(client.call("AddChips", top_up, player("bob")))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "command_expired")
        assert await room.wallet.client.player_balance("bob") == balance
        # A command decided at a sequence the archive holds, with no record: the same.
        code, reason = await refused(client.call("LeaveSeat", pb.LeaveSeatRequest(
            table_id=table_id, seat=3, expected_sequence=1), player("cat")))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "command_expired")
        # An id from the future, beyond the clocks' skew: INVALID_ARGUMENT.
        future = timed_id(now_ms() + 2 * MAX_SKEW_S * 1000, "muck")
        code, reason = await refused(client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=1, muck=True, command_id=future), player("ann")))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "command_id_future")
        assert await store.version(table_id) == version

        # A fresh timed id is a new command; an id not in the timed form keeps the old rule.
        fresh = timed_id(now_ms(), "muck")
        await client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=1, muck=True, command_id=fresh), player("ann"))
        assert await admin.hexists(keys.table_commands(table_id), "c:player:ann:" + fresh)
        await client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=2, muck=True, command_id="t12-garbage"), player("bob"))
        await client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=2, muck=False, command_id="t0000000000000"), player("bob"))
        # A timed id from the epoch: the rule holds, it is too old.
        code, reason = await refused(client.call("SetMuckPreference", pb.SetMuckPreferenceRequest(
            table_id=table_id, seat=2, muck=True, command_id="t0000000000000-x"), player("bob")))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "command_expired")
    await admin.aclose()
