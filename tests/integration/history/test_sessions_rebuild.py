"""The players' sessions hash rebuilt once the wallet's ledger left Redis (``python -m
wallet.rebuild_sessions``, ``WalletStore.rebuild_sessions`` with
``wallet.history.archived_sessions_seen``): the archived transactions' time and
players (posting 0's ``at_ms`` and ``seen``, migration 0011), then the ledger Redis still
holds, fold to the hash ``apply.lua`` wrote as the money moved. Redis's part alone does not,
and is refused once the archiver trimmed the ledger. Real wallet, Redis and PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import psycopg
import pytest

from stud.v1 import wallet_pb2 as pb
from studhistory.ledger_archive import (
    LEDGER,
    LedgerArchiveError,
    archive_ledger,
    copy_ledger,
    trim_ledger,
    watermark,
)
from studkit.redis_client import Client, connect
from studtest.wallet import RunningWallet
from studtools.redis_server import find_redis_server, server_version
from wallet import rebuild_sessions
from wallet.history import archived_sessions_seen
from wallet.keys import SESSIONS
from wallet.protection import replay_sessions, session_to_text

from .test_ledger_archive import KEEP, archiver, play_money, wallet

pytestmark = pytest.mark.integration
__all__ = ["archiver", "wallet"]


async def test_the_sessions_rebuilt_after_an_archive_step_equal_the_live_ones(
        wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str,
        history_dsns: Any) -> None:
    client, conn = archiver
    await play_money(wallet, range(1, 13))
    admin = connect(redis_url, decode_responses=True)
    try:
        live = await admin.hgetall(SESSIONS)
        assert set(live) == {"alice", "bob"}
        whole = await wallet.deps.store.ledger()
        outcome = await archive_ledger(client, conn, keep=KEEP)
        assert outcome.trimmed == len(whole) - KEEP and await admin.xlen(LEDGER) == KEEP
        hot = await wallet.deps.store.ledger()
        # What Redis still holds starts the sessions later: it alone is not the projection.
        assert {p: session_to_text(s) for p, s in replay_sessions(hot).items()} != live
        older = await archived_sessions_seen(conn, hot[0].transaction_id)
        assert [r.transaction_id for r in older] == [
            e.transaction_id for e in whole[:-KEEP] if e.players_seen]
        assert [(r.at_ms, r.players_seen) for r in older] == [
            (e.at_ms, e.players_seen) for e in whole[:-KEEP] if e.players_seen]

        # Without a DSN the command refuses unless told --redis-only, on any Redis (6.2
        # cannot tell a trimmed stream: it would write Redis's part alone and exit 0).
        for argv in (["--history-dsn", ""], []):
            status, out = await _rebuild(redis_url, *argv, dsn_env="")
            assert status == 1 and out.startswith("sessions NOT rebuilt (history_dsn_required): ")
            assert "--redis-only" in out
            assert await admin.hgetall(SESSIONS) == live
        if server_version(find_redis_server()) >= (7,):  # 6.2 cannot tell a trimmed stream
            status, out = await _rebuild(redis_url, "--redis-only")
            assert status == 1 and out.startswith("sessions NOT rebuilt (ledger_trimmed)")
            # It names the command that does it (there is no `stud wallet ...` one).
            assert "python -m wallet.rebuild_sessions --history-dsn" in out
            assert "stud wallet" not in out
            assert await admin.hgetall(SESSIONS) == live  # refused: nothing written

        await admin.delete(SESSIONS)
        status, out = await _rebuild(redis_url, "--history-dsn", history_dsns.support)
        assert status == 0, out
        assert out.startswith(f"sessions rebuilt: 2 players, from {len(older)} archived "
                              "transactions")
        assert await admin.hgetall(SESSIONS) == live
        # A transaction after the step goes on the same sessions, rebuilt or not.
        await play_money(wallet, range(13, 15))
        after = await admin.hgetall(SESSIONS)
        await admin.delete(SESSIONS)
        assert (await _rebuild(redis_url, "--history-dsn", history_dsns.support))[0] == 0
        assert await admin.hgetall(SESSIONS) == after
    finally:
        await admin.aclose()


async def test_a_settlement_with_no_postings_keeps_its_players_in_the_archive(
        wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str,
        history_dsns: Any) -> None:
    """A voided hand's settlement (each seat wins back what it put in, no rake) moves no
    money: no postings, but it saw its players; the archive keeps it (one row per archived
    transaction, ledger.transactions), so the rebuilt sessions equal the live ones."""
    client, conn = archiver
    await play_money(wallet, range(1, 4))
    await wallet.client.settle(pb.SettleHandRequest(
        table_id="t1", hand_id="h4", rake=0,
        ended_on_street=pb.SettleHandRequest.STREET_UNSPECIFIED,
        seats=[pb.SettlementSeat(seat=s, player_id=p, amount_in=20, amount_won=20)
               for s, p in ((1, "alice"), (2, "bob"))]))
    void = (await wallet.deps.store.ledger())[-1]
    assert void.players_seen == ("alice", "bob")
    await play_money(wallet, range(5, 9))
    admin = connect(redis_url, decode_responses=True)
    try:
        live = await admin.hgetall(SESSIONS)
        whole = await wallet.deps.store.ledger()
        await archive_ledger(client, conn, keep=KEEP)
        hot = await wallet.deps.store.ledger()
        assert void.transaction_id not in {e.transaction_id for e in hot}
        older = await archived_sessions_seen(conn, hot[0].transaction_id)
        assert [(r.transaction_id, r.at_ms, r.players_seen) for r in older] == [
            (e.transaction_id, e.at_ms, e.players_seen) for e in whole[:-KEEP]
            if e.players_seen]
        await admin.delete(SESSIONS)
        status, out = await _rebuild(redis_url, "--history-dsn", history_dsns.support)
        assert status == 0, out
        assert await admin.hgetall(SESSIONS) == live
    finally:
        await admin.aclose()


@pytest.mark.parametrize("change", [
    "UPDATE ledger.transactions SET at_ms = at_ms + 1 WHERE transaction_id = %s",
    "UPDATE ledger.transactions SET seen = '{}' WHERE transaction_id = %s",
    "UPDATE ledger.transactions SET seen = array_append(seen, 'carol') "
    "WHERE transaction_id = %s",
    "DELETE FROM ledger.transactions WHERE transaction_id = %s"])
async def test_a_transaction_row_changed_in_postgres_is_never_trimmed(
        change: str, wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str,
        history_dsns: Any) -> None:
    """The verify step compares each transaction's row (its time and players) with Redis,
    whatever its at_ms: a row changed or lost behind the archiver's back stops the trim."""
    client, conn = archiver
    await play_money(wallet, range(1, 6))
    await copy_ledger(client, conn)
    saw = next(e for e in await wallet.deps.store.ledger() if e.players_seen)
    admin = connect(redis_url, decode_responses=True)
    try:
        n = await admin.xlen(LEDGER)
        with psycopg.connect(history_dsns.admin, autocommit=True) as owner:  # behind its back
            owner.execute("ALTER TABLE ledger.transactions DISABLE TRIGGER USER")
            owner.execute(change, (saw.transaction_id,))
            owner.execute("ALTER TABLE ledger.transactions ENABLE TRIGGER USER")
        with pytest.raises(LedgerArchiveError, match=f"transaction {saw.transaction_id}"):
            await trim_ledger(client, conn, keep=KEEP)
        assert await admin.xlen(LEDGER) == n
    finally:
        await admin.aclose()


