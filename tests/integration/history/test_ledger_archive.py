"""The wallet's ledger and statements leave Redis for PostgreSQL (``studhistory.
ledger_archive``) over a real wallet, a real Redis (the archiver's and the wallet's ACL users)
and a real PostgreSQL: every statement reads the same, page for page, before and after;
nothing is trimmed that PostgreSQL does not hold byte for byte; a step repeated or stopped
between its copy and its trim moves each posting once."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import grpc
import psycopg
import pytest

from archiver.loop import Archiver
from stud.v1 import wallet_pb2 as pb
from studhistory.archiver import archive_table
from studhistory.ledger_archive import (
    LEDGER,
    LedgerArchiveError,
    archive_ledger,
    copy_ledger,
    statement_key,
    trim_ledger,
    watermark,
)
from studhistory.pgarchive import PgHistory
from studkit.grpc_server import rpc_error_reason
from studkit.metrics import Metrics
from studkit.redis_client import Client, connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import running_room
from studtest.wallet import AUDITOR, RunningWallet, running_wallet
from studtools.cli import main as cli_main
from studtools.devkeys import DevKeys
from studtools.redis_server import find_redis_server, server_version
from wallet.config import Settings
from wallet.history import ArchivedLines, ArchivedStatementStore

from .test_archiver import room_with_hands

pytestmark = pytest.mark.integration

KEEP = 3
HOUSE = pb.AccountRef(system=pb.SYSTEM_ACCOUNT_HOUSE)
ACCOUNTS = [pb.AccountRef(player_id="alice"), pb.AccountRef(player_id="bob"),
            pb.AccountRef(seat=pb.SeatAccount(table_id="t1", seat=1)),
            pb.AccountRef(seat=pb.SeatAccount(table_id="t1", seat=2)),
            HOUSE, pb.AccountRef(system=pb.SYSTEM_ACCOUNT_EXTERNAL)]


def user_url(redis_server: TestRedis, admin_url: str, user: str) -> str:
    return redis_server.server.url_for(user) if redis_server.server is not None else admin_url


@pytest.fixture
async def wallet(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
                 history_dsns: Any) -> AsyncIterator[RunningWallet]:
    """A wallet that reads archived statements as the support role."""
    settings = Settings(addr="127.0.0.1:0", redis_url=user_url(redis_server, redis_url, "wallet"),
                        auth_keys=dev_keys.key_set(), history_dsn=history_dsns.support)
    async with running_wallet(settings, dev_keys) as running:
        yield running


@pytest.fixture
async def archiver(redis_server: TestRedis, redis_url: str,
                   history_dsns: Any) -> AsyncIterator[tuple[Client, Any]]:
    """The archiver's Redis user and PostgreSQL role (autocommit, as the service's)."""
    client = connect(user_url(redis_server, redis_url, "archiver"))
    conn = await psycopg.AsyncConnection.connect(history_dsns.archiver, autocommit=True)
    try:
        yield client, conn
    finally:
        await conn.close()
        await client.aclose()


async def play_money(wallet: RunningWallet, hands: range) -> None:
    """Deposits, buy-ins, settlements with rake and a cash-out, as a table moves money."""
    c = wallet.client
    if hands.start == 1:
        for name, seat in (("alice", 1), ("bob", 2)):
            await c.create_account(name)
            await c.deposit(name, 5_000, f"dep-{name}")
            await c.buy_in(name, "t1", seat, 2_000, f"buy-{name}")
    for h in hands:
        await settle_hand(c, h)


async def statements(wallet: RunningWallet) -> dict[tuple[str, int], list[Any]]:
    """Every account's statement read page by page at several page sizes: the pages' lines
    and tokens."""
    c = wallet.client
    out: dict[tuple[str, int], list[Any]] = {}
    for account in ACCOUNTS:
        for size in (1, 4, 100):
            pages: list[Any] = []
            token = ""
            while True:
                reply = await c.stub.GetStatement(
                    pb.GetStatementRequest(account=account, page_size=size, page_token=token),
                    metadata=c.metadata(AUDITOR))
                pages.append((list(reply.lines), reply.next_page_token))
                token = reply.next_page_token
                if not token:
                    break
            out[(str(account), size)] = pages
    return out


async def test_statements_read_the_same_after_the_ledger_left_redis(
        wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str) -> None:
    client, conn = archiver
    await play_money(wallet, range(1, 13))
    balances = await wallet.deps.store.balances()
    before = await statements(wallet)
    whole = await wallet.deps.store.ledger()
    admin = connect(redis_url, decode_responses=True)
    try:
        lines_before = {a: await admin.xlen(statement_key(a)) for a in ("house", "seat:t1:1")}
        outcome = await archive_ledger(client, conn, keep=KEEP)
        assert outcome.copied == len(whole) and outcome.trimmed == len(whole) - KEEP
        assert await admin.xlen(LEDGER) == KEEP
        for account, n in lines_before.items():  # each statement keeps its hot lines only
            assert await admin.xlen(statement_key(account)) < n
        assert await statements(wallet) == before
        assert await wallet.deps.store.balances() == balances  # the projection stays
        # PostgreSQL holds the whole ledger (its sums are the balances), Redis its hot end.
        cur = await conn.execute("SELECT account, balance FROM ledger.balances")
        assert {a: int(b) for a, b in await cur.fetchall() if int(b)} == balances
        assert await wallet.deps.store.ledger() == whole[-KEEP:]
        # Again, with more money moved: nothing copied twice, the statements still the same.
        again = await archive_ledger(client, conn, keep=KEEP)
        assert (again.copied, again.trimmed) == (0, 0)
        await play_money(wallet, range(13, 20))
        before = await statements(wallet)
        outcome = await archive_ledger(client, conn, keep=KEEP)
        assert outcome.copied == 7 and outcome.trimmed == 7
        assert await statements(wallet) == before
        cur = await conn.execute("SELECT count(*), count(DISTINCT (account, line_id)), "
                                 "(SELECT sum(postings) FROM ledger.segments) "
                                 "FROM ledger.postings")
        rows, lines, postings = await cur.fetchone()
        assert rows == lines == postings == sum(len(e.postings) for e in whole) + 7 * 3
    finally:
        await admin.aclose()


async def test_a_step_stopped_between_copy_and_trim_is_finished_by_the_next(
        wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str) -> None:
    client, conn = archiver
    await play_money(wallet, range(1, 6))
    before = await statements(wallet)
    admin = connect(redis_url, decode_responses=True)
    try:
        n = await admin.xlen(LEDGER)
        assert await copy_ledger(client, conn) != (0, 0)  # ...and the archiver dies here
        assert await admin.xlen(LEDGER) == n
        assert await statements(wallet) == before  # both stores hold them: read once
        assert await copy_ledger(client, conn) == (0, 0)  # a second copy writes nothing
        outcome = await archive_ledger(client, conn, keep=KEEP)
        assert (outcome.copied, outcome.trimmed) == (0, n - KEEP)
        assert await statements(wallet) == before
    finally:
        await admin.aclose()


async def test_a_posting_changed_in_postgres_is_never_trimmed(
        wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str,
        history_dsns: Any) -> None:
    client, conn = archiver
    await play_money(wallet, range(1, 6))
    admin = connect(redis_url, decode_responses=True)
    try:
        await copy_ledger(client, conn)
        n, lines = await admin.xlen(LEDGER), await admin.xlen(statement_key("house"))
        with psycopg.connect(history_dsns.admin, autocommit=True) as owner:  # behind its back
            owner.execute("ALTER TABLE ledger.postings DISABLE TRIGGER USER")
            owner.execute("UPDATE ledger.postings SET balance_after = balance_after + 1 "
                          "WHERE account = 'house' AND line_id = (SELECT min(line_id) FROM "
                          "ledger.postings WHERE account = 'house')")
            owner.execute("ALTER TABLE ledger.postings ENABLE TRIGGER USER")
        with pytest.raises(LedgerArchiveError, match="house's statement line"):
            await trim_ledger(client, conn, keep=KEEP)
        assert (await admin.xlen(LEDGER), await admin.xlen(statement_key("house"))) == (n, lines)
    finally:
        await admin.aclose()


async def test_an_archived_statement_with_postgres_down_is_unavailable(
        wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str) -> None:
    """A page that needs the archive while PostgreSQL is down: UNAVAILABLE
    archive_unavailable; a page that starts in the hot window still reads."""
    client, conn = archiver
    await play_money(wallet, range(1, 6))
    await archive_ledger(client, conn, keep=KEEP)
    store = wallet.deps.store
    assert isinstance(store, ArchivedStatementStore)
    await store.archive.aclose()
    store.archive = ArchivedLines("postgresql://support:x@127.0.0.1:1/stud")
    c = wallet.client
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await c.stub.GetStatement(pb.GetStatementRequest(account=HOUSE),
                                  metadata=c.metadata(AUDITOR))
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE
    assert rpc_error_reason(info.value) == "archive_unavailable"
    admin = connect(redis_url, decode_responses=True)
    try:
        rows: Any = await admin.xrange(statement_key("house"), count=1)
        oldest = str(rows[0][0])
    finally:
        await admin.aclose()
    reply = await c.stub.GetStatement(
        pb.GetStatementRequest(account=HOUSE, page_token=oldest),
        metadata=c.metadata(AUDITOR))
    assert len(reply.lines) == KEEP - 1


async def test_replay_verify_finds_settlements_that_left_redis(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, history_dsns: Any,
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stud replay verify`` checks each hand's settlement in the wallet's ledger: in
    PostgreSQL once it left Redis (a hand whose settlement is in neither store fails)."""
    admin = connect(redis_url)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room_with_hands(room, 6, random.Random(8))
        await room.table_deps.app.stop()
    conn = await psycopg.AsyncConnection.connect(history_dsns.archiver, autocommit=True)
    history = PgHistory(conn)
    try:
        await archive_table(EventStore(admin), history, table_id, keep_hands=2)
        outcome = await archive_ledger(admin, conn, keep=1)
        assert outcome.trimmed > 5
    finally:
        await conn.close()
    monkeypatch.setenv("STUD_REPLAY_REDIS_URL", redis_url)
    monkeypatch.setenv("STUD_RUN_DIR", str(tmp_path))
    for name in ("STUD_AUDITOR_DSN", "STUD_DEALER_TARGET", "STUD_ISSUER_KEY",
                 "STUD_REPLAY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STUD_SUPPORT_DSN", history_dsns.support)
    out = io.StringIO()
    status = await asyncio.to_thread(cli_main, ["replay", "verify", "--table", table_id,
                                                "--no-progress", "--json"], out)
    report = json.loads(out.getvalue())
    assert status == 0, out.getvalue()
    assert report["verified"] >= 5 and report["failed"] == 0
    await admin.aclose()


