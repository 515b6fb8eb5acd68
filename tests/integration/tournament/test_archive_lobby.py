"""The lobby at scale (issue 31): ``ListTournaments`` pages the archived tournaments in SQL,
keyset by its page tokens (``after:<id>``), so a page reads one page of the archive however
many tournaments it holds. A few hundred tournaments over, archived and gone from Redis, some
copied and still in Redis, some live: every page walked in order lists each once, ids
descending (mixed case and punctuation: byte order, as Python's); a phase filter reads the
archive only for the phases an archived tournament can have; a legacy offset token still
pages; PostgreSQL down, the live tournaments are still listed. Over a real tournament
service, a real wallet, a real Redis and a real PostgreSQL; and the archive's pages on a
database whose collation is not byte order (ICU ``en``, as a managed database's often is):
still Python's order."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from stud.v1 import tournament_pb2 as pb
from studhistory.migrate import migrate
from studhistory.tournament_archive import archive_tournaments
from studkit.redis_client import Client, connect
from studtest.postgres import TestPostgres
from studtest.tournament_service import (
    OPERATOR,
    RunningTournament,
    running_tournament,
)
from studtest.wallet import RunningWallet
from studtools.devkeys import DevKeys
from studtools.pg_server import ADMIN_USER
from tournament.history import ArchivedTournaments

from .test_archive_trim import MTT, archiver, later, tournament_keys

pytestmark = pytest.mark.integration

__all__ = ["archiver"]  # the fixture, imported to be used here

PREFIXES = ("a", "B", "c-", "Z_", "m.", "_q", "-r", "0", "z")
"""Mixed case and punctuation: a collation other than byte order sorts these otherwise."""
ARCHIVED = [f"{p}{n:02d}" for n in range(30) for p in PREFIXES][:250]
COPIED = [f"k{n:02d}" for n in range(12)]  # over, archived, still in Redis (in the window)
LIVE = [f"L{n:02d}" for n in range(12)]  # registering


async def cancel_all(t: RunningTournament, ids: list[str]) -> None:
    for tid in ids:
        await t.client.create(tid, MTT)
        await t.client.cancel(tid, "the room closes", f"c-{tid}")


async def pages(t: RunningTournament, size: int, phase: int = 0, token: str = ""
                ) -> list[list[pb.TournamentSummary]]:
    """Every page from ``token`` on, as a client walks them."""
    out = []
    while True:
        page = await t.client.stub.ListTournaments(
            pb.ListTournamentsRequest(page_size=size, phase=phase, page_token=token),
            metadata=t.client.md(OPERATOR), timeout=30)
        out.append(list(page.tournaments))
        token = page.next_page_token
        if not token:
            return out


async def test_the_lobby_pages_the_archive_in_sql_complete_and_ordered(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        history_dsns: Any, archiver: tuple[Client, psycopg.AsyncConnection[Any]],
        dev_keys: DevKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    redis, conn = archiver
    admin = connect(redis_url)
    try:
        await cancel_all(tournament, ARCHIVED)
        moved = await archive_tournaments(redis, conn, clock=later)
        assert sorted(moved.trimmed) == sorted(ARCHIVED) and not moved.failed
        await cancel_all(tournament, COPIED)
        kept = await archive_tournaments(redis, conn)
        assert sorted(kept.archived) == sorted(COPIED) and kept.trimmed == []
        for tid in LIVE:
            await tournament.client.create(tid, MTT)
        assert await tournament_keys(admin, ARCHIVED[0]) == []
        assert "index" in await tournament_keys(admin, COPIED[0])
        everything = sorted(ARCHIVED + COPIED + LIVE, reverse=True)
        assert everything != sorted(everything, key=str.lower, reverse=True)

        settings = dataclasses.replace(tournament.settings, history_dsn=history_dsns.tournament)
        async with running_tournament(settings, dev_keys) as reader:
            archive = reader.deps.app.archive
            assert isinstance(archive, ArchivedTournaments)
            reads: list[tuple[int, int]] = []  # each SQL page: (its limit, rows read)
            real_page = archive.page

            async def page(before: str | None, outcome: str, limit: int
                           ) -> list[tuple[str, str]]:
                rows = await real_page(before, outcome, limit)
                reads.append((limit, len(rows)))
                return rows
            monkeypatch.setattr(archive, "page", page)

            # Every tournament once, ids descending, every page full but the last.
            walked = await pages(reader, 7)
            ids = [s.tournament_id for p in walked for s in p]
            assert ids == everything
            assert all(len(p) == 7 for p in walked[:-1]) and 1 <= len(walked[-1]) <= 7
            phases = {s.tournament_id: s.phase for p in walked for s in p}
            assert {phases[t] for t in ARCHIVED + COPIED} == {pb.TOURNAMENT_PHASE_CANCELLED}
            assert {phases[t] for t in LIVE} == {pb.TOURNAMENT_PHASE_REGISTERING}
            # SQL pages of page_size + 1 rows, one a page or two (where rows also in Redis,
            # listed from there, leave the first short): the cost of a page does not grow
            # with the archive.
            assert {limit for limit, _ in reads} == {8}
            assert len(walked) <= len(reads) <= 2 * len(walked)
            assert sum(n for _, n in reads) <= len(ARCHIVED + COPIED) + 2 * len(walked)

            # A phase an archived tournament has: filtered in SQL, the same order.
            reads.clear()
            cancelled = await pages(reader, 50, pb.TOURNAMENT_PHASE_CANCELLED)
            assert [s.tournament_id for p in cancelled for s in p] == sorted(
                ARCHIVED + COPIED, reverse=True)
            assert {limit for limit, _ in reads} == {51}
            # One it never has: the archive is not read.
            reads.clear()
            registering = await pages(reader, 5, pb.TOURNAMENT_PHASE_REGISTERING)
            assert [s.tournament_id for p in registering for s in p] == sorted(
                LIVE, reverse=True)
            assert reads == []
            assert await pages(reader, 50, pb.TOURNAMENT_PHASE_FINISHED) == [[]]

            # A legacy offset token (a client paging across the deploy) goes on from there.
            rest = await pages(reader, 50, token="100")
            assert [s.tournament_id for p in rest for s in p] == everything[100:]

        # PostgreSQL down: the tournaments in Redis are still listed, in order.
        down = dataclasses.replace(tournament.settings,
                                   history_dsn="postgresql://support@127.0.0.1:1/none")
        async with running_tournament(down, dev_keys) as cut:
            listed = await pages(cut, 50)
            assert [s.tournament_id for p in listed for s in p] == sorted(
                COPIED + LIVE, reverse=True)
    finally:
        await admin.aclose()


async def test_the_archives_pages_are_in_byte_order_whatever_the_collation(
        postgres: TestPostgres) -> None:
    """The tests' server is made ``--no-locale`` (byte order already); a managed database is
    often made with a language's collation, under which ``ORDER BY tournament_id`` puts
    ``_q`` before ``a`` before ``B``. The pages compare ids ``COLLATE "C"``: the same order
    as the service's (Python's), so the keyset pages walk every archived tournament once."""
    name = "t_icu_" + uuid.uuid4().hex[:12]
    server = postgres.server
    with psycopg.connect(server.dsn(ADMIN_USER, "postgres"), autocommit=True) as c:
        c.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 LOCALE_PROVIDER icu "
                          "ICU_LOCALE 'en' LOCALE 'C'").format(sql.Identifier(name)))
    archive = ArchivedTournaments(server.dsn("tournament", name))
    try:
        admin = server.dsn(ADMIN_USER, name)
        migrate(admin)
        outcome = {tid: "cancelled" if i % 3 == 0 else "finished"
                   for i, tid in enumerate(ARCHIVED)}
        with psycopg.connect(admin, autocommit=True) as c:
            for tid, how in outcome.items():
                c.execute("INSERT INTO tournaments.endings (tournament_id, outcome, ended_at) "
                          "VALUES (%s, %s, now())", (tid, how))
                c.execute("INSERT INTO tournaments.events (tournament_id, sequence, "
                          "occurred_at, event_type, command_id, envelope, digest) VALUES "
                          "(%s, 1, now(), 'TournamentEvent', '', '\\x00', %s)",
                          (tid, bytes(32)))
            ordered = [r[0] for r in c.execute(
                "SELECT tournament_id FROM tournaments.endings ORDER BY tournament_id DESC")]
        assert ordered != sorted(ARCHIVED, reverse=True)  # this collation is not bytes

        for wanted in ("", "cancelled", "finished"):
            walked: list[tuple[str, str]] = []
            before: str | None = None
            while rows := await archive.page(before, wanted, 9):
                assert len(rows) <= 9
                walked += rows
                before = rows[-1][0]
            assert walked == sorted(((t, o) for t, o in outcome.items()
                                     if not wanted or o == wanted), reverse=True), wanted
    finally:
        await archive.aclose()
        with psycopg.connect(server.dsn(ADMIN_USER, "postgres"), autocommit=True) as c:
            c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
