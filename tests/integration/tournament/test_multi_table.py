"""A multi-table tournament of bots over the real room (dealer, wallet, table and tournament
services in process, real gRPC, real Redis): ten entries at four tables of three, players
moved to balance the tables, tables broken as the field shrinks, a break, hand for hand on
the bubble (ten entries pay three places), a restart of the tournament service in the middle
that carries on from its log, and at the end the prizes paid once, summing to the pool, the
last table holding every chip."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import grpc
import pytest

from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.table import Room, act_once
from studtest.tournament_service import OffsetClock, RunningTournament, running_tournament
from studtools.devkeys import DevKeys
from tests.integration.tournament.test_sit_and_go_to_the_end import aggressive
from tournament import events as ev
from tournament.config import Settings

pytestmark = pytest.mark.integration


def bubble_reached(log: list[ev.Event]) -> bool:
    """Whether some hand left exactly paid places + 1 (4 of 10) in, with two tables or more
    open: counted from the busts and the tables in the log, apart from the model's logic."""
    alive, tables = 10, 0
    for e in log:
        if isinstance(e, ev.TableOpened):
            tables += 1
        elif isinstance(e, ev.TableClosed):
            tables -= 1
        elif isinstance(e, ev.Busted):
            alive -= 1
        elif isinstance(e, ev.HandEnded) and alive == 4 and tables >= 2:
            return True
    return alive == 4 and tables >= 2


def structure() -> pb.TournamentStructure:
    return pb.TournamentStructure(starting_stack=1000, break_every=1, break_seconds=1, levels=[
        pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=2),
        pb.TournamentLevel(ante=25, bring_in=50, small_bet=150, big_bet=300, seconds=2),
        pb.TournamentLevel(ante=50, bring_in=100, small_bet=300, big_bet=600, seconds=600)])


async def test_an_mtt_balances_breaks_tables_goes_hand_for_hand_and_survives_a_restart(
        room: Room, room_settings: Settings, dev_keys: DevKeys) -> None:
    settings = room_settings
    names = [f"p{i}" for i in range(10)]
    for name in names:
        await room.fund(name, 10_000)
    rng = random.Random(11)
    restarted = False
    clock = OffsetClock()  # both runs of the service decide by it (the restart too)
    async with contextlib.AsyncExitStack() as stack:
        service: RunningTournament = await stack.enter_async_context(
            running_tournament(settings, dev_keys, clock=clock))
        start = int(time.time()) + 3600  # far off: it starts when the clock is moved to it
        config = pb.TournamentConfig(
            name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=1000, fee=100,
            seats=3, min_entrants=4, structure=structure(), start_at={"seconds": start})
        await service.client.create("mtt-e2e", config)
        for name in names:
            await service.client.register("mtt-e2e", Principal(Role.PLAYER, name), f"r-{name}")
        before = await service.deps.app.load("mtt-e2e")
        assert before.phase == "registering" and len(before.field()) == 10
        clock.jump_to(start)  # every entry in: its start comes (once the last charge settles)
        async with asyncio.timeout(240):
            while True:
                t = await service.deps.app.load("mtt-e2e")
                if t.phase == "finished" and set(t.payments) <= t.paid:
                    break
                if not restarted and t.moves >= 1:
                    await stack.aclose()  # the tournament service goes away mid-tournament
                    service = await stack.enter_async_context(
                        running_tournament(settings, dev_keys, clock=clock))
                    restarted = True
                for table_id in list(t.tables):
                    try:
                        tv = await room.client.view(table_id)
                    except grpc.aio.AioRpcError:
                        continue  # being opened or closed right now
                    await act_once(room.client, table_id, tv, aggressive(rng))
                await asyncio.sleep(0.01)
        log = [r.event for r in await service.deps.app.records("mtt-e2e", 0)]
        final = await service.deps.app.load("mtt-e2e")
    kinds = {type(e) for e in log}
    assert restarted
    assert ev.MoveSeated in kinds and ev.TableBreaking in kinds and ev.BreakStarted in kinds
    assert sum(isinstance(e, ev.TableOpened) for e in log) == 4
    assert sum(isinstance(e, ev.TableBreaking) for e in log) >= 2  # 4 tables down to 1
    assert sum(isinstance(e, ev.TableClosed) for e in log) == 4
    assert bubble_reached(log) == (ev.HandForHand(True) in log)
    if ev.HandForHand(True) in log:  # and it ended when the bubble burst
        assert log.index(ev.HandForHand(True)) < log.index(ev.HandForHand(False))
    prizes = {p.entry_id: p.amount for p in final.payments.values()
              if isinstance(p, ev.PrizeDue)}
    assert sum(prizes.values()) == final.pool() == 10_000
    assert (await room.wallet.client.pool("mtt-e2e")).balance == 0
    winner = final.entries[final.winner]
    last = await room.client.view(winner.table_id)
    assert sum(s.stack for s in last.seats) == 10_000
    for entry in final.field():
        balance = await room.wallet.client.player_balance(entry.player_id)
        assert balance == 10_000 - 1100 + prizes.get(entry.entry_id, 0)