async def test_a_range_archived_before_the_sessions_were_kept_is_refused(
        wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str,
        history_dsns: Any) -> None:
    """A segment copied before migration 0011 (ledger.segments.sessions false) kept no
    transaction's players: the rebuild refuses archive_predates_sessions, the hash as it
    was, rather than print "sessions rebuilt" over less than the live hash saw."""
    client, conn = archiver
    await play_money(wallet, range(1, 6))
    await archive_ledger(client, conn, keep=KEEP)
    await conn.execute("INSERT INTO ledger.segments (first_id, last_id, last_ms, last_seq, "
                       "transactions, postings) VALUES ('1-0', '1-1', 1, 1, 2, 4)")
    admin = connect(redis_url, decode_responses=True)
    try:
        live = await admin.hgetall(SESSIONS)
        status, out = await _rebuild(redis_url, "--history-dsn", history_dsns.support)
        assert status == 1 and out.startswith(
            "sessions NOT rebuilt (archive_predates_sessions): 1 archived segments (1-0 .. 1-1)")
        assert await admin.hgetall(SESSIONS) == live
    finally:
        await admin.aclose()


@pytest.mark.parametrize("seen", ['"alice"', '["alice", 7]', '{"alice": 1}', '"'])
async def test_a_ledger_entry_whose_seen_is_not_a_list_of_players_is_refused(
        seen: str, wallet: RunningWallet, archiver: tuple[Client, Any], redis_url: str,
        history_dsns: Any) -> None:
    """An entry whose seen is a string (never split into its letters), a list holding a
    number, an object or not JSON at all: the copy refuses it (nothing copied), and so
    does the rebuild (NOT rebuilt, exit 1, no traceback; the hash as it was)."""
    client, conn = archiver
    await play_money(wallet, range(1, 3))
    admin = connect(redis_url, decode_responses=True)
    try:
        live = await admin.hgetall(SESSIONS)
        tx = json.dumps({"kind": "settlement", "postings": [], "table_id": "t1",
                         "hand_id": "h99", "at_ms": 1})[:-1] + f', "seen": {seen}}}'
        await admin.xadd(LEDGER, {"tx": tx, "scope": "settle:t1:h99"})
        mark = await watermark(conn)
        with pytest.raises((LedgerArchiveError, ValueError)):
            await copy_ledger(client, conn)
        assert await watermark(conn) == mark  # nothing copied
        status, out = await _rebuild(redis_url, "--history-dsn", history_dsns.support)
        assert status == 1 and out.startswith("sessions NOT rebuilt (malformed_ledger): "), out
        assert await admin.hgetall(SESSIONS) == live
    finally:
        await admin.aclose()


