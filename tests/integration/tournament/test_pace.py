"""A tournament's table pace (``TournamentConfig.pace``, issue 29: a turbo could not be run)
reaches the tables it opens, over the real room: the action clock, the time bank and the
delay between hands it names are the table's settings, the service's others kept."""

from __future__ import annotations

import pytest

from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role
from studtest.table import Room
from studtest.tournament_service import eventually, running_tournament
from studtools.devkeys import DevKeys
from tournament.config import Settings

pytestmark = pytest.mark.integration


async def test_the_tables_of_a_tournament_take_its_pace(
        room: Room, room_settings: Settings, dev_keys: DevKeys) -> None:
    for name in ("ann", "bob"):
        await room.fund(name, 10_000)
    async with running_tournament(room_settings, dev_keys) as service:
        client = service.client
        await client.create("turbo-1", pb.TournamentConfig(
            name="turbo", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100, fee=10, seats=2,
            structure=pb.TournamentStructure(preset="turbo"),
            pace=pb.TournamentPace(action_time_s=7, time_bank_s=11, next_hand_delay_ms=1500)))
        view = await client.get("turbo-1")
        assert (view.config.pace.action_time_s, view.config.pace.time_bank_s,
                view.config.pace.next_hand_delay_ms) == (7, 11, 1500)
        for name in ("ann", "bob"):
            await client.register("turbo-1", Principal(Role.PLAYER, name), f"r-{name}")

        async def opened() -> bool:
            return bool((await client.get("turbo-1")).tables)
        await eventually(opened)
        (table,) = (await client.get("turbo-1")).tables

        async def table_there() -> bool:
            try:
                await room.client.view(table.table_id)
            except Exception:
                return False
            return True
        await eventually(table_there)
        settings = (await room.client.view(table.table_id)).settings
        assert (settings.action_time_s, settings.time_bank_s,
                settings.next_hand_delay_ms) == (7, 11, 1500)
        assert settings.buy_in_max == room_settings.table_settings.buy_in_max  # kept
