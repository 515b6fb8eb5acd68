"""The archiver over a real room, a real Redis and a real PostgreSQL: settled hands older
than the hot window leave Redis for PostgreSQL, byte for byte, verified first; a step
repeated, interrupted between its write and its trim, or run by two archivers at once moves
each event exactly once."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import random
import time
from collections.abc import Awaitable
from typing import Any

import grpc
import psycopg
import pytest
from redis import exceptions as redis_errors

from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1 import table_pb2 as pb
from studhistory import archiver as archiving
from studhistory.archiver import ArchiveError, RecordUnavailable, archive_table, digest
from studhistory.dealer_records import DealerAudits
from studhistory.pgarchive import PgHistory, TableLock, archived, archived_envelopes
from studkit import keys
from studkit.auth import Principal, Role, bearer_metadata
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.grpc_errors import rpc_error_reason
from studkit.redis_client import Client, connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import OPERATOR, TableClient, act_once, player, running_room
from studtools.cli import main as cli_main
from studtools.devkeys import DevKeys
from studtools.redis_server import find_redis_server, server_version

pytestmark = pytest.mark.integration

NAMES = {1: "ann", 2: "bob", 3: "cat"}
HOT = 2


async def play(client: TableClient, table_id: str, hands: int, rng: random.Random) -> None:
    async with asyncio.timeout(120):
        while (view := await client.view(table_id)).hands_started < hands:
            if not await act_once(client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)


async def stream_bytes(admin: Client, table_id: str) -> dict[int, bytes]:
    entries = await admin.xrange(keys.table_stream(table_id))
    return {int(i.decode().split("-")[1]): f[b"envelope"] for i, f in entries}


def archived_bytes(dsn: str, table_id: str) -> dict[int, bytes]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT sequence, envelope, digest FROM history.events "
                            "WHERE table_id = %s ORDER BY sequence", (table_id,)).fetchall()
    found: dict[int, bytes] = {}
    for sequence, raw, sha in rows:
        assert sequence not in found, f"event {sequence} archived twice"
        assert bytes(sha) == digest(bytes(raw))
        found[int(sequence)] = bytes(raw)
    return found


async def room_with_hands(room: Any, hands: int, rng: random.Random) -> str:
    table_id: str = await room.client.open_table()
    for seat, name in NAMES.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    await play(room.client, table_id, hands, rng)
    return table_id


async def test_settled_hands_move_to_postgres_exactly_once(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    admin = connect(redis_url)
    store = EventStore(admin)
    rng = random.Random(31)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 7, rng)
        await room.table_deps.app.stop()
    before = await stream_bytes(admin, table_id)
    version = await store.version(table_id)
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        # A dry run plans and changes nothing.
        dry = await archive_table(store, history, table_id, keep_hands=HOT, dry_run=True)
        assert dry.plan.copying and dry.plan.trimming and dry.trimmed_to is None
        assert await store.trimmed(table_id) == 0 and await history.last_segment(table_id) is None

        outcome = await archive_table(store, history, table_id, keep_hands=HOT)
        assert outcome.wrote and outcome.trimmed_to == outcome.plan.trim_to > 0
        trimmed = await store.trimmed(table_id)
        archived = (await history.last_segment(table_id)).last
        assert trimmed == outcome.plan.trim_to <= archived <= version
        # Every settled hand is copied at once; the hot window stays in Redis, whole.
        kept = await stream_bytes(admin, table_id)
        hands_in = {archiving.EventEnvelope.FromString(r).hand_number for r in kept.values()}
        latest = max(hands_in)
        assert set(range(latest - HOT + 1, latest + 1)) <= hands_in
        assert outcome.plan.trim_hands[0] == 1 and min(hands_in - {0}) == latest - HOT + 1
        assert set(outcome.plan.hands) >= set(outcome.plan.trim_hands)

        # Every event is in Redis or PostgreSQL (or both while hot), with the bytes it was
        # appended with; what left Redis is all in PostgreSQL.
        in_pg = archived_bytes(history_dsns.admin, table_id)
        assert set(in_pg) == set(range(1, archived + 1))
        assert set(kept) == set(range(trimmed + 1, version + 1))
        for sequence, raw in before.items():
            assert in_pg.get(sequence, raw) == raw and kept.get(sequence, raw) == raw

        # One row per archived hand; a player's rows find it; nets and rake balance.
        with psycopg.connect(history_dsns.admin) as conn:
            hands = conn.execute(
                "SELECT hand, pot, rake, players, nets FROM history.hands WHERE table_id = %s "
                "ORDER BY hand", (table_id,)).fetchall()
            mine = conn.execute(
                "SELECT hand, net FROM history.hand_players WHERE player_id = 'ann' AND "
                "table_id = %s ORDER BY hand", (table_id,)).fetchall()
        assert [h[0] for h in hands] == outcome.plan.hands
        for _, pot, rake, players, nets in hands:
            assert set(players) <= set(NAMES.values()) and pot > 0
            assert sum(nets.values()) == -rake
        assert [h for h, _ in mine] == [h[0] for h in hands if "ann" in h[3]]

        # A second step with nothing new does nothing.
        again = await archive_table(store, history, table_id, keep_hands=HOT)
        assert again.plan.empty and await store.trimmed(table_id) == trimmed
        assert archived_bytes(history_dsns.admin, table_id) == in_pg
    finally:
        await history.aclose()
        await admin.aclose()


async def test_a_step_stopped_between_write_and_trim_is_finished_by_the_next(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, history_dsns: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(5))
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        async def crash(*_: object) -> int:
            raise ConnectionError("killed before the trim")
        with monkeypatch.context() as patch:
            patch.setattr(archiving, "_trim", crash)
            with pytest.raises(ConnectionError):
                await archive_table(store, history, table_id, keep_hands=HOT)
        written = await history.last_segment(table_id)
        assert written is not None and await store.trimmed(table_id) == 0

        resumed = await archive_table(store, history, table_id, keep_hands=HOT)
        assert not resumed.wrote and resumed.trimmed_to and resumed.trimmed_to <= written.last
        assert await store.trimmed(table_id) == resumed.trimmed_to
        assert set(archived_bytes(history_dsns.admin, table_id)) == set(
            range(1, written.last + 1))
    finally:
        await history.aclose()
        await admin.aclose()


async def test_two_archivers_at_once_write_one_segment(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(8))
        await room.table_deps.app.stop()
    one, two = (await PgHistory.connect(history_dsns.archiver),
                await PgHistory.connect(history_dsns.archiver))
    try:
        # The lock: while one holds the table, the other is told no.
        assert await TableLock(one.conn).acquire(table_id)
        assert not await TableLock(two.conn).acquire(table_id)
        await TableLock(one.conn).release(table_id)

        # Without the lock (two processes that raced past it): the segment's key decides.
        results = await asyncio.gather(
            archive_table(store, one, table_id, keep_hands=HOT),
            archive_table(store, two, table_id, keep_hands=HOT), return_exceptions=True)
        done = [r for r in results if not isinstance(r, BaseException)]
        assert done, results
        assert all(isinstance(r, ArchiveError) for r in results
                   if isinstance(r, BaseException)), results
        # One wrote the segment (the other found it); whichever trimmed first won the trim.
        assert sum(r.wrote for r in done) <= 1
        trimmed = await store.trimmed(table_id)
        last = await one.last_segment(table_id)
        assert last is not None and 0 < trimmed <= last.last
        assert set(archived_bytes(history_dsns.admin, table_id)) == set(range(1, last.last + 1))
        with psycopg.connect(history_dsns.admin) as conn:
            count = conn.execute("SELECT count(*) FROM history.segments WHERE table_id = %s",
                                 (table_id,)).fetchone()
        assert count == (1,)
    finally:
        await one.aclose()
        await two.aclose()
        await admin.aclose()


async def test_a_changed_byte_in_redis_is_never_trimmed(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification compares PostgreSQL with a fresh read of the stream: a copy that
    differs (here: one event's bytes changed on the way to PostgreSQL) is never trimmed."""
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(9))
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    write = history.write_segment

    async def corrupt_first(segment: archiving.Segment) -> bool:
        first = segment.events[0]
        envelope = archiving.EventEnvelope.FromString(first.envelope)
        envelope.command_id += "x"  # one field changed, still a valid envelope
        bad = envelope.SerializeToString(deterministic=True)
        changed = dataclasses.replace(first, envelope=bad, digest=digest(bad))
        return await write(dataclasses.replace(segment,
                                               events=(changed, *segment.events[1:])))
    try:
        history.write_segment = corrupt_first  # type: ignore[method-assign]
        with pytest.raises(ArchiveError, match="differs from the stream"):
            await archive_table(store, history, table_id, keep_hands=HOT)
        assert await store.trimmed(table_id) == 0
        # The bad copy stays refused (an operator's alert), and Redis keeps every event.
        history.write_segment = write  # type: ignore[method-assign]
        with pytest.raises(ArchiveError, match="differs from the stream"):
            await archive_table(store, history, table_id, keep_hands=HOT)
        assert await store.trimmed(table_id) == 0
    finally:
        await history.aclose()
        await admin.aclose()


