"""A tournament table deals its first hand to its whole draw (issue 29, RULES 2.5: every
entrant is dealt in). The tournament opened each table not paused and seated the draw one
``SeatEntrant`` at a time, and the table started hand 1 as soon as two seats were filled: in
every sit & go of six, two to four entrants sat out hand 1 and its ante. Over the real room
(dealer, wallet, table and tournament services, real gRPC and Redis): a sit & go of six, and
hand 1's ``HandStarted`` names all six seats."""

from __future__ import annotations

import pytest

from stud.v1 import table_pb2 as tpb
from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.table import OPERATOR, Room
from studtest.tournament_service import eventually, running_tournament
from studtools.devkeys import DevKeys
from tournament.config import Settings

pytestmark = pytest.mark.integration

NAMES = ("ann", "bob", "cy", "dee", "eve", "fay")


async def test_hand_one_of_a_sit_and_go_of_six_is_dealt_to_all_six(
        room: Room, room_settings: Settings, dev_keys: DevKeys) -> None:
    for name in NAMES:
        await room.fund(name, 10_000)
    async with running_tournament(room_settings, dev_keys) as service:
        client = service.client
        await client.create("six-1", pb.TournamentConfig(
            name="six", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100, fee=10,
            seats=len(NAMES), structure=pb.TournamentStructure(preset="turbo")))
        for name in NAMES:
            await client.register("six-1", Principal(Role.PLAYER, name), f"r-{name}")

        async def opened() -> bool:
            return bool((await client.get("six-1")).tables)
        await eventually(opened)
        (table,) = (await client.get("six-1")).tables

        async def dealt() -> bool:
            try:
                return (await room.client.view(table.table_id)).hands_started >= 1
            except Exception:
                return False
        await eventually(dealt)
        history = await room.client.call("GetHandHistory", tpb.GetHandHistoryRequest(
            table_id=table.table_id, hand_number=1), OPERATOR)
        (started,) = [r.event.hand_started for r in history.events
                      if r.event.WhichOneof("event") == "hand_started"]
        assert len(started.seats) == len(NAMES), list(started.seats)
        seated = await room.client.view(table.table_id)
        assert sorted(s.seat for s in seated.seats) == list(started.seats)
        assert not seated.dealing_paused  # resumed once the draw was seated
