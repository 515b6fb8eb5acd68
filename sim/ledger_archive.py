"""The wallet's ledger archive in the simulator (issue 31; docs/history.md, "The wallet's
ledger"): the archiver's step for the wallet, :func:`studhistory.ledger_archive.archive_ledger`
(copy, verify, trim), run unchanged on the simulated Redis (its faults too) into a simulated
PostgreSQL (``sim.ledger_db``: ``ledger.segments`` and ``ledger.postings`` in memory,
answering the very statements the module and the wallet's statement read send, through
``SimConn``). The archiver dies after the copy's commit and before any of its trims, at
random; PostgreSQL fails a statement now and then.

The invariants (:meth:`LedgerArchiver.check`, every step of the run, and at each trim as it
happens): no ledger transaction or statement line leaves Redis before the archive holds it;
the archive holds the ledger's head as appended, gapless, each posting once and complete;
Redis holds the rest, each transaction in one of the two (a transaction of the hot window may
be in both, equal); the ledger across the archive and Redis sums to zero and moves to each
account its balance. :meth:`LedgerArchiver.statements` reads accounts' statements through the
wallet's own merge (``wallet.history.ArchivedStatementStore``) and compares them with every
line as appended.

Three sabotage knobs for the invariant tests: :attr:`LedgerArchiver.trim_first` (a broken
archiver trims the ledger and the statements down to its hot window before it copies),
``SimLedgerDb.drop_row`` (the archive loses one posting row of a copy) and
``SimLedgerDb.twice`` (the archive stores one copy twice)."""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any, cast

import psycopg
from redis.exceptions import RedisError

from sim.archiver_part import ArchiverPart, Crash
from sim.ledger_db import SimConn, SimLedgerDb
from sim.redis import SimRedis, as_client
from studhistory import ledger_archive
from studhistory.ledger_archive import LEDGER, LedgerArchiveError, parse_id
from studkit import keys
from wallet.history import ArchivedLines, ArchivedStatementStore
from wallet.model import AccountId

if TYPE_CHECKING:
    from sim.world import World

KEEP = 3
"""The wallet's transactions kept in Redis once archived (production:
``WALLET_HOT_TRANSACTIONS``): few, so a short run trims."""
BATCH = 25
"""Transactions copied (or trimmed) in one step at most (production: 2000)."""
CRASH = 0.2
"""Per step: the archiver dies right after the copy's commit, and, apart, at one of its
trims (the statements' or the ledger's)."""
PG_FAIL = 0.01
"""Per statement: PostgreSQL fails it (the step fails; a transaction rolls back whole)."""
PAGE = 4
"""The statement check's page size (small: the pages cross from the archive to Redis)."""
_LEDGER = LEDGER.encode()
_STATEMENT = keys.wallet_key("postings:").encode()


def _key(stream_id: str) -> tuple[int, int]:
    return parse_id(stream_id)


class _LedgerRedis(SimRedis):
    """The ledger archiver's connection: when ``crash_at`` is n, it dies as its n-th XTRIM
    of the step is sent (the statements' trims come first, the ledger's last)."""

    crash_at = 0
    trims = 0

    async def xtrim(self, name: str, maxlen: int | None = None, approximate: bool = True,
                    minid: str | None = None, limit: int | None = None) -> int:
        self.trims += 1
        if self.trims == self.crash_at:
            raise Crash(f"at trim {self.trims} of the step (before it)")
        return await super().xtrim(name, maxlen, approximate, minid, limit)


def _s(value: bytes) -> str:
    return value.decode()


