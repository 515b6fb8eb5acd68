"""Tournaments whose stream left Redis for PostgreSQL (docs/tournament.md, "Finished
tournaments"; the archiver's step: ``studhistory.tournament_archive``): the PostgreSQL side
of the :class:`tournament.archived.Archive` port, which the app reads through
(:class:`tournament.archived.ArchivedReads`).

Once a tournament is over, paid out and past the idempotency window, the archiver copies its
stream to ``tournaments.events``, verifies it, and removes its keys from Redis. The service
then reads it here, with ``TOURNAMENT_HISTORY_DSN`` (the read-only ``stud_tournament_reader``
role, migration 0009: ``tournaments.events`` and ``tournaments.archived`` only):
its events for ``GetTournament``, ``VerifyTournament`` and ``WatchTournament``, and the
archived tournaments with how they ended for ``ListTournaments``, so no client sees a
tournament disappear. PostgreSQL down when a read needs it: ``UNAVAILABLE``
``archive_unavailable`` (retry). Without a DSN (:data:`NO_ARCHIVE`), such a tournament is
``NOT_FOUND`` ``archived`` with a message that says so.

A caller's command retried once the tournament left Redis finds no record (its command
records left with its stream): when the archived events name its command id it was applied,
and it is refused ``FAILED_PRECONDITION`` ``command_expired`` (:class:`CommandExpired`), as
the table refuses a retry whose record was archived, not decided again on the archived state
(whose refusal would say it was not applied).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import psycopg

from studhistory.tournament_archive import archived_raw
from tournament.archived import NO_ARCHIVE, ArchiveUnavailable, CommandExpired

__all__ = ["NO_ARCHIVE", "STATEMENT_TIMEOUT_S", "ArchiveUnavailable", "ArchivedTournaments",
           "CommandExpired"]
_T = TypeVar("_T")


STATEMENT_TIMEOUT_S: Final = 5.0
"""How long PostgreSQL may take over one of the reader's statements (``statement_timeout``
on its connection, and as long again client-side for a server that does not answer at all):
past it the read is ``UNAVAILABLE`` ``archive_unavailable``, never a stalled call."""


class ArchivedTournaments:
    """Archived tournaments, over one connection as the tournament reader role, made when
    first needed and again after an error, one query at a time, each bounded by
    :data:`STATEMENT_TIMEOUT_S` (a finished tournament is read once per process: the app
    keeps its state; the app asks only for a tournament whose tombstone is in Redis)."""

    def __init__(self, dsn: str, *, statement_timeout_s: float = STATEMENT_TIMEOUT_S) -> None:
        self._dsn = dsn
        self._timeout_s = statement_timeout_s
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def _read(self, what: str, read: Callable[[psycopg.AsyncConnection[Any]],
                                                   Awaitable[_T]]) -> _T:
        async with self._lock:
            try:
                async with asyncio.timeout(2 * self._timeout_s + 5):
                    if self._conn is None or self._conn.closed:
                        ms = max(1, int(self._timeout_s * 1000))
                        self._conn = await psycopg.AsyncConnection.connect(
                            self._dsn, autocommit=True, connect_timeout=5,
                            options=f"-c statement_timeout={ms}")
                    return await read(self._conn)
            except (psycopg.Error, TimeoutError) as exc:
                await self.aclose()
                raise ArchiveUnavailable(f"the archive of {what} could not be read: "
                                         f"{type(exc).__name__}") from exc

    async def _query(self, what: str, sql: str, params: tuple[Any, ...]
                     ) -> list[tuple[Any, ...]]:
        async def run(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall())
        return await self._read(what, run)

    async def events(self, tournament_id: str, after: int = 0) -> list[tuple[int, bytes]]:
        """The tournament's archived events after ``after`` (sequence, stored bytes), in
        order; none when it is not archived."""
        return await self._read(f"tournament {tournament_id}",
                                lambda conn: archived_raw(conn, tournament_id, after))

    async def applied(self, tournament_id: str, command_id: str) -> bool:
        """Whether an archived event of the tournament was appended by ``command_id`` (the
        id as stored: :func:`tournament.app.stored_id`). Reads that tournament's events only
        (its primary key's range: a few hundred rows)."""
        rows = await self._query(
            f"tournament {tournament_id}", "SELECT 1 FROM tournaments.events WHERE "
            "tournament_id = %s AND command_id = %s LIMIT 1", (tournament_id, command_id))
        return bool(rows)

    async def page(self, before: str | None, outcome: str, limit: int
                   ) -> list[tuple[str, str]]:
        """Up to ``limit`` archived tournaments (their streams archived) with how each ended
        (``finished`` or ``cancelled``, the phase it has), ids in descending order, those
        before ``before`` only (None: from the last), of that ``outcome`` only (``""``: any).
        Keyset paging over an index (migration 0008): ids compared byte by byte
        (``COLLATE "C"``), as Python compares the ids (ASCII), so a page costs one page
        whatever the archive holds."""
        where, params = [], []
        if before is not None:
            where.append('tournament_id COLLATE "C" < %s')
            params.append(before)
        if outcome:
            where.append("outcome = %s")
            params.append(outcome)
        sql = ("SELECT tournament_id, outcome FROM tournaments.archived"
               + (" WHERE " + " AND ".join(where) if where else "")
               + ' ORDER BY tournament_id COLLATE "C" DESC LIMIT %s')
        rows = await self._query("the tournaments", sql, (*params, limit))
        return [(str(t), str(o)) for t, o in rows]

    async def aclose(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