async def _rebuild(redis_url: str, *argv: str, dsn_env: str | None = None
                   ) -> tuple[int, str]:
    """``python -m wallet.rebuild_sessions --redis-url <redis_url> <argv>``: its status and
    what it printed. It runs its own event loop: in a thread, while the wallet serves here.
    ``dsn_env``: WALLET_HISTORY_DSN as the command finds it (None: as it is)."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as env:
        if dsn_env is not None:
            env.setenv("WALLET_HISTORY_DSN", dsn_env)
        status: int = await asyncio.to_thread(rebuild_sessions.main,
                                              ["--redis-url", redis_url, *argv], out)
    return status, out.getvalue()


async def test_redis_only_rebuilds_a_ledger_never_trimmed(
        wallet: RunningWallet, redis_url: str) -> None:
    """--redis-only, said explicitly, reads the ledger in Redis alone: right while the
    archiver never trimmed it (WALLET_HOT_TRANSACTIONS 0)."""
    await play_money(wallet, range(1, 4))
    admin = connect(redis_url, decode_responses=True)
    try:
        live = await admin.hgetall(SESSIONS)
        await admin.delete(SESSIONS)
        status, out = await _rebuild(redis_url, "--redis-only", dsn_env="")
        assert status == 0, out
        assert out.startswith("sessions rebuilt: 2 players, from the ledger in Redis alone")
        assert await admin.hgetall(SESSIONS) == live
    finally:
        await admin.aclose()
