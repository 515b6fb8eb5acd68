"""A player's SDK client keeps under the table's per-player budget (``studclient.pace``):
as many calls as it makes at once are all answered, where the same calls unpaced are refused
``rate_limited`` past the budget (``stud bots`` heads-up, a ``GetTable`` after every record
and an action at every turn, had its action refused so in CI). An operator's client is not
paced: the table does not budget it. The room here allows a player 10 calls a second (20 at
once), so that unpaced calls outrun it on any machine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from studclient import Client, ResourceExhausted, RetryPolicy
from studclient.pace import CallPace
from studkit.auth import Principal
from studtest.redis import TestRedis
from studtest.table import OPERATOR, Room, player, running_room
from studtools.devkeys import DevKeys
from tests.integration.client.conftest import connect

PER_S = 10
"""The room's budget for a player: calls a second (and twice that at once)."""
CALLS = 40
"""Past the room's burst (20) and the client's (8)."""


@pytest.fixture
async def small_budget(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
                       ) -> AsyncIterator[Room]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STUD_RATE_PER_PLAYER", str(PER_S))
        patch.setenv("STUD_RATE_LIMITED_HOLD_MS", "100")
        async with running_room(redis_server, redis_url, dev_keys) as running:
            yield running


async def gets(client: Client, table_id: str, calls: int = CALLS) -> list[str]:
    async def one() -> str:
        try:
            await client.get_table(table_id)
            return "ok"
        except ResourceExhausted as exc:
            return exc.reason
    return await asyncio.gather(*(one() for _ in range(calls)))


def no_retry(room: Room, who: Principal, **kwargs: object) -> Client:
    return connect(room, who, retry=RetryPolicy(attempts=1, patience_s=0), **kwargs)


def refused(room: Room) -> float:
    return room.table_deps.metrics.sample(
        "stud_grpc_requests_total", service="stud.v1.TableService", method="GetTable",
        code="RESOURCE_EXHAUSTED")


async def test_a_players_calls_at_once_are_paced_and_all_answered(small_budget: Room) -> None:
    room = small_budget
    table_id = await room.client.open_table()
    pace = CallPace(per_s=PER_S * 0.8, burst=PER_S * 0.8)
    async with no_retry(room, player("ann"), table_pace=pace) as client:
        assert await gets(client, table_id) == ["ok"] * CALLS
        assert 0 < pace.waited <= CALLS - pace.burst
    assert refused(room) == 0


async def test_the_same_calls_unpaced_are_refused_past_the_budget(small_budget: Room) -> None:
    """What the pace prevents (so the test above can fail): the table refuses the calls
    past its budget, and while one is held back, the player's others too."""
    room = small_budget
    table_id = await room.client.open_table()
    async with no_retry(room, player("bob"), table_pace=None) as client:
        answers = await gets(client, table_id)
        assert "rate_limited" in answers and "ok" in answers
        assert set(answers) == {"ok", "rate_limited"}
    assert refused(room) == answers.count("rate_limited")


async def test_a_rate_limited_call_is_retried_and_answered(small_budget: Room) -> None:
    """Unpaced, with its retries: a call refused ``rate_limited`` is sent again after a
    pause, and every call is answered in the end."""
    room = small_budget
    table_id = await room.client.open_table()
    async with connect(room, player("cyd"), table_pace=None) as client:
        assert await gets(client, table_id, 2 * PER_S + 5) == ["ok"] * (2 * PER_S + 5)
    assert refused(room) > 0


async def test_an_operators_calls_are_not_paced(small_budget: Room) -> None:
    room = small_budget
    table_id = await room.client.open_table()
    async with no_retry(room, OPERATOR) as client:
        assert await gets(client, table_id) == ["ok"] * CALLS
        assert client.table_pace is not None and client.table_pace.waited == 0


async def test_a_players_client_is_paced_by_default(room: Room) -> None:
    """The default pace (80 calls a second, 80 at once), in a room at the table's default
    budget (100 a second, 200 at once): 120 calls at once, those past the client's burst
    wait their turn, all are answered, none is refused by the table."""
    table_id = await room.client.open_table()
    async with no_retry(room, player("dee")) as client:
        assert await gets(client, table_id, 120) == ["ok"] * 120
        assert client.table_pace is not None and client.table_pace.waited > 0
    assert refused(room) == 0
