"""What an archived tournament leaves in Redis (issue 31, review): the trim's script leaves a
tombstone in the tournament's slot (``stud:tournament:{id}:archived``, the archived version)
as it removes its keys, and the tournament service goes to PostgreSQL only for an id that
has one: an id never created (a GetTournament of a random id, a CreateTournament of a new
one) costs no query, and a CreateTournament of an archived id is refused
``tournament_exists`` with or without a DSN. The reader's queries have a statement timeout:
a PostgreSQL that holds them answers UNAVAILABLE instead of stalling. Real Redis,
PostgreSQL, wallet and tournament service."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

import grpc
import psycopg
import pytest

from studhistory import tournament_archive as archiving
from studhistory.tournament_archive import archive_tournaments
from studkit import keys
from studkit.grpc_server import rpc_error_reason
from studkit.redis_client import Client, connect
from studtest.tournament_service import RunningTournament, running_tournament
from studtest.wallet import RunningWallet
from studtools.devkeys import DevKeys
from tournament.history import ArchivedTournaments, ArchiveUnavailable

from .test_archive_trim import MTT, archiver, cancelled, funded, later

pytestmark = pytest.mark.integration
__all__ = ["archiver"]


class Counted(ArchivedTournaments):
    """The real reader, counting the events it is asked for."""

    asked: ClassVar[list[str]] = []

    async def events(self, tournament_id: str, after: int = 0) -> list[tuple[int, bytes]]:
        self.asked.append(tournament_id)
        return await super().events(tournament_id, after)


async def test_an_archived_tournament_leaves_a_tombstone_and_only_it_reaches_postgresql(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        history_dsns: Any, archiver: tuple[Client, psycopg.AsyncConnection[Any]],
        dev_keys: DevKeys) -> None:
    redis, conn = archiver
    admin = connect(redis_url)
    try:
        await funded(wallet, "ann", "bob")
        await cancelled(tournament, admin, "gone-2", "ann", "bob")
        version = int(await admin.get(keys.tournament_key("gone-2", "version")))
        assert (await archive_tournaments(redis, conn, clock=later)).trimmed == ["gone-2"]
        left = sorted(k.decode() for k in await admin.keys("stud:tournament:{gone-2}:*"))
        assert left == [keys.tournament_key("gone-2", archiving.TOMBSTONE)]
        assert int(await admin.get(left[0])) == version
        assert await admin.memory_usage(left[0]) < 128  # 88 bytes on Redis 7.0

        # Without a DSN: a create of the archived id is refused, nothing written.
        plain = dataclasses.replace(tournament.settings, history_dsn="")
        async with running_tournament(plain, dev_keys) as blind:
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await blind.client.create("gone-2", MTT, command_id="again")
            assert exc.value.code() == grpc.StatusCode.ALREADY_EXISTS
            assert rpc_error_reason(exc.value) == "tournament_exists"
            assert await admin.xlen(keys.tournament_key("gone-2", "events")) == 0

        # With one: ids never created cost no query; the archived one is read once.
        counted = dataclasses.replace(tournament.settings, history_dsn=history_dsns.tournament)

        def count(deps: Any) -> None:
            deps.app.archived.archive = Counted(history_dsns.tournament)
        async with running_tournament(counted, dev_keys, prepare=count) as reader:
            for i in range(5):
                with pytest.raises(grpc.aio.AioRpcError) as exc:
                    await reader.client.get(f"nobody-{i}")
                assert exc.value.code() == grpc.StatusCode.NOT_FOUND
            await reader.client.create("new-2", MTT)
            assert Counted.asked == []
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await reader.client.create("gone-2", MTT, command_id="again-2")
            assert rpc_error_reason(exc.value) == "tournament_exists"
            assert (await reader.client.get("gone-2")).tournament_id == "gone-2"
            assert Counted.asked == ["gone-2"]
    finally:
        await admin.aclose()


async def test_a_postgresql_that_holds_a_read_answers_unavailable(history_dsns: Any) -> None:
    reader = ArchivedTournaments(history_dsns.tournament, statement_timeout_s=0.2)
    async with await psycopg.AsyncConnection.connect(history_dsns.admin) as lock:
        await lock.execute("LOCK TABLE tournaments.events IN ACCESS EXCLUSIVE MODE")
        try:
            async with asyncio.timeout(30):
                with pytest.raises(ArchiveUnavailable):
                    await reader.events("held")
        finally:
            await lock.rollback()
            await reader.aclose()
    assert await reader.events("held") == []
    await reader.aclose()
