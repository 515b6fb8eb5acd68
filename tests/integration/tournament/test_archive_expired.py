"""A caller's command retried after the command window, once its tournament left Redis for
PostgreSQL (issue 31; docs/tournament.md, "Finished tournaments"): its command record left
with the stream, so the retry is refused ``FAILED_PRECONDITION`` ``command_expired`` (it may
have been applied; send a new command), as the table refuses one (``services/table/
expiry.py``), never the archived tournament's own refusal of a new command, which would tell
the caller it was not applied. Over a real wallet, a real tournament service, a real Redis
and a real PostgreSQL."""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc
import psycopg
import pytest

from studhistory.tournament_archive import archive_tournaments
from studkit.auth import Principal, Role
from studkit.grpc_server import rpc_error_reason
from studkit.redis_client import Client, connect
from studtest.tournament_service import RunningTournament, running_tournament
from studtest.wallet import RunningWallet
from studtools.devkeys import DevKeys

from .test_archive_trim import MTT, archiver, cancelled, funded, later, tournament_keys

pytestmark = pytest.mark.integration

__all__ = ["archiver"]  # the fixture, imported to be used here

ANN, CY = Principal(Role.PLAYER, "ann"), Principal(Role.PLAYER, "cy")


async def refused(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await call
    return exc.value.code(), rpc_error_reason(exc.value) or ""


async def test_a_retry_after_the_archive_is_command_expired(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str,
        history_dsns: Any, archiver: tuple[Client, psycopg.AsyncConnection[Any]],
        dev_keys: DevKeys) -> None:
    redis, conn = archiver
    admin = connect(redis_url)
    settings = dataclasses.replace(tournament.settings, history_dsn=history_dsns.tournament)
    try:
        await funded(wallet, "ann", "bob", "cy")
        await cancelled(tournament, admin, "late-1", "ann", "bob")
        balances = {n: await wallet.client.player_balance(n) for n in ("ann", "bob", "cy")}
        async with running_tournament(settings, dev_keys) as reader:
            # Within the window (the archive holds a copy, Redis keeps it): a retry is the
            # recorded outcome, a duplicate.
            assert (await archive_tournaments(redis, conn)).archived == ["late-1"]
            again = await reader.client.register("late-1", ANN, "r-ann")
            assert again.duplicate and again.entry_id
            before = await reader.client.get("late-1")  # this replica has it folded

            assert (await archive_tournaments(redis, conn, clock=later)).trimmed == ["late-1"]
            assert await tournament_keys(admin, "late-1") == []

            # Past it, stream and records gone: each retry is command_expired, at the replica
            # that had folded it from Redis and at one that never saw it there.
            async with running_tournament(settings, dev_keys) as fresh:
                for service in (reader, fresh):
                    c = service.client
                    for call in (c.register("late-1", ANN, "r-ann"),
                                 c.register("late-1", Principal(Role.PLAYER, "bob"), "r-bob"),
                                 c.cancel("late-1", "the room closes", "c-late-1"),
                                 c.create("late-1", MTT)):
                        assert await refused(call) == (
                            grpc.StatusCode.FAILED_PRECONDITION, "command_expired")
                    # A new command is decided on the archived state: its own refusal.
                    code, reason = await refused(c.register("late-1", CY, "r-cy"))
                    assert code is grpc.StatusCode.FAILED_PRECONDITION
                    assert reason != "command_expired"
                    # The same id from another player was never this tournament's command.
                    code, reason = await refused(c.register("late-1", CY, "r-ann"))
                    assert reason != "command_expired"
                    assert await refused(c.create("late-1", MTT, "create-again")) == (
                        grpc.StatusCode.ALREADY_EXISTS, "tournament_exists")
                    assert await c.get("late-1") == before
            assert await tournament_keys(admin, "late-1") == []  # nothing written to Redis
            assert {n: await wallet.client.player_balance(n) for n in balances} == balances
    finally:
        await admin.aclose()
