"""PostgreSQL as the archive of record: the archiver's writes (:class:`PgHistory`) and the
reads of archived events that replay and the services use (psycopg 3, asyncio).

The tables are those of ``studhistory/migrations`` (docs/history.md). A segment is written in
one transaction, its row first: the segment's primary key (table, first sequence) makes a
second write of the same range a no-op that rolls back whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from studhistory.archiver import HandRow, Segment, as_json, digest


def _segment(row: Sequence[Any], table_id: str) -> Segment:
    first, last, last_digest, state = row
    return Segment(table_id, int(first), int(last), bytes(last_digest), str(state))


_SEGMENT_COLUMNS = "first_sequence, last_sequence, last_digest, state"


class PgHistory:
    """The archive over one async connection (the archiver's role: insert and select)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    @classmethod
    async def connect(cls, dsn: str) -> PgHistory:
        """A history over a new connection (autocommit; each write its own transaction)."""
        return cls(await psycopg.AsyncConnection.connect(dsn, autocommit=True))

    async def aclose(self) -> None:
        await self.conn.close()

    async def ping(self) -> None:
        await self.conn.execute("SELECT 1")

    async def last_segment(self, table_id: str) -> Segment | None:
        cur = await self.conn.execute(
            f"SELECT {_SEGMENT_COLUMNS} FROM history.segments WHERE table_id = %s "
            "ORDER BY last_sequence DESC LIMIT 1", (table_id,))
        row = await cur.fetchone()
        return None if row is None else _segment(row, table_id)

    async def segment_ending(self, table_id: str, last: int) -> Segment | None:
        cur = await self.conn.execute(
            f"SELECT {_SEGMENT_COLUMNS} FROM history.segments WHERE table_id = %s "
            "AND last_sequence = %s", (table_id, last))
        row = await cur.fetchone()
        return None if row is None else _segment(row, table_id)

    async def write_segment(self, segment: Segment) -> bool:
        # A month's partitions first, each in its own short transaction (autocommit): made
        # inside the copy's transaction, a new partition would lock readers out until it ends.
        months = {e.occurred_at for e in segment.events} | {h.ended_at for h in segment.hands}
        for when in sorted({(m.year, m.month) for m in months}):
            await self.conn.execute("SELECT history.ensure_month(%s)",
                                    (datetime(*when, 1, tzinfo=UTC),))
        try:
            async with self.conn.transaction():
                cur = await self.conn.execute(
                    "INSERT INTO history.segments (table_id, first_sequence, last_sequence, "
                    "last_digest, hands, state) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING RETURNING 1",
                    (segment.table_id, segment.first, segment.last, segment.last_digest,
                     len(segment.hands), segment.state))
                if await cur.fetchone() is None:
                    raise _AlreadyThere
                await self._rows(segment)
        except _AlreadyThere:
            return False
        return True

    async def _rows(self, segment: Segment) -> None:
        table_id = segment.table_id
        async with self.conn.cursor() as cur:
            async with cur.copy(
                    "COPY history.events (table_id, sequence, hand, type, command_id, "
                    "occurred_at, envelope, digest) FROM STDIN") as copy:
                for e in segment.events:
                    await copy.write_row((table_id, e.sequence, e.hand, e.type, e.command_id,
                                          e.occurred_at, e.envelope, e.digest))
            if segment.hands:
                await cur.executemany(
                    "INSERT INTO history.hands (table_id, hand, started_at, ended_at, "
                    "first_sequence, last_sequence, ante, small_bet, big_bet, bring_in, pot, "
                    "rake, players, seats, winners, nets) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                    "%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [_hand(table_id, h) for h in segment.hands])
                await cur.executemany(
                    "INSERT INTO history.hand_players (player_id, ended_at, table_id, hand, "
                    "seat, net, pot) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [(player, h.ended_at, table_id, h.hand, seat, h.nets.get(seat, 0), h.pot)
                     for h in segment.hands for seat, player in sorted(h.players.items())])
            if segment.commands:
                await cur.executemany(
                    "INSERT INTO history.commands (table_id, command_id, version, outcome, "
                    "fingerprint) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [(table_id, c.command_id, c.version, c.outcome, c.fingerprint)
                     for c in segment.commands])
            if segment.dealer:
                await cur.executemany(
                    "INSERT INTO auditor.dealer_hands (table_id, hand, record, digest) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [(table_id, hand, record, digest(record))
                     for hand, record in sorted(segment.dealer.items())])

    async def event_bytes(self, table_id: str, first: int, last: int) -> dict[int, bytes]:
        return {seq: raw async for seq, raw in archived(self.conn, table_id, first, last)}

    async def records_through(self, table_id: str, upto_hand: int) -> int:
        cur = await self.conn.execute(
            "SELECT min(h.hand) FROM history.hands h WHERE h.table_id = %s AND h.hand <= %s "
            "AND NOT EXISTS (SELECT 1 FROM auditor.dealer_hands d WHERE d.table_id = "
            "h.table_id AND d.hand = h.hand)", (table_id, upto_hand))
        row = await cur.fetchone()
        missing = row[0] if row is not None else None
        return upto_hand if missing is None else int(missing) - 1


class _AlreadyThere(Exception):
    """The segment's row exists: roll the transaction back whole."""


