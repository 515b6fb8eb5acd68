"""The process manager's round costs nothing per idle tournament (issue 29, G8: each round
loaded and ticked every tournament not over, so 2,000 scheduled tournaments took a core and
delayed every settlement): over a real Redis, tournaments registering for a start hours
away are stepped once and then only when something is due: a new event (a registration, at
any replica) or their next deadline (the start). A registration among them is still settled
at once, and a start comes at its time with no event to wake it."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from studkit.auth import Principal, Role
from studkit.redis_client import connect
from studtest.tournament_service import OffsetClock
from tournament import commands as c
from tournament import driver
from tournament import events as ev
from tournament.app import WOKEN, TournamentApp, tournament_store
from tournament.structure import TURBO

pytestmark = pytest.mark.integration

OPERATOR = Principal(Role.OPERATOR, "ops")
IDLE = 40


class Wallet:
    """The wallet's port, answering at once (the wallet's own service is tested elsewhere:
    here the rounds are counted)."""

    def __init__(self) -> None:
        self.entered: list[tuple[str, str]] = []

    async def enter(self, tid: str, entry_id: str, _player: str, _buy_in: int,
                    _fee: int) -> None:
        self.entered.append((tid, entry_id))

    async def refund(self, _tid: str, _entry_id: str, _player: str) -> None:
        pass

    async def pay(self, _tid: str, _payment_id: str, _player: str, _amount: int,
                  _place: int) -> None:
        pass

    async def exclusion(self, _player: str) -> str:
        return ""


class Counting(TournamentApp):
    """The app, counting the manager's commands by kind."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.commands: Counter[str] = Counter()

    async def execute(self, tournament_id: str, cmd: c.Command, command_id: str,
                      **kwargs: object) -> object:  # type: ignore[override]
        if kwargs.get("by") is None:
            self.commands[type(cmd).__name__] += 1
        return await super().execute(tournament_id, cmd, command_id, **kwargs)  # type: ignore[arg-type]


class CountingRounds(driver.Rounds):
    """The process manager's rounds, counting those done (``driver.run``'s, in a test that
    puts it in place of :class:`driver.Rounds`)."""

    done = 0

    async def round(self, stop: asyncio.Event | None = None) -> int:
        stepped = await super().round(stop)
        CountingRounds.done += 1
        return stepped


@pytest.fixture
def counted_rounds(monkeypatch: pytest.MonkeyPatch) -> type[CountingRounds]:
    monkeypatch.setattr(CountingRounds, "done", 0)
    monkeypatch.setattr(driver, "Rounds", CountingRounds)
    return CountingRounds


async def rounds_done(rounds: type[CountingRounds], n: int) -> None:
    async with asyncio.timeout(10):
        while rounds.done < n:
            await asyncio.sleep(0.01)


@pytest.fixture
def clock() -> OffsetClock:
    return OffsetClock()


@pytest.fixture
async def app(redis_url: str, clock: OffsetClock) -> AsyncIterator[Counting]:
    client = connect(redis_url)
    try:
        yield Counting(tournament_store(client), clock=clock)
    finally:
        await client.aclose()


def mtt(start_at: float, min_entrants: int = 2) -> ev.Config:
    return ev.Config("mtt", ev.MULTI_TABLE, 100, 10, TURBO, seats=8, start_at=start_at,
                     min_entrants=min_entrants)


async def test_idle_tournaments_are_not_stepped_each_round(
        app: Counting, clock: OffsetClock, counted_rounds: type[CountingRounds]) -> None:
    far = clock() + 7200
    for i in range(IDLE):
        await app.create(OPERATOR, f"idle-{i}", mtt(far), f"create-{i}")
    soon = clock() + 3600  # its time comes when the test moves the clock to it; no event
    # will wake it then: its deadline must
    await app.create(OPERATOR, "soon", mtt(soon, min_entrants=3), "create-soon")
    wallet, stop = Wallet(), asyncio.Event()
    task = asyncio.create_task(driver.run(app, wallet, 0.02, stop))
    try:
        await rounds_done(counted_rounds, 1)  # the first round steps each once
        assert IDLE + 1 <= app.commands["Tick"] <= IDLE * 1.5, app.commands
        ticks = app.commands["Tick"]
        await rounds_done(counted_rounds, counted_rounds.done + 5)  # the rest, none of them
        await app.player_command(Principal(Role.PLAYER, "ann"), "idle-7", c.Register,
                                 "r-ann")
        async with asyncio.timeout(5):
            while ("idle-7", "e1") not in wallet.entered:
                await asyncio.sleep(0.01)
        async with asyncio.timeout(5):
            while (await app.load("idle-7")).entries["e1"].paid is False:
                await asyncio.sleep(0.01)
        assert (await app.load("soon")).phase == "registering"  # not before its time
        clock.jump_to(soon)
        async with asyncio.timeout(5):  # below its minimum at its start: cancelled
            while (await app.load("soon")).phase != "cancelled":
                await asyncio.sleep(0.02)
        cancelled = [r.event for r in await app.records("soon", 0)
                     if isinstance(r.event, ev.Cancelled)]
        assert len(cancelled) == 1 and cancelled[0].at >= soon, cancelled
        assert app.commands["Tick"] - ticks <= 10, app.commands
    finally:
        stop.set()
        await task


async def test_a_lost_wake_is_found_by_the_next_sweep(app: Counting,
                                                     clock: OffsetClock) -> None:
    """A caller's event whose wake was lost (the process died between its append and the
    mark) is stepped by the next sweep, which reads every tournament's version."""
    await app.create(OPERATOR, "lost", mtt(clock() + 7200), "create-lost")
    wallet = Wallet()
    # The rounds read the app's clock, which moves only when the test moves it: a sweep
    # comes when the test says, not when a slow machine's rounds happen to reach it.
    rounds = driver.Rounds(app, wallet, sweep_s=3600)
    assert await rounds.round() == 1  # the first round: a sweep, every tournament
    assert await rounds.round() == 0
    await app.player_command(Principal(Role.PLAYER, "ann"), "lost", c.Register, "r-ann")
    await app.store.client.zrem(WOKEN, "lost")  # the wake lost
    assert await rounds.round() == 0 and wallet.entered == []  # no sweep yet: not found
    clock.jump_to(clock() + 3601)  # the next sweep is due (the start, at 7200 s, is not)
    assert await rounds.round() == 1 and wallet.entered == [("lost", "e1")]
    assert (await app.load("lost")).entries["e1"].paid  # charged and settled in that step
    assert await rounds.round() == 0  # idle again