class LedgerArchiver(ArchiverPart):
    """The wallet's part of the archiver process, and the ledger archive's checks."""

    def __init__(self, world: World, rng: random.Random) -> None:
        super().__init__(world)
        self.rng = rng
        self.db = SimLedgerDb()
        self.redis = _LedgerRedis(world.data, self._store_faults(rng))
        self.conn = SimConn(self.db, rng, PG_FAIL)
        reader = SimRedis(world.data, decode=True)
        lines = ArchivedLines("simulated")
        lines._conn = cast(psycopg.AsyncConnection[Any], SimConn(self.db))
        self.reader = ArchivedStatementStore(as_client(reader), lines)
        world.data.on_trim = self._trimmed
        self.trim_first = False
        """The sabotage: each step trims Redis to its hot window first, archived or not."""
        self.trimmed = 0
        self.statements_read = 0
        self.archived_lines_read = 0
        self._verified = 0
        """The ledger's first transactions found in the archive, as appended."""
        self._with_rows = 0
        """Of those, the ones with postings (the others are counted by the segments)."""
        self._archived_sums: dict[str, int] = {}
        """Each account's sum over the archive's rows of the verified transactions."""

    # --- the step ------------------------------------------------------------------------

    async def step(self) -> None:
        self.steps += 1
        self.db.crash_after_commit = self.rng.random() < CRASH
        crash_at = self.rng.randint(1, 3) if self.rng.random() < CRASH else 0
        self.redis.trims = 0
        try:
            if self.trim_first:
                await self._trim_unarchived()
            self.redis.crash_at, self.redis.trims = crash_at, 0
            outcome = await ledger_archive.archive_ledger(
                as_client(self.redis), cast(psycopg.AsyncConnection[Any], self.conn),
                keep=KEEP, batch=BATCH)
            self.trimmed += outcome.trimmed
        except Crash as exc:
            self._crashed(f"ledger archiver crash {exc}")
        except (LedgerArchiveError, RedisError, psycopg.Error) as exc:
            self._failed(f"ledger archiver step failed: {type(exc).__name__}: {exc}")
        finally:
            self.db.crash_after_commit = False
            self.redis.crash_at = 0
        accounts = sorted(self.world.data.statement_log)
        if accounts:
            await self.statements(self.rng.sample(accounts, min(2, len(accounts))))

    async def _trim_unarchived(self) -> None:
        """The broken archiver: the ledger down to its last ``KEEP`` transactions and each
        statement down to the lines of those, whatever the archive holds."""
        data = self.world.data
        ledger = data.streams.get(_LEDGER, [])
        if len(ledger) <= KEEP:
            return
        head = ledger[-KEEP][0]
        for key in sorted(data.statement_log):
            kept = next((i for i, f in data.streams.get(key, []) if f[b"tx_id"] >= head), None)
            if kept is not None:
                await self.redis.xtrim(_s(key), minid=_s(kept), approximate=False)
        await self.redis.xtrim(LEDGER, minid=_s(head), approximate=False)

    # --- the checks ----------------------------------------------------------------------

    def _held(self, tx_id: str, postings: int) -> bool:
        """The archive holds the transaction (a transaction with no postings: within its
        segments' range)."""
        if postings:
            return len(self.db.by_tx.get(tx_id, ())) == postings
        mark = self.db.watermark()
        return mark is not None and _key(tx_id) <= _key(mark)

    def _trimmed(self, key: bytes, removed: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        """At the trim, as Redis applies it: each entry leaving the ledger or a statement
        is in the archive."""
        at = f"at its trim, t={self.world.loop.time():.3f}"
        if key == _LEDGER:
            for entry_id, fields in removed:
                postings = len(json.loads(fields[b"tx"])["postings"])
                if not self._held(_s(entry_id), postings):
                    self._report(f"ledger archive: transaction {_s(entry_id)} left Redis "
                                 f"before the archive held it ({at})")
        elif key.startswith(_STATEMENT):
            account = _s(key[len(_STATEMENT):])
            for line_id, _fields in removed:
                if (account, _s(line_id)) not in self.db.lines:
                    self._report(f"ledger archive: {account}'s statement line "
                                 f"{_s(line_id)} left Redis before the archive held it "
                                 f"({at})")

    def check(self) -> list[str]:
        """The ledger across the archive and Redis, against the ledger as appended (O(what
        changed since the last check), and the transactions not yet archived)."""
        data = self.world.data
        appended = data.ledger_log
        out: list[str] = []
        while self._verified < len(appended):
            tx, fields, lines = appended[self._verified]
            tx_id = _s(tx)
            record = json.loads(fields[b"tx"])
            want = [(i, str(account), int(amount), str(record["kind"]), _s(fields[b"scope"]),
                     str(record.get("table_id", "")), str(record.get("hand_id", "")),
                     _s(lines[i][0]), lines[i][1])
                    for i, (account, amount) in enumerate(record["postings"])]
            rows = self.db.by_tx.get(tx_id, [])
            if not rows and not (not want and self._held(tx_id, 0)):
                mark = self.db.watermark()
                if mark is not None and _key(tx_id) <= _key(mark):
                    out.append(f"ledger archive: transaction {tx_id} is within the archive's "
                               f"range (through {mark}) and not in it")
                break
            have = sorted((r["posting"], r["account"], r["amount"], r["kind"], r["scope"],
                           r["table_id"], r["hand_id"], r["line_id"], r["balance_after"])
                          for r in rows)
            if have != want:
                out.append(f"ledger archive: transaction {tx_id}: the archive holds "
                           f"{len(have)} postings {have[:3]}, the ledger appended "
                           f"{len(want)} {want[:3]}")
            for r in rows:
                self._archived_sums[r["account"]] = (self._archived_sums.get(r["account"], 0)
                                                     + r["amount"])
            self._with_rows += bool(rows)
            self._verified += 1
        k = self._verified
        if len(self.db.by_tx) != self._with_rows:
            out.append(f"ledger archive: the archive holds {len(self.db.by_tx)} transactions "
                       f"with postings, the ledger's first {k} appended {self._with_rows} "
                       "(one not appended, or past a gap)")
        trimmed = data.trimmed.get(_LEDGER, 0)
        if trimmed > k:
            out.append(f"ledger archive: transactions {_s(appended[k][0])}.. "
                       f"({trimmed - k}) left Redis before the archive held them (trimmed "
                       f"{trimmed}, archived {k})")
        hot = data.streams.get(_LEDGER, [])
        if len(hot) + trimmed != len(appended) or (
                hot and hot[0][0] != appended[trimmed][0]):
            out.append(f"ledger archive: Redis's ledger holds {len(hot)} transactions, not "
                       f"the {len(appended) - trimmed} appended after the {trimmed} trimmed")
        sums = dict(self._archived_sums)
        for _id, fields in hot[max(k - trimmed, 0):]:  # in Redis only
            for account, amount in json.loads(fields[b"tx"])["postings"]:
                sums[account] = sums.get(account, 0) + int(amount)
        if sum(sums.values()) != 0:
            out.append(f"ledger archive: the ledger across the archive and Redis sums to "
                       f"{sum(sums.values())}, not 0")
        balances = {_s(a): int(v) for a, v in
                    data.hashes.get(keys.wallet_key("balances").encode(), {}).items()}
        wrong = sorted(a for a in sums.keys() | balances.keys()
                       if sums.get(a, 0) != balances.get(a, 0))
        if wrong:
            a = wrong[0]
            out.append(f"ledger archive: the ledger across the archive and Redis moved "
                       f"{sums.get(a, 0)} to {a}, its balance is {balances.get(a, 0)} "
                       f"({len(wrong)} accounts differ)")
        for line in out:
            self._report(line)
        return self.take()

    async def statements(self, accounts: list[bytes]) -> None:
        """Each account's statement, page by page through the wallet's merge of the archive
        and Redis, is its lines as appended."""
        for key in accounts:
            account = _s(key[len(_STATEMENT):])
            before = len(self.world.data.statement_log.get(key, []))
            read: list[tuple[Any, ...]] = []
            token = ""
            while True:
                page = await self.reader.statement(AccountId.parse(account), PAGE, token)
                read += [(x.posting_id, x.transaction_id, x.kind.value, x.amount,
                          x.balance_after, x.recorded_at_ms, x.table_id, x.hand_id)
                         for x in page.lines]
                token = page.next_page_token
                if not token:
                    break
            self.statements_read += 1
            first = self.world.data.streams.get(key, [])
            oldest = _key(_s(first[0][0])) if first else None
            self.archived_lines_read += sum(1 for r in read
                                            if oldest is None or _key(r[0]) < oldest)
            appended = self.world.data.statement_log.get(key, [])
            want = [(_s(i), _s(f[b"tx_id"]), _s(f[b"kind"]), int(f[b"amount"]),
                     int(f[b"balance_after"]), _key(_s(i))[0], _s(f[b"table_id"]),
                     _s(f[b"hand_id"])) for i, f in appended[:len(read)]]
            if read != want or len(read) < before:
                diff = next((n for n, (a, b) in enumerate(zip(read, want, strict=False))
                             if a != b), min(len(read), len(want)))
                self._report(f"ledger archive: {account}'s statement read from the archive "
                             f"and Redis has {len(read)} lines, {before} were appended; "
                             f"first difference at line {diff}")

    def summary(self) -> dict[str, int]:
        return {"ledger_steps": self.steps, "ledger_crashes": self.crashes,
                "ledger_failed": self.failed, "ledger_trimmed": self.trimmed,
                "statements_read": self.statements_read,
                "archived_lines_read": self.archived_lines_read}

