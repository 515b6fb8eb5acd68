"""The players' sessions hash rebuilt once the wallet's ledger left Redis (``python -m
wallet.rebuild_sessions``, ``WalletStore.rebuild_sessions`` with
``wallet.history.archived_sessions_seen``): the archived transactions' time and
players (posting 0's ``at_ms`` and ``seen``, migration 0011), then the ledger Redis still
holds, fold to the hash ``apply.lua`` wrote as the money moved. Redis's part alone does not,
and is refused once the archiver trimmed the ledger. Real wallet, Redis and PostgreSQL."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from stud.v1 import wallet_pb2 as pb
from studhistory.ledger_archive import LEDGER, archive_ledger
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

        if server_version(find_redis_server()) >= (7,):  # 6.2 cannot tell a trimmed stream
            out = io.StringIO()
            assert await _in_thread(rebuild_sessions.main, [
                "--redis-url", redis_url, "--history-dsn", ""], out) == 1
            assert out.getvalue().startswith("sessions NOT rebuilt (ledger_trimmed)")
            assert await admin.hgetall(SESSIONS) == live  # refused: nothing written

        await admin.delete(SESSIONS)
        out = io.StringIO()
        status = await _in_thread(rebuild_sessions.main, [
            "--redis-url", redis_url, "--history-dsn", history_dsns.support], out)
        assert status == 0, out.getvalue()
        assert out.getvalue().startswith("sessions rebuilt: 2 players, from "
                                         f"{len(older)} archived transactions")
        assert await admin.hgetall(SESSIONS) == live
        # A transaction after the step goes on the same sessions, rebuilt or not.
        await play_money(wallet, range(13, 15))
        after = await admin.hgetall(SESSIONS)
        await admin.delete(SESSIONS)
        assert await _in_thread(rebuild_sessions.main, [
            "--redis-url", redis_url, "--history-dsn", history_dsns.support],
            io.StringIO()) == 0
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
        out = io.StringIO()
        assert await _in_thread(rebuild_sessions.main, [
            "--redis-url", redis_url, "--history-dsn", history_dsns.support], out) == 0, \
            out.getvalue()
        assert await admin.hgetall(SESSIONS) == live
    finally:
        await admin.aclose()


async def _in_thread(main: Any, argv: list[str], out: io.StringIO) -> int:
    """The command runs its own event loop: in a thread, while the wallet serves here."""
    status: int = await asyncio.to_thread(main, argv, out)
    return status
