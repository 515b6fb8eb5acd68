"""Player protection in tournaments (issue 34), over a real wallet and a real tournament
service: a player excluded after entering is withdrawn and refunded before the start (a sit
& go's fill, a multi-table's start time), the event naming the wallet's reason; the others
play; the pool and the log agree (VerifyTournament)."""

from __future__ import annotations

import asyncio
import time

import pytest

from stud.v1 import tournament_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studtest.tournament_service import OPERATOR, OffsetClock, RunningTournament, eventually
from studtest.wallet import RunningWallet
from tests.integration.tournament.test_tournament_api import SNG, funded, player

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def withdrawals(t: RunningTournament, tid: str) -> list[tuple[str, str]]:
    """Each ``EntryWithdrawn`` of the log so far: (entry, reason)."""
    out: list[tuple[str, str]] = []
    last = (await t.client.get(tid)).version
    stream = t.client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id=tid),
                                           metadata=t.client.md(OPERATOR))
    async with asyncio.timeout(10):
        async for record in stream:
            if record.event.WhichOneof("kind") == "entry_withdrawn":
                w = record.event.entry_withdrawn
                out.append((w.entry_id, w.reason))
            if record.sequence >= last:
                break
    stream.cancel()
    return out


async def paid(t: RunningTournament, tid: str, n: int) -> bool:
    return bool(sum(e.paid for e in (await t.client.get(tid)).entries) == n)


async def test_a_sit_and_go_entrant_who_excludes_themself_is_refunded_at_the_fill(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    await funded(wallet, "ann", "bob", "cy", "dee")
    client = tournament.client
    await client.create("x1", SNG)
    for name in ("ann", "bob"):
        await client.register("x1", player(name), f"r-{name}")
    await eventually(lambda: paid(tournament, "x1", 2))
    assert await wallet.client.player_balance("ann") == 890
    await wallet.client.stub.SelfExclude(
        wpb.SelfExcludeRequest(player_id="ann", period=wpb.EXCLUSION_PERIOD_WEEK),
        metadata=wallet.client.metadata(player("ann")), timeout=10)
    await client.register("x1", player("cy"), "r-cy")  # the field is full: the start is near

    async def refunded() -> bool:
        return await wallet.client.player_balance("ann") == 1000
    await eventually(refunded)
    await eventually(lambda: paid(tournament, "x1", 2))
    view = await client.get("x1")
    assert view.phase == pb.TOURNAMENT_PHASE_REGISTERING  # ann's seat is free again
    assert sorted(e.player_id for e in view.entries) == ["bob", "cy"]
    assert await withdrawals(tournament, "x1") == [("e1", "self_excluded")]
    await client.register("x1", player("dee"), "r-dee")

    async def running() -> bool:
        return (await client.get("x1")).phase == pb.TOURNAMENT_PHASE_RUNNING
    await eventually(running)
    view = await client.get("x1")
    assert sorted(e.player_id for e in view.entries) == ["bob", "cy", "dee"]
    pool = await wallet.client.pool("x1")
    assert pool.balance == 300
    assert [(e.player_id, e.refunded) for e in pool.entries if e.player_id == "ann"] == [
        ("ann", True)]
    verdict = await client.stub.VerifyTournament(
        pb.VerifyTournamentRequest(tournament_id="x1"), metadata=client.md(OPERATOR))
    assert not verdict.problems, verdict.problems
    assert await withdrawals(tournament, "x1") == [("e1", "self_excluded")]  # once


async def test_a_multi_table_entrant_an_operator_excludes_is_refunded_at_the_start(
        tournament: RunningTournament, wallet: RunningWallet,
        tournament_clock: OffsetClock) -> None:
    await funded(wallet, "ann", "bob", "cy")
    client = tournament.client
    start = int(time.time()) + 3600  # far off: the start comes when the clock is moved to it
    await client.create("x2", pb.TournamentConfig(
        name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=50, fee=5, seats=8,
        min_entrants=2, start_at={"seconds": start},
        structure=pb.TournamentStructure(preset="default")))
    for name in ("ann", "bob", "cy"):
        await client.register("x2", player(name), f"r-{name}")
    await eventually(lambda: paid(tournament, "x2", 3))
    await wallet.client.stub.ExcludePlayer(
        wpb.ExcludePlayerRequest(player_id="bob", period=wpb.EXCLUSION_PERIOD_MONTH,
                                 reason="support case 34"),
        metadata=wallet.client.metadata(OPERATOR), timeout=10)
    assert (await client.get("x2")).phase == pb.TOURNAMENT_PHASE_REGISTERING
    tournament_clock.jump_to(start)  # the start time comes, bob excluded while entered

    async def running() -> bool:
        return (await client.get("x2")).phase == pb.TOURNAMENT_PHASE_RUNNING
    await eventually(running, timeout_s=20)
    view = await client.get("x2")
    assert sorted(e.player_id for e in view.entries) == ["ann", "cy"]

    async def refunded() -> bool:
        return await wallet.client.player_balance("bob") == 1000
    await eventually(refunded)
    assert await wallet.client.player_balance("ann") == 945
    assert await withdrawals(tournament, "x2") == [("e2", "operator_excluded")]
    assert (await wallet.client.pool("x2")).balance == 100