async def test_get_hand_history_of_an_archived_hand_is_read_from_postgres(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    """Clients never see a history disappear: a hand that left Redis is answered from
    PostgreSQL with the same events; without the archive configured it is NOT_FOUND
    archived, as before."""
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(4))
        request = pb.GetHandHistoryRequest(table_id=table_id, hand_number=1)
        before = await room.client.call("GetHandHistory", request, OPERATOR)
        mine_before = await room.client.call("GetHandHistory", request, player("ann"))
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        outcome = await archive_table(store, history, table_id, keep_hands=HOT)
        assert 1 in outcome.plan.trim_hands and outcome.trimmed_to
    finally:
        await history.aclose()
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await room.client.call("GetHandHistory", request, OPERATOR)
        assert (refused.value.code(), rpc_error_reason(refused.value)) == (
            grpc.StatusCode.NOT_FOUND, "archived")
        await room.table_deps.app.stop()
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2,
                            history_dsn=history_dsns.support) as room:
        after = await room.client.call("GetHandHistory", request, OPERATOR)
        assert after.complete and list(after.events) == list(before.events)
        mine = await room.client.call("GetHandHistory", request, player("ann"))
        assert list(mine.events) == list(mine_before.events)
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await room.client.call("GetHandHistory", pb.GetHandHistoryRequest(
                table_id=table_id, hand_number=10_000), OPERATOR)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        await room.table_deps.app.stop()
    await admin.aclose()


