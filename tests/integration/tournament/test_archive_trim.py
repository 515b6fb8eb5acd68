"""A tournament that is over leaves Redis for PostgreSQL (``studhistory.tournament_archive``,
issue 31) over a real wallet, a real tournament service, a real Redis (the archiver's ACL
user) and a real PostgreSQL: written, verified, and only then its keys removed, once past
the command window; the tournament service answers it from PostgreSQL as before
(``TOURNAMENT_HISTORY_DSN``), and says why it cannot without one; a tournament still running
is never touched; a step killed between the insert and the trim, or after the script and
before the index, loses and duplicates nothing; two archivers at once move it once."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import signal
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import psycopg
import pytest

from archiver.loop import Archiver
from stud.v1 import tournament_pb2 as pb
from studhistory import tournament_archive as archiving
from studhistory.tournament_archive import (
    TournamentLock,
    archive_tournaments,
    facts,
    read_records,
    stream_raw,
)
from studkit import keys
from studkit.auth import Principal, Role
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.grpc_server import rpc_error_reason
from studkit.metrics import Metrics
from studkit.redis_client import Client, connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.tournament_service import (
    OPERATOR,
    RunningTournament,
    eventually,
    running_tournament,
)
from studtest.wallet import RunningWallet
from studtools import replay_tournament
from studtools.devkeys import DevKeys
from studtools.replay_source import RedisSource

from .conftest import url_for

pytestmark = pytest.mark.integration

MTT = pb.TournamentConfig(name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=50,
                          fee=5, seats=8, min_entrants=2, start_at={"seconds": 4_000_000_000},
                          structure=pb.TournamentStructure(preset="default"))


def later() -> float:
    """A clock past the command window of everything these tests append."""
    return time.time() + COMMAND_WINDOW_S + 60


async def funded(wallet: RunningWallet, *names: str) -> None:
    for name in names:
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, 1000, f"d-{name}")


async def registered(t: RunningTournament, tid: str, *names: str) -> None:
    await t.client.create(tid, MTT)
    for name in names:
        await t.client.register(tid, Principal(Role.PLAYER, name), f"r-{name}")

    async def paid() -> bool:
        return sum(e.paid for e in (await t.client.get(tid)).entries) == len(names)
    await eventually(paid)


async def cancelled(t: RunningTournament, admin: Client, tid: str, *names: str) -> None:
    """A tournament over and paid out: registered, paid, cancelled and refunded, and
    forgotten by the service's process manager (its wake entry gone: it goes a moment after
    the ending, so a test that read the keys before would see it go under its feet)."""
    await registered(t, tid, *names)
    await t.client.cancel(tid, "the room closes", f"c-{tid}")

    async def paid_out() -> bool:
        return (facts(await read_records(admin, tid)).ending is not None
                and await admin.zscore(archiving.WOKEN, tid) is None)
    await eventually(paid_out)


async def tournament_keys(admin: Client, tid: str) -> list[str]:
    """Every key of the tournament (a test's admin scan) but the tombstone the trim leaves
    (test_archive_tombstone.py), and its index and wake entries."""
    tombstone = keys.tournament_key(tid, archiving.TOMBSTONE)
    found = sorted(k.decode() for k in await admin.keys(f"stud:tournament:{{{tid}}}:*")
                   if k.decode() != tombstone)
    if await admin.sismember(keys.tournament_index(), tid):
        found.append("index")
    if await admin.zscore(archiving.WOKEN, tid) is not None:
        found.append("woken")
    return found


async def archived_rows(dsn: str, tid: str) -> dict[int, bytes]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute("SELECT sequence, envelope FROM tournaments.events WHERE "
                                 "tournament_id = %s ORDER BY sequence", (tid,))
        rows = [(int(s), bytes(raw)) for s, raw in await cur.fetchall()]
        cur = await conn.execute("SELECT count(*) FROM tournaments.endings WHERE "
                                 "tournament_id = %s", (tid,))
        assert await cur.fetchone() in ((0,), (1,))
    found = dict(rows)
    assert len(found) == len(rows), "an event archived twice"
    return found


@pytest.fixture
async def archiver(redis_server: TestRedis, redis_url: str, history_dsns: Any
                   ) -> AsyncIterator[tuple[Client, psycopg.AsyncConnection[Any]]]:
    redis = connect(url_for(redis_server, redis_url, "archiver"))
    conn = await psycopg.AsyncConnection.connect(history_dsns.archiver, autocommit=True)
    try:
        yield redis, conn
    finally:
        await conn.close()
        await redis.aclose()


async def watched(t: RunningTournament, tid: str, count: int) -> list[pb.TournamentEventRecord]:
    """The first ``count`` records a watch from the start yields; then it stays open."""
    stream = t.client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id=tid),
                                           metadata=t.client.md(OPERATOR))
    out = []
    async with asyncio.timeout(10):
        while len(out) < count:
            out.append(await stream.read())
    with pytest.raises(TimeoutError):  # nothing more comes, and the stream is still open
        async with asyncio.timeout(0.5):
            await stream.read()
    stream.cancel()
    return out


async def test_a_tournament_over_leaves_redis_and_the_service_answers_it_the_same(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        history_dsns: Any, archiver: tuple[Client, psycopg.AsyncConnection[Any]],
        dev_keys: DevKeys) -> None:
    redis, conn = archiver
    admin = connect(redis_url)
    try:
        await funded(wallet, "ann", "bob", "cy")
        await cancelled(tournament, admin, "gone-1", "ann", "bob")
        await registered(tournament, "live-1", "cy")  # paid in, not over: never moved
        stream = await stream_raw(admin, "gone-1")
        before = await tournament.client.get("gone-1")
        verdict = await tournament.client.stub.VerifyTournament(
            pb.VerifyTournamentRequest(tournament_id="gone-1"),
            metadata=tournament.client.md(OPERATOR))
        assert verdict.verified
        lobby = await tournament.client.stub.ListTournaments(
            pb.ListTournamentsRequest(), metadata=tournament.client.md(OPERATOR))
        records = await watched(tournament, "gone-1", len(stream))
        source = RedisSource(admin, history_dsns.support)
        text = io.StringIO()
        assert await replay_tournament.run(source, "gone-1", text) == 0
        live_keys = await tournament_keys(admin, "live-1")

        # Within the window: written and verified, kept in Redis (a retry is answered).
        first = await archive_tournaments(redis, conn)
        assert first.archived == ["gone-1"] and first.trimmed == [] and not first.failed
        assert await archived_rows(history_dsns.admin, "gone-1") == dict(stream)
        assert "index" in await tournament_keys(admin, "gone-1")

        # Past it: its keys, index entry and wake are gone; the running one is untouched.
        done = await archive_tournaments(redis, conn, clock=later)
        assert done.trimmed == ["gone-1"] and done.archived == [] and not done.failed
        assert await tournament_keys(admin, "gone-1") == []
        assert await tournament_keys(admin, "live-1") == live_keys
        assert await archived_rows(history_dsns.admin, "live-1") == {}
        assert (await archive_tournaments(redis, conn, clock=later)).trimmed == []

        # A replica with the support role's DSN answers it as before.
        settings = dataclasses.replace(tournament.settings, history_dsn=history_dsns.tournament)
        async with running_tournament(settings, dev_keys) as reader:
            assert await reader.client.get("gone-1") == before
            assert await reader.client.stub.VerifyTournament(
                pb.VerifyTournamentRequest(tournament_id="gone-1"),
                metadata=reader.client.md(OPERATOR)) == verdict
            listed = await reader.client.stub.ListTournaments(
                pb.ListTournamentsRequest(), metadata=reader.client.md(OPERATOR))
            assert listed == lobby
            over = await reader.client.stub.ListTournaments(
                pb.ListTournamentsRequest(phase=pb.TOURNAMENT_PHASE_CANCELLED),
                metadata=reader.client.md(OPERATOR))
            assert [s.tournament_id for s in over.tournaments] == ["gone-1"]
            assert await watched(reader, "gone-1", len(stream)) == records
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await reader.client.register("gone-1", Principal(Role.PLAYER, "cy"), "r-late")
            assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert await tournament_keys(admin, "gone-1") == []  # reading it wrote nothing

        # PostgreSQL unreachable: UNAVAILABLE archive_unavailable (retry), never NOT_FOUND.
        down = dataclasses.replace(tournament.settings,
                                   history_dsn="postgresql://support@127.0.0.1:1/none")
        async with running_tournament(down, dev_keys) as cut:
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await cut.client.get("gone-1")
            assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
            assert rpc_error_reason(exc.value) == "archive_unavailable"

        # One without a DSN says why it cannot.
        plain = dataclasses.replace(tournament.settings, history_dsn="")
        async with running_tournament(plain, dev_keys) as blind:
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await blind.client.get("gone-1")
            assert exc.value.code() == grpc.StatusCode.NOT_FOUND
            assert rpc_error_reason(exc.value) == "archived"
            assert "TOURNAMENT_HISTORY_DSN" in (exc.value.details() or "")

        # stud replay tournament reads it from PostgreSQL, the same.
        again = io.StringIO()
        assert await replay_tournament.run(source, "gone-1", again) == 0
        assert again.getvalue() == text.getvalue()
    finally:
        await admin.aclose()


KILLED_BEFORE_TRIM = """
import asyncio, os, signal, sys, time
import psycopg
from studhistory import tournament_archive as archiving
from studkit.redis_client import connect

async def main() -> None:
    redis = connect(sys.argv[1])
    conn = await psycopg.AsyncConnection.connect(sys.argv[2], autocommit=True)
    async def die(*_: object) -> str:
        os.kill(os.getpid(), signal.SIGKILL)
        return ""
    archiving.trim = die
    await archiving.archive_tournaments(redis, conn, clock=lambda: time.time() + 86_400)

asyncio.run(main())
"""
"""An archiver process killed (``kill -9``) when it comes to its first trim: after the
insert's commit."""


async def test_a_kill_between_insert_and_trim_loses_and_duplicates_nothing(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        redis_server: TestRedis, history_dsns: Any,
        archiver: tuple[Client, psycopg.AsyncConnection[Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    redis, conn = archiver
    admin = connect(redis_url)
    try:
        await funded(wallet, "ann", "bob")
        await cancelled(tournament, admin, "kill-1", "ann", "bob")
        await cancelled(tournament, admin, "kill-2", "ann", "bob")
        stream = {tid: dict(await stream_raw(admin, tid)) for tid in ("kill-1", "kill-2")}

        # kill -9 of an archiver process once its insert is committed, before its trim.
        died = await asyncio.create_subprocess_exec(
            sys.executable, "-c", KILLED_BEFORE_TRIM, url_for(redis_server, redis_url,
                                                              "archiver"),
            history_dsns.archiver)
        assert await died.wait() == -signal.SIGKILL
        assert await archived_rows(history_dsns.admin, "kill-1") == stream["kill-1"]
        assert len(await tournament_keys(admin, "kill-1")) > 2  # nothing removed

        async def lock_freed() -> bool:  # the killed session's lock, once its server sees it
            lock = TournamentLock(conn)
            if not await lock.acquire("kill-1"):
                return False
            await lock.release("kill-1")
            return True
        await eventually(lock_freed)

        # Killed after the script and before the index: its keys gone, its entry left.
        async def cut(*_: object) -> int:
            raise ConnectionError("killed before the index")
        with monkeypatch.context() as patch:
            patch.setattr(redis, "srem", cut)
            with pytest.raises(ConnectionError):
                await archive_tournaments(redis, conn, clock=later)
        assert await tournament_keys(admin, "kill-1") == ["index"]
        assert await archived_rows(history_dsns.admin, "kill-2") == {}  # not reached

        resumed = await archive_tournaments(redis, conn, clock=later)
        assert not resumed.failed
        assert resumed.archived == ["kill-2"] and resumed.trimmed == ["kill-2"]
        for tid in ("kill-1", "kill-2"):
            assert await tournament_keys(admin, tid) == []
            assert await archived_rows(history_dsns.admin, tid) == stream[tid]
    finally:
        await admin.aclose()


async def test_a_changed_stream_is_never_trimmed(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        archiver: tuple[Client, psycopg.AsyncConnection[Any]]) -> None:
    """The script removes only the stream it was told was verified: another version, or
    another head, and nothing goes."""
    redis, conn = archiver
    admin = connect(redis_url)
    try:
        await funded(wallet, "ann", "bob")
        await cancelled(tournament, admin, "changed-1", "ann", "bob")
        assert (await archive_tournaments(redis, conn)).archived == ["changed-1"]
        version, head = await archiving.verify(redis, conn, "changed-1")
        kept = await tournament_keys(admin, "changed-1")
        for wrong in ((version - 1, head), (version, bytes(32))):
            with pytest.raises(archiving.TournamentArchiveError):
                await archiving.trim(redis, "changed-1", *wrong)
            assert await tournament_keys(admin, "changed-1") == kept
        assert await archiving.trim(redis, "changed-1", version, head) == "trimmed"
    finally:
        await admin.aclose()


async def test_two_archivers_at_once_move_a_tournament_once(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        redis_server: TestRedis, history_dsns: Any,
        archiver: tuple[Client, psycopg.AsyncConnection[Any]]) -> None:
    redis, conn = archiver
    admin = connect(redis_url)
    other = await psycopg.AsyncConnection.connect(history_dsns.archiver, autocommit=True)
    try:
        await funded(wallet, "ann", "bob")
        await cancelled(tournament, admin, "twice-1", "ann", "bob")
        stream = dict(await stream_raw(admin, "twice-1"))

        # The lock: while one holds the tournament, the other is told no and does nothing.
        lock = TournamentLock(other)
        assert await lock.acquire("twice-1")
        busy = await archive_tournaments(redis, conn, clock=later)
        assert busy.busy == ["twice-1"] and not busy.archived and not busy.trimmed
        assert await archived_rows(history_dsns.admin, "twice-1") == {}
        await lock.release("twice-1")

        results = await asyncio.gather(archive_tournaments(redis, conn, clock=later),
                                       archive_tournaments(redis, other, clock=later))
        assert sum(len(r.archived) for r in results) == 1
        assert sum(len(r.trimmed) for r in results) == 1
        assert not any(r.failed for r in results)
        assert await tournament_keys(admin, "twice-1") == []
        assert await archived_rows(history_dsns.admin, "twice-1") == stream
    finally:
        await other.close()
        await admin.aclose()


async def test_the_archivers_round_moves_a_tournament_only_when_told_to(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        redis_server: TestRedis, history_dsns: Any) -> None:
    """The archiver's round (``services/archiver``): without ``ARCHIVER_TRIM_TOURNAMENTS``
    a tournament over is copied and kept; with it, past the window, its keys go, counted."""
    admin = connect(redis_url)
    client = connect(url_for(redis_server, redis_url, "archiver"))
    try:
        await funded(wallet, "ann", "bob")
        await cancelled(tournament, admin, "round-1", "ann", "bob")
        kept = await tournament_keys(admin, "round-1")
        for trim, left in ((False, kept), (True, [])):
            metrics = Metrics()
            step = Archiver(EventStore(client), history_dsns.archiver, metrics, 2,
                            trim_tournaments=trim, clock=later)
            await step.tournaments_step()
            await step.aclose()
            assert await tournament_keys(admin, "round-1") == left
            assert metrics.registry.get_sample_value(
                "stud_archiver_tournaments_trimmed_total") == (1 if trim else 0)
            assert metrics.registry.get_sample_value(
                "stud_archiver_tournaments_total") == (0 if trim else 1)
    finally:
        await client.aclose()
        await admin.aclose()
