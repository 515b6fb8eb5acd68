"""A player's SDK client keeps under the table's per-player budget (``studclient.pace``):
as many calls as it can make at once are all answered, where the same calls unpaced are
refused ``rate_limited`` past the budget (``stud bots`` heads-up, a ``GetTable`` after every
record and an action at every turn, had its action refused so in CI). An operator's client
is not paced: the table does not budget it."""

from __future__ import annotations

import asyncio

from studclient import Client, ResourceExhausted, RetryPolicy
from studclient.pace import TABLE_BURST
from studkit.auth import Principal
from studtest.table import OPERATOR, Room, player
from tests.integration.client.conftest import connect

CALLS = 260
"""Past the table's burst of 200 for one player, and past the client's of 80."""


async def gets(client: Client, table_id: str) -> list[str]:
    async def one() -> str:
        try:
            await client.get_table(table_id)
            return "ok"
        except ResourceExhausted as exc:
            return exc.reason
    return await asyncio.gather(*(one() for _ in range(CALLS)))


def no_retry(room: Room, who: Principal, **kwargs: object) -> Client:
    return connect(room, who, retry=RetryPolicy(attempts=1, patience_s=0), **kwargs)


async def test_a_players_calls_at_once_are_paced_and_all_answered(room: Room) -> None:
    table_id = await room.client.open_table()
    async with no_retry(room, player("ann")) as client:
        answers = await gets(client, table_id)
        assert answers == ["ok"] * CALLS
        assert client.table_pace is not None
        assert client.table_pace.waited == CALLS - TABLE_BURST


async def test_the_same_calls_unpaced_are_refused_past_the_budget(room: Room) -> None:
    """What the pace prevents (so the test above can fail): the table refuses the calls
    past its budget, and while one is held back, the player's others too."""
    table_id = await room.client.open_table()
    async with no_retry(room, player("bob"), table_pace=None) as client:
        answers = await gets(client, table_id)
        assert "rate_limited" in answers
        assert set(answers) == {"ok", "rate_limited"}


async def test_an_operators_calls_are_not_paced(room: Room) -> None:
    table_id = await room.client.open_table()
    async with no_retry(room, OPERATOR) as client:
        assert await gets(client, table_id) == ["ok"] * CALLS
        assert client.table_pace is not None and client.table_pace.waited == 0
