"""The wallet's ledger leaves Redis (docs/history.md, "The wallet's ledger"): the archiver's
step for the wallet, beside its steps for the tables (:mod:`studhistory.archiver`).

The wallet appends, in one script (``services/wallet/apply.lua``), one entry per transaction
to its ledger stream (``stud:wallet:{wallet}:ledger``) and one line per posting to the
statement stream of the posting's account (``...:postings:<account>``). Both are
append-only, so both leave Redis the same way, in three steps:

1. **Copy** (:func:`copy_ledger`): the ledger's entries after the archive's watermark (the
   greatest ``ledger.segments.last_id``), each posting a row of ``ledger.postings`` with its
   statement line (the line's id, the page token of ``GetStatement``, and the balance after
   it). An account's next lines are the lines after its last archived one, in the ledger's
   order (one script wrote both), each checked to name its transaction. One PostgreSQL
   transaction writes the rows and the segment; the segment's key (its first id) and the
   postings' key make a second write of the same range (a re-run, a second archiver) roll
   back whole.
2. **Verify** (:func:`trim_ledger`): what is to leave Redis (the entries older than the
   latest ``keep`` transactions and archived) is read back from PostgreSQL and compared with
   a fresh read of Redis, every posting and every statement line, and each transaction's
   ``ledger.transactions`` row whole (a row copied without its table and hand, before
   migration 0012, is filled in from the entry first: :func:`fill_in_hands`).
3. **Trim**, only then: each account's statement up to its last verified line first, the
   ledger last (``XTRIM MINID``: removes entries below an id, never one written after the
   read). A crash between them leaves lines whose ledger entry is still in Redis: the next
   step trims them again.

The balances, the idempotency records, seats, pools and protection stay in Redis (they are
projections the wallet decides on). ``GetStatement`` reads an account's archived lines from
PostgreSQL and the rest from Redis (``services/wallet/history.py``). Each transaction also
gets one row of ``ledger.transactions`` (migration 0011), postings or none (a voided hand's
settlement has none): the entry's time and the players whose sessions it saw (and a
settlement's table and hand, migration 0012: the only record of one with no posting),
written with its postings and compared by the verify step, so the sessions hash can be
rebuilt from the archive and then Redis (``wallet.history.archived_sessions_seen``,
``WalletStore.rebuild_sessions``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, cast

import psycopg

from studhistory.pg import ledger_time
from studkit import keys
from studkit.redis_client import Client

LEDGER: Final = keys.wallet_key("ledger")
DEFAULT_HOT_TRANSACTIONS: Final = 0
"""The wallet's transactions kept in Redis once archived (``WALLET_HOT_TRANSACTIONS``); 0:
copied, never trimmed (for a wallet that cannot read the archive: no ``WALLET_HISTORY_DSN``)."""
DEFAULT_BATCH: Final = 2000
"""Transactions copied (or trimmed) in one step at most."""
LOCK: Final = "stud-archiver:wallet-ledger"

_COLUMNS: Final = ("transaction_id", "posting", "occurred_at", "kind", "scope", "account",
                   "amount", "table_id", "hand_id", "tournament_id", "line_id", "line_ms",
                   "line_seq", "balance_after")
_TX_COLUMNS: Final = ("transaction_id", "occurred_at", "kind", "postings", "at_ms", "seen",
                      "table_id", "hand_id")


class LedgerArchiveError(RuntimeError):
    """The wallet's step could not copy or verify: nothing was trimmed."""


def statement_key(account: str) -> str:
    """The statement stream of an account key (``player:alice``, ``house``, ...)."""
    return keys.wallet_key(f"postings:{account}")


def parse_id(stream_id: str) -> tuple[int, int]:
    """A stream id's two numbers."""
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq)


def _next_id(stream_id: str) -> str:
    """The least id above ``stream_id`` (``XTRIM MINID`` keeps it and everything after)."""
    ms, seq = parse_id(stream_id)
    return f"{ms}-{seq + 1}"


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _fields(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in raw.items()}


Rows = list[tuple[str, dict[str, str]]]


