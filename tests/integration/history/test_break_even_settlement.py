"""A hand that ends break-even (every seat wins back what it put in, no rake: a hi/lo pot
split between the two who put in alike, or a voided hand) is settled by the wallet with no
posting. Once that settlement left Redis, ``stud replay verify`` found it in neither store and
failed the hand, "the wallet has no settlement of hN": the archive kept the transaction in
``ledger.transactions`` without its table and hand, and the replay reads the archived
settlements by table. ``make archive-chaos``'s short run failed so once in about 15 runs
(seed 113: hand 1 of archive-0, its events and deck from PostgreSQL)."""

from __future__ import annotations

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
)
from studkit.redis_client import Client, connect
from studtest.wallet import RunningWallet
from studtools.replay_source import RedisSource

from .test_ledger_archive import archiver, play_money, settle_hand, wallet  # noqa: F401

pytestmark = pytest.mark.integration


async def settle_break_even(c: Any, h: int) -> None:
    """Hand ``h`` at t1: both seats put in 20 and win back 20 (a split pot, no rake)."""
    await c.settle(pb.SettleHandRequest(
        table_id="t1", hand_id=f"h{h}", rake=0,
        rake_policy=pb.RakePolicy(percent_bps=500, cap=2),
        ended_on_street=pb.SettleHandRequest.STREET_THIRD,
        seats=[pb.SettlementSeat(seat=s, player_id=p, amount_in=20, amount_won=20)
               for s, p in ((1, "alice"), (2, "bob"))]))


async def hands_with_h3_break_even(running: RunningWallet) -> None:
    """Buy-ins, then hands 3 to 7 settled, h3 break-even (no posting)."""
    await play_money(running, range(1, 3))
    await settle_break_even(running.client, 3)
    for h in range(4, 8):
        await settle_hand(running.client, h)


async def test_a_break_even_settlement_is_found_after_it_left_redis(
        wallet: RunningWallet, archiver: tuple[Client, Any],  # noqa: F811
        history_dsns: Any, redis_url: str) -> None:
    client, conn = archiver
    await hands_with_h3_break_even(wallet)
    source = RedisSource(connect(redis_url), history_dsn=history_dsns.auditor)
    try:
        hot = await source.settlements(["t1"])
        assert hot is not None and [t.postings for t in hot[("t1", "h3")]] == [()]
        outcome = await archive_ledger(client, conn, keep=2)
        assert outcome.trimmed > 0
        admin = connect(redis_url, decode_responses=True)
        try:  # h3's settlement is in PostgreSQL only now
            assert not any('"h3"' in f["tx"] for _, f in await admin.xrange(LEDGER))
        finally:
            await admin.aclose()
        cold = await source.settlements(["t1"])
        assert cold is not None
        assert sorted(h for t, h in cold if t == "t1") == sorted(f"h{h}" for h in range(1, 8))
        assert [(t.entry_id, t.postings) for t in cold[("t1", "h3")]] == \
            [(t.entry_id, ()) for t in hot[("t1", "h3")]]
    finally:
        await source.aclose()
    with psycopg.connect(history_dsns.auditor) as auditor:  # the replay's role reads it
        rows = auditor.execute("SELECT table_id, hand_id, postings FROM ledger.transactions "
                               "WHERE kind = 'settlement' AND hand_id = 'h3'").fetchall()
    assert rows == [("t1", "h3", 0)]


async def blank_behind_its_back(history_dsns: Any, change: str, entry: str | None) -> None:
    """``change`` made to ledger.transactions (one entry's row, or every row) by its owner,
    with the append-only trigger off."""
    where = "" if entry is None else " WHERE transaction_id = %s"
    with psycopg.connect(history_dsns.admin, autocommit=True) as owner:
        owner.execute("ALTER TABLE ledger.transactions DISABLE TRIGGER USER")
        owner.execute(f"UPDATE ledger.transactions {change}{where}",
                      () if entry is None else (entry,))
        owner.execute("ALTER TABLE ledger.transactions ENABLE TRIGGER USER")