async def test_the_archivers_round_moves_the_wallets_ledger(
        wallet: RunningWallet, archiver: tuple[Client, Any], history_dsns: Any,
        redis_url: str) -> None:
    """The service's round takes the wallet's ledger one step after the tables: copied
    always, trimmed only with a hot window (``WALLET_HOT_TRANSACTIONS``)."""
    client, _ = archiver
    await play_money(wallet, range(1, 6))
    before = await statements(wallet)
    admin = connect(redis_url, decode_responses=True)
    try:
        n = await admin.xlen(LEDGER)
        copy_only = Archiver(EventStore(client), history_dsns.archiver, Metrics(), 2)
        await copy_only.round()
        await copy_only.aclose()
        assert await admin.xlen(LEDGER) == n
        async with await psycopg.AsyncConnection.connect(history_dsns.support) as conn:
            mark = await watermark(conn)
        assert mark == (await wallet.deps.store.ledger())[-1].transaction_id
        metrics = Metrics()
        trimming = Archiver(EventStore(client), history_dsns.archiver, metrics, 2,
                            wallet_hot=KEEP)
        await trimming.round()
        await trimming.aclose()
        assert await admin.xlen(LEDGER) == KEEP
        assert metrics.registry.get_sample_value(
            "stud_archiver_ledger_trimmed_total") == n - KEEP
        assert await statements(wallet) == before
    finally:
        await admin.aclose()


