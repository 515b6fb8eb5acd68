"""Statements whose older lines left Redis for PostgreSQL (docs/history.md, "The wallet's
ledger"; the archiver's step: ``studhistory.ledger_archive``).

The archiver copies every posting with its statement line (its stream id, the page token,
and the balance after it) into ``ledger.postings``, verifies, and only then trims the head of
each account's statement stream. So an account's statement is the archived lines *before*
the oldest line still in Redis, then Redis's lines: :class:`ArchivedStatementStore` reads the
stream's oldest id and the page's hot lines in one ``MULTI`` first, then PostgreSQL (a trim
that happened before that read committed its rows before it), and answers the same pages,
tokens and lines as before anything moved. A page whose lines are all in Redis never asks
PostgreSQL. PostgreSQL (``WALLET_HISTORY_DSN``: the read-only ``stud_support`` role) down
when a page needs it: ``UNAVAILABLE`` ``archive_unavailable`` (retry).

The players' sessions are rebuilt from the archive too (:func:`archived_sessions_seen`:
``ledger.transactions`` keeps each archived transaction's time and the players it saw,
migration 0011), then from Redis (``WalletStore.rebuild_sessions``, ``python -m
wallet.rebuild_sessions --history-dsn ...``).
"""

from __future__ import annotations

import asyncio
import bisect
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg

from studkit.errors import FailedPrecondition, Unavailable
from studkit.redis_client import Client, connect
from wallet.keys import postings_key
from wallet.model import AccountId, AccountKind, StatementLine, StatementPage, TxKind
from wallet.store import _STREAM_ID, StreamRows, UnknownAccount, WalletStore


class ArchiveUnavailable(Unavailable):
    """PostgreSQL could not answer for a statement's archived lines (retry)."""

    default_reason = "archive_unavailable"


