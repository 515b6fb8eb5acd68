"""A cancel after the first bust pays out the whole pool (issue 29, G3), over the real room
(dealer, wallet, table and tournament services in process, real gRPC, real Redis): a sit &
go of four bots plays until one busts, the operator cancels it, and the entries still in are
paid their shares of the pool by chips (prizes of place 0 at the wallet, where the wallet
refused them and the process manager retried for ever with the pool full). Checked: the pool
ends empty, every share is a prize of place 0 in the wallet's pool record, every player's
balance is what was paid."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
import pytest

from stud.v1 import common_pb2 as cpb
from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.table import Room, act_once
from studtest.tournament_service import TournamentClient, running_tournament
from studtools.devkeys import DevKeys
from tournament.config import Settings

pytestmark = pytest.mark.integration

TID = "sng-g3"
NAMES = ("ann", "bob", "cy", "dee")
FUNDS = 10_000
FAST = pb.TournamentStructure(starting_stack=1000, levels=[
    pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=2),
    pb.TournamentLevel(ante=25, bring_in=50, small_bet=150, big_bet=300, seconds=2),
    pb.TournamentLevel(ante=50, bring_in=100, small_bet=300, big_bet=600, seconds=600)])


def lively(rng: random.Random) -> Any:
    def choose(actions: list[Any]) -> Any:
        kinds = {a.kind: a for a in actions}
        for kind in (cpb.ACTION_KIND_RAISE, cpb.ACTION_KIND_BET, cpb.ACTION_KIND_COMPLETE):
            if kind in kinds and rng.random() < 0.25:
                return kinds[kind]
        for kind in (cpb.ACTION_KIND_CALL, cpb.ACTION_KIND_CHECK, cpb.ACTION_KIND_BRING_IN):
            if kind in kinds:
                return kinds[kind]
        return actions[0]
    return choose


async def a_bust(room: Room, client: TournamentClient, tid: str, seed: int) -> bool:
    """Play a new sit & go of the four until one or two of them are out (True), or it ends
    first (False: a hand that busted three)."""
    config = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                 buy_in=1000, fee=100, seats=4, structure=FAST)
    await client.create(tid, config)
    for name in NAMES:
        await client.register(tid, Principal(Role.PLAYER, name), f"r-{name}")
    rng = random.Random(seed)
    async with asyncio.timeout(60):
        while True:
            view = await client.get(tid)
            out = [e for e in view.entries if e.place]
            if view.phase != pb.TOURNAMENT_PHASE_RUNNING and view.phase != \
                    pb.TOURNAMENT_PHASE_REGISTERING:
                return False
            if out and view.phase == pb.TOURNAMENT_PHASE_RUNNING:
                return True
            for table in view.tables:
                try:
                    tv = await room.client.view(table.table_id)
                except grpc.aio.AioRpcError:
                    continue
                await act_once(room.client, table.table_id, tv, lively(rng))
            await asyncio.sleep(0.01)


async def test_a_cancel_after_a_bust_pays_the_shares_to_an_empty_pool(
        room: Room, room_settings: Settings, dev_keys: DevKeys) -> None:
    for name in NAMES:
        await room.fund(name, FUNDS)
    async with running_tournament(room_settings, dev_keys) as service:
        client = service.client
        for attempt in range(5):
            tid = f"sng-g3-{attempt}"
            if await a_bust(room, client, tid, attempt):
                break
            async with asyncio.timeout(30):  # the prizes of the one that ended
                while (await room.wallet.client.pool(tid)).balance != 0:
                    await asyncio.sleep(0.05)
        else:
            raise AssertionError("every sit & go ended in one hand")
        reply = await client.cancel(tid, "the room closes", "c-g3")
        shares = [r.event.prize_due for r in reply.events
                  if r.event.WhichOneof("kind") == "prize_due"
                  and r.event.prize_due.place == 0]
        assert shares, "the entries still in are paid their shares by chips"
        async with asyncio.timeout(30):
            while (await room.wallet.client.pool(tid)).balance != 0:
                await asyncio.sleep(0.05)
        pool = await room.wallet.client.pool(tid)
        assert sorted((p.player_id, p.amount) for p in pool.prizes if p.place == 0) == sorted(
            (s.player_id, s.amount) for s in shares)
        assert sum(p.amount for p in pool.prizes) == 4000
        assert (await client.get(tid)).phase == pb.TOURNAMENT_PHASE_CANCELLED
        spent = 1100 * len(NAMES) * (attempt + 1)
        won = 4000 * (attempt + 1)
        balances = [await room.wallet.client.player_balance(n) for n in NAMES]
        assert sum(balances) == len(NAMES) * FUNDS - spent + won
