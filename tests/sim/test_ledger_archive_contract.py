"""The simulated ledger archive against the real one: the same ledger and statements in a
real Redis and in the simulator's (:class:`sim.redis.SimRedis`, its XTRIM and XINFO), the
same steps of ``studhistory.ledger_archive.archive_ledger`` into a real PostgreSQL and into
:class:`sim.ledger_db.SimLedgerDb` (through :class:`sim.ledger_db.SimConn`, which
answers the module's statements): the outcomes, the rows and segments archived, what stays
in each Redis and every statement page read through ``ArchivedStatementStore`` must agree,
step by step, while money keeps moving between the steps."""

from __future__ import annotations

import json
import random
from typing import Any, cast

import psycopg

from sim.ledger_db import SimConn, SimLedgerDb
from sim.redis import Data, SimRedis, as_client
from studhistory.ledger_archive import LEDGER, archive_ledger, statement_key
from studkit import keys
from studkit.redis_client import Client, connect
from wallet.history import ArchivedLines, ArchivedStatementStore
from wallet.model import AccountId

ACCOUNTS = ("player:alice", "player:bob", "seat:t1:1", "seat:t1:2", "house", "external")
KEEP, BATCH = 3, 4
_COLUMNS = ("transaction_id", "posting", "kind", "scope", "account", "amount", "table_id",
            "hand_id", "tournament_id", "line_id", "line_ms", "line_seq", "balance_after")


class Ledger:
    """Transactions as ``apply.lua`` writes them (its ledger entry and a statement line per
    posting, with the balance after it), into both stores at the same ids."""

    def __init__(self, real: Client, data: Data) -> None:
        self.real = real
        self.data = data
        self.rng = random.Random(31)
        self.balances = dict.fromkeys(ACCOUNTS, 0)
        self.n = 0

    async def move(self, count: int) -> None:
        for _ in range(count):
            self.n += 1
            accounts = self.rng.sample(ACCOUNTS, self.rng.randint(2, 4))
            amounts = [self.rng.randint(-50, 50) for _ in accounts[1:]]
            postings: list[tuple[str, int]] = [(accounts[0], -sum(amounts)),
                                               *zip(accounts[1:], amounts, strict=True)]
            if self.n % 7 == 0:
                postings = []  # a settlement that moves nothing
            stamp = f"{1_800_000_000_000 + self.n * 3}-0"
            tx = {"kind": "settlement", "table_id": "t1", "hand_id": f"h{self.n}",
                  "postings": postings}
            await self._add(LEDGER, stamp, {"tx": json.dumps(tx), "scope": f"settle:{self.n}"})
            for account, amount in postings:
                self.balances[account] += amount
                await self._add(statement_key(account), stamp, {
                    "tx_id": stamp, "kind": "settlement", "amount": str(amount),
                    "balance_after": str(self.balances[account]), "table_id": "t1",
                    "hand_id": f"h{self.n}", "tournament_id": ""})

    async def _add(self, key: str, stream_id: str, fields: dict[str, str]) -> None:
        await self.real.xadd(key, fields, id=stream_id)  # type: ignore[arg-type]
        self.data.xadd(key.encode(), stream_id.encode(),
                       {k.encode(): v.encode() for k, v in fields.items()})


async def _streams(real: Client, data: Data) -> tuple[dict[str, Any], dict[str, Any]]:
    out_real, out_sim = {}, {}
    for key in (LEDGER, *(statement_key(a) for a in ACCOUNTS)):
        got = cast(list[tuple[bytes, Any]], await real.xrange(key))
        out_real[key] = [i.decode() for i, _ in got]
        out_sim[key] = [i.decode() for i, _ in data.streams.get(key.encode(), [])]
    return out_real, out_sim