async def test_replay_reads_redis_and_postgres_as_one_log(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, history_dsns: Any,
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stud replay list/show/verify`` give the same answers before and after the archiver
    moved hands out of Redis; ``list --player`` finds a player's hands in both stores."""
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 7, random.Random(21))
        await room.table_deps.app.stop()
    monkeypatch.setenv("STUD_REPLAY_REDIS_URL", redis_url)
    monkeypatch.setenv("STUD_RUN_DIR", str(tmp_path))
    for name in ("STUD_SUPPORT_DSN", "STUD_AUDITOR_DSN", "STUD_DEALER_TARGET",
                 "STUD_ISSUER_KEY", "STUD_REPLAY_TOKEN"):
        monkeypatch.delenv(name, raising=False)

    async def stud(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        status = await asyncio.to_thread(cli_main, list(argv), out)
        return status, out.getvalue()

    listed = await stud("replay", "list", "--table", table_id, "--json")
    shown = await stud("replay", "show", "--table", table_id, "--hand", "1")
    assert listed[0] == 0 and shown[0] == 0
    bobs = [h["hand"] for h in json.loads(listed[1])["hands"]
            if h["complete"] and "bob" in h["players"].values()]
    live = json.loads((await stud("replay", "list", "--player", "bob", "--json"))[1])["hands"]
    assert sorted(h["hand"] for h in live) == sorted(bobs) and len(bobs) >= 5
    assert {h["where"] for h in live} == {"redis"}
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        outcome = await archive_table(store, history, table_id, keep_hands=HOT)
        assert 1 in outcome.plan.trim_hands
    finally:
        await history.aclose()
    # Without PostgreSQL the archived hands are left out, with a note.
    partial = await stud("replay", "list", "--table", table_id, "--json")
    assert partial[0] == 0 and partial[1] != listed[1]
    monkeypatch.setenv("STUD_SUPPORT_DSN", history_dsns.support)
    assert await stud("replay", "list", "--table", table_id, "--json") == listed
    again = await stud("replay", "show", "--table", table_id, "--hand", "1")
    assert again == shown
    verified = await stud("replay", "verify", "--table", table_id, "--no-progress")
    assert verified[0] == 0, verified[1]
    # verify's read of a table's head: the envelopes alone, as archived() gives them.
    async with await psycopg.AsyncConnection.connect(history_dsns.support) as conn:
        rows = [row async for row in archived(conn, table_id)]
        assert len(rows) > 10 and [s for s, _ in rows] == list(range(1, len(rows) + 1))
        assert await archived_envelopes(conn, table_id) == [raw for _, raw in rows]
        assert await archived_envelopes(conn, table_id, 3, 9) == [raw for _, raw in rows[2:9]]

    status, text = await stud("replay", "list", "--player", "bob", "--json")
    assert status == 0
    found = json.loads(text)["hands"]
    assert sorted(h["hand"] for h in found) == sorted(bobs)
    assert "archive" in {h["where"] for h in found}
    assert all(h["table"] == table_id and h["players"][str(h["seat"])] == "bob" for h in found)
    hands = [h["hand"] for h in found]
    assert hands == sorted(hands, reverse=True) and len(set(hands)) == len(hands)
    none = await stud("replay", "list", "--player", "bob", "--until", "2000-01-01", "--json")
    assert json.loads(none[1])["hands"] == []
    big = await stud("replay", "list", "--player", "bob", "--min-pot", "1000000000")
    assert big[0] == 0 and big[1].strip().endswith("0 hands of bob")
    await admin.aclose()


async def test_the_dealers_records_go_to_the_auditor_schema(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    """The archiver copies each archived hand's dealer record (as ``service:archiver``, the
    one service the dealer's ``GetAudit`` admits besides auditors) into ``auditor``; a
    dealer that cannot answer holds the copy back rather than archive a hand without it."""
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 5, random.Random(17))
        await room.table_deps.app.stop()
        history = await PgHistory.connect(history_dsns.archiver)
        target = f"127.0.0.1:{room.dealer.port}"
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                table_token = dev_keys.service_source("table")
                as_table = DealerAudits(channel, lambda: table_token.token("dealer"))
                with pytest.raises(RecordUnavailable, match="PERMISSION_DENIED"):
                    await as_table.record(table_id, 1)
                archiver_token = dev_keys.service_source("archiver")
                dealer = DealerAudits(channel, lambda: archiver_token.token("dealer"))
                outcome = await archive_table(store, history, table_id, keep_hands=HOT,
                                              dealer=dealer)
                # The dealer forgot the hands that left Redis (their records are archived),
                # and says so; nobody else may ask it to, nor past what Redis still holds.
                gone = outcome.plan.trim_hands
                assert gone and outcome.released_through == gone[-1]
                for hand in gone:
                    assert not await admin.exists(keys.dealer_key(table_id, f"hand:{hand}"))
                assert await admin.exists(keys.dealer_key(table_id, f"hand:{gone[-1] + 1}"))
                auditor = dev_keys.issuer().issue(Principal(role=Role.AUDITOR, name="a"),
                                                  ttl_seconds=600)
                stub = dpb_grpc.DealerServiceStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as archived_hand:
                    await stub.GetAudit(dpb.GetAuditRequest(table_id=table_id, hand_number=1),
                                        metadata=bearer_metadata(auditor))
                assert (archived_hand.value.code(), rpc_error_reason(archived_hand.value)) == (
                    grpc.StatusCode.NOT_FOUND, "archived")
                cases = [(table_token.token("dealer"), table_id, 1,
                          grpc.StatusCode.PERMISSION_DENIED),
                         (auditor, table_id, 1, grpc.StatusCode.PERMISSION_DENIED),
                         (archiver_token.token("dealer"), table_id, gone[-1] + 1,
                          grpc.StatusCode.FAILED_PRECONDITION),
                         (archiver_token.token("dealer"), "no such id!", 1,
                          grpc.StatusCode.INVALID_ARGUMENT),
                         (archiver_token.token("dealer"), table_id, 0,
                          grpc.StatusCode.INVALID_ARGUMENT)]
                for token, table, through, code in cases:
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await stub.ReleaseHands(dpb.ReleaseHandsRequest(
                            table_id=table, through_hand=through),
                            metadata=bearer_metadata(token))
                    assert refused.value.code() == code, (table, through)
                again = await stub.ReleaseHands(dpb.ReleaseHandsRequest(
                    table_id=table_id, through_hand=1),
                    metadata=bearer_metadata(archiver_token.token("dealer")))
                assert (again.released_through, again.deleted) == (gone[-1], 0)
        finally:
            await history.aclose()
    assert outcome.wrote and outcome.plan.hands
    with psycopg.connect(history_dsns.admin) as conn:
        rows = dict(conn.execute("SELECT hand, record FROM auditor.dealer_hands WHERE "
                                 "table_id = %s", (table_id,)).fetchall())
    assert sorted(rows) == outcome.plan.hands
    for hand, record in rows.items():
        audit = dpb.HandAudit.FromString(bytes(record))
        assert audit.hand_number == hand and audit.streets

    # A dealer that does not answer: the next settled hands wait (nothing copied).
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        await play(room.client, table_id, 7, random.Random(2))
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        before = await history.last_segment(table_id)
        async with grpc.aio.insecure_channel("127.0.0.1:1") as nowhere:
            gone = DealerAudits(nowhere, lambda: "x")
            with pytest.raises(RecordUnavailable):
                await archive_table(store, history, table_id, keep_hands=HOT, dealer=gone)
        assert await history.last_segment(table_id) == before
    finally:
        await history.aclose()
        await admin.aclose()


async def test_the_archivers_redis_user_does_its_step_and_no_more(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    """The archiver's ACL user reads a table's keys and trims its stream's head (with the
    command records that go with it); it may not change a table's owner or summary,
    nor read the dealer's decks."""
    if redis_server.server is None:
        pytest.skip("a Redis of the environment's, without the tests' ACL users")
    url = redis_server.server.url_for("archiver")
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 5, random.Random(6))
        await room.table_deps.app.stop()
    client = connect(url)
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        outcome = await archive_table(EventStore(client), history, table_id, keep_hands=HOT)
        assert outcome.wrote and outcome.trimmed_to
        denied: list[Awaitable[Any]] = [client.get(keys.dealer_key(table_id, "hand:1"))]
        if server_version(find_redis_server()) >= (7,):  # 6.2 has no read-only keys
            denied += [client.delete(keys.table_owner(table_id)),
                       client.set(keys.table_key(table_id, "summary"), "x")]
        for attempt in denied:
            with pytest.raises(redis_errors.NoPermissionError):
                await attempt
    finally:
        await history.aclose()
        await client.aclose()


async def test_command_records_leave_redis_with_their_events(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    """The idempotency hash keeps the hot window's commands only (and the idempotency
    window's: the step runs 10 minutes later here): a record whose events left Redis is in
    PostgreSQL (``history.commands``), with its outcome and fingerprint."""
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(12))
        await room.table_deps.app.stop()
    before = {k.decode(): v.decode() for k, v in
              (await admin.hgetall(keys.table_commands(table_id))).items()}
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        outcome = await archive_table(store, history, table_id, keep_hands=HOT,
                                      clock=lambda: time.time() + COMMAND_WINDOW_S)
    finally:
        await history.aclose()
    trimmed = outcome.trimmed_to
    assert trimmed
    after = {k.decode(): v.decode() for k, v in
             (await admin.hgetall(keys.table_commands(table_id))).items()}

    def version(outcome: str) -> int:
        return int(outcome.split(" ")[0])
    gone = {k: v for k, v in before.items() if not k.endswith("#fp") and version(v) <= trimmed}
    assert gone and not set(gone) & set(after)
    assert {k for k in after if not k.endswith("#fp")} == {
        k for k, v in before.items() if not k.endswith("#fp") and version(v) > trimmed}
    with psycopg.connect(history_dsns.support) as conn:
        rows = {r[0]: (r[1], r[2]) for r in conn.execute(
            "SELECT command_id, outcome, fingerprint FROM history.commands WHERE "
            "table_id = %s", (table_id,))}
    for command_id, recorded in gone.items():
        assert rows[command_id] == (recorded, before.get(command_id + "#fp", ""))
    await admin.aclose()


async def test_list_my_hands_pages_through_a_players_own_hands(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
        history_dsns: Any) -> None:
    """ListMyHands: a player's own settled hands, newest first, a page at a time, from the
    archive; nobody else's; bad pages and other roles refused; no archive, no list."""
    admin = connect(redis_url)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(14))
        with pytest.raises(grpc.aio.AioRpcError) as none:
            await room.client.call("ListMyHands", pb.ListMyHandsRequest(), player("ann"))
        assert (none.value.code(), rpc_error_reason(none.value)) == (
            grpc.StatusCode.FAILED_PRECONDITION, "no_archive")
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        await archive_table(EventStore(admin), history, table_id, keep_hands=HOT)
    finally:
        await history.aclose()
    with psycopg.connect(history_dsns.support) as conn:
        expected = {name: [(t, h, s, n) for t, h, s, n in conn.execute(
            "SELECT table_id, hand, seat, net FROM history.hand_players WHERE player_id = %s "
            "ORDER BY ended_at DESC, table_id DESC, hand DESC", (name,))]
            for name in NAMES.values()}
    assert all(len(rows) >= 3 for rows in expected.values()), expected
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2,
                            history_dsn=history_dsns.support) as room:
        for name in NAMES.values():
            seen: list[tuple[str, int, int, int]] = []
            token = ""
            while True:
                page = await room.client.call("ListMyHands", pb.ListMyHandsRequest(
                    page_size=2, page_token=token), player(name))
                assert len(page.hands) <= 2
                seen += [(h.table_id, h.hand_number, h.seat, h.net) for h in page.hands]
                token = page.next_page_token
                if not token:
                    break
            assert seen == expected[name]
        one = await room.client.call("ListMyHands", pb.ListMyHandsRequest(), player("ann"))
        assert [(h.table_id, h.hand_number, h.seat, h.net) for h in one.hands] == \
            expected["ann"] and not one.next_page_token
        refusals = [(pb.ListMyHandsRequest(), OPERATOR, grpc.StatusCode.PERMISSION_DENIED),
                    (pb.ListMyHandsRequest(page_size=201), player("ann"),
                     grpc.StatusCode.INVALID_ARGUMENT),
                    (pb.ListMyHandsRequest(page_token="not-a-token!"), player("ann"),
                     grpc.StatusCode.INVALID_ARGUMENT),
                    (pb.ListMyHandsRequest(page_token="eHx5fHo"), player("ann"),
                     grpc.StatusCode.INVALID_ARGUMENT)]
        for request, who, code in refusals:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await room.client.call("ListMyHands", request, who)
            assert refused.value.code() == code, request
        # A player who never played has an empty list.
        empty = await room.client.call("ListMyHands", pb.ListMyHandsRequest(), player("zed"))
        assert list(empty.hands) == [] and not empty.next_page_token
        await room.table_deps.app.stop()
    await admin.aclose()