async def _xrange(redis: Client, key: str, start: str, end: str = "+",
                  count: int | None = None) -> Rows:
    raw = cast(list[tuple[Any, Any]], await redis.xrange(key, min=start, max=end, count=count))
    return [(_s(i), _fields(f)) for i, f in raw]


@dataclass(frozen=True, slots=True)
class PostingRow:
    """One row of ``ledger.postings``: a posting of a ledger transaction with its line of the
    account's statement."""

    transaction_id: str
    posting: int
    kind: str
    scope: str
    account: str
    amount: int
    table_id: str
    hand_id: str
    tournament_id: str
    line_id: str
    balance_after: int

    @property
    def occurred_at(self) -> datetime:
        return ledger_time(self.transaction_id)

    def values(self) -> tuple[Any, ...]:
        ms, seq = parse_id(self.line_id)
        return (self.transaction_id, self.posting, self.occurred_at, self.kind, self.scope,
                self.account, self.amount, self.table_id, self.hand_id, self.tournament_id,
                self.line_id, ms, seq, self.balance_after)


@dataclass(frozen=True, slots=True)
class TransactionRow:
    """One row of ``ledger.transactions`` (migration 0011): a ledger transaction, postings
    or none, with the wallet's time it was applied at and the players whose sessions it
    saw."""

    transaction_id: str
    kind: str
    postings: int
    at_ms: int
    seen: tuple[str, ...]
    table_id: str = ""
    hand_id: str = ""
    """A settlement's table and hand (migration 0012): the only record of them once a
    settlement with no posting (a break-even or voided hand) left Redis."""

    @property
    def occurred_at(self) -> datetime:
        return ledger_time(self.transaction_id)

    def values(self) -> tuple[Any, ...]:
        return (self.transaction_id, self.occurred_at, self.kind, self.postings, self.at_ms,
                list(self.seen), self.table_id, self.hand_id)

    def blank_of(self, ledger: TransactionRow) -> bool:
        """Whether this archived row is the ledger's ``ledger`` copied without its table and
        hand (before migration 0012, or by an archiver from before it: both ''), which the
        ledger's entry names: the row to fill in (:func:`fill_in_hands`) before the entry
        may leave Redis. Never a row that names a table or a hand."""
        return (not (self.table_id or self.hand_id) and bool(ledger.table_id or ledger.hand_id)
                and self == replace(ledger, table_id="", hand_id=""))


def _postings(entry_id: str, fields: Mapping[str, str]
              ) -> list[tuple[int, str, int, dict[str, Any]]]:
    record = json.loads(fields["tx"])
    return [(i, str(account), int(amount), record)
            for i, (account, amount) in enumerate(record["postings"])]


def _transaction(entry_id: str, record: Mapping[str, Any]) -> TransactionRow:
    """The entry's ``ledger.transactions`` row: its time (the stream id's for an entry from
    before the wallet recorded its clock, as ``wallet.codec.entry`` reads it) and the players
    it saw. :class:`LedgerArchiveError` for a ``seen`` that is not a list of player ids or an
    ``at_ms`` that is not a positive integer (nothing is copied)."""
    seen = record.get("seen", [])
    at_ms = record.get("at_ms", parse_id(entry_id)[0])
    if not (isinstance(seen, list) and all(isinstance(p, str) and p for p in seen)):
        raise LedgerArchiveError(f"the ledger entry {entry_id} has seen={seen!r}, not a list "
                                 "of player ids: nothing copied")
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or at_ms <= 0:
        raise LedgerArchiveError(f"the ledger entry {entry_id} has at_ms={at_ms!r}, not a "
                                 "time in ms: nothing copied")
    return TransactionRow(entry_id, str(record["kind"]), len(record["postings"]), at_ms,
                          tuple(seen), str(record.get("table_id", "")),
                          str(record.get("hand_id", "")))


def _line_matches(row: PostingRow, line: Mapping[str, str]) -> bool:
    return (line.get("tx_id") == row.transaction_id and line.get("kind") == row.kind
            and line.get("amount") == str(row.amount)
            and line.get("balance_after") == str(row.balance_after)
            and line.get("table_id", "") == row.table_id
            and line.get("hand_id", "") == row.hand_id
            and line.get("tournament_id", "") == row.tournament_id)