def _id(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ArchivedLines:
    """An account's archived statement lines, over one connection as the support role, made
    when first needed and again after an error."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def lines(self, account: str, after: str, before: str | None,
                    limit: int) -> list[StatementLine]:
        """Up to ``limit`` lines of ``account`` after the id ``after`` ("" for the start)
        and before the id ``before`` (None: no bound), in the stream's order."""
        lo = _id(after) if after else (-1, -1)
        hi = _id(before) if before else (2**63 - 1, 2**63 - 1)
        async with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await psycopg.AsyncConnection.connect(
                        self._dsn, autocommit=True, connect_timeout=5)
                cur = await self._conn.execute(
                    "SELECT line_id, transaction_id, kind, amount, balance_after, line_ms, "
                    "table_id, hand_id, tournament_id FROM ledger.postings "
                    "WHERE account = %s AND (line_ms, line_seq) > (%s, %s) "
                    "AND (line_ms, line_seq) < (%s, %s) ORDER BY line_ms, line_seq LIMIT %s",
                    (account, *lo, *hi, limit))
                rows = await cur.fetchall()
            except psycopg.Error as exc:
                await self.aclose()
                raise ArchiveUnavailable(f"the archive of {account}'s statement could not "
                                         f"be read: {type(exc).__name__}") from exc
        return [StatementLine(posting_id=str(line), transaction_id=str(tx), kind=TxKind(kind),
                              amount=int(amount), balance_after=int(after_),
                              recorded_at_ms=int(ms), table_id=table, hand_id=hand,
                              tournament_id=tour)
                for line, tx, kind, amount, after_, ms, table, hand, tour in rows]

    async def aclose(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()


class ArchivePredatesSessions(FailedPrecondition):
    """The range a sessions rebuild folds holds a segment the archiver copied before
    migration 0011: its transactions' time and players were not kept, so the archive cannot
    say when those sessions started."""

    default_reason = "archive_predates_sessions"


class ArchiveIncomplete(FailedPrecondition):
    """``ledger.transactions`` does not hold exactly one row for each transaction of a
    segment the rebuild folds."""

    default_reason = "archive_incomplete"


@dataclass(frozen=True, slots=True)
class SessionsSeen:
    """An archived transaction as the players' sessions read it (``wallet.protection.
    Seen``): its id, the wallet's time and the players it saw."""

    transaction_id: str
    at_ms: int
    players_seen: tuple[str, ...]


async def archived_sessions_seen(conn: psycopg.AsyncConnection[Any], before: str | None
                                 ) -> list[SessionsSeen]:
    """Every archived transaction that saw players, older than the ledger entry ``before``
    (None: all), oldest first: what the sessions hash folds before the ledger still in
    Redis. Read from ``ledger.transactions`` (one row per transaction, postings or none).
    Refuses :class:`ArchivePredatesSessions` when a segment of that range was copied before
    migration 0011, :class:`ArchiveIncomplete` when a segment's transactions are not each
    there once."""
    bound = _id(before) if before is not None else None
    cur = await conn.execute("SELECT first_id, last_id, transactions, sessions "
                             "FROM ledger.segments")
    segments = sorted((_id(str(f)), _id(str(la)), int(n), bool(new))
                      for f, la, n, new in await cur.fetchall())
    segments = [s for s in segments if bound is None or s[0] < bound]
    old = [s for s in segments if not s[3]]
    if old:
        (f_ms, f_seq), (l_ms, l_seq) = old[0][0], old[-1][1]
        raise ArchivePredatesSessions(
            f"{len(old)} archived segments ({f_ms}-{f_seq} .. {l_ms}-{l_seq}) were copied "
            "before migration 0011 kept each transaction's players: the sessions they saw "
            "cannot be rebuilt (the live hash stays as it is)")
    if not segments:
        return []
    upto = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=segments[-1][1][0])
    cur = await conn.execute(  # occurred_at is the id's time: only the months up to it
        "SELECT transaction_id, at_ms, seen FROM ledger.transactions WHERE occurred_at <= %s",
        (upto,))
    rows = sorted((_id(str(t)), str(t), int(at), tuple(seen))
                  for t, at, seen in await cur.fetchall())
    keys = [r[0] for r in rows]
    for first, last, count, _ in segments:
        held = bisect.bisect_right(keys, last) - bisect.bisect_left(keys, first)
        if held != count or len(set(keys)) != len(keys):
            raise ArchiveIncomplete(
                f"the archived segment {first[0]}-{first[1]} .. {last[0]}-{last[1]} holds "
                f"{count} transactions and ledger.transactions {held} of them")
    return [SessionsSeen(t, at, seen) for key, t, at, seen in rows
            if seen and (bound is None or key < bound)]


def _line(posting_id: str, f: dict[str, str]) -> StatementLine:
    return StatementLine(
        posting_id=posting_id, transaction_id=f["tx_id"], kind=TxKind(f["kind"]),
        amount=int(f["amount"]), balance_after=int(f["balance_after"]),
        recorded_at_ms=int(posting_id.split("-", 1)[0]), table_id=f.get("table_id", ""),
        hand_id=f.get("hand_id", ""), tournament_id=f.get("tournament_id", ""))


class ArchivedStatementStore(WalletStore):
    """The wallet's store whose statements also read the archive (the module's docstring);
    everything else is :class:`WalletStore`'s."""

    def __init__(self, client: Client, archive: ArchivedLines) -> None:
        super().__init__(client)
        self.archive = archive

    @classmethod
    def with_archive(cls, url: str, dsn: str) -> ArchivedStatementStore:
        """A store on a new connection pool, its archive read with ``dsn``."""
        return cls(connect(url, decode_responses=True), ArchivedLines(dsn))

    async def close(self) -> None:
        await self.archive.aclose()
        await super().close()

    async def statement(self, account: AccountId, page_size: int, page_token: str = ""
                        ) -> StatementPage:
        if account.kind is AccountKind.PLAYER and not await self.account_exists(
            account.player_id
        ):
            raise UnknownAccount(f"no account {account.key}")
        if page_token and _STREAM_ID.fullmatch(page_token) is None:
            raise ValueError("malformed page token")
        key = postings_key(account)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.xrange(key, "-", "+", count=1)
            pipe.xrange(key, f"({page_token}" if page_token else "-", "+", count=page_size + 1)
            first, hot = cast(tuple[StreamRows, StreamRows], tuple(await pipe.execute()))
        oldest = _s(first[0][0]) if first else None
        lines: list[StatementLine] = []
        if oldest is None or not page_token or _id(page_token) < _id(oldest):
            lines = await self.archive.lines(account.key, page_token, oldest, page_size + 1)
        lines += [_line(_s(i), {_s(k): _s(v) for k, v in f.items()}) for i, f in hot]
        page = lines[:page_size]
        next_token = page[-1].posting_id if len(lines) > page_size else ""
        return StatementPage(lines=tuple(page), next_page_token=next_token)


def store_for(redis_url: str, history_dsn: str) -> WalletStore:
    """The wallet's store: reading archived statements when ``history_dsn`` is set."""
    if history_dsn:
        return ArchivedStatementStore.with_archive(redis_url, history_dsn)
    return WalletStore.from_url(redis_url)