async def test_a_byte_changed_in_an_archived_row_is_named(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, history_dsns: Any,
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain runs on across Redis and PostgreSQL: one byte changed in an archived row
    (by an admin who first disabled the append-only trigger) is found by ``stud replay
    verify``, which names the table, the event, and the digests expected and found; the
    archiver refuses to continue a chain whose archived end no longer matches."""
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(23))
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        await archive_table(store, history, table_id, keep_hands=HOT)
    finally:
        await history.aclose()
    monkeypatch.setenv("STUD_REPLAY_REDIS_URL", redis_url)
    monkeypatch.setenv("STUD_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("STUD_SUPPORT_DSN", history_dsns.support)
    for name in ("STUD_AUDITOR_DSN", "STUD_DEALER_TARGET", "STUD_ISSUER_KEY"):
        monkeypatch.delenv(name, raising=False)

    async def verify() -> tuple[int, str]:
        out = io.StringIO()
        status = await asyncio.to_thread(
            cli_main, ["replay", "verify", "--table", table_id, "--no-progress"], out)
        return status, out.getvalue()
    assert (await verify())[0] == 0
    with psycopg.connect(history_dsns.admin, autocommit=True) as conn:
        raw = conn.execute("SELECT envelope FROM history.events WHERE table_id = %s AND "
                           "sequence = 9", (table_id,)).fetchone()
        assert raw is not None
        changed = bytearray(bytes(raw[0]))
        changed[-1] ^= 1
        conn.execute("ALTER TABLE history.events DISABLE TRIGGER USER")
        conn.execute("UPDATE history.events SET envelope = %s WHERE table_id = %s AND "
                     "sequence = 9", (bytes(changed), table_id))
        conn.execute("ALTER TABLE history.events ENABLE TRIGGER USER")
    status, text = await verify()
    assert status == 1, text
    expected = digest(bytes(raw[0])).hex()[:8]
    found = digest(bytes(changed)).hex()[:8]
    lines = [line for line in text.splitlines() if "chain broken" in line]
    assert lines and "#9" in lines[0] and table_id in text, text
    assert expected in lines[0] and found in lines[0], lines[0]

    # The archive's end changed: the next copy would not link to it, so nothing is copied.
    with psycopg.connect(history_dsns.admin, autocommit=True) as conn:
        conn.execute("ALTER TABLE history.segments DISABLE TRIGGER USER")
        conn.execute("UPDATE history.segments SET last_digest = %s WHERE table_id = %s",
                     (bytes(32), table_id))
        conn.execute("ALTER TABLE history.segments ENABLE TRIGGER USER")
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        await play(room.client, table_id, 8, random.Random(3))
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        before = await history.last_segment(table_id)
        with pytest.raises(ArchiveError, match="chain broken"):
            await archive_table(store, history, table_id, keep_hands=HOT)
        assert await history.last_segment(table_id) == before
    finally:
        await history.aclose()
        await admin.aclose()