def _hand(table_id: str, h: HandRow) -> tuple[Any, ...]:
    return (table_id, h.hand, h.started_at, h.ended_at, h.first_sequence, h.last_sequence,
            h.ante, h.small_bet, h.big_bet, h.bring_in, h.pot, h.rake,
            [h.players[s] for s in sorted(h.players)], as_json(h.players),
            as_json(h.winners), as_json(h.nets))


ARCHIVED_BATCH = 10_000
"""Rows :func:`archived_batches` hands out at a time."""


async def archived(conn: psycopg.AsyncConnection[Any], table_id: str, first: int = 1,
                   last: int | None = None) -> AsyncIterator[tuple[int, bytes]]:
    """(sequence, envelope bytes) of a table's archived events ``first .. last``, in order."""
    async for rows in archived_batches(conn, table_id, first, last):
        for row in rows:
            yield row


async def archived_batches(conn: psycopg.AsyncConnection[Any], table_id: str, first: int = 1,
                           last: int | None = None, batch: int = ARCHIVED_BATCH
                           ) -> AsyncIterator[list[tuple[int, bytes]]]:
    """:func:`archived` in lists of up to ``batch`` rows, read in binary format: the bytea
    arrives as it is stored, not as hex text for the driver to parse (about half the
    driver's CPU time of a row-by-row text read: bench_replay's PostgreSQL figure)."""
    query = sql.SQL("SELECT sequence, envelope FROM history.events WHERE table_id = %s "
                    "AND sequence >= %s AND sequence <= %s ORDER BY sequence")
    async with conn.cursor(binary=True) as cur:
        await cur.execute(query, (table_id, first, last if last is not None else 2**62))
        while rows := await cur.fetchmany(batch):
            yield [(int(sequence), bytes(raw)) for sequence, raw in rows]


async def archived_envelopes(conn: psycopg.AsyncConnection[Any], table_id: str, first: int = 1,
                             last: int | None = None) -> list[bytes]:
    """The stored bytes of a table's archived events ``first .. last``, in order, in one
    list: :func:`archived_batches` without the sequence column and the row made per event
    (``stud replay verify`` reads a table's whole head; each envelope holds its sequence)."""
    query = sql.SQL("SELECT envelope FROM history.events WHERE table_id = %s "
                    "AND sequence >= %s AND sequence <= %s ORDER BY sequence")
    async with conn.cursor(binary=True) as cur:
        await cur.execute(query, (table_id, first, last if last is not None else 2**62))
        rows = await cur.fetchall()
    return [raw if type(raw) is bytes else bytes(raw) for (raw,) in rows]


class TableLock:
    """Two archivers never work on one table at once: a PostgreSQL session-level advisory
    lock per table, held for one step (released at once after it, and by the server when the
    holder's connection dies)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def acquire(self, table_id: str) -> bool:
        cur = await self.conn.execute(
            "SELECT pg_try_advisory_lock(hashtextextended('stud-archiver:' || %s, 0))",
            (table_id,))
        row = await cur.fetchone()
        return bool(row and row[0])

    async def release(self, table_id: str) -> None:
        await self.conn.execute(
            "SELECT pg_advisory_unlock(hashtextextended('stud-archiver:' || %s, 0))",
            (table_id,))


class HandArchive:
    """One archived hand's events, for a service that answers a hand's history after it left
    Redis (the table's ``GetHandHistory``): one connection as the support role, made when
    first needed and again after an error, used one query at a time (an archived hand is a
    rare read)."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def hand(self, table_id: str, hand: int) -> list[bytes]:
        """The stored bytes of every event of ``hand`` of ``table_id``, in order ([] when it
        is not archived); ``psycopg.Error`` when PostgreSQL cannot answer."""
        async with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await psycopg.AsyncConnection.connect(
                        self._dsn, autocommit=True, connect_timeout=5)
                cur = await self._conn.execute(
                    "SELECT envelope FROM history.events WHERE table_id = %s AND hand = %s "
                    "ORDER BY sequence", (table_id, hand))
                return [bytes(row[0]) for row in await cur.fetchall()]
            except psycopg.Error:
                await self.aclose()
                raise

    async def player_hands(self, player: str, before: tuple[datetime, str, int] | None,
                           limit: int) -> list[tuple[str, int, datetime, int, int, int]]:
        """A player's hands (table, hand, ended at, seat, net, pot), newest first, those
        before the key ``before`` (ended at, table, hand) when given; at most ``limit``."""
        async with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await psycopg.AsyncConnection.connect(
                        self._dsn, autocommit=True, connect_timeout=5)
                if before is None:
                    cur = await self._conn.execute(
                        "SELECT table_id, hand, ended_at, seat, net, pot FROM "
                        "history.hand_players WHERE player_id = %s ORDER BY ended_at DESC, "
                        "table_id DESC, hand DESC LIMIT %s", (player, limit))
                else:
                    cur = await self._conn.execute(
                        "SELECT table_id, hand, ended_at, seat, net, pot FROM "
                        "history.hand_players WHERE player_id = %s AND (ended_at, table_id, "
                        "hand) < (%s, %s, %s) ORDER BY ended_at DESC, table_id DESC, "
                        "hand DESC LIMIT %s", (player, *before, limit))
                return [(str(t), int(h), e, int(s), int(n), int(p))
                        for t, h, e, s, n, p in await cur.fetchall()]
            except psycopg.Error:
                await self.aclose()
                raise

    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