def _tournament(record: Mapping[str, Any]) -> str:
    pool = record.get("pool")
    return str(pool["tournament"]) if pool else ""


# --- PostgreSQL --------------------------------------------------------------------------------

async def watermark(conn: psycopg.AsyncConnection[Any]) -> str | None:
    """The id of the last ledger entry archived, or None."""
    cur = await conn.execute("SELECT last_id FROM ledger.segments "
                             "ORDER BY last_ms DESC, last_seq DESC LIMIT 1")
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def _last_line(conn: psycopg.AsyncConnection[Any], account: str) -> str | None:
    cur = await conn.execute("SELECT line_id FROM ledger.postings WHERE account = %s "
                             "ORDER BY line_ms DESC, line_seq DESC LIMIT 1", (account,))
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def _write(conn: psycopg.AsyncConnection[Any], entries: Rows,
                 rows: Sequence[PostingRow], txs: Sequence[TransactionRow]) -> bool:
    """The rows and their segment in one transaction; False when the segment (or one of its
    postings or transactions) was there already (the transaction rolled back)."""
    months = sorted({(t.occurred_at.year, t.occurred_at.month) for t in txs})
    for year, month in months:  # each in its own short transaction (autocommit)
        await conn.execute("SELECT history.ensure_month(%s)",
                           (datetime(year, month, 1, tzinfo=UTC),))
    first, last = entries[0][0], entries[-1][0]
    ms, seq = parse_id(last)
    try:
        async with conn.transaction():
            cur = await conn.execute(
                "INSERT INTO ledger.segments (first_id, last_id, last_ms, last_seq, "
                "transactions, postings, sessions) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (first, last, ms, seq, len(entries), len(rows), True))
            if await cur.fetchone() is None:
                raise _AlreadyThere
            async with conn.cursor() as c, c.copy(
                    f"COPY ledger.postings ({', '.join(_COLUMNS)}) FROM STDIN") as copy:
                for r in rows:
                    await copy.write_row(r.values())
            async with conn.cursor() as c, c.copy(
                    f"COPY ledger.transactions ({', '.join(_TX_COLUMNS)}) FROM STDIN") as copy:
                for t in txs:
                    await copy.write_row(t.values())
    except (_AlreadyThere, psycopg.errors.UniqueViolation):
        return False
    return True


class _AlreadyThere(Exception):
    """The segment's row exists: roll back whole."""


async def archived_rows(conn: psycopg.AsyncConnection[Any], transaction_ids: Sequence[str]
                        ) -> dict[tuple[str, int], PostingRow]:
    """(transaction, posting) -> its archived row, for ``transaction_ids``."""
    if not transaction_ids:
        return {}
    lo, hi = ledger_time(transaction_ids[0]), ledger_time(transaction_ids[-1])
    cur = await conn.execute(
        "SELECT transaction_id, posting, kind, scope, account, amount, table_id, hand_id, "
        "tournament_id, line_id, balance_after FROM ledger.postings WHERE "
        "occurred_at BETWEEN %s AND %s AND transaction_id = ANY(%s)",
        (lo, hi, list(transaction_ids)))
    out = {}
    for t, p, kind, scope, account, amount, table, hand, tour, line, after in \
            await cur.fetchall():
        out[(str(t), int(p))] = PostingRow(str(t), int(p), kind, scope, account, int(amount),
                                           table, hand, tour, line, int(after))
    return out


async def archived_transactions(conn: psycopg.AsyncConnection[Any],
                                transaction_ids: Sequence[str]) -> dict[str, TransactionRow]:
    """Transaction -> its ``ledger.transactions`` row, for ``transaction_ids`` (oldest
    first)."""
    if not transaction_ids:
        return {}
    lo, hi = ledger_time(transaction_ids[0]), ledger_time(transaction_ids[-1])
    cur = await conn.execute(
        "SELECT transaction_id, kind, postings, at_ms, seen, table_id, hand_id FROM "
        "ledger.transactions WHERE occurred_at BETWEEN %s AND %s AND transaction_id = ANY(%s)",
        (lo, hi, list(transaction_ids)))
    out: dict[str, TransactionRow] = {}
    for t, kind, postings, at, seen, table, hand in await cur.fetchall():
        if str(t) in out:
            raise LedgerArchiveError(f"ledger.transactions holds {t} twice: nothing trimmed")
        out[str(t)] = TransactionRow(str(t), str(kind), int(postings), int(at),
                                     tuple(str(p) for p in seen), str(table), str(hand))
    return out


async def fill_in_hands(conn: psycopg.AsyncConnection[Any],
                        rows: Sequence[TransactionRow]) -> None:
    """Set the table and hand of each row of ``rows`` (the ledger's) on its archived
    ``ledger.transactions`` row whose table and hand are both '' (migration 0013: the one
    change that table allows, the archiver's grant the two columns only). A row that names
    either is never changed; the caller reads the rows back and compares them."""
    for r in rows:
        await conn.execute(
            "UPDATE ledger.transactions SET table_id = %s, hand_id = %s WHERE "
            "transaction_id = %s AND occurred_at = %s AND table_id = '' AND hand_id = ''",
            (r.table_id, r.hand_id, r.transaction_id, r.occurred_at))


async def write_missing_rows(conn: psycopg.AsyncConnection[Any],
                             rows: Sequence[TransactionRow]) -> None:
    """The ``ledger.transactions`` rows of ``rows`` (the ledger's), in a segment copied
    before migration 0011 (which wrote none): a settlement with no posting names its hand
    nowhere else once its entry left Redis. One a transaction: a row there already (another
    archiver's) rolls the write back; the caller reads the rows back and compares them."""
    for year, month in sorted({(t.occurred_at.year, t.occurred_at.month) for t in rows}):
        await conn.execute("SELECT history.ensure_month(%s)",
                           (datetime(year, month, 1, tzinfo=UTC),))
    try:
        async with conn.transaction(), conn.cursor() as c, c.copy(
                f"COPY ledger.transactions ({', '.join(_TX_COLUMNS)}) FROM STDIN") as copy:
            for t in rows:
                await copy.write_row(t.values())
    except psycopg.errors.UniqueViolation:
        pass


async def _legacy_segments(conn: psycopg.AsyncConnection[Any], first: str
                           ) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (first, last) ids of the segments ending at or after ``first`` copied before
    migration 0011 (no ``ledger.transactions`` rows)."""
    cur = await conn.execute(
        "SELECT first_id, last_id FROM ledger.segments WHERE NOT sessions "
        "AND (last_ms, last_seq) >= (%s, %s)", parse_id(first))
    return [(parse_id(str(f)), parse_id(str(la))) for f, la in await cur.fetchall()]



async def archived_lines(conn: psycopg.AsyncConnection[Any], account: str, first: str,
                         last: str) -> dict[str, PostingRow]:
    """Line id -> the archived row, for an account's lines ``first .. last``."""
    cur = await conn.execute(
        "SELECT transaction_id, posting, kind, scope, account, amount, table_id, hand_id, "
        "tournament_id, line_id, balance_after FROM ledger.postings WHERE account = %s "
        "AND (line_ms, line_seq) >= (%s, %s) AND (line_ms, line_seq) <= (%s, %s)",
        (account, *parse_id(first), *parse_id(last)))
    return {str(line): PostingRow(str(t), int(p), kind, scope, acc, int(amount), table, hand,
                                  tour, str(line), int(after))
            for t, p, kind, scope, acc, amount, table, hand, tour, line, after
            in await cur.fetchall()}


# --- the step ----------------------------------------------------------------------------------

@dataclass
class LedgerOutcome:
    """What one step did for the wallet's ledger."""

    copied: int = 0
    """Transactions this step wrote to PostgreSQL (0: none new, or another wrote them)."""
    postings: int = 0
    trimmed: int = 0
    """Ledger entries trimmed from Redis."""
    trimmed_lines: int = 0
    """Statement lines trimmed from Redis."""
    trimmed_through: str | None = None
    skipped: bool = False
    """Another archiver held the wallet's lock."""


async def _check_not_trimmed_past(redis: Client, conn: psycopg.AsyncConnection[Any],
                                  mark: str | None) -> None:
    """Refuse to copy when Redis trimmed more entries than PostgreSQL holds (PostgreSQL
    restored to an earlier point): a copy would leave a gap. Redis 7 counts the entries ever
    added to a stream (``XINFO STREAM``'s ``entries-added``); 6.2 does not, and there this
    check cannot be made."""
    info = cast(dict[Any, Any], await redis.xinfo_stream(LEDGER))
    added = info.get("entries-added", info.get(b"entries-added"))
    if added is None:
        return
    trimmed = int(added) - int(info.get("length", info.get(b"length", 0)))
    cur = await conn.execute("SELECT coalesce(sum(transactions), 0) FROM ledger.segments")
    row = await cur.fetchone()
    archived = int(row[0]) if row is not None else 0
    if trimmed > archived:
        raise LedgerArchiveError(f"the ledger was trimmed of {trimmed} entries but "
                                 f"PostgreSQL's archive holds {archived} (through "
                                 f"{mark or 'none'}): restore the missing range first "
                                 "(docs/history.md, Restore)")


async def copy_ledger(redis: Client, conn: psycopg.AsyncConnection[Any], *,
                      batch: int = DEFAULT_BATCH) -> tuple[int, int]:
    """Copy the ledger's entries after the watermark (at most ``batch``) with their statement
    lines; (transactions, postings) written (0, 0 when none, or when another wrote them)."""
    mark = await watermark(conn)
    entries = await _xrange(redis, LEDGER, f"({mark}" if mark else "-", count=batch)
    if not entries:
        return 0, 0
    await _check_not_trimmed_past(redis, conn, mark)
    plan = [(entry_id, fields, _postings(entry_id, fields)) for entry_id, fields in entries]
    wanted = Counter(account for _, _, ps in plan for _, account, _, _ in ps)
    lines: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for account, n in wanted.items():
        last = await _last_line(conn, account)
        got = await _xrange(redis, statement_key(account), f"({last}" if last else "-",
                            count=n)
        if len(got) < n:
            raise LedgerArchiveError(f"the statement of {account} holds {len(got)} lines "
                                     f"after {last or 'its start'}, the ledger {n} postings")
        got.reverse()
        lines[account] = got
    rows = []
    for entry_id, fields, postings in plan:
        for i, account, amount, record in postings:
            line_id, line = lines[account].pop()
            row = PostingRow(entry_id, i, str(record["kind"]), fields.get("scope", ""),
                             account, amount, str(record.get("table_id", "")),
                             str(record.get("hand_id", "")), _tournament(record), line_id,
                             int(line.get("balance_after", "0")))
            if not _line_matches(row, line):
                raise LedgerArchiveError(f"{account}'s statement line {line_id} is not "
                                         f"posting {i} of {entry_id}: nothing copied")
            rows.append(row)
    txs = [_transaction(entry_id, json.loads(fields["tx"])) for entry_id, fields in entries]
    if not await _write(conn, entries, rows, txs):
        return 0, 0
    return len(entries), len(rows)


async def trim_ledger(redis: Client, conn: psycopg.AsyncConnection[Any], *,
                      keep: int = DEFAULT_HOT_TRANSACTIONS,
                      batch: int = DEFAULT_BATCH) -> LedgerOutcome:
    """Trim what is archived and older than the latest ``keep`` transactions (at most
    ``batch`` entries), verified first. :class:`LedgerArchiveError` when a copy differs."""
    outcome = LedgerOutcome()
    newest = cast(list[tuple[Any, Any]], await redis.xrevrange(LEDGER, "+", "-", count=keep))
    mark = await watermark(conn)
    if len(newest) < keep or mark is None:
        return outcome
    hot = parse_id(_s(newest[-1][0]))  # the oldest entry of the hot window stays
    bound = parse_id(mark)
    head = [(i, f) for i, f in await _xrange(redis, LEDGER, "-", count=batch)
            if parse_id(i) < hot and parse_id(i) <= bound]
    if not head:
        return outcome
    archived = await archived_rows(conn, [i for i, _ in head])
    ledger = {i: _transaction(i, json.loads(f["tx"])) for i, f in head}
    transactions = await archived_transactions(conn, [i for i, _ in head])
    blank = [ledger[i] for i, tx in transactions.items() if tx.blank_of(ledger[i])]
    if blank:  # copied without their table and hand: filled in, then read back
        await fill_in_hands(conn, blank)
        transactions = await archived_transactions(conn, [i for i, _ in head])
    legacy = await _legacy_segments(conn, head[0][0])

    def before_0011(entry_id: str) -> bool:
        return any(lo <= parse_id(entry_id) <= hi for lo, hi in legacy)

    def needs_row(entry_id: str) -> bool:
        """Every transaction has its row, unless its segment was copied before migration
        0011 (the rebuild of the sessions refuses such a range) and it has postings (which
        name its table and hand) or names no hand."""
        tx = ledger[entry_id]
        return not before_0011(entry_id) or (tx.postings == 0 and bool(tx.table_id
                                                                        or tx.hand_id))

    missing = [ledger[i] for i, _ in head
               if i not in transactions and before_0011(i) and needs_row(i)]
    if missing:  # a break-even settlement copied before 0011: its row written first
        await write_missing_rows(conn, missing)
        transactions = await archived_transactions(conn, [i for i, _ in head])
    last_line: dict[str, str] = {}
    for entry_id, fields in head:
        postings = _postings(entry_id, fields)
        # Each row equal to Redis's (its table and hand too: a break-even settlement's only
        # record of its hand once it left Redis).
        tx = transactions.get(entry_id)
        if (needs_row(entry_id) or tx is not None) and (tx is None or tx != ledger[entry_id]):
            raise LedgerArchiveError(f"transaction {entry_id} in PostgreSQL differs from "
                                     "the ledger (ledger.transactions): nothing trimmed")
        for i, account, amount, record in postings:
            row = archived.get((entry_id, i))
            if (row is None or row.account != account or row.amount != amount
                    or row.kind != record["kind"] or row.scope != fields.get("scope", "")
                    or row.table_id != str(record.get("table_id", ""))
                    or row.hand_id != str(record.get("hand_id", ""))
                    or row.tournament_id != _tournament(record)):
                raise LedgerArchiveError(f"posting {i} of {entry_id} in PostgreSQL differs "
                                         "from the ledger: nothing trimmed")
            if account not in last_line or parse_id(row.line_id) > parse_id(last_line[account]):
                last_line[account] = row.line_id
    if len(archived) != sum(len(_postings(i, f)) for i, f in head):
        raise LedgerArchiveError("PostgreSQL does not hold the ledger's postings exactly once")
    # Statements first (a crash before the ledger's trim: the next step trims them again).
    for account, upto in sorted(last_line.items()):
        lines = await _xrange(redis, statement_key(account), "-", upto)
        if not lines:
            continue
        there = await archived_lines(conn, account, lines[0][0], upto)
        for line_id, line in lines:
            row = there.get(line_id)
            if row is None or not _line_matches(row, line):
                raise LedgerArchiveError(f"{account}'s statement line {line_id} in "
                                         "PostgreSQL differs from Redis: nothing trimmed")
        outcome.trimmed_lines += int(await redis.xtrim(statement_key(account),
                                                       minid=_next_id(upto), approximate=False))
    outcome.trimmed_through = head[-1][0]
    outcome.trimmed = int(await redis.xtrim(LEDGER, minid=_next_id(head[-1][0]),
                                             approximate=False))
    return outcome


async def archive_ledger(redis: Client, conn: psycopg.AsyncConnection[Any], *,
                         keep: int = DEFAULT_HOT_TRANSACTIONS,
                         batch: int = DEFAULT_BATCH) -> LedgerOutcome:
    """One step for the wallet's ledger: copy, then verify and trim, under the wallet's
    advisory lock (another archiver's step: skipped). ``conn`` is in autocommit. ``keep``
    0: copy only."""
    cur = await conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (LOCK,))
    row = await cur.fetchone()
    if not (row and row[0]):
        return LedgerOutcome(skipped=True)
    try:
        copied, postings = await copy_ledger(redis, conn, batch=batch)
        outcome = (await trim_ledger(redis, conn, keep=keep, batch=batch) if keep > 0
                   else LedgerOutcome())
        outcome.copied, outcome.postings = copied, postings
        return outcome
    finally:
        if not conn.closed:
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (LOCK,))