async def _archived(conn: psycopg.AsyncConnection[Any], db: SimLedgerDb
                    ) -> tuple[list[Any], list[Any]]:
    cur = await conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM ledger.postings")
    real = sorted(await cur.fetchall())
    cur = await conn.execute("SELECT first_id, last_id, transactions, postings "
                             "FROM ledger.segments")
    real_segments = sorted(await cur.fetchall())
    sim = sorted(tuple(row[c] for c in _COLUMNS) for row in db.rows.values())
    sim_segments = sorted((s["first_id"], s["last_id"], s["transactions"], s["postings"])
                          for s in db.segments)
    cur = await conn.execute("SELECT transaction_id, kind, postings, at_ms, seen, table_id, "
                             "hand_id FROM ledger.transactions")
    real_txs = sorted(await cur.fetchall())
    sim_txs = sorted((t["transaction_id"], t["kind"], t["postings"], t["at_ms"], t["seen"],
                      t.get("table_id", ""), t.get("hand_id", "")) for t in db.txs.values())
    return [real, real_segments, real_txs], [sim, sim_segments, sim_txs]


def _blank_every_hand(history_dsns: Any, db: SimLedgerDb) -> None:
    """Every archived transaction's table and hand '' in both stores, as an archiver from
    before migration 0012 copied them: the next steps fill in those they trim."""
    with psycopg.connect(history_dsns.admin, autocommit=True) as owner:
        owner.execute("ALTER TABLE ledger.transactions DISABLE TRIGGER USER")
        owner.execute("UPDATE ledger.transactions SET table_id = '', hand_id = ''")
        owner.execute("ALTER TABLE ledger.transactions ENABLE TRIGGER USER")
    for t in db.txs.values():
        t["table_id"] = t["hand_id"] = ""


async def _pages(store: ArchivedStatementStore) -> list[Any]:
    out = []
    for account in ACCOUNTS:
        for size in (1, 3, 100):
            token = ""
            while True:
                page = await store.statement(AccountId.parse(account), size, token)
                out.append(page)
                token = page.next_page_token
                if not token:
                    break
    return out


async def test_the_simulated_archive_answers_as_postgres_and_redis(
        redis_url: str, history_dsns: Any) -> None:
    real = connect(redis_url)
    reader = connect(redis_url, decode_responses=True)
    conn = await psycopg.AsyncConnection.connect(history_dsns.archiver, autocommit=True)
    real_lines = ArchivedLines(history_dsns.support)
    data, db = Data(), SimLedgerDb()
    sim_lines = ArchivedLines("simulated")
    sim_lines._conn = cast(psycopg.AsyncConnection[Any], SimConn(db))
    real_store = ArchivedStatementStore(reader, real_lines)
    sim_store = ArchivedStatementStore(as_client(SimRedis(data, decode=True)), sim_lines)
    accounts = keys.wallet_key("accounts")
    try:
        for player in ("alice", "bob"):
            await real.hset(accounts, player, "1")
            data.hashes.setdefault(accounts.encode(), {})[player.encode()] = b"1"
        ledger = Ledger(real, data)
        trimmed = 0
        for step in range(8):
            await ledger.move(5 if step < 5 else 0)
            want = await archive_ledger(real, conn, keep=KEEP, batch=BATCH)
            have = await archive_ledger(as_client(SimRedis(data)),
                                        cast(psycopg.AsyncConnection[Any], SimConn(db)),
                                        keep=KEEP, batch=BATCH)
            assert have == want, step
            trimmed += want.trimmed
            in_real, in_sim = await _streams(real, data)
            assert in_sim == in_real, step
            archived_real, archived_sim = await _archived(conn, db)
            assert archived_sim == archived_real, step
            assert await _pages(sim_store) == await _pages(real_store), step
            if step == 2:
                _blank_every_hand(history_dsns, db)
        assert trimmed == ledger.n - KEEP  # every step's copy and trim compared
        assert len(db.rows) > 40
    finally:
        await real_lines.aclose()
        await conn.close()
        await real.aclose()
        await reader.aclose()
