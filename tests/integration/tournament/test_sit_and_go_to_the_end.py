"""A sit & go of bots to the end over the real room (dealer, wallet, table and tournament
services in process, real gRPC, real Redis): three players buy in through the wallet, the
tournament opens its table, seats them with the starting stack, raises the stakes by the
level clock, follows every hand's stacks, unseats the busted, ranks them and pays the prizes
once from the pool. Checked: the prizes sum to the pool and the pool ends empty, the places
are 1..3, the chips at the table always the field's, and every player's balance is what the
payouts say."""

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
from studtest.tournament_service import running_tournament
from studtools.devkeys import DevKeys
from tournament.config import Settings

pytestmark = pytest.mark.integration

FAST = pb.TournamentStructure(starting_stack=1000, levels=[
    pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=2),
    pb.TournamentLevel(ante=25, bring_in=50, small_bet=150, big_bet=300, seconds=2),
    pb.TournamentLevel(ante=50, bring_in=100, small_bet=300, big_bet=600, seconds=600)])


def aggressive(rng: random.Random) -> Any:
    def choose(actions: list[Any]) -> Any:
        kinds = {a.kind: a for a in actions}
        for kind in (cpb.ACTION_KIND_RAISE, cpb.ACTION_KIND_BET, cpb.ACTION_KIND_COMPLETE):
            if kind in kinds and rng.random() < 0.6:
                return kinds[kind]
        for kind in (cpb.ACTION_KIND_CALL, cpb.ACTION_KIND_CHECK, cpb.ACTION_KIND_BRING_IN):
            if kind in kinds:
                return kinds[kind]
        return actions[0]
    return choose


async def test_a_sit_and_go_of_bots_plays_to_the_end_and_pays_the_pool(
        room: Room, room_settings: Settings, dev_keys: DevKeys) -> None:
    settings = room_settings
    names = ("ann", "bob", "cy")
    for name in names:
        await room.fund(name, 10_000)
    async with running_tournament(settings, dev_keys) as service:
        client = service.client
        config = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO,
                                     buy_in=1000, fee=100, seats=3, structure=FAST)
        await client.create("sng-e2e", config)
        for name in names:
            await client.register("sng-e2e", Principal(Role.PLAYER, name), f"r-{name}")
        rng = random.Random(7)
        hands = 0
        async with asyncio.timeout(120):
            while True:
                view = await client.get("sng-e2e")
                if view.phase == pb.TOURNAMENT_PHASE_FINISHED and all(
                        e.prize == 0 or e.place for e in view.entries):
                    pool = await room.wallet.client.pool("sng-e2e")
                    if pool.balance == 0:
                        break
                for table in view.tables:
                    try:
                        tv = await room.client.view(table.table_id)
                    except grpc.aio.AioRpcError:
                        continue  # being opened by the tournament right now
                    if tv.hand_in_progress:
                        chips = sum(s.stack for s in tv.seats) + sum(
                            p.hand_total for p in tv.hand.players) - sum(
                            a.amount for a in tv.hand.awards)
                    else:
                        chips = sum(s.stack for s in tv.seats)
                    if tv.hands_started:  # every entrant is seated before the first hand
                        assert chips == 3000, "chips at the table are the field's"
                    hands = max(hands, tv.hands_started)
                    await act_once(room.client, table.table_id, tv, aggressive(rng))
                await asyncio.sleep(0.01)
        view = await client.get("sng-e2e")
    assert hands >= 1  # aggressive bots may bust two players in one hand
    prizes = {e.player_id: e.prize for e in view.entries}
    assert sum(prizes.values()) == 3000 == sum(view.prizes)
    assert sorted(e.place for e in view.entries) == [1, 2, 3] or any(
        e.place != e.place_to for e in view.entries)
    for name in names:
        assert await room.wallet.client.player_balance(name) == 10_000 - 1100 + prizes[name]