async def test_a_tables_settlement_records_stay_a_window_and_an_old_retry_is_refused(
        wallet: RunningWallet, redis_url: str) -> None:
    """The wallet keeps the settlement records of each table's latest 100 hands, so its keys
    stay flat; a retry of an older settlement is refused ``settlement_expired`` and changes
    nothing, one inside the window answers its original outcome."""
    await play_money(wallet, range(1, 106))
    admin = connect(redis_url, decode_responses=True)
    try:
        records = [k for k in await admin.hkeys("stud:wallet:{wallet}:idempotency")
                   if k.startswith("settle:t1:")]
        assert len(records) == 100 and "settle:t1:h5" not in records
        balances, n = await wallet.deps.store.balances(), await admin.xlen(LEDGER)
        c = wallet.client
        for hand in (1, 5):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await settle_hand(c, hand)
            assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
            assert rpc_error_reason(info.value) == "settlement_expired"
        assert (await wallet.deps.store.balances(), await admin.xlen(LEDGER)) == (balances, n)
        assert (await settle_hand(c, 6)).replayed
        assert (await wallet.deps.store.balances(), await admin.xlen(LEDGER)) == (balances, n)
    finally:
        await admin.aclose()


async def settle_hand(c: Any, h: int) -> pb.SettleHandResponse:
    """Hand ``h``'s settlement at t1 (2 to the house; seat 2 wins every third hand)."""
    won = 1 if h % 3 else 2
    reply: pb.SettleHandResponse = await c.settle(pb.SettleHandRequest(
        table_id="t1", hand_id=f"h{h}", rake=2,
        rake_policy=pb.RakePolicy(percent_bps=500, cap=2),
        ended_on_street=pb.SettleHandRequest.STREET_SEVENTH,
        seats=[pb.SettlementSeat(seat=s, player_id=p, amount_in=20,
                                 amount_won=38 if s == won else 0)
               for s, p in ((1, "alice"), (2, "bob"))]))
    return reply


async def test_a_ledger_trimmed_past_the_archive_is_not_copied_with_a_gap(
        wallet: RunningWallet, archiver: tuple[Client, Any], history_dsns: Any) -> None:
    """PostgreSQL restored to before a trim: the next copy is refused (on Redis 7, which
    counts the entries a stream was ever given), never written with the trimmed range missing."""
    client, conn = archiver
    await play_money(wallet, range(1, 6))
    await archive_ledger(client, conn, keep=KEEP)
    if server_version(find_redis_server()) < (7,):
        pytest.skip("Redis 6.2 does not count the entries a stream was given")
    with psycopg.connect(history_dsns.admin, autocommit=True) as owner:  # "a restore"
        for table in ("ledger.postings", "ledger.segments"):
            owner.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            owner.execute(f"DELETE FROM {table}")
            owner.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    await settle_hand(wallet.client, 6)
    with pytest.raises(LedgerArchiveError, match="trimmed of"):
        await copy_ledger(client, conn)