def archived_hand(history_dsns: Any, entry: str) -> tuple[str, str]:
    with psycopg.connect(history_dsns.auditor) as auditor:
        row = auditor.execute("SELECT table_id, hand_id FROM ledger.transactions "
                              "WHERE transaction_id = %s", (entry,)).fetchone()
    assert row is not None
    return str(row[0]), str(row[1])


@pytest.mark.parametrize("change", [
    "SET hand_id = 'h9'",                 # another hand
    "SET table_id = 't2'",                # another table
    "SET hand_id = ''",                   # its table, no hand
    "SET table_id = '', hand_id = 'h3'"])  # its hand, no table
async def test_a_settlements_hand_changed_in_postgres_is_never_trimmed(
        change: str, wallet: RunningWallet,  # noqa: F811
        archiver: tuple[Client, Any], history_dsns: Any, redis_url: str) -> None:  # noqa: F811
    """The verify step compares the table and hand of each ledger.transactions row with the
    ledger's entry: a row that names another (or half of its own) is refused, nothing is
    trimmed, and the row is left as it is (only a row with neither is filled in)."""
    client, conn = archiver
    await play_money(wallet, range(1, 3))
    await settle_break_even(wallet.client, 3)
    await play_money(wallet, range(4, 8))
    await copy_ledger(client, conn)
    admin = connect(redis_url, decode_responses=True)
    try:
        (entry,) = [i for i, f in await admin.xrange(LEDGER) if '"h3"' in f["tx"]]
        n = await admin.xlen(LEDGER)
        await blank_behind_its_back(history_dsns, change, entry)
        changed = archived_hand(history_dsns, entry)
        for step in (trim_ledger(client, conn, keep=2), archive_ledger(client, conn, keep=2)):
            with pytest.raises(LedgerArchiveError, match=f"transaction {entry}"):
                await step
            assert await admin.xlen(LEDGER) == n
            assert archived_hand(history_dsns, entry) == changed
    finally:
        await admin.aclose()


@pytest.mark.parametrize("step", ["trim_ledger", "archive_ledger"])
async def test_a_row_copied_before_0012_is_filled_in_before_its_entry_leaves_redis(
        step: str, wallet: RunningWallet, archiver: tuple[Client, Any],  # noqa: F811
        history_dsns: Any, redis_url: str) -> None:
    """A break-even settlement copied before migration 0012 (its row's table and hand both
    '', as an archiver from before 0012 still writes them): its entry never leaves Redis with
    that row (it named no hand, and the replay failed h3: 'the wallet has no settlement of
    h3'); the step fills the row in from the entry, reads it back, and only then trims."""
    client, conn = archiver
    await hands_with_h3_break_even(wallet)
    await copy_ledger(client, conn)
    await blank_behind_its_back(history_dsns, "SET table_id = '', hand_id = ''", None)
    admin = connect(redis_url, decode_responses=True)
    source = RedisSource(connect(redis_url), history_dsn=history_dsns.auditor)
    try:
        (entry,) = [i for i, f in await admin.xrange(LEDGER) if '"h3"' in f["tx"]]
        n = await admin.xlen(LEDGER)
        outcome = await (trim_ledger(client, conn, keep=2) if step == "trim_ledger"
                         else archive_ledger(client, conn, keep=2))
        assert outcome.trimmed == n - 2
        assert not any('"h3"' in f["tx"] for _, f in await admin.xrange(LEDGER))
        assert archived_hand(history_dsns, entry) == ("t1", "h3")
        cold = await source.settlements(["t1"])
        assert cold is not None
        assert sorted(h for t, h in cold if t == "t1") == sorted(f"h{h}" for h in range(1, 8))
        assert [t.postings for t in cold[("t1", "h3")]] == [()]
        hot = [i for i, _ in await admin.xrange(LEDGER)]
    finally:
        await source.aclose()
        await admin.aclose()
    with psycopg.connect(history_dsns.auditor) as auditor:  # each trimmed one's filled in
        blank = auditor.execute("SELECT transaction_id FROM ledger.transactions WHERE "
                                "kind = 'settlement' AND hand_id = ''").fetchall()
    assert sorted(str(t) for t, in blank) == sorted(hot) and len(hot) == 2


