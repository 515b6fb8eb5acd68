"""``stud replay tournament`` over a real Redis, with the real wallet and tournament services
(issue 29, G2): a cancelled tournament refunded to an empty pool checks out; one whose refunds
were never paid (the process manager stopped, as G1's attack stopped it) does not, where it
said ``verified=yes``."""

from __future__ import annotations

import io

import pytest

from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.tournament_service import RunningTournament, eventually
from studtest.wallet import RunningWallet
from studtools import replay_tournament
from studtools.replay_source import RedisSource

pytestmark = pytest.mark.integration

MTT = pb.TournamentConfig(name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=1000,
                          fee=100, seats=8, min_entrants=2, start_at={"seconds": 4_000_000_000},
                          structure=pb.TournamentStructure(preset="default"))


async def replayed(redis_url: str, tid: str) -> tuple[int, str]:
    source = RedisSource.from_url(redis_url)
    out = io.StringIO()
    try:
        status = await replay_tournament.run(source, tid, out)
    finally:
        await source.aclose()
    return status, out.getvalue()


async def entered(tournament: RunningTournament, wallet: RunningWallet, tid: str) -> None:
    client = tournament.client
    await client.create(tid, MTT)
    for name in ("ann", "bob"):
        await client.register(tid, Principal(Role.PLAYER, name), f"r-{name}")

    async def paid() -> bool:
        return sum(e.paid for e in (await client.get(tid)).entries) == 2
    await eventually(paid)


async def test_a_cancel_is_verified_only_once_its_refunds_are_paid(
        tournament: RunningTournament, wallet: RunningWallet, redis_url: str) -> None:
    for name in ("ann", "bob"):
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, 5000, f"d-{name}")
    await entered(tournament, wallet, "refunded")
    await tournament.client.cancel("refunded", "the room closes", "c-1")

    async def empty() -> bool:
        return (await wallet.client.pool("refunded")).balance == 0
    await eventually(empty)
    status, text = await replayed(redis_url, "refunded")
    assert status == 0 and text.splitlines()[-1].endswith("verified=yes"), text

    await entered(tournament, wallet, "stuck")
    await tournament.deps.stop_driver()
    await tournament.client.cancel("stuck", "the room closes", "c-2")
    status, text = await replayed(redis_url, "stuck")
    assert status == 1 and text.splitlines()[-1].endswith("verified=no"), text
    assert "FAILED: payment refund/e1 (1,000 to ann) is due and not paid" in text
    assert "FAILED: the tournament is over and the pool still holds 2,000" in text