async def test_the_archiver_may_fill_in_a_blank_row_and_nothing_else(
        wallet: RunningWallet, archiver: tuple[Client, Any],  # noqa: F811
        history_dsns: Any) -> None:
    """Migration 0013: ledger.transactions stays append-only for the archiver but for one
    change, a row's table and hand set where both were ''."""
    client, conn = archiver
    await play_money(wallet, range(1, 2))
    await settle_break_even(wallet.client, 2)
    await copy_ledger(client, conn)
    with psycopg.connect(history_dsns.auditor) as auditor:
        (entry,) = auditor.execute("SELECT transaction_id FROM ledger.transactions "
                                   "WHERE hand_id = 'h2'").fetchone() or ("",)
    update = "UPDATE ledger.transactions SET {} WHERE transaction_id = %s"
    with psycopg.connect(history_dsns.archiver, autocommit=True) as arch:
        for change in ("table_id = 't9'", "hand_id = ''"):  # a row that names its hand
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                arch.execute(update.format(change), (entry,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no grant
            arch.execute(update.format("at_ms = 1"), (entry,))
    await blank_behind_its_back(history_dsns, "SET table_id = '', hand_id = ''", entry)
    with psycopg.connect(history_dsns.archiver, autocommit=True) as arch:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            arch.execute(update.format("table_id = '', hand_id = ''"), (entry,))
        arch.execute(update.format("table_id = 't1', hand_id = 'h2'"), (entry,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            arch.execute(update.format("hand_id = 'h3'"), (entry,))
    assert archived_hand(history_dsns, entry) == ("t1", "h2")


async def test_a_break_even_settlement_copied_before_0011_gets_its_row_before_it_leaves(
        wallet: RunningWallet, archiver: tuple[Client, Any],  # noqa: F811
        history_dsns: Any, redis_url: str) -> None:
    """A segment copied before migration 0011 has no ledger.transactions rows: a break-even
    settlement in it would leave Redis with its hand named nowhere. The step writes that one
    row from the entry first (its postings name the others' hands), then trims."""
    client, conn = archiver
    await hands_with_h3_break_even(wallet)
    await copy_ledger(client, conn)
    with psycopg.connect(history_dsns.admin, autocommit=True) as owner:  # as 0010 left it
        owner.execute("ALTER TABLE ledger.transactions DISABLE TRIGGER USER")
        owner.execute("DELETE FROM ledger.transactions")
        owner.execute("ALTER TABLE ledger.transactions ENABLE TRIGGER USER")
        owner.execute("ALTER TABLE ledger.segments DISABLE TRIGGER USER")
        owner.execute("UPDATE ledger.segments SET sessions = false")
        owner.execute("ALTER TABLE ledger.segments ENABLE TRIGGER USER")
    admin = connect(redis_url, decode_responses=True)
    source = RedisSource(connect(redis_url), history_dsn=history_dsns.auditor)
    try:
        (entry,) = [i for i, f in await admin.xrange(LEDGER) if '"h3"' in f["tx"]]
        n = await admin.xlen(LEDGER)
        assert (await archive_ledger(client, conn, keep=2)).trimmed == n - 2
        assert archived_hand(history_dsns, entry) == ("t1", "h3")
        cold = await source.settlements(["t1"])
        assert cold is not None
        assert sorted(h for t, h in cold if t == "t1") == sorted(f"h{h}" for h in range(1, 8))
    finally:
        await source.aclose()
        await admin.aclose()
    with psycopg.connect(history_dsns.auditor) as auditor:  # that row only
        assert auditor.execute("SELECT transaction_id FROM ledger.transactions"
                               ).fetchall() == [(entry,)]
